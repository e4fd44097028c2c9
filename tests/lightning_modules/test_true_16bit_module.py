"""GroveModule in 16 bits: ``frozen_dtype`` holds the frozen weights in bf16/fp16 beside fp32 trained
masters and still trains; ``cli.py predict|test|validate --trainer.precision=bf16-true|16-true`` run on
a tiny checkpoint and predict what fp32 predicts within docs/precision.md's tolerance."""
import json
import math
from pathlib import Path

import pytest
import torch

from cli import cli_main
from models.grove import Grove
from tests.fixtures.tiny_cli import tiny_cli_args
from tests.webdemo.fixed_caption_server import fixed_generate_captions

FROZEN = ("global_backbone", "grounding_backbone", "llm_blocks")
TRAINED = ("global_adapters", "vision_projector", "query_projector", "box_decoder", "heads", "llm_embeddings",
           "llm_lora")
# the paper's policy: towers and LLM blocks frozen, LoRA on the LLM
PAPER_FREEZING = ("--model.init_args.train_global_backbone=false", "--model.init_args.train_grounding_backbone=false",
                  "--model.init_args.train_llm=false", "--model.init_args.language_model.lora_r=4")


@pytest.mark.parametrize("name, dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_frozen_dtype_holds_frozen_weights_in_16bit_and_a_fit_step_trains_the_fp32_ones(
        tiny_synthetic_root, tmp_path, name, dtype):
    cli = cli_main([*tiny_cli_args(tiny_synthetic_root, tmp_path), *PAPER_FREEZING,
                    f"--model.init_args.frozen_dtype={name}"], run=False)
    module, data = cli.model, cli.datamodule
    groups = module.model.parameter_groups()
    norms = {id(p) for m in module.model.modules() if "Norm" in type(m).__name__ for p in m.parameters()}
    frozen = [p for g in FROZEN for _, p in groups[g] if id(p) not in norms]
    assert all(p.dtype == torch.float32 for g in FROZEN for _, p in groups[g] if id(p) in norms)
    trained = [p for g in TRAINED for _, p in groups[g]]
    assert frozen and trained and groups["llm_lora"]
    assert all(p.dtype == dtype and not p.requires_grad for p in frozen)
    assert all(p.dtype == torch.float32 and p.requires_grad for p in trained)
    assert all(p.dtype == torch.float32 for p in module.parameters() if p.requires_grad)
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    frozen_before = [p.detach().clone() for p in frozen]
    trained_before = [p.detach().clone() for p in trained]
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-2)
    with module.compute_context():
        losses, _, _ = module.compute_losses(batch)
    assert all(math.isfinite(float(v)) for v in losses.values())
    losses["loss"].backward()
    assert all(p.grad is None for p in frozen)
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in trained)
    optimizer.step()
    assert all(torch.equal(a, p) for a, p in zip(frozen_before, frozen))
    assert any(not torch.equal(a, p) for a, p in zip(trained_before, trained))
    assert all(p.dtype == torch.float32 for p in trained)


@pytest.mark.slow
def test_a_cli_fit_with_bf16_frozen_weights_logs_a_finite_loss(tiny_synthetic_root, tmp_path):
    fit = cli_main(["fit", *tiny_cli_args(tiny_synthetic_root, tmp_path), *PAPER_FREEZING,
                    "--model.init_args.frozen_dtype=bf16",
                    "--trainer.max_steps=2", "--trainer.limit_val_batches=0"])
    assert fit.trainer.global_step == 2 and math.isfinite(float(fit.trainer.callback_metrics["train/loss_step"]))
    state = torch.load(fit.trainer.checkpoint_callback.last_model_path, map_location="cpu",
                       weights_only=False)["state_dict"]
    assert state["model.global_encoder.backbone.conv1.weight"].dtype == torch.bfloat16
    assert state["model.box_head.mlp.0.weight"].dtype == torch.float32


def test_an_unknown_frozen_dtype_is_refused_naming_the_key(tiny_synthetic_root, tmp_path):
    with pytest.raises(ValueError, match="model.frozen_dtype"):
        cli_main([*tiny_cli_args(tiny_synthetic_root, tmp_path), "--model.init_args.frozen_dtype=int8"], run=False)


@pytest.fixture(scope="module")
def checkpoint(tiny_synthetic_root, tmp_path_factory):
    fit = cli_main(["fit", *tiny_cli_args(tiny_synthetic_root, tmp_path_factory.mktemp("fit16")),
                    "--trainer.max_steps=2", "--trainer.limit_val_batches=0"])
    return fit.trainer.checkpoint_callback.last_model_path


def _predict(root, ckpt, save_dir, precision):
    run = cli_main(["predict", *tiny_cli_args(root, save_dir), f"--ckpt_path={ckpt}",
                    "--model.init_args.objectness_threshold=0.0", f"--trainer.precision={precision}"])
    return json.loads(next(Path(run.trainer.log_dir).glob("predictions_predict.json")).read_text())


@pytest.mark.slow
@pytest.mark.parametrize("precision, box_px", [("bf16-true", 4.0), ("16-true", 1.0)])
def test_cli_predict_in_true_16bit_agrees_with_fp32(tiny_synthetic_root, checkpoint, tmp_path, monkeypatch,
                                                     precision, box_px):
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)  # phrases to box
    reference = _predict(tiny_synthetic_root, checkpoint, tmp_path / "fp32", "32-true")
    half = _predict(tiny_synthetic_root, checkpoint, tmp_path / precision, precision)
    assert set(half) == set(reference) and reference
    compared = 0
    for key, clip in reference.items():
        assert half[key]["caption"] == clip["caption"] and half[key]["phrases"] == clip["phrases"]
        for ours, theirs in zip(half[key]["frames"], clip["frames"], strict=True):
            assert ours["frame"] == theirs["frame"] and ours["labels"] == theirs["labels"]
            for a, b in zip(ours["boxes"], theirs["boxes"], strict=True):
                assert max(abs(x - y) for x, y in zip(a, b)) <= box_px
                compared += 1
            assert max((abs(x - y) for x, y in zip(ours["scores"], theirs["scores"])), default=0) <= 0.01
    assert compared > 0
