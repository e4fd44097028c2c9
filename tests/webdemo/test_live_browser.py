"""The Live tab in a real headless Chromium (Debian's package, driven by Playwright).

A ``grove webdemo`` server with a tiny checkpoint (the generated caption fixed, so every clip has two
phrases to link; objectness threshold 0, so every phrase has a box on every frame). The camera is
Chromium's fake camera playing a synthetic long video (one object that stays), written as Y4M by
the test; the stream URL is the same video served as live MPEG-TS over HTTP on 127.0.0.1. With 2-s
clips the page must show the rolling story (times, caption, phrases tagged with entity ids), the
picture of predicted frames with each box labelled ``#id name`` in its entity's colour (the boxes
those of the very frame shown, as the clips' JSON lines give them), ids kept from clip to clip,
and the counters; the downloaded clips file holds the lines the story shows.
"""
from __future__ import annotations

from core.drawing import PALETTE

import contextlib
import json
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from formats.video_reader import stream_frames
from live.serving import LiveStreamServer
from longvideo.synthetic_long import LongVideoConfig, generate_long_video
from tests.webdemo.conftest import tiny_demo_server
from tests.webdemo.fixed_caption_server import FIXED_PLAIN
from webdemo.browser import CHROMIUM_ARGS, chromium_path

pytestmark = pytest.mark.slow

CLIP_SECONDS = 2
FPS = 10.0

# What the Live tab shows, read from the page: the frame's key, grid frame and legend, the story's
# lines with their entity tags, and the counters' numbers.
READ_PAGE = """() => {
    const figure = document.querySelector("#grove-live-picture figure.grove-live-frame");
    const counters = document.querySelector("#grove-live-counters .grove-live-counters");
    return {
        picture: figure && {key: figure.dataset.key, frame: Number(figure.dataset.frame),
            boxes: [...figure.querySelectorAll("li.grove-live-box")].map(b => ({
                entity: b.dataset.entity, label: b.textContent, colour: b.style.color,
                box: b.dataset.box.split(",").map(Number)}))},
        lines: [...document.querySelectorAll("#grove-live-story li.grove-live-line")].map(l => ({
            key: l.dataset.key, text: l.textContent,
            tags: [...l.querySelectorAll(".grove-entity")].map(s => ({entity: Number(s.dataset.entity),
                text: s.textContent, colour: s.style.background}))})),
        counters: counters && {...counters.dataset, text: counters.textContent},
    };
}"""

# The shown picture's pixel at (x, y), read through a canvas.
READ_PIXEL = """([x, y]) => {
    const img = document.querySelector("#grove-live-picture figure img");
    const canvas = document.createElement("canvas");
    canvas.width = img.naturalWidth;
    canvas.height = img.naturalHeight;
    const context = canvas.getContext("2d");
    context.drawImage(img, 0, 0);
    return [...context.getImageData(x, y, 1, 1).data.slice(0, 3)];
}"""


