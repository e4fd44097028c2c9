"""The real CLI end to end on the tiny config: fit -> test -> predict, resume, overlays, errors."""
import json
from pathlib import Path

import pytest

from cli import cli_main
from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args

pytestmark = pytest.mark.slow


def _fit(root, save_dir, *extra):
    return cli_main(["fit", *tiny_cli_args(root, save_dir, *extra)])


def test_fit_test_predict(tiny_synthetic_root, tmp_path):
    fit = _fit(tiny_synthetic_root, tmp_path)
    trainer = fit.trainer
    assert trainer.global_step == 3  # 6 clips / batch 2
    log_dir = Path(trainer.log_dir)
    assert (log_dir / "config.yaml").exists()
    last = trainer.checkpoint_callback.last_model_path
    assert last and Path(last).exists()
    assert "val/AP50" in trainer.callback_metrics and "val/METEOR" in trainer.callback_metrics
    assert list(log_dir.glob("eval_val_*.json"))

    test = cli_main(["test", *tiny_cli_args(tiny_synthetic_root, tmp_path), f"--ckpt_path={last}"])
    metrics = test.trainer.callback_metrics
    for name in ("test/AP50", "test/mIoU", "test/recall", "test/AP50_frame", "test/METEOR", "test/CIDEr",
                 "test/CAPTURE", "test/objectness_acc", "test/box_hit_rate_tf", "test/box_other_object_rate_tf"):
        assert name in metrics, name
    preds = json.loads(next(Path(test.trainer.log_dir).glob("predictions_test.json")).read_text())
    assert len(preds) == 2
    for pred in preds.values():
        assert set(pred) >= {"caption", "tagged_caption", "phrases", "frames"}
        for frame in pred["frames"]:
            assert len(frame["boxes"]) == len(frame["labels"]) == len(frame["scores"])
            assert all(label in pred["phrases"] for label in frame["labels"])
            assert all(s >= 0.5 for s in frame["scores"])  # default objectness threshold

    predict = cli_main(["predict", *tiny_cli_args(tiny_synthetic_root, tmp_path), f"--ckpt_path={last}",
                        "--model.init_args.objectness_threshold=0.0"])
    # an evaluation setting: the command line wins over the checkpoint's hyper-parameters
    assert predict.model.objectness_threshold == 0.0
    out = json.loads(next(Path(predict.trainer.log_dir).glob("predictions_predict.json")).read_text())
    frames_with_boxes = [f for p in out.values() for f in p["frames"]]
    n_phrases = sum(len(p["phrases"]) for p in out.values())
    # threshold 0 keeps every phrase on every annotated frame (2 s at 5 fps = 10 frames)
    assert sum(len(f["boxes"]) for f in frames_with_boxes) == n_phrases * 10


def test_resume_keeps_step_and_schedule(tiny_synthetic_root, tmp_path):
    fixed = ["--model.init_args.lr_scheduler.init_args.total_steps=6"]
    straight = _fit(tiny_synthetic_root, tmp_path / "a", "--trainer.max_epochs=2", *fixed)
    first = _fit(tiny_synthetic_root, tmp_path / "b", "--trainer.max_epochs=1", *fixed)
    resumed = _fit(tiny_synthetic_root, tmp_path / "b", "--trainer.max_epochs=2", *fixed,
                   f"--ckpt_path={first.trainer.checkpoint_callback.last_model_path}")
    assert first.trainer.global_step == 3 and resumed.trainer.global_step == straight.trainer.global_step == 6
    lr = lambda cli: cli.trainer.optimizers[0].param_groups[0]["lr"]  # noqa: E731
    sched = lambda cli: cli.trainer.lr_scheduler_configs[0].scheduler  # noqa: E731
    assert sched(resumed).last_epoch == sched(straight).last_epoch == 6
    assert lr(resumed) == pytest.approx(lr(straight))


@pytest.mark.parametrize("overlay, check", [
    ("no_adapters.yaml",
     lambda m: len(m.model.global_encoder.adapters) == 0 and len(m.model.grounding_encoder.adapters) == 0),
    ("frozen_decoder.yaml", lambda m: not any(p.requires_grad for p in m.model.box_decoder.parameters())),
    ("frozen_vl_lq.yaml", lambda m: not any(p.requires_grad for p in m.model.global_encoder.projector.parameters())
     and not any(p.requires_grad for p in m.model.query_projector.parameters())),
    ("no_objectness.yaml", lambda m: m.model.objectness_head is None and m.criterion.use_objectness is False),
])
def test_ablation_overlays_stack(tiny_synthetic_root, tmp_path, overlay, check):
    cli = cli_main([*tiny_cli_args(tiny_synthetic_root, tmp_path), "--config",
                    str(ROOT / "configs" / "ablations" / overlay)], run=False)
    assert check(cli.model)
    # the rest of the demo config is untouched by the overlay
    assert cli.model.hparams.train_llm is True


def test_real_config_missing_weights_names_key_and_readme(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        cli_main(["--config", str(ROOT / "configs" / "pretrain.yaml"), "--trainer.accelerator=cpu",
                  "--trainer.devices=1", "--trainer.strategy=auto"], run=False)
    message = str(err.value)
    assert "model.global_encoder.checkpoint" in message and "README" in message
