"""The demo end to end in a real headless Chromium (Debian's package, driven by Playwright).

A real ``python -m webdemo`` server on a free loopback port with a tiny checkpoint: upload a
synthetic clip, wait for the result, check the caption and its phrase colours, download the
predictions file and compare it with ``cli.py predict`` on the same clip; then a corrupt upload
must give a message in the page while the server keeps serving. A screenshot of the result is saved.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from models.grove import Grove
from tests.fixtures.paths import ROOT
from tests.webdemo.fixed_caption_server import FIXED_PLAIN, fixed_generate_captions
from tests.webdemo.tiny_model import TINY_MODEL_ARGS, predict_with_cli

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Offline, no first-run work, nothing in the background: the page is all the browser loads.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(url: str, server: subprocess.Popen, log: Path, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the demo server exited with {server.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(1.0)
    pytest.fail(f"the demo server did not answer at {url} within {timeout:.0f} s:\n{log.read_text()[-4000:]}")


@pytest.fixture
def server(tiny_checkpoint, tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    command = [sys.executable, "-m", "tests.webdemo.fixed_caption_server", "--config",
               str(ROOT / "configs" / "demo.yaml"), "--ckpt_path", str(tiny_checkpoint), "--port", str(port),
               "--samples", "1", *TINY_MODEL_ARGS]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_serving(url, process, log)
        yield url, process, log
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture
def browser_page(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail("Chromium is missing: scripts/setup.sh installs Debian's chromium package")
    with playwright.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            accept_downloads=True, viewport={"width": 1400, "height": 1000})
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def upload_and_run(page, url: str, video: Path) -> None:
    page.goto(url)
    page.locator("#grove-upload input[type=file]").set_input_files(str(video))
    page.locator("#grove-upload video").wait_for(timeout=60_000)  # the upload arrived and plays
    page.click("#grove-run")


def test_upload_predict_download_and_a_corrupt_upload(server, browser_page, tiny_synthetic_root, tiny_checkpoint,
                                                      tmp_path, monkeypatch):
    url, process, log = server
    page = browser_page
    clip = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    started = time.monotonic()
    upload_and_run(page, url, clip)
    caption = page.locator("#grove-caption .grove-caption")
    caption.wait_for(timeout=300_000)
    print(f"upload to result: {time.monotonic() - started:.1f} s (2-s clip, tiny model)")
    assert caption.inner_text().split() == FIXED_PLAIN.split()
    colours = page.eval_on_selector_all(
        "#grove-caption .grove-phrase", "spans => spans.map(s => getComputedStyle(s).backgroundColor)")
    assert len(colours) == 2 and len(set(colours)) == 2  # "red shape", "the wall": a colour each
    page.locator("#grove-frame img").wait_for(timeout=60_000)  # the frame view and the plot are filled
    page.locator("#grove-plot img, #grove-plot svg, #grove-plot canvas").first.wait_for(timeout=60_000)
    shot = tmp_path / "webdemo_result.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("WEBDEMO_SCREENSHOT"):
        shutil.copy(shot, os.environ["WEBDEMO_SCREENSHOT"])
    assert shot.stat().st_size > 10_000

    with page.expect_download(timeout=60_000) as download:
        page.click("#grove-json")
    downloaded = tmp_path / "downloaded.json"
    download.value.save_as(str(downloaded))
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)  # as the server has it
    expected = predict_with_cli(tiny_checkpoint, clip, tmp_path / "cli")
    assert json.loads(downloaded.read_text()) == expected
    assert downloaded.read_text() == json.dumps(expected)  # the same file, byte for byte

    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"this is not a video" * 200)
    page.goto(url)
    page.locator("#grove-upload input[type=file]").set_input_files(str(broken))
    page.wait_for_timeout(1000)
    page.click("#grove-run")
    alert = page.locator("#grove-status .grove-error")
    alert.wait_for(timeout=120_000)
    assert "'broken.mp4' could not be read as a video" in alert.inner_text()
    assert "Traceback" not in page.content()
    assert process.poll() is None  # still serving
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