def write_y4m(frames: np.ndarray, path: Path, fps: float) -> Path:
    """``(N, H, W, 3)`` RGB frames as a Y4M file (4:2:0, BT.601 studio range, as Chromium's fake camera reads it)."""
    rgb = frames.astype(np.float64)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    u = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    v = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255
    n, h, w = y.shape

    def half(c):  # 2x2 means: the chroma planes at half size
        return c.reshape(n, h // 2, 2, w // 2, 2).mean(axis=(2, 4))

    planes = [np.clip(np.round(p), 0, 255).astype(np.uint8).reshape(n, -1) for p in (y, half(u), half(v))]
    with open(path, "wb") as out:
        out.write(f"YUV4MPEG2 W{w} H{h} F{int(fps)}:1 Ip A1:1 C420jpeg\n".encode())
        for k in range(n):
            out.write(b"FRAME\n" + b"".join(p[k].tobytes() for p in planes))
    return path


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """A 4-s synthetic long video (one object, there all along) as MP4, and as a Y4M that plays it forth
    and back (the fake camera loops it without a jump)."""
    folder = tmp_path_factory.mktemp("live_video")
    config = LongVideoConfig(duration_s=4.0, fps=FPS, width=224, height=128, num_objects=1, look_alikes=0,
                             visit_s=(30.0, 30.0), object_size=(24, 36), speed=30.0)
    mp4 = folder / "walk.mp4"
    generate_long_video(mp4, config, clip_seconds=CLIP_SECONDS)
    frames = np.stack([f for _, f in stream_frames(mp4, np.arange(config.num_frames))])
    return mp4, write_y4m(np.concatenate([frames, frames[::-1]]), folder / "walk.y4m", FPS)


@pytest.fixture(scope="module")
def server(tiny_checkpoint, tmp_path_factory):
    with tiny_demo_server(tiny_checkpoint, tmp_path_factory.mktemp("live_server"),
                          "--model.init_args.objectness_threshold=0.0") as running:
        yield running


@pytest.fixture(scope="module")
def page(videos):
    """A Chromium page whose camera is the fake one playing the Y4M (camera access granted)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(chromium_path()).exists():
        pytest.skip(f"Chromium is missing ({chromium_path()}): scripts/setup.sh installs Debian's chromium package")
    camera = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
              f"--use-file-for-fake-video-capture={videos[1]}"]
    with tempfile.TemporaryDirectory(prefix="grove-live-chromium-") as profile, \
            sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=chromium_path(), headless=True, args=[*CHROMIUM_ARGS, *camera],
            accept_downloads=True, viewport={"width": 1400, "height": 1000})
        with contextlib.closing(context):
            yield context.pages[0] if context.pages else context.new_page()


def open_live_tab(page, url: str) -> None:
    page.goto(url)
    page.get_by_role("tab", name="Live").click()
    page.locator("#grove-live-clip-seconds input").fill(str(CLIP_SECONDS))


def wait_for_clips(page, count: int, timeout_s: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        shown = page.evaluate(READ_PAGE)
        if len(shown["lines"]) >= count and shown["picture"] is not None:
            return shown
        page.wait_for_timeout(250)
    raise AssertionError(f"fewer than {count} clips in the page after {timeout_s:.0f} s: {shown}")


def watch_picture(page, seconds: float) -> list[dict]:
    """The pictures shown over ``seconds`` (one look every 0.1 s), with a pixel of each box's left edge."""
    seen = []
    for _ in range(int(seconds * 10)):
        picture = page.evaluate(READ_PAGE)["picture"]
        if picture and picture["boxes"] and (not seen or picture["frame"] != seen[-1]["frame"]):
            x1, y1, x2, y2 = picture["boxes"][0]["box"]
            picture["edge"] = page.evaluate(READ_PIXEL, [int(x1), int((y1 + y2) / 2)])
            seen.append(picture)
        page.wait_for_timeout(100)
    return seen


def css(colour) -> str:
    return "rgb({}, {}, {})".format(*colour)


def check_live_page(page, shown: dict, pictures: list[dict], tmp_path: Path) -> list[dict]:
    """The story, the picture and the counters agree with each other and with the downloaded clips file."""
    for line in shown["lines"]:
        assert FIXED_PLAIN.split()[1] in line["text"] and " s " in line["text"]
        assert {t["text"].rsplit(" #", 1)[0] for t in line["tags"]} == {"red shape", "the wall"}
        for tag in line["tags"]:
            assert tag["text"].endswith(f"#{tag['entity']}") and tag["colour"] == css(PALETTE[tag["entity"] % 12])
    ids = {}  # phrase -> its entity id in each line
    for line in shown["lines"]:
        for tag in line["tags"]:
            ids.setdefault(tag["text"].rsplit(" #", 1)[0], []).append(tag["entity"])
    # the object that stays keeps its id from clip to clip
    assert ids["red shape"][0] == ids["red shape"][1], ids
    assert ids["red shape"][0] != ids["the wall"][0]

    assert pictures, "no picture with boxes was shown"
    for picture in pictures:
        for box in picture["boxes"]:
            entity = int(box["entity"])
            assert box["label"] in (f"#{entity} red shape", f"#{entity} the wall")
            assert box["colour"] == css(PALETTE[entity % 12])
        edge, colour = picture["edge"], PALETTE[int(picture["boxes"][0]["entity"]) % 12]
        assert max(abs(a - b) for a, b in zip(edge, colour)) <= 60, (edge, colour)  # the box's outline, JPEG'd

    counters = page.evaluate(READ_PAGE)["counters"]
    assert int(counters["clips"]) >= len(shown["lines"]) and int(counters["dropped"]) >= 0
    assert float(counters["latency"]) > 0 and "dropped" in counters["text"] and "latency" in counters["text"]

    page.click("#grove-live-stop")
    page.wait_for_function("() => document.querySelector('#grove-live-counters .grove-live-counters')"
                           "?.dataset.state.startsWith('ended')", timeout=120_000)
    page.locator("#grove-live-clips").wait_for(timeout=30_000)
    with page.expect_download(timeout=60_000) as download:
        page.click("#grove-live-clips")
    saved = tmp_path / "clips.jsonl"
    download.value.save_as(str(saved))
    records = {r["key"]: r for r in map(json.loads, saved.read_text().splitlines())}
    final = page.evaluate(READ_PAGE)
    assert [line["key"] for line in final["lines"]] == list(records)
    for line in final["lines"]:
        assert sorted(t["entity"] for t in line["tags"]) == sorted(p["entity"] for p in records[line["key"]]["phrases"])
    for picture in pictures:  # every box shown is the one predicted on that very frame
        (entry,) = [f for f in records[picture["key"]]["frames"] if f["frame"] == picture["frame"]]
        assert [b["box"] for b in picture["boxes"]] == [[round(v, 1) for v in box] for box in entry["boxes"]]
        assert [int(b["entity"]) for b in picture["boxes"]] == entry["entities"]
    assert page.locator("#grove-live-timeline").is_visible()
    return list(records.values())


def test_live_tab_captions_the_browser_camera(page, server, tmp_path):  # no Chromium: skipped before the server
    url, process, log = server
    open_live_tab(page, url)
    page.locator("#grove-live-camera [title='grant webcam access'] button").click()
    page.locator("#grove-live-camera [title='start recording']").click()
    page.click("#grove-live-start")
    shown = wait_for_clips(page, 3)
    pictures = watch_picture(page, 3.0)
    state = page.evaluate(READ_PAGE)["counters"]["state"]
    frames = int(re.fullmatch(r"running \((\d+) frames from the camera\)", state).group(1))
    records = check_live_page(page, shown, pictures, tmp_path)
    assert all(r["key"].startswith("camera_") for r in records)
    assert frames >= records[2]["end_s"]  # at least a frame a second reached the server
    assert [r["end_s"] - r["start_s"] for r in records[:3]] == [CLIP_SECONDS] * 3
    assert process.poll() is None
    server_log = log.read_text()
    assert "Traceback" not in server_log, server_log[max(0, server_log.find("Traceback") - 2000):]


def test_live_tab_reads_a_stream_url(page, server, videos, tmp_path):
    url, process, log = server
    with LiveStreamServer(videos[0], speed=1.0) as stream:
        open_live_tab(page, url)
        page.get_by_label("stream URL", exact=True).check()
        page.locator("#grove-live-url textarea, #grove-live-url input").first.fill(stream.url)
        page.click("#grove-live-start")
        shown = wait_for_clips(page, 2)
        pictures = watch_picture(page, 2.0)
        records = check_live_page(page, shown, pictures, tmp_path)
        # a new run; closing the page ends it (its files are written)
        page.click("#grove-live-start")
        page.wait_for_function("() => document.querySelector('#grove-live-counters .grove-live-counters')"
                               "?.dataset.state === 'running'", timeout=60_000)
        (workspace,) = re.findall(r"temporary folder (\S+) \(removed", log.read_text())
        newest = max(Path(workspace, "runs").iterdir())
        page.goto("about:blank")
        deadline = time.monotonic() + 90
        while not (newest / "live.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert json.loads((newest / "live.json").read_text())["ended"] == "stopped"
    assert all(r["key"].startswith("stream_") for r in records)
    assert records[0]["start_s"] == 0.0 and records[1]["start_s"] == CLIP_SECONDS
    assert process.poll() is None
    server_log = log.read_text()
    assert "Traceback" not in server_log, server_log[max(0, server_log.find("Traceback") - 2000):]
