"""The annotated MP4s' clip ownership, TensorBoard clip strips and the validation-clip callback."""
from core.drawing import PALETTE

import io
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from callbacks.annotated_video import ClipPrediction, grid_owners
from callbacks.tensorboard_visualizer import SEPARATOR, ValidationClipVisualizer, render_clip_strip
from datamodules.grounded_dataset import GroundedClipDataset
from datamodules.video_folder import VideoInfo, clip_records
from formats.records import read_records
from formats.video_files import open_video


def test_grid_owners_give_each_grid_frame_to_the_nearest_clip_centre():
    info = VideoInfo(path=Path("/v.mp4"), video_id="v", num_frames=100, fps=30.0,
                     width=64, height=48)
    records = clip_records(info, clip_seconds=2.0)  # grid 0, 6, ..., 96; clips grid[0:10], grid[7:17]
    grid, owner = grid_owners([ClipPrediction(r, None) for r in records])
    np.testing.assert_array_equal(grid, np.arange(0, 100, 6))
    # centres 29.5 and 69: frames 42, 48 (in both clips) are nearer the first, 54 the second
    np.testing.assert_array_equal(owner, [0] * 9 + [1] * 8)


def _grey(n=3, h=60, w=90):
    return np.full((n, h, w, 3), 128, dtype=np.uint8)


def test_clip_strip_draws_gt_and_predictions_scaled_with_shared_colours():
    frames = _grey()
    gt_boxes = [np.array([[10, 10, 40, 40]]), np.zeros((0, 4)), np.zeros((0, 4))]
    gt_labels = [["a cup"], [], []]
    prediction = {"caption": "a cup and a knife", "phrases": ["a knife", "a cup"], "frames": [
        {"frame": 100, "boxes": [[50, 20, 80, 50], [5, 5, 20, 20]], "labels": ["a cup", "a knife"], "scores": [1, 1]}]}
    image = render_clip_strip(frames, [100, 105, 110], gt_boxes, gt_labels, "a cup", prediction, frame_height=120)
    cup, knife = PALETTE[0], PALETTE[1]  # GT phrases first: the cup keeps its colour in both rows
    assert image.shape[1] == 3 * 180 + 2 * SEPARATOR
    assert (image[20, 20:80] == cup).all() and (image[20:80, 20] == cup).all()  # GT box x2 in the top row
    assert (image[90, 40:60] == 128).all()  # inside it: the frame
    assert (image[:120, 180:180 + SEPARATOR] == 255).all()  # the gap between frames
    lower = image[120:]
    cup_rows = [r for r in range(len(lower)) if (lower[r, 100:160] == cup).all()]
    assert len(cup_rows) == 2 and cup_rows[1] - cup_rows[0] == 59  # top and bottom edges of the 2 x 30 box
    top = cup_rows[0] - 40  # where the predicted row starts (the cup box starts at y = 2 x 20)
    # the knife box (2 x [5, 5, 20, 20]): bottom edge and the left edge below its label
    assert (lower[top + 39, 10:40] == knife).all() and (lower[top + 30:top + 40, 10] == knife).all()
    # frames 2 and 3 have no predicted box: only the frame and the caption band below
    assert not (lower[:, 180 + SEPARATOR:] == cup).all(axis=-1).any()


@pytest.fixture()
def val_dataset(tiny_synthetic_root):
    records = read_records(tiny_synthetic_root / "annotations" / "val.json")
    return GroundedClipDataset(records, tiny_synthetic_root / "videos", all_frames=True)


def _prediction_from_gt(record, shift=3.0):
    frames = [{"frame": int(f), "boxes": (np.asarray(b) + shift).tolist(), "labels": list(l), "scores": [0.9] * len(l)}
              for f, b, l in zip(record.frame_indices, record.bboxes, record.labels) if len(l)]
    return {"caption": record.caption, "phrases": list(record.phrases), "frames": frames}


def test_callback_logs_fixed_clips_to_tensorboard(val_dataset, tmp_path):
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path, name="viz", version=0)
    trainer = SimpleNamespace(datamodule=SimpleNamespace(datasets={"val": val_dataset}), loggers=[logger],
                              sanity_checking=False, is_global_zero=True, current_epoch=0, global_step=7)
    callback = ValidationClipVisualizer(num_clips=1, frames_per_clip=4, frame_height=64, every_n_epochs=2)
    predictions = {r.key: _prediction_from_gt(r) for r in val_dataset.records}

    def epoch(step, current_epoch, sanity=False):
        trainer.global_step, trainer.current_epoch, trainer.sanity_checking = step, current_epoch, sanity
        callback.on_validation_epoch_start(trainer, None)
        callback.on_validation_batch_end(trainer, None, {"predictions": predictions}, {}, 0)
        callback.on_validation_epoch_end(trainer, None)

    epoch(0, 0, sanity=True)  # sanity check: nothing drawn
    epoch(7, 0)
    epoch(9, 1)  # every_n_epochs=2: skipped
    epoch(11, 2)
    logger.experiment.flush()
    events = EventAccumulator(str(logger.log_dir), size_guidance={"images": 0}).Reload()
    first = val_dataset.records[0]
    assert events.Tags()["images"] == [f"val_clips/{first.key}"]  # the same clip every epoch
    logged = events.Images(f"val_clips/{first.key}")
    assert [e.step for e in logged] == [7, 11]
    positions = np.array([1, 3, 6, 8])  # centre frames of the clip's 10 grid frames in 4 segments
    with open_video(val_dataset.video_root, first.video_fname) as video:
        frames = video.read_frames(first.frame_indices[positions].tolist())
    expected = render_clip_strip(frames, first.frame_indices[positions], [first.bboxes[p] for p in positions],
                                 [first.labels[p] for p in positions], first.caption, predictions[first.key], 64)
    drawn = np.asarray(Image.open(io.BytesIO(logged[0].encoded_image_string)).convert("RGB"))
    np.testing.assert_array_equal(drawn, expected)  # PNG: lossless


def test_annotated_videos_get_distinct_readable_names(tmp_path):
    from callbacks.annotated_video_writer import AnnotatedVideoWriter

    names = [AnnotatedVideoWriter.output_path(tmp_path, v) for v in ("猫", "犬", "../../x", "sub/dir")]
    assert [p.name for p in names[:2]] == ["猫.mp4", "犬.mp4"]
    assert len(set(names)) == 4 and all(p.parent == tmp_path for p in names)
