"""What the demo's tests share: a tiny trained checkpoint, a demo server on it, a Chromium page."""
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.fixtures.paths import ROOT
from tests.webdemo.tiny_model import TINY_MODEL_ARGS, fit_tiny


@pytest.fixture(scope="session")
def tiny_checkpoint(tiny_synthetic_root, tmp_path_factory):
    return fit_tiny(tiny_synthetic_root, tmp_path_factory.mktemp("tiny_fit"))


@contextmanager
def tiny_demo_server(tiny_checkpoint, tmp_path, *extra, module: str = "tests.webdemo.fixed_caption_server"):
    """The demo on the tiny checkpoint (fixed captions, one sample): ``(url, process, log path)``."""
    from webdemo.browser import demo_server

    args = ["--config", str(ROOT / "configs" / "demo.yaml"), "--ckpt-path", str(tiny_checkpoint), "--samples", "1",
            *TINY_MODEL_ARGS, *extra]
    log = tmp_path / "server.log"
    with demo_server(args, log, module=module) as (url, process):
        yield url, process, log


@pytest.fixture
def page():
    pytest.importorskip("playwright.sync_api")
    from webdemo.browser import chromium_page, chromium_path

    if not Path(chromium_path()).exists():
        pytest.fail("Chromium is missing: scripts/setup.sh installs Debian's chromium package")
    with chromium_page() as browser_page:
        yield browser_page


def check_corrupt_upload_is_a_message(page, url, tmp_path, process, long_video: bool = False) -> None:
    """A file that is not a video, uploaded and run: a message in the page, no traceback, still serving."""
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"this is not a video" * 200)
    page.goto(url)
    page.locator("#grove-upload input[type=file]").set_input_files(str(broken))
    page.wait_for_timeout(1000)
    if long_video:
        page.locator("#grove-long input[type=checkbox]").check()
    page.click("#grove-run")
    alert = page.locator("#grove-status .grove-error")
    alert.wait_for(timeout=120_000)
    assert "'broken.mp4' could not be read as a video" in alert.inner_text()
    assert "Traceback" not in page.content()
    assert process.poll() is None  # still serving
