"""Stage 1 from GLaMM (tiny random weights in the released layout, built here) and the HowToCaption
clip source, through the whole pipeline on synthetic clips."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from annotation.__main__ import main
from annotation.clips import clips_from_timestamps
from annotation.config import load_config
from annotation.engines.workers import FrameWorker
from tests.fixtures.official_glamm_state import save_loud_glamm_folder

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "annotation"
TINY = ROOT / "configs" / "official" / "glamm_tiny.yaml"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    from datamodules.synthetic import generate_synthetic_dataset

    root = tmp_path_factory.mktemp("glamm_synthetic")
    paths = generate_synthetic_dataset(root, num_train=0, num_val=0, num_test=2, seed=0, workers=1, duration_s=2.0)
    folder = save_loud_glamm_folder(root / "glamm")
    overlay = root / "tiny_glamm.yaml"
    overlay.write_text(json.dumps({"clips": {"timestamps": None}, "stage1": {
        "path": str(folder), "clip_path": None, "config": str(TINY), "max_new_tokens": 8, "batch_size": 4,
        "device": "cpu"}, "decode": {"every": 3}, "engine": {"batch_size": 2, "torch_threads": 1}}))
    return {"videos": root / "videos", "truth": paths["test"], "overlay": overlay}


def test_glamm_stage1_gives_a_caption_and_mask_boxes_per_sampled_frame(synthetic):
    config = load_config([CONFIGS / "glamm.yaml", synthetic["overlay"]])
    worker = FrameWorker(config, synthetic["videos"])
    from annotation.clips import clips_from_videos

    specs, _ = clips_from_videos(synthetic["videos"])
    clips, timings = worker.run(specs)
    assert timings["stage1"] > 0 and len(clips) == len(specs)
    total_boxes = 0
    for clip in clips:
        assert [f.frame for f in clip.frames] == sorted(f.frame for f in clip.frames) and clip.frames
        for frame in clip.frames:
            assert isinstance(frame.caption, str)
            assert len(frame.phrases) == len(frame.boxes) == len(frame.scores)
            if len(frame.boxes):
                assert (frame.boxes[:, :2] >= 0).all() and (frame.boxes[:, 2] <= clip.width).all()
                assert (frame.boxes[:, 3] <= clip.height).all() and (frame.boxes[:, 2:] > frame.boxes[:, :2]).all()
                assert ((frame.scores > 0.5) & (frame.scores <= 1)).all()  # mean probability inside the mask
            total_boxes += len(frame.boxes)
    # the same frames through GLaMM directly: the boxes are the masks' tight boxes (+1: pixel extent)
    clip = clips[0]
    from annotation.stage1.decoding import decode_clip

    decoded = decode_clip(synthetic["videos"], specs[0], every=3)
    results = worker.stage1.model.ground(decoded.frames, max_new_tokens=8)
    for frame, result in zip(clip.frames, results):
        keep = result.has_box
        assert frame.caption == result.caption
        np.testing.assert_allclose(frame.boxes, (result.boxes[keep] + torch.tensor([0, 0, 1, 1])).numpy())


def test_pipeline_runs_end_to_end_with_glamm(synthetic, tmp_path):
    out = tmp_path / "out"
    report = main(["run", "--config", str(CONFIGS / "glamm.yaml"), "--config", str(synthetic["overlay"]),
                   "--videos", str(synthetic["videos"]), "--out", str(out), "--no-progress"])
    clips = report["clips"]
    assert clips["planned"] == clips["seen"] == 2 and clips["skipped_corrupt"] == 0
    assert clips["accepted"] + clips["rejected"] == 2  # random captions may well be rejected by Stage 2
    assert json.loads((out / "report.json").read_text())["clips"] == clips
    assert report["stages"]["stage1"]["clips_per_s"] > 0


def test_howtocaption_timestamps_cut_the_clips(synthetic, tmp_path):
    from annotation.clips import find_videos, video_id_of

    videos = find_videos(synthetic["videos"])
    ids = [video_id_of(v) for v in videos]
    stamps = {ids[0]: {"start": [0.0, 0.4, 1.0], "end": [0.8, 0.6, 2.0], "text": ["a", "b", "c"]}}
    path = tmp_path / "howtocaption.json"
    path.write_text(json.dumps(stamps))
    specs, skipped = clips_from_timestamps(synthetic["videos"], path, min_seconds=0.5)
    # 25 fps: [0, 0.8) s -> frames 0..19; [0.4, 0.6) s is shorter than 0.5 s: dropped; [1, 2) s -> 25..49
    assert [(s.video_id, s.clip_id, s.start_frame, s.end_frame) for s in specs] == \
        [(ids[0], "0", 0, 19), (ids[0], "2", 25, 49)]
    assert [s.key for s in skipped] == [f"{i}_*" for i in ids[1:]]  # no timestamps for the other video
    config = load_config([CONFIGS / "synthetic.yaml"], {"clips": {"timestamps": str(path), "min_seconds": 0.5}})
    from annotation.commands.run import plan_clips

    planned, _ = plan_clips(config, synthetic["videos"], None)
    assert [s.key for s in planned] == [f"{ids[0]}_0", f"{ids[0]}_2"]
    from annotation.config import ConfigError

    with pytest.raises(ConfigError, match="clips.timestamps .* and clips.seconds"):
        load_config([CONFIGS / "synthetic.yaml"], {"clips": {"timestamps": str(path), "seconds": 8}})
