"""What the Live tab shows, without a browser: the picture's schedule, its drawing in entity colours, the story
line, the counters, and the tab's answers to bad settings."""
from core.drawing import PALETTE

import html
import re

import gradio as gr
import numpy as np
import pytest

from webdemo.live_tab import LiveSettings, LiveTab
from webdemo.live_view import (
    LiveCounters,
    LivePlayback,
    ShownClip,
    counters_html,
    draw_live_frame,
    picture_html,
    story_line_html,
)

FPS = 25.0  # a stream's rate: the grid takes every 5th frame


def record(clip: int, boxes_on=None, entity: int = 3, name: str = "red shape") -> dict:
    first = 50 * clip
    frames = [first + 5 * k for k in range(10)]
    boxes_on = frames if boxes_on is None else boxes_on
    return {"key": f"cam_{clip}", "clip": clip, "start_frame": first, "end_frame": first + 49,
            "start_s": first / FPS, "end_s": (first + 50) / FPS, "caption": f"a {name} moves",
            "phrases": [{"phrase": name, "entity": entity}],
            "frames": [{"frame": f, "time_s": f / FPS, "boxes": [[10.0, 8.0, 40.0, 30.0]], "labels": [name],
                        "entities": [entity], "scores": [0.9]} for f in boxes_on],
            "latency_s": 0.5 + clip, "model_s": 0.25, "dropped": 0}


def grid(clip: int) -> np.ndarray:
    return np.arange(50 * clip, 50 * clip + 50, 5)


def pixels(n: int) -> list[np.ndarray]:
    return [np.full((64, 96, 3), 40 + k, np.uint8) for k in range(n)]


def test_each_clip_plays_its_own_frames_at_the_grid_rate_after_the_clip_before():
    playback = LivePlayback(max_behind_s=2.0)
    assert playback.at(0.0) is None and playback.behind_s(0.0) is None
    first = playback.add(record(0), grid(0), pixels(10), FPS, {3: "red shape"}, arrival=99.5, now=100.0)
    assert first.start == 100.0 and first.end == pytest.approx(102.0)
    assert [playback.at(t)[1] for t in (100.0, 100.19, 100.2, 101.0, 101.85, 105.0)] == [0, 0, 1, 5, 9, 9]
    assert playback.behind_s(100.0) == pytest.approx(100.0 - (99.5 - 1.8))  # frame 0 arrived 1.8 s before the last
    # the next clip's prediction comes in while the first is still playing: it follows it
    second = playback.add(record(1), grid(1), pixels(10), FPS, {3: "red shape"}, arrival=101.5, now=101.6)
    assert second.start == pytest.approx(102.0)
    assert playback.at(101.9)[0] is first and playback.at(102.05) == (second, 0)
    # a clip far ahead of the picture cuts the one playing short: the delay does not grow
    third = playback.add(record(2), grid(2), pixels(10), FPS, {3: "red shape"}, arrival=99.0, now=99.5)
    assert third.start == 99.5


def test_a_shown_clip_needs_one_picture_per_grid_frame():
    with pytest.raises(ValueError, match="cam_0: 3 pictures for 10 grid frames"):
        ShownClip(record(0), grid(0), pixels(3), FPS, {}, 0.0, 0.0)


def test_a_frame_is_drawn_with_its_entity_s_colour_and_id():
    clip = ShownClip(record(0, boxes_on=[0, 5]), grid(0), pixels(10), FPS, {3: "red shape"}, 0.0, 0.0)
    drawn, shown = draw_live_frame(clip, 1)
    colour = PALETTE[3]
    assert shown == [{"entity": 3, "label": "#3 red shape", "colour": colour, "box": [10.0, 8.0, 40.0, 30.0]}]
    assert tuple(drawn[25, 10]) == colour and tuple(drawn[29, 25]) == colour  # the box's left and bottom edges
    label = PALETTE[3][0] * 210 / 255 + 41 * 45 / 255  # the label's tag: the colour at alpha 210 over the frame
    assert abs(int(drawn[12, 10, 0]) - label) <= 1
    assert tuple(drawn[25, 25]) == (41, 41, 41)  # inside the box: the frame itself (position 1)
    bare, none = draw_live_frame(clip, 2)  # a grid frame without a kept box: the frame and caption only
    assert none == [] and np.array_equal(bare[:40], pixels(10)[2][:40])
    page = picture_html(clip, 1)
    assert 'data-key="cam_0" data-frame="5" data-time="0.20"' in page
    assert 'data-entity="3" data-box="10.0,8.0,40.0,30.0" style="color:rgb({},{},{})">#3 red shape</li>'.format(
        *colour) in page
    assert re.search(r'<img src="data:image/jpeg;base64,[A-Za-z0-9+/=]+"', page)


def test_a_story_line_tags_each_phrase_with_its_entity():
    line = story_line_html(record(1, entity=13, name="the <wall>"))
    assert line.startswith('<li class="grove-live-line" data-key="cam_1"><span class="grove-live-time">2.0-4.0 s')
    tag = (f'<span class="grove-entity" data-entity="13" style="background:rgb({PALETTE[1][0]},{PALETTE[1][1]},'
           f'{PALETTE[1][2]})">{html.escape("the <wall>")} #13</span>')
    assert f"a {tag} moves" in line


def test_the_counters_say_clips_drops_latency_and_delay():
    counters = LiveCounters()
    assert 'data-clips="0" data-dropped="0" data-latency=""' in counters_html(counters, None, "running")
    for clip in range(3):
        counters.add({**record(clip), "dropped": clip})
    text = counters_html(counters, 2.44, "running")
    assert 'data-clips="3" data-dropped="2" data-latency="2.5"' in text
    assert "latency 2.50 s (max 2.50 s) · model 0.25 s per clip · picture 2.4 s behind the source" in text


@pytest.mark.parametrize("settings, message", [
    (("screen", 2.0, "drop-oldest", 0.5), "the source must be one of camera, stream URL, got 'screen'"),
    (("camera", 0.2, "drop-oldest", 0.5), "the clip length must be 0.4-60 s"),
    (("camera", 2.0, "newest", 0.5), "the skip policy must be one of drop-oldest, queue, got 'newest'"),
    (("camera", 2.0, "queue", 1.5), "the objectness threshold must be between 0 and 1, got 1.5"),
])
def test_bad_live_settings_are_sentences(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        LiveSettings(*settings).checked()


def test_the_tab_asks_for_a_stream_url_and_ignores_frames_without_a_run():
    tab = LiveTab(predictor=None, workspace=None)  # nothing of the model is reached before a run starts
    status, *rest = tab.start("stream URL", "/etc/passwd", 2, "drop-oldest", 0.5)
    assert "/etc/passwd: give a stream URL (rtsp://, http(s)://" in status and 'role="alert"' in status
    status, *_ = tab.start("stream URL", "", 2, "drop-oldest", 0.5)
    assert "an empty URL: give a stream URL" in status
    status, *_ = tab.start("camera", "", 0, "drop-oldest", 0.5)
    assert "the clip length must be 0.4-60 s" in status
    assert tab.pages == {}
    assert tab.camera_frame(np.zeros((8, 8, 3), np.uint8)) == gr.skip()  # no camera run: the frame is dropped
    timer = tab.tick()[-1]  # a page without a run: its timer is turned off
    assert isinstance(timer, gr.Timer) and timer.active is False
