"""``model.weight_quantization`` (configs/overlays/int8.yaml): applied when predict/test/validate starts,
after ``--ckpt_path`` is restored; ``fit`` and unknown schemes are refused with the key named."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cli import cli_main
from models.grove.quantization import is_int8
from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args

INT8 = ["--config", str(ROOT / "configs" / "overlays" / "int8.yaml")]
GATE = "language_model.model.model.layers.0.mlp.gate_proj"


def _module(root, tmp_path, *extra):
    return cli_main([*tiny_cli_args(root, tmp_path), *extra], run=False).model


def test_the_overlay_sets_int8_and_the_weights_stay_float_until_a_stage_starts(tiny_synthetic_root, tmp_path):
    module = _module(tiny_synthetic_root, tmp_path, *INT8)
    assert module.weight_quantization == "int8" and "weight_quantization" not in module.hparams
    assert not is_int8(dict(module.model.named_modules())[GATE].weight)
    module.setup("predict")
    module.on_predict_start()
    report = module.quantization_report
    assert is_int8(dict(module.model.named_modules())[GATE].weight) and len(report.layers) > 0
    module.on_test_start()  # once: a second stage start does not quantise again
    assert module.quantization_report is report


def test_fit_and_unknown_schemes_are_refused(tiny_synthetic_root, tmp_path):
    module = _module(tiny_synthetic_root, tmp_path, *INT8)
    with pytest.raises(ValueError, match=r"model.weight_quantization=int8: quantised weights are for predict"):
        module.setup("fit")
    with pytest.raises(ValueError, match=r"model.weight_quantization: unknown weight quantization scheme 'int4'"):
        _module(tiny_synthetic_root, tmp_path, "--model.init_args.weight_quantization=int4")


@pytest.mark.slow
def test_cli_predict_with_the_overlay_quantises_the_checkpoint_s_weights(tiny_synthetic_root, tmp_path):
    fit = cli_main(["fit", *tiny_cli_args(tiny_synthetic_root, tmp_path / "fit")])
    ckpt = fit.trainer.checkpoint_callback.last_model_path
    saved = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"][f"model.{GATE}.weight"]
    with pytest.raises(ValueError, match="quantised weights are for predict"):
        cli_main(["fit", *tiny_cli_args(tiny_synthetic_root, tmp_path / "refused"), *INT8])
    predict = cli_main(["predict", *tiny_cli_args(tiny_synthetic_root, tmp_path / "int8"), *INT8,
                        f"--ckpt_path={ckpt}"])
    weight = dict(predict.model.model.named_modules())[GATE].weight
    assert is_int8(weight)
    # quantised after the checkpoint was restored: the trained weight, within half a step per row
    step = saved.abs().amax(dim=1, keepdim=True) / 127
    assert ((weight.dequantize() - saved).abs() <= step / 2 + 1e-7).all()
    out = json.loads(next(Path(predict.trainer.log_dir).glob("predictions_predict.json")).read_text())
    assert len(out) == 2 and all({"caption", "phrases", "frames"} <= set(p) for p in out.values())
