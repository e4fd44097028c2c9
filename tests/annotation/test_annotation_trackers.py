"""Stage 3 by tracking ("Alt. Stage 3"): the box geometry on hand-made point motions, the oracle point
tracker (with exact Stage 1 boxes its tracks equal the truth, end to end), and the CoTracker3 and
SAM 2 backends with tiny random models on synthetic clips."""
from pathlib import Path

import numpy as np
import pytest
import torch

from annotation.commands.run import run_annotation
from annotation.config import load_config
from annotation.stage3.by_tracking import key_rows
from annotation.stage3.trackers.box_tracking import TrackingInput, box_grid_points, boxes_from_points
from annotation.stage3.trackers.sam2_tracker import tight_boxes
from formats.records import read_records

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "annotation"
ORACLE = [str(CONFIGS / "synthetic.yaml"), str(CONFIGS / "synthetic_oracle.yaml")]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from datamodules.synthetic import generate_synthetic_dataset

    root = tmp_path_factory.mktemp("tracker_synthetic")
    paths = generate_synthetic_dataset(root, num_train=0, num_val=0, num_test=3, seed=1, workers=1, duration_s=2.0)
    return {"videos": root / "videos", "truth": paths["test"]}


def test_points_moving_with_a_box_give_that_box_and_hidden_points_give_none():
    box = np.array([[10.0, 20.0, 30.0, 60.0]], np.float32)
    points = box_grid_points(box, 3)
    assert points.shape == (1, 9, 2) and points[0, 0].tolist() == pytest.approx([12.0, 24.0])
    # frame 1: shifted by (5, -4) and stretched x2 in width around the box's corner; frame 2: hidden
    moved = np.stack([points[0], np.stack([15 + (points[0, :, 0] - 10) * 2, points[0, :, 1] - 4], -1), points[0]])
    visible = np.array([[True] * 9, [True] * 9, [False] * 9])
    out = boxes_from_points(points, box, moved[:, None], visible[:, :, None].transpose(0, 2, 1).reshape(3, 1, 9),
                            (128, 128))
    assert out.boxes[0, 0].tolist() == pytest.approx([10, 20, 30, 60], abs=1e-4)
    assert out.boxes[1, 0].tolist() == pytest.approx([15, 16, 55, 56], abs=1e-4)
    assert out.present[:, 0].tolist() == [True, True, False]


def test_tight_boxes_of_hand_made_masks_and_key_rows():
    masks = np.zeros((2, 8, 10), bool)
    masks[0, 2:5, 3:7] = True
    boxes, present = tight_boxes(masks)
    assert boxes[0].tolist() == [3, 2, 7, 5] and present.tolist() == [True, False]
    assert key_rows(10, 5).tolist() == [0, 2, 4, 7, 9] and key_rows(3, 5).tolist() == [0, 1, 2]


def tracker_config(stage3: dict, **stage1):
    return load_config(ORACLE, {"stage3": stage3, "stage1": stage1,
                                "engine": {"batch_size": 2, "torch_threads": 1}})


def test_oracle_point_tracker_tracks_equal_the_truth(synthetic, tmp_path):
    config = load_config(ORACLE + [str(CONFIGS / "alt_stage3_oracle_tracker.yaml")],
                         {"engine": {"batch_size": 2, "torch_threads": 1}})
    report = run_annotation(config, ORACLE, synthetic["videos"], tmp_path / "out", synthetic["truth"], progress=False)
    assert report["clips"]["accepted"] == 3 and "stage3_tracking" in report["stages"]
    truth = {r.key: r for r in read_records(synthetic["truth"])}
    for pred in read_records(tmp_path / "out" / "annotations"):
        t = truth[pred.key]
        assert set(pred.phrases) == set(t.phrases)
        for pb, pl, tb, tl in zip(pred.bboxes, pred.labels, t.bboxes, t.labels):
            got, want = dict(zip(pl, pb.tolist())), dict(zip(tl, tb.tolist()))
            assert set(got) == set(want)
            for phrase in want:
                assert got[phrase] == pytest.approx(want[phrase], abs=1e-3)


def test_tracker_backends_run_in_the_pipeline_with_tiny_models(synthetic, tmp_path):
    from models.cotracker3.modeling import CoTracker3Config, CoTracker3Offline

    torch.manual_seed(0)
    tiny = CoTracker3Config(window_len=8, hidden_size=16, num_heads=2, time_depth=1, space_depth=1,
                            num_virtual_tracks=2, latent_dim=16, corr_hidden=16, corr_out=8, model_resolution=(64, 64))
    torch.save({"model": CoTracker3Offline(tiny).state_dict()}, tmp_path / "tiny_cotracker.pth")
    cotracker = {"backend": "cotracker", "path": str(tmp_path / "tiny_cotracker.pth"), "iters": 2,
                 "model_config": {"num_heads": 2, "model_resolution": [64, 64]}, "points_per_side": 2,
                 "batch_size": 2, "device": "cpu"}
    sam2 = {"backend": "sam2", "model_config": str(CONFIGS / "models" / "sam2_tiny_random.yaml"), "device": "cpu",
            "key_frames": 2}
    for name, stage3 in (("cotracker", cotracker), ("sam2", sam2)):
        report = run_annotation(tracker_config(stage3), ORACLE, synthetic["videos"], tmp_path / name,
                                synthetic["truth"], limit=2, progress=False)
        assert report["clips"]["seen"] == 2, name
        assert report["clips"]["accepted"] + report["clips"]["rejected"] == 2, name
        assert report["stages"]["stage3_tracking"]["clips"] == 2, name
        # random weights: SAM 2's masks may be empty everywhere (no box: the object is absent), then the
        # clip is rejected for having no box
        assert all("box(es) matched" in r for r in report["rejected"].values()), name
        for pred in (read_records(tmp_path / name / "annotations") if report["clips"]["accepted"] else []):
            boxes = np.concatenate(pred.bboxes)
            assert (boxes[:, 2:] > boxes[:, :2]).all() and (boxes >= 0).all() and (boxes <= 128).all()


