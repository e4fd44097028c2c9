"""``grove ground``: a trained checkpoint grounds what a user asks, written as predictions and an annotated video."""
import core  # noqa: F401

import json

import pytest

from command_line.grove import main as grove
from formats.video_files import open_video
from tests.webdemo.tiny_model import DEMO_CONFIG, TINY_MODEL_ARGS, fit_tiny


@pytest.fixture(scope="module")
def checkpoint(tiny_synthetic_root, tmp_path_factory):
    return fit_tiny(tiny_synthetic_root, tmp_path_factory.mktemp("ground_fit"))


def test_grove_ground_writes_each_querys_boxes_and_a_video(checkpoint, tiny_synthetic_root, tmp_path):
    video = sorted((tiny_synthetic_root / "videos").glob("*.mp4"))[0]
    out = tmp_path / "out"
    queries = ["the red circle", "<p>a blue square</p> moves past <p>a green star</p>"]
    grove(["ground", str(video), *[a for q in queries for a in ("--query", q)], "--config", str(DEMO_CONFIG),
           "--ckpt-path", str(checkpoint), "--out", str(out), "--objectness-threshold", "0", *TINY_MODEL_ARGS])
    predictions = json.loads((out / "predictions.json").read_text())
    assert [e["query"] for e in predictions.values()] == queries
    assert [e["referent"] for e in predictions.values()] == ["the red circle", "a blue square"]
    with open_video("/", str(video)) as source:
        num_frames, width, height = source.num_frames, source.width, source.height
    grid = list(range(0, num_frames, 5))
    for entry in predictions.values():
        assert entry["objectness"]["frames"] == grid
        assert [f["frame"] for f in entry["frames"]] == grid  # threshold 0: every frame keeps every phrase
        for frame in entry["frames"]:
            assert frame["labels"] == entry["phrases"]
            for x1, y1, x2, y2 in frame["boxes"]:
                assert 0 <= x1 <= x2 <= width and 0 <= y1 <= y2 <= height
    with open_video("/", str(out / "ground.mp4")) as drawn:
        assert (drawn.num_frames, drawn.width, drawn.height) == (num_frames, width, height)


def test_grove_ground_refuses_an_empty_query_in_one_line(checkpoint, tiny_synthetic_root, tmp_path, capsys):
    video = sorted((tiny_synthetic_root / "videos").glob("*.mp4"))[0]
    with pytest.raises(SystemExit, match="error: an empty query"):
        grove(["ground", str(video), "--query", " ", "--config", str(DEMO_CONFIG), "--ckpt-path", str(checkpoint),
               "--out", str(tmp_path / "out"), *TINY_MODEL_ARGS])
    assert not (tmp_path / "out").exists()


def test_long_video_mode_takes_the_whole_video(tmp_path, capsys):
    for name in ("v.mp4", "c.yaml", "x.ckpt"):
        (tmp_path / name).write_text("")
    with pytest.raises(SystemExit) as exit_info:
        grove(["ground", str(tmp_path / "v.mp4"), "--query", "a", "--config", str(tmp_path / "c.yaml"),
               "--ckpt-path", str(tmp_path / "x.ckpt"), "--out", str(tmp_path / "o"), "--clip-seconds", "8",
               "--start-frame", "10"])
    assert exit_info.value.code == 2 and "leave out --start-frame" in capsys.readouterr().err
