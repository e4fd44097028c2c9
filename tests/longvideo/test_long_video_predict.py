"""``cli.py predict`` with configs/overlays/long_video.yaml, end to end on the tiny model: the per-clip JSON is
unchanged, timeline.json is valid, the MP4 keeps one colour per entity, a corrupt middle is a gap."""
import json
from pathlib import Path

import numpy as np
import pytest

from formats.video_reader import PyAVVideoSource
from formats.video_writer import write_video
from longvideo.timeline import read_timeline
from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args

FIXED_CAPTION = "A <p>red shape</p> moves past <p>the wall</p>."


def moving_square(n, fps, rng=None):
    frames = np.full((n, 64, 96, 3), 40, dtype=np.uint8)
    if rng is not None:  # noisy background: big packets, so damage to the file stays local
        frames = rng.integers(0, 255, frames.shape, dtype=np.uint8)
    for i in range(n):
        x = (2 * i) % 70
        frames[i, 20:40, x:x + 20] = (220, 40, 40)
    return frames


@pytest.fixture
def fixed_caption(monkeypatch):
    from models.grove import Grove

    monkeypatch.setattr(Grove, "generate_captions",
                        lambda self, frames, max_new_tokens=64, video_embeds=None: [FIXED_CAPTION] * len(frames))


def predict(root, out, video, *extra):
    from cli import cli_main

    cli = cli_main(["predict", *tiny_cli_args(root, out, *extra), f"--data.videos={video}",
                    "--model.init_args.objectness_threshold=0.0", "--data.init_args.video_clip_seconds=4"])
    return Path(cli.trainer.log_dir)


@pytest.mark.slow
def test_long_video_predict_end_to_end(tiny_synthetic_root, tmp_path, fixed_caption):
    video = write_video(tmp_path / "walk.mp4", moving_square(120, 10), fps=10)
    plain = predict(tiny_synthetic_root, tmp_path / "plain", video)
    long = predict(tiny_synthetic_root, tmp_path / "long", video,
                   "--config", str(ROOT / "configs" / "overlays" / "long_video.yaml"),
                   "--trainer.callbacks+=longvideo.timeline_writer.LongVideoTimeline",  # a second one: exact match
                   "--trainer.callbacks.text_encoder=exact")
    # the per-clip predictions are those of the plain predict, byte for byte
    assert (long / "predictions_predict.json").read_text() == (plain / "predictions_predict.json").read_text()
    document = read_timeline(long / "timeline.json")  # checked against the schema
    (timeline,) = document["videos"]
    assert [s["key"] for s in timeline["segments"]] == ["walk_0", "walk_1", "walk_2"]
    assert [(s["start_s"], s["end_s"]) for s in timeline["segments"]] == [(0.0, 4.0), (4.0, 8.0), (8.0, 12.0)]
    # the same caption in every clip: two entities, each in all three clips, with a tube on every grid frame
    assert sorted(e["name"] for e in timeline["entities"]) == ["red shape", "the wall"]
    for entity in timeline["entities"]:
        assert entity["segments"] == ["walk_0", "walk_1", "walk_2"]
        assert [p["frame"] for p in entity["tube"]] == list(range(0, 120, 2))
    # the MP4 (colours: test_render.py): every frame of the video
    with PyAVVideoSource(long / "annotated" / "walk.mp4") as rendered:
        assert (rendered.num_frames, rendered.width, rendered.height) == (120, 96, 64)


@pytest.mark.slow
def test_corrupt_middle_is_a_gap_in_the_timeline_and_the_rest_is_predicted(tiny_synthetic_root, tmp_path,
                                                                          fixed_caption, capsys):
    rng = np.random.default_rng(0)
    path = write_video(tmp_path / "ok.mp4", moving_square(200, 10, rng), fps=10, gop=10)
    data = bytearray(path.read_bytes())
    start, length = int(len(data) * 0.45), int(len(data) * 0.08)
    data[start:start + length] = rng.integers(0, 255, length, dtype=np.uint8).tobytes()
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(bytes(data))
    run = predict(tiny_synthetic_root, tmp_path / "long", bad,
                  "--config", str(ROOT / "configs" / "overlays" / "long_video.yaml"),
                  "--trainer.callbacks.text_encoder=exact", "--trainer.callbacks.render=false")
    (timeline,) = read_timeline(run / "timeline.json")["videos"]
    (gap,) = timeline["gaps"]
    assert 4.0 < gap["start_s"] < gap["end_s"] < 16.0 and gap["reason"]
    assert f"{gap['start_s']:.2f}-{gap['end_s']:.2f} s" in capsys.readouterr().out
    segments = timeline["segments"]
    assert segments[0]["start_s"] == 0.0 and segments[-1]["end_s"] == 20.0  # before and after the gap
    for s in segments:  # none spans the gap
        assert s["end_frame"] < gap["first_frame"] or s["start_frame"] > gap["last_frame"]
    assert len({s["shot"] for s in segments}) == 2
    predictions = json.loads((run / "predictions_predict.json").read_text())
    assert sorted(predictions) == sorted(s["key"] for s in segments)


@pytest.mark.slow
def test_where_clips_are_decoded_changes_no_output(tiny_synthetic_root, tmp_path, fixed_caption):
    """``decode_in``: a background thread (default), a forked worker, or inline give the same files."""
    video = write_video(tmp_path / "walk.mp4", moving_square(100, 10), fps=10)
    outputs = {}
    for where in ("thread", "worker", "inline"):
        run = predict(tiny_synthetic_root, tmp_path / where, video,
                      "--config", str(ROOT / "configs" / "overlays" / "long_video.yaml"),
                      "--trainer.callbacks.text_encoder=exact", "--trainer.callbacks.render=false",
                      f"--data.init_args.decode_in={where}", "--data.init_args.num_workers=1")
        timeline = json.loads((run / "timeline.json").read_text())
        outputs[where] = ((run / "predictions_predict.json").read_text(), timeline["videos"])
    assert outputs["thread"] == outputs["worker"] == outputs["inline"]
    assert [s["key"] for s in outputs["thread"][1][0]["segments"]] == ["walk_0", "walk_1", "walk_2"]
