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
def tiny_demo_server(tiny_checkpoint, tmp_path, *extra):
    """The demo on the tiny checkpoint (fixed captions, one sample): ``(url, process, log path)``."""
    from webdemo.browser import demo_server

    args = ["--config", str(ROOT / "configs" / "demo.yaml"), "--ckpt_path", str(tiny_checkpoint), "--samples", "1",
            *TINY_MODEL_ARGS, *extra]
    log = tmp_path / "server.log"
    with demo_server(args, log, module="tests.webdemo.fixed_caption_server") as (url, process):
        yield url, process, log


@pytest.fixture
def page():
    pytest.importorskip("playwright.sync_api")
    from webdemo.browser import chromium_page, chromium_path

    if not Path(chromium_path()).exists():
        pytest.fail("Chromium is missing: scripts/setup.sh installs Debian's chromium package")
    with chromium_page() as browser_page:
        yield browser_page