def test_cotracker_batches_equal_single_clips(synthetic):
    from annotation.stage3.trackers.cotracker_tracker import CoTrackerBoxTracker
    from models.cotracker3.modeling import CoTracker3Config, CoTracker3Offline, CoTracker3Predictor

    torch.manual_seed(1)
    tiny = CoTracker3Config(window_len=6, hidden_size=16, num_heads=2, time_depth=1, space_depth=1,
                            num_virtual_tracks=2, latent_dim=16, corr_hidden=16, corr_out=8, model_resolution=(32, 32))
    tracker = CoTrackerBoxTracker("unused.pth", points_per_side=2, iters=2, device="cpu")
    tracker._predictor = CoTracker3Predictor(CoTracker3Offline(tiny).eval(), iters=2)
    rng = np.random.default_rng(0)
    clips = [TrackingInput(f"c{i}", rng.integers(0, 255, (6, 40, 48, 3), dtype=np.uint8), np.arange(6),
                           np.array([0, 3][:i + 1]), np.array([[5, 5, 20, 25], [10, 12, 40, 30]][:i + 1], np.float32))
             for i in range(2)]
    together = tracker.track(clips)
    alone = [tracker.track([c])[0] for c in clips]
    for a, b in zip(together, alone):
        assert a.boxes.shape == (6, len(a.present[0]), 4)
        np.testing.assert_allclose(a.boxes, b.boxes, atol=1e-3)
        np.testing.assert_array_equal(a.present, b.present)
    # a query box is on its own frame exactly where it was asked (the query points are kept)
    np.testing.assert_allclose(together[1].boxes[3, 1], [10, 12, 40, 30], atol=1e-3)


def test_tracks_travel_between_workers_as_json():
    import json

    from annotation.clips import ClipSpec
    from annotation.stage1.frame_annotations import ClipFrameAnnotations, FrameAnnotation
    from annotation.stage3.by_tracking import TrackerStage3
    from annotation.stage3.trackers.box_tracking import Track

    clip = ClipFrameAnnotations(ClipSpec("v.mp4", "v", "0", 0, 10, 5.0), 5.0, 0, 10, 64, 48,
                                [FrameAnnotation(0, "A red circle.", ["a red circle"], [[1, 2, 3, 4]], [0.9]),
                                 FrameAnnotation(1, "", [], np.zeros((0, 4)), [])],
                                [Track("a red circle", 0, 0.9, np.array([[1, 2, 3, 4], [2, 2, 4, 4]], np.float32),
                                       np.array([True, True])),
                                 Track("a red disc", 1, 0.8, np.array([[0, 0, 0, 0], [5, 5, 9, 9]], np.float32),
                                       np.array([False, True]))])
    back = ClipFrameAnnotations.from_dict(json.loads(json.dumps(clip.to_dict())))
    assert [t.to_dict() for t in back.tracks] == [t.to_dict() for t in clip.tracks]
    tracked = TrackerStage3.tracked_frames(back)
    # frame 1: both tracks, the one queried on frame 1 scores higher (nearer in time)
    assert tracked.frames[0].phrases == ["a red circle"] and tracked.frames[1].phrases == ["a red circle", "a red disc"]
    assert tracked.frames[1].scores.tolist() == pytest.approx([0.5, 1.0])
    assert tracked.frames[1].boxes.tolist() == [[2, 2, 4, 4], [5, 5, 9, 9]]


@pytest.mark.slow
def test_ray_engine_tracks_like_the_local_engine(synthetic, tmp_path):
    pytest.importorskip("ray")
    import ray

    stage3 = {"backend": "cotracker", "path": None, "iters": 2, "points_per_side": 2, "batch_size": 2,
              "device": "cpu", "model_config": {"window_len": 10, "hidden_size": 16, "num_heads": 2, "time_depth": 1,
                                                 "space_depth": 1, "num_virtual_tracks": 2, "latent_dim": 16,
                                                 "corr_hidden": 16, "corr_out": 8, "model_resolution": [64, 64]}}
    config = load_config(ORACLE, {"stage3": stage3, "engine": {
        "batch_size": 2, "torch_threads": 1,
        "ray": {"num_cpus": 2, "frame_actors": 1, "text_actors": 1, "object_store_mb": 256}}})
    local = run_annotation(config, ORACLE, synthetic["videos"], tmp_path / "local", synthetic["truth"], progress=False)
    try:
        remote = run_annotation(config, ORACLE, synthetic["videos"], tmp_path / "ray", synthetic["truth"],
                                engine="ray", progress=False)
    finally:
        ray.shutdown()
    assert local["clips"] == remote["clips"] and "stage3_tracking" in remote["stages"]
    a = {r.key: r for r in read_records(tmp_path / "local" / "annotations")}
    b = {r.key: r for r in read_records(tmp_path / "ray" / "annotations")}
    assert set(a) == set(b) and a
    for key in a:
        assert a[key].labels == b[key].labels
        for x, y in zip(a[key].bboxes, b[key].bboxes):
            np.testing.assert_allclose(x, y, atol=1e-3)


def test_a_wrong_cotracker_size_is_named():
    from annotation.stage3.trackers.cotracker_tracker import CoTrackerBoxTracker

    with pytest.raises(ValueError, match="stage3.model_config.hidden is not a CoTracker3 size"):
        _ = CoTrackerBoxTracker(None, model_config={"hidden": 8}, device="cpu").predictor
