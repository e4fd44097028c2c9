"""The demo end to end in a real headless Chromium (Debian's package, driven by Playwright).

A real ``grove webdemo`` server on a free loopback port with a tiny checkpoint: upload a
synthetic clip, wait for the result, check the caption and its phrase colours, download the
predictions file and compare it with ``cli.py predict`` on the same clip; then a corrupt upload
must give a message in the page while the server keeps serving. A screenshot of the result is saved.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import urllib.request
from pathlib import Path

import pytest

from models.grove import Grove
from tests.webdemo.conftest import check_corrupt_upload_is_a_message, tiny_demo_server
from tests.webdemo.fixed_caption_server import FIXED_PLAIN, fixed_generate_captions
from tests.webdemo.tiny_model import predict_with_cli
from webdemo.browser import upload, upload_and_predict

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tiny_checkpoint, tmp_path):
    with tiny_demo_server(tiny_checkpoint, tmp_path) as running:
        yield running


def test_upload_predict_download_and_a_corrupt_upload(server, page, tiny_synthetic_root, tiny_checkpoint,
                                                      tmp_path, monkeypatch):
    url, process, log = server
    clip = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    seconds = upload_and_predict(page, url, clip)
    print(f"upload to result: {seconds:.1f} s (2-s clip, demo-size model trained 3 steps, 6 new tokens)")
    caption = page.locator("#grove-caption .grove-caption")
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

    check_corrupt_upload_is_a_message(page, url, tmp_path, process)
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
    upload(page, url, clip)  # and still predicting
    page.click("#grove-run")
    page.locator("#grove-caption .grove-caption").wait_for(timeout=300_000)

    process.terminate()  # stopping the server removes its uploads and results
    assert process.wait(timeout=60) == 0
    (workspace,) = re.findall(r"temporary folder (\S+) \(removed", log.read_text())
    assert not Path(workspace).exists()
