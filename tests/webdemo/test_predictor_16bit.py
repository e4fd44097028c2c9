"""The web demo's predictor with ``precision="bf16-true"``: every weight bf16, and the per-clip page and
long-video mode give the fp32 predictor's captions, labels and (within docs/precision.md's tolerance)
boxes."""
import json

import pytest
import torch

from models.grove import Grove
from tests.webdemo.fixed_caption_server import fixed_generate_captions
from tests.webdemo.tiny_model import DEMO_CONFIG, TINY_MODEL_ARGS
from tests.webdemo.walking_square import walking_square
from webdemo.predictor import DemoPredictor, Settings
from webdemo.workspace import Workspace

pytestmark = pytest.mark.slow
BOX_PX = 4.0  # bf16 at tiny size (docs/precision.md)


def _close(half: dict, full: dict) -> int:
    assert list(half) == list(full)
    compared = 0
    for key, clip in full.items():
        assert half[key]["caption"] == clip["caption"] and half[key]["phrases"] == clip["phrases"]
        for ours, theirs in zip(half[key]["frames"], clip["frames"], strict=True):
            assert ours["labels"] == theirs["labels"]
            for a, b in zip(ours["boxes"], theirs["boxes"], strict=True):
                assert max(abs(x - y) for x, y in zip(a, b)) <= BOX_PX
                compared += 1
    return compared


def test_the_demo_predicts_in_bf16_per_clip_and_in_long_video_mode(tiny_checkpoint, tiny_synthetic_root, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)  # phrases to box
    clip = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    video = walking_square(tmp_path / "walk.mp4")
    settings = Settings(0.0, "interleaved", 8.0, None, 6)
    outputs = {}
    for precision in (None, "bf16-true"):
        predictor = DemoPredictor([DEMO_CONFIG], tiny_checkpoint, clip, TINY_MODEL_ARGS, precision=precision)
        with Workspace(parent=tmp_path) as workspace:
            short = predictor.predict(clip, settings, workspace.new_run()).predictions_path.read_text()
            long = predictor.predict_long(video, settings, workspace.new_run()).predictions_path.read_text()
        outputs[precision] = json.loads(short), json.loads(long)
        weights = {p.dtype for p in predictor.module.parameters()}
        assert weights == ({torch.bfloat16} if precision else {torch.float32})
    assert _close(outputs["bf16-true"][0], outputs[None][0]) > 0
    assert _close(outputs["bf16-true"][1], outputs[None][1]) > 0
