"""Long-video mode from the upload page in a real headless Chromium (Debian's package, driven by Playwright).

A ``grove webdemo`` server with a tiny checkpoint (the generated caption fixed, so every clip has
two phrases to link; objectness threshold 0, so every phrase has a tube): a 20-s video uploaded with
the long-video option on; the segments and entities shown must be those of the timeline.json in the
request's folder, the downloaded timeline.json that very file, and choosing an entity shows its tube.
A corrupt upload in long-video mode gives a message in the page.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from longvideo.timeline import read_timeline
from tests.webdemo.conftest import check_corrupt_upload_is_a_message, tiny_demo_server
from tests.webdemo.walking_square import walking_square
from webdemo.browser import upload
from webdemo.timeline import entity_choices

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tiny_checkpoint, tmp_path):
    with tiny_demo_server(tiny_checkpoint, tmp_path, "--model.init_args.objectness_threshold=0.0") as running:
        yield running


def test_long_video_mode_shows_the_request_s_timeline(server, page, tmp_path):
    url, process, log = server
    video = walking_square(tmp_path / "walk.mp4", seconds=20.0)
    upload(page, url, video)
    page.locator("#grove-long input[type=checkbox]").check()
    page.click("#grove-run")
    page.locator("#grove-segments table").wait_for(timeout=300_000)

    (workspace,) = re.findall(r"temporary folder (\S+) \(removed", log.read_text())
    (written,) = Path(workspace, "runs").glob("*/timeline.json")  # the request's folder
    (timeline,) = read_timeline(written)["videos"]
    assert len(timeline["segments"]) == 3 and timeline["entities"]
    rows = page.locator("#grove-segments tr.grove-segment")
    assert [rows.nth(i).get_attribute("data-key") for i in range(rows.count())] == \
        [s["key"] for s in timeline["segments"]]
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())] == \
        [f"{s['start_s']:.1f}-{s['end_s']:.1f} s" for s in timeline["segments"]]
    tags = page.eval_on_selector_all("#grove-segments tr.grove-segment",
                                     "rows => rows.map(r => [...r.querySelectorAll('.grove-entity')]"
                                     ".map(s => Number(s.dataset.entity)))")
    assert tags == [[p["entity"] for p in s["phrases"]] for s in timeline["segments"]]
    labels = page.locator("#grove-entities label").all_inner_texts()
    assert [label.strip() for label in labels] == [label for label, _ in entity_choices(timeline)]
    status = page.locator("#grove-status").inner_text()
    assert f"{len(timeline['segments'])} segment(s), {len(timeline['entities'])} entities" in status
    assert page.locator("#grove-annotated video").count() == 1  # the entity-coloured MP4
    assert Path(written.parent, "annotated", "walk.mp4").stat().st_size > 0

    with page.expect_download(timeout=60_000) as download:
        page.click("#grove-timeline-json")
    downloaded = tmp_path / "downloaded.json"
    download.value.save_as(str(downloaded))
    assert downloaded.read_bytes() == written.read_bytes()

    entity = timeline["entities"][0]
    page.get_by_label(entity_choices(timeline)[0][0], exact=True).check()
    tube = page.locator("#grove-tube .grove-tube")
    tube.wait_for(timeout=60_000)
    assert tube.get_attribute("data-entity") == str(entity["id"])
    assert tube.get_attribute("data-points") == str(len(entity["tube"]))
    assert page.locator("#grove-tube svg circle").count() == 2 * len(entity["tube"])
    assert html.unescape(entity["name"]) in tube.inner_text()

    check_corrupt_upload_is_a_message(page, url, tmp_path, process, long_video=True)
