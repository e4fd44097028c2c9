"""VCInspectorScore: the callback that rates a captioning model's generated captions with the judge."""
import math

import numpy as np
import pytest
import torch

from tests.judge.judge_fixtures import TINY


def test_score_callback_reads_grove_outputs_and_denormalises_frames():
    from judge.application.callback import VCInspectorScore
    from models.grove.image_processing import CLIP_MEAN, CLIP_STD

    cb = VCInspectorScore(judge={"tiny": TINY, "max_pixels": 56 * 56, "min_pixels": 28 * 28})
    pixels = np.random.default_rng(0).integers(0, 256, (2, 5, 32, 32, 3)).astype(np.uint8)
    mean, std = torch.tensor(CLIP_MEAN).view(1, 1, 3, 1, 1), torch.tensor(CLIP_STD).view(1, 1, 3, 1, 1)
    normalised = (torch.from_numpy(pixels).permute(0, 1, 4, 2, 3).float() / 255 - mean) / std
    batch = {"keys": ["k0", "k1"], "global_frames": normalised, "caption_positions": torch.tensor([[0, 2], [1, 4]])}
    outputs = {"predictions": {"k1": {"caption": "a dog"}, "k0": {"caption": "a cat"}}}
    keys, captions = cb.captions_of(outputs)
    assert keys == ["k1", "k0"] and captions == ["a dog", "a cat"]
    frames, _ = cb.frames_of(outputs, batch, keys)
    assert np.array_equal(frames[0], pixels[1, [1, 4]]) and np.array_equal(frames[1], pixels[0, [0, 2]])
    with pytest.raises(ValueError, match="'keys' and 'captions'"):
        cb.captions_of({"loss": 1.0})


def test_score_callback_logs_mean_score_and_unparsable_share_during_validation():
    import lightning as L

    from judge.application.callback import VCInspectorScore

    class Captioner(L.LightningModule):  # stands in for GROVE: returns its captions per batch
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def validation_step(self, batch, batch_idx):
            return {"keys": batch["keys"], "captions": [f"a red circle number {k}" for k in batch["keys"]]}

    frames = torch.zeros(3, 4, 3, 32, 32)
    loader = [{"keys": ["a", "b", "c"], "global_frames": frames}, {"keys": ["d"], "global_frames": frames[:1]}]
    callback = VCInspectorScore(judge={"tiny": TINY, "max_pixels": 56 * 56, "min_pixels": 28 * 28}, max_new_tokens=4)
    trainer = L.Trainer(accelerator="cpu", logger=False, callbacks=[callback], enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.validate(Captioner(), dataloaders=torch.utils.data.DataLoader(loader, batch_size=None))
    answers = callback.judge.score([np.zeros((4, 32, 32, 3), np.uint8)] * 4,
                                   [f"a red circle number {k}" for k in "abcd"], max_new_tokens=4)
    parsed = [a.score for a in answers if a.score is not None]
    logged = trainer.callback_metrics
    assert logged["val/vc_inspector_unparsable"].item() == pytest.approx(1 - len(parsed) / 4)
    if parsed:
        assert logged["val/vc_inspector"].item() == pytest.approx(np.mean(parsed))
    else:
        assert math.isnan(logged["val/vc_inspector"].item())




def test_the_documented_command_line_adds_the_callback_to_a_grove_config(tmp_path):
    """docs/judge.md: the callback joins any GROVE config's trainer from the command line."""
    from command_line.grove_cli import GroveCLI
    from tests.fixtures.paths import ROOT

    class Parsed(Exception):
        pass

    class ParseOnly(GroveCLI):
        def before_instantiate_classes(self):
            raise Parsed(self.config[self.config.subcommand])

    with pytest.raises(Parsed) as parsed:
        ParseOnly(subclass_mode_model=True, subclass_mode_data=True, parser_kwargs={"parser_mode": "omegaconf"},
                  args=["test", "--config", str(ROOT / "configs" / "demo.yaml"),
                        "--trainer.callbacks+=judge.application.callback.VCInspectorScore",
                        f"--trainer.callbacks.judge_checkpoint={tmp_path / 'last.ckpt'}",
                        "--trainer.callbacks.num_frames=8"])
    callbacks = parsed.value.args[0].trainer.callbacks
    assert callbacks[-1].class_path == "judge.application.callback.VCInspectorScore"
    assert callbacks[-1].init_args.judge_checkpoint == str(tmp_path / "last.ckpt")
    assert callbacks[-1].init_args.num_frames == 8
