"""The demo's query box: a query grounded on every predicted clip, and drawn in its own colour."""
import core  # noqa: F401
from core.drawing import PALETTE

import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from datamodules.video_folder import clip_records
from formats.video_files import probe_video
from formats.video_writer import write_video
from models.grove import Grove
from models.grove.configuration import tiny_configs
from models.grove.query_grounding import QueryError
from models.tiny_tokenizer import build_tiny_tokenizer
from webdemo.query import answer_markdown, ask_handlers, draw_with_answer, ground_on_result
from webdemo.results import DemoResult, assemble_clips


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("query_demo")
    model = Grove(**tiny_configs(), tokenizer=build_tiny_tokenizer(folder / "tok")).eval()
    module = SimpleNamespace(model=model, objectness_threshold=0.5, objectness_strict=False,
                             window_mode="interleaved", masker=None)
    predictor = SimpleNamespace(module=module, lock=threading.Lock(), datamodule=SimpleNamespace(
        hparams={"num_frames": 2, "global_image_size": 64, "grounding_image_size": 128}))
    frames = np.full((40, 48, 64, 3), 30, dtype=np.uint8)
    video = write_video(folder / "v.mp4", frames, fps=25)
    info = probe_video(Path(video), "v")
    records = clip_records(info, 0.8)  # two clips of 4 grid frames
    predictions = {r.key: {"caption": "a dot", "tagged_caption": "<p>a dot</p>", "phrases": ["a dot"],
                           "frames": [{"frame": int(r.frame_indices[0]), "boxes": [[1, 1, 9, 9]], "labels": ["a dot"],
                                       "scores": [0.9]}]} for r in records}
    result = DemoResult("v.mp4", str(video), info.fps, info.width, info.height, info.num_frames, 0.5,
                        assemble_clips(records, predictions, {}, {}), folder / "p.json", None)
    return predictor, result


def test_a_query_is_grounded_on_every_clip_and_drawn_in_the_next_colour(setup):
    predictor, result = setup
    answer = ground_on_result(predictor, result, "the red circle", threshold=0.0)
    assert list(answer.clips) == [c.key for c in result.clips] and answer.label == "asked: the red circle"
    for clip in result.clips:
        assert [f["frame"] for f in answer.clips[clip.key]["frames"]] == clip.grid  # threshold 0: every frame
    assert "on 4 of 4 frames" in answer_markdown(answer, result)
    image = np.full((48, 64, 3), 30, dtype=np.uint8)
    clip = result.clips[0]
    drawn = draw_with_answer(image, clip.prediction, answer, clip.key, clip.grid[0])
    alone = draw_with_answer(image, clip.prediction, None, clip.key, clip.grid[0])
    assert (alone != image).any()  # the caption's box
    added = (drawn != alone).any(axis=-1)
    assert added.any()
    # what the answer adds is drawn in the palette's next colour (the caption's phrase has the first)
    r, g, b = drawn[added].astype(float).mean(axis=0)
    assert PALETTE[1] == (60, 180, 75) and g > r and g > b
    absent = ground_on_result(predictor, result, "the red circle", threshold=1.01)
    assert "absent" in answer_markdown(absent, result)


def test_the_query_box_reports_a_bad_query_on_the_page(setup):
    predictor, result = setup
    ask, redraw = ask_handlers(predictor)
    message, image, state = ask(result, "<p>unclosed", 0.5, 0, 0)
    assert "never closed" in message and state is None and image is not None
    message, _, state = ask(None, "a dot", 0.5, 0, 0)
    assert "first" in message and state is None
    with pytest.raises(QueryError):
        ground_on_result(predictor, result, "", 0.5)
    _, _, answer = ask(result, "a dot", 0.0, 0, 1)
    assert redraw(result, answer, 0, 1).shape == (48, 64, 3)
