"""The long-video timeline page in a real headless Chromium: segments with entity-coloured phrases, the gap,
the entity list, and an entity's tube on click."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from longvideo.timeline import build_timeline, timeline_document
from webdemo.browser import chromium_page, chromium_path, demo_server
from webdemo.timeline import entity_choices, segments_html, tube_html

VIDEO = {"video_id": "kitchen", "path": "/videos/kitchen.mp4", "fps": 30.0, "num_frames": 900, "width": 320,
         "height": 180}


def timeline():
    clips, predictions = [], {}
    for k, (first, caption, boxes) in enumerate([(0, "A cup on a board.", {"a cup": [10, 10, 50, 50],
                                                                           "a board": [0, 100, 300, 170]}),
                                                 (240, "The cup moves.", {"the cup": [12, 10, 52, 50]}),
                                                 (600, "A knife.", {"a knife": [200, 20, 260, 60]})]):
        frames = [first + 6 * i for i in range(40)]
        clips.append({"key": f"kitchen_{k}", "clip": k, "shot": 0 if k < 2 else 1, "frames": frames,
                      "start_frame": first, "end_frame": frames[-1] + 5})
        predictions[f"kitchen_{k}"] = {"caption": caption, "tagged_caption": caption, "phrases": list(boxes),
                                       "frames": [{"frame": f, "boxes": list(boxes.values()), "labels": list(boxes),
                                                   "scores": [0.9] * len(boxes)} for f in frames]}
    text = {"a cup": [1.0, 0, 0], "the cup": [0.99, 0.14, 0], "a board": [0, 1.0, 0], "a knife": [0, 0, 1.0]}
    gap = {"first_frame": 480, "last_frame": 590, "start_s": 16.0, "end_s": 19.7, "reason": "InvalidDataError: x"}
    return build_timeline(VIDEO, clips, predictions, [gap], text_vectors={k: np.array(v) for k, v in text.items()})


def test_segments_and_tube_html():
    video = timeline()
    table = segments_html(video)
    assert table.count('class="grove-segment"') == 3 and table.count('class="grove-gap"') == 1
    assert table.index("16.0-19.7 s") < table.index("A knife")  # the gap in time order
    assert 'data-entity="0"' in table and "not decoded: InvalidDataError: x" in table
    assert [label.split(" (")[0] for label, _ in entity_choices(video)] == ["#0 a cup", "#1 a board", "#2 a knife"]
    tube = tube_html(video, 0)
    assert 'data-points="80"' in tube and "segments: kitchen_0, kitchen_1" in tube
    assert tube_html(video, None) == ""
    assert "80 boxes</p>" in tube  # no masks: not mentioned
    video["entities"][0]["tube"][3]["mask"] = {"size": [180, 320], "counts": "0"}
    assert "80 boxes, 1 with a mask</p>" in tube_html(video, 0)


@pytest.mark.slow
def test_timeline_page_in_the_browser(tmp_path):
    pytest.importorskip("playwright.sync_api")
    if not Path(chromium_path()).exists():
        pytest.fail("Chromium is missing: scripts/setup.sh installs Debian's chromium package")
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps(timeline_document([timeline()])))
    with demo_server(["timeline", str(path)], tmp_path / "server.log", module="webdemo") as (url, _), \
            chromium_page() as page:
        page.goto(url)
        page.locator("#grove-segments table").wait_for(timeout=60_000)
        assert page.locator("#grove-segments tr.grove-segment").count() == 3
        assert "not decoded" in page.locator("#grove-segments tr.grove-gap").inner_text()
        colours = page.eval_on_selector_all("#grove-segments .grove-entity",
                                            "spans => spans.map(s => [s.dataset.entity, s.style.background])")
        by_entity = {}
        for entity, colour in colours:
            by_entity.setdefault(entity, set()).add(colour)
        assert all(len(c) == 1 for c in by_entity.values())  # one colour per entity, in every segment
        assert len({next(iter(c)) for c in by_entity.values()}) == len(by_entity)
        page.get_by_label("#0 a cup", exact=False).check()
        tube = page.locator("#grove-tube .grove-tube")
        tube.wait_for(timeout=60_000)
        assert tube.get_attribute("data-points") == "80"
        assert page.locator("#grove-tube svg circle").count() == 160
