"""``cli.py predict`` with ``configs/masks.yaml`` stacked on the demo config writes a mask beside every
kept box, at each video's own frame size; ``test`` too, and the predictions still evaluate."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cli import cli_main
from formats.mask_rle import decode_masks
from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args

pytestmark = pytest.mark.slow

MASKS = ["--config", str(ROOT / "configs" / "masks.yaml"), "--model.init_args.masks.init_args.device=cpu"]


def test_predict_with_the_masks_overlay_writes_masks_at_each_videos_size(tiny_synthetic_root, tmp_path, monkeypatch):
    from formats.video_writer import write_video
    from models.grove import Grove
    from tests.webdemo.fixed_caption_server import FIXED_CAPTION

    # the untrained tiny model's caption may have no phrase: fix it to two grounded phrases
    monkeypatch.setattr(Grove, "generate_captions",
                        lambda self, frames, max_new_tokens=64, video_embeds=None: [FIXED_CAPTION] * len(frames))

    src = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    folder = tmp_path / "videos"
    folder.mkdir()
    (folder / "original.mp4").write_bytes(src.read_bytes())
    from formats.video_reader import PyAVVideoSource

    with PyAVVideoSource(src) as video:
        frames = video.read_all()
    write_video(folder / "wide.mp4", np.concatenate([frames, frames[:, :, :64]], axis=2), 25.0)  # 192 x 128
    cli = cli_main(["predict", *tiny_cli_args(tiny_synthetic_root, tmp_path), f"--data.videos={folder}",
                    "--model.init_args.objectness_threshold=0.0", *MASKS])
    preds = json.loads((Path(cli.trainer.log_dir) / "predictions_predict.json").read_text())
    assert sorted(preds) == ["original_0", "wide_0"]
    for key, (width, height) in (("original_0", (128, 128)), ("wide_0", (192, 128))):
        clip = preds[key]
        assert clip["phrases"] == ["red shape", "the wall"], key
        # threshold 0: every phrase on every frame of the 5-fps grid, each with its mask
        assert len(clip["frames"]) == 10
        for frame in clip["frames"]:
            assert len(frame["masks"]) == len(frame["boxes"]) == len(clip["phrases"])
            assert decode_masks(frame["masks"]).shape == (len(frame["boxes"]), height, width)


def test_test_with_the_masks_overlay_writes_masks_that_validate(tiny_synthetic_root, tmp_path, monkeypatch):
    from metrics.evaluator.prediction_validation import validate_predictions
    from models.grove import Grove
    from tests.webdemo.fixed_caption_server import FIXED_CAPTION

    monkeypatch.setattr(Grove, "generate_captions",
                        lambda self, frames, max_new_tokens=64, video_embeds=None: [FIXED_CAPTION] * len(frames))

    test = cli_main(["test", *tiny_cli_args(tiny_synthetic_root, tmp_path), *MASKS,
                     "--model.init_args.objectness_threshold=0.0"])
    assert "test/AP50" in test.trainer.callback_metrics
    preds = json.loads(next(Path(test.trainer.log_dir).glob("predictions_test.json")).read_text())
    frames = [f for p in preds.values() for f in p["frames"]]
    assert frames and all(len(f["masks"]) == len(f["boxes"]) for f in frames)
    assert all(decode_masks(f["masks"]).shape[1:] == (128, 128) for f in frames)
    validate_predictions(preds, {k: (128, 128) for k in preds})


def test_long_video_mode_writes_the_masks_plain_predict_writes(tiny_synthetic_root, tmp_path, monkeypatch):
    from formats.video_writer import write_video
    from models.grove import Grove
    from tests.longvideo.test_long_video_predict import FIXED_CAPTION, moving_square

    monkeypatch.setattr(Grove, "generate_captions",
                        lambda self, frames, max_new_tokens=64, video_embeds=None: [FIXED_CAPTION] * len(frames))
    video = write_video(tmp_path / "walk.mp4", moving_square(60, 10), fps=10)

    def predict(out, *extra):
        cli = cli_main(["predict", *tiny_cli_args(tiny_synthetic_root, out, *extra, *MASKS), f"--data.videos={video}",
                        "--model.init_args.objectness_threshold=0.0", "--data.init_args.video_clip_seconds=4"])
        return (Path(cli.trainer.log_dir) / "predictions_predict.json").read_text()

    plain = predict(tmp_path / "plain")
    long = predict(tmp_path / "long", "--config", str(ROOT / "configs" / "overlays" / "long_video.yaml"))
    assert long == plain
    frames = [f for clip in json.loads(plain).values() for f in clip["frames"]]
    # two 4-s clips of 20 grid frames (the second aligned to the video's end), two phrases each
    assert len(frames) == 40 and all(decode_masks(f["masks"]).shape == (2, 64, 96) for f in frames)


@pytest.mark.parametrize("precision", ["bf16-true", "16-true"])
def test_predict_with_masks_in_a_16bit_precision(tiny_synthetic_root, tmp_path, monkeypatch, precision):
    """The masker is built lazily inside the predict step, where Lightning's true-16-bit precision makes
    16-bit the default dtype; it is built and run in float32 on purpose (docs/precision.md)."""
    from models.grove import Grove
    from tests.webdemo.fixed_caption_server import FIXED_CAPTION

    monkeypatch.setattr(Grove, "generate_captions",
                        lambda self, frames, max_new_tokens=64, video_embeds=None: [FIXED_CAPTION] * len(frames))
    cli = cli_main(["predict", *tiny_cli_args(tiny_synthetic_root, tmp_path), f"--trainer.precision={precision}",
                    "--model.init_args.objectness_threshold=0.0", *MASKS])
    masker = cli.model.masker
    assert {p.dtype for p in masker.model.parameters()} == {torch.float32}
    preds = json.loads((Path(cli.trainer.log_dir) / "predictions_predict.json").read_text())
    frames = [f for clip in preds.values() for f in clip["frames"]]
    assert frames and all(len(f["masks"]) == len(f["boxes"]) and all(m is not None for m in f["masks"])
                          for f in frames)
    assert decode_masks(frames[0]["masks"]).shape == (len(frames[0]["boxes"]), 128, 128)
