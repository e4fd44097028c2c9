"""Driving the served page from a real browser: a ``grove webdemo`` server on a free loopback port
and Debian's headless Chromium under Playwright (which cannot download a browser of its own here).
Used by the browser test and by ``bench/bench_webdemo.py``.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator, Sequence

ROOT = Path(__file__).resolve().parent.parent
# Offline, no first-run work, nothing in the background: the page is all the browser loads.
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium_path() -> str:
    return shutil.which("chromium") or "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def demo_server(args: Sequence[str], log_path: str | Path, module: str = "webdemo",
                timeout: float = 300.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """``python -m <module> ARGS --port <free port>``, yielded once it answers: ``(url, process)``."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log_path, "w") as log:
        process = subprocess.Popen([sys.executable, "-m", module, *args, "--port", str(port)], cwd=ROOT, env=env,
                                   stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the demo server exited with {process.returncode}:\n"
                                   f"{Path(log_path).read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the demo server did not answer at {url} within {timeout:.0f} s:\n"
                                       f"{Path(log_path).read_text()[-4000:]}") from None
                time.sleep(1.0)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


@contextlib.contextmanager
def chromium_page(width: int = 1400, height: int = 1000) -> Iterator:
    """A Playwright page in headless Chromium with a fresh profile, removed afterwards."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="grove-webdemo-chromium-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=chromium_path(), headless=True, args=list(CHROMIUM_ARGS),
            accept_downloads=True, viewport={"width": width, "height": height})
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def upload(page, url: str, video: str | Path, timeout_ms: int = 60_000) -> None:
    """Open the page and upload ``video`` into the demo's video input (waits until it has arrived)."""
    page.goto(url)
    page.locator("#grove-upload input[type=file]").set_input_files(str(video))
    page.locator("#grove-upload video").wait_for(timeout=timeout_ms)


def upload_and_predict(page, url: str, video: str | Path, timeout_ms: int = 600_000) -> float:
    """Upload ``video``, run it, wait for the caption; seconds from the upload to the result."""
    started = time.perf_counter()
    upload(page, url, video)
    page.click("#grove-run")
    page.locator("#grove-caption .grove-caption").wait_for(timeout=timeout_ms)
    return time.perf_counter() - started
