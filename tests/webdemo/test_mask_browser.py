"""Masks in the demo, in a real headless Chromium: a prediction whose boxes carry masks shows each mask
translucent in its phrase's colour in the frame view (read back from the displayed image) and in the
annotated MP4 (downloaded and decoded)."""
from __future__ import annotations

from core.drawing import MASK_ALPHA, PALETTE

import re

import numpy as np
import pytest

from formats.video_reader import PyAVVideoSource
from tests.webdemo.conftest import tiny_demo_server
from tests.webdemo.masked_prediction_server import known_mask
from webdemo.browser import upload_and_predict

pytestmark = pytest.mark.slow

# The pixels of the image shown in the frame view at its own size, read through a canvas.
READ_PIXELS = """(img, points) => {
    const canvas = document.createElement("canvas");
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    const context = canvas.getContext("2d");
    context.drawImage(img, 0, 0);
    const size = [img.naturalWidth, img.naturalHeight];
    return {size, pixels: points.map(([x, y]) => Array.from(context.getImageData(x, y, 1, 1).data.slice(0, 3)))};
}"""


def blend(colour, under):
    return np.round((np.asarray(colour, float) * MASK_ALPHA + np.asarray(under, float) * (255 - MASK_ALPHA)) / 255)


def test_the_frame_view_and_the_video_show_the_masks(tiny_checkpoint, tiny_synthetic_root, tmp_path, page):
    clip = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    with tiny_demo_server(tiny_checkpoint, tmp_path, module="tests.webdemo.masked_prediction_server") as (url, *_):
        upload_and_predict(page, url, clip)
        image = page.locator("#grove-frame img")
        image.wait_for(timeout=60_000)
        page.wait_for_function("() => { const i = document.querySelector('#grove-frame img');"
                               " return i && i.complete && i.naturalWidth > 0; }", timeout=60_000)
        frame = int(re.search(r"frame (\d+) \(", page.locator("#grove-frame-label").inner_text()).group(1))
        with PyAVVideoSource(clip) as video:
            width, height = video.width, video.height
            source = video.read_frames([frame])[0].astype(float)
        mask = known_mask(width, height)
        inside = (width // 2, height // 2)  # the disc's centre
        outside = (int(0.25 * width), int(0.75 * height))  # inside the box, off the disc
        assert mask[inside[1], inside[0]] and not mask[outside[1], outside[0]]
        shown = image.evaluate(READ_PIXELS, [list(inside), list(outside)])
        assert shown["size"] == [width, height]
        colour = PALETTE[0]  # the caption's first phrase
        got_in, got_out = (np.asarray(p, float) for p in shown["pixels"])
        assert np.abs(got_in - blend(colour, source[inside[1], inside[0]])).max() <= 2, got_in
        assert np.abs(got_out - source[outside[1], outside[0]]).max() <= 2, got_out

        with page.expect_download(timeout=60_000) as download:
            page.click("#grove-mp4")
        mp4 = tmp_path / "annotated.mp4"
        download.value.save_as(str(mp4))
    with PyAVVideoSource(mp4) as annotated, PyAVVideoSource(clip) as video:
        drawn = annotated.read_frames([frame])[0].astype(float)
        source = video.read_frames([frame])[0].astype(float)
    y, x = inside[1], inside[0]
    patch = (slice(y - 3, y + 4), slice(x - 3, x + 4))
    expected = blend(colour, source[patch].mean((0, 1)))
    assert np.abs(drawn[patch].mean((0, 1)) - expected).max() < 12, (drawn[patch].mean((0, 1)), expected)
