"""The processor: the one path from decoded frames to model inputs and from model outputs to predictions."""
import core  # noqa: F401

import subprocess
import sys

import numpy as np
import pytest
import torch

from datamodules.grounded_dataset import GroundedClipDataset
from formats.video_writer import write_video
from models.grove.clip_processing import GroundedCollate
from models.grove.postprocessing import format_clip_predictions, objectness_by_clip
from models.grove.processing import GroveProcessor, clip_record
from tests.fixtures.paths import ROOT


def test_objectness_by_clip_keeps_real_frames_and_the_clips_own_phrases():
    scores = torch.arange(2 * 3 * 3, dtype=torch.float32).reshape(2, 3, 3) / 100
    batch = {"keys": ["a_0", "b_0"], "frame_mask": torch.tensor([[True, True, False], [True, True, True]]),
             "frame_indices": torch.tensor([[0, 5, 0], [3, 9, 15]])}
    out = objectness_by_clip(batch, [["x", "y"], ["z"]], scores)
    assert out["a_0"]["frames"] == [0, 5] and out["b_0"]["frames"] == [3, 9, 15]
    np.testing.assert_allclose(out["a_0"]["scores"], scores[0, :2, :2].numpy())
    np.testing.assert_allclose(out["b_0"]["scores"], scores[1, :, :1].numpy())


def _one_clip(scores):
    # a 200 x 100 frame; one phrase; box centred at (0.5, 0.5), half the width, a fifth of the height
    boxes = torch.tensor([[0.5, 0.5, 0.5, 0.2], [0.9, 0.9, 0.4, 0.4]]).view(1, 2, 1, 4)
    batch = {"keys": ["v_0"], "size": torch.tensor([[200, 100]]), "frame_mask": torch.tensor([[True, True]]),
             "frame_indices": torch.tensor([[6, 12]])}
    return batch, boxes, torch.tensor(scores).view(1, 2, 1)


def test_predictions_are_pixel_boxes_clipped_to_the_frame_kept_by_the_threshold():
    batch, boxes, scores = _one_clip([0.5, 0.8])
    out = format_clip_predictions(batch, ["a <p> dog </p> [DET] runs"], [["dog"]], boxes, scores, None, 0.5, False)
    clip = out["v_0"]
    assert clip["caption"] == "a dog runs" and clip["phrases"] == ["dog"]
    assert [f["frame"] for f in clip["frames"]] == [6, 12]
    assert clip["frames"][0]["boxes"] == [[50.0, 40.0, 150.0, 60.0]]
    # (0.9 +- 0.2) of 200 x 100 -> x 140..220, y 70..110, clipped to the frame's 200 x 100
    assert clip["frames"][1]["boxes"] == [[140.0, 70.0, 200.0, 100.0]]
    strict = format_clip_predictions(batch, ["<p> dog </p> [DET]"], [["dog"]], boxes, scores, None, 0.5, True)
    assert [f["frame"] for f in strict["v_0"]["frames"]] == [12]  # 0.5 is not above 0.5
    headless = format_clip_predictions(batch, ["<p> dog </p> [DET]"], [["dog"]], boxes, scores * 0, ["given"], 0.5,
                                       False, has_objectness=False)
    assert len(headless["v_0"]["frames"]) == 2 and headless["v_0"]["caption"] == "given"


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (25, 48, 64, 3), dtype=np.uint8)
    return write_video(tmp_path_factory.mktemp("processing") / "clip.mp4", frames, fps=25)


def test_the_processor_builds_the_evaluation_sample_the_dataset_builds(video):
    record = clip_record(video, 2, 20)
    assert record.clip_start_frame == 2 and record.clip_end_frame == 20 and record.video_id == "clip"
    assert (record.width, record.height) == (64, 48) and record.fps == pytest.approx(25)
    settings = {"num_frames": 3, "global_image_size": 32, "global_resize": "pad", "grounding_image_size": 48,
                "grounding_resize": "float"}
    dataset = GroundedClipDataset([record], "/", train=False, all_frames=True, on_error="raise", **settings)
    expected = dataset[0]
    processor = GroveProcessor(preprocessing=settings)
    frames = dataset.decode_frames(record, record.frame_indices)
    got = processor.sample(frames, record)
    assert set(got) == set(expected) - {"skipped"}
    for key, value in expected.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(got[key], value), key
        elif key != "skipped":
            assert got[key] == value, key
    # all of the clip's grid frames (25 fps -> every 5th source frame), captioned from 3 segment centres
    assert got["frame_indices"].tolist() == record.frame_indices.tolist() == [2, 7, 12, 17]
    assert got["caption_positions"].tolist() == [0, 2, 3]
    batch = processor.preprocess(frames, record)
    reference = GroundedCollate()([expected])
    assert batch["keys"] == reference["keys"] and torch.equal(batch["grounding_frames"], reference["grounding_frames"])


def test_a_clip_record_checks_what_it_is_told_against_the_file(video, tmp_path):
    with pytest.raises(ValueError, match=r"w=99 but .*clip.mp4 has 64"):
        clip_record(video, w=99)
    with pytest.raises(ValueError, match="start_frame 30"):
        clip_record(video, 30)
    with pytest.raises(FileNotFoundError, match="no such file"):
        clip_record(tmp_path / "missing.mp4")


def test_the_model_family_imports_without_lightning():
    code = ("import sys; from models.grove import Grove, GroveProcessor, predict_clips; "
            "import models.grove.convert_official, models.grove.export, models.grove.pretrained; "
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('lightning', 'lightning_modules')); "
            "print(loaded); sys.exit(1 if loaded else 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
