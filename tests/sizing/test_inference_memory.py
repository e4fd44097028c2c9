"""The inference memory estimate per weight precision: weights counted by dtype class on a hand-built
module, and the real model of configs/official/grove.yaml built on the meta device."""
import pytest
import torch
from torch import nn

from models.grove.configuration import read_stacked_yaml
from models.grove.fp32_buffers import Fp32PositionEmbeddingRandom
from sizing.memory_estimator import (
    GIB,
    INFERENCE_PRECISIONS,
    InferenceParameters,
    Workload,
    build_meta_module,
    inference_activation_values,
    inference_table,
)
from tests.fixtures.paths import ROOT


class _Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(10, 6)                      # int8: 60 values, 6 rows; bias 6 "other"
        self.head = nn.Linear(6, 3, bias=False)           # int8: 18 values, 3 rows
        self.kept = nn.Linear(2, 2, bias=False)           # not quantised: 4 "other"
        self.attn = nn.MultiheadAttention(4, 2)           # in_proj 48 + 12 bias, out_proj 16 + 4: all "other"
        self.embed = nn.Embedding(5, 4)                   # 20 "other"
        self.pe = Fp32PositionEmbeddingRandom(8)          # a 2 x 8 fp32 island
        self.register_buffer("table", torch.zeros(7))     # a float buffer: 7 "other"
        self.register_buffer("ids", torch.zeros(9, dtype=torch.long))  # not a weight


def test_weights_are_counted_by_the_dtype_each_gets():
    params = InferenceParameters.of(_Small(), quantised_linears=["proj", "head"])
    assert (params.linear, params.linear_rows, params.fp32_islands) == (78, 9, 16)
    assert params.other == 6 + 4 + 48 + 12 + 16 + 4 + 20 + 7
    other = params.other
    assert params.weight_bytes("fp32") == 4 * (78 + other) + 4 * 16
    assert params.weight_bytes("bf16") == params.weight_bytes("fp16") == 2 * (78 + other) + 4 * 16
    assert params.weight_bytes("int8") == 78 + 5 * 9 + 2 * other + 4 * 16  # a float32 scale + int8 zero point a row
    with pytest.raises(ValueError, match="precision must be one of"):
        params.weight_bytes("int4")


@pytest.fixture(scope="module")
def official():
    return build_meta_module(read_stacked_yaml([ROOT / "configs" / "official" / "grove.yaml"])).model


def test_the_real_model_needs_a_24_gib_gpu_in_16_bits_and_a_16_gib_one_in_int8(official):
    params = InferenceParameters.of(official)
    floats = {id(t): t for t in [*official.parameters(), *official.buffers()] if t.is_floating_point()}
    assert params.total == sum(t.numel() for t in floats.values())
    assert params.fp32_islands == 2 * 128 + 2 * 64  # SAM's Gaussian matrix, LLaMA's two rotary tables (dim 128)
    values = inference_activation_values(official, Workload(frames=8), max_new_tokens=64)
    cfg = official.language_model.model.config
    assert values["kv_cache"] == 2 * cfg.num_hidden_layers * (576 + 128 + 64) * cfg.hidden_size
    rows = {row.precision: row for row in inference_table(params, values)}
    assert list(rows) == list(INFERENCE_PRECISIONS)
    assert rows["bf16"].total == rows["fp16"].total
    # the released 8.1 B model: ~30 GiB of fp32 weights, half that in 16 bits, about 8 GiB in int8
    assert 29 * GIB < rows["fp32"].weights < 31 * GIB
    assert rows["bf16"].weights == pytest.approx(rows["fp32"].weights / 2, rel=1e-6)
    assert 7.5 * GIB < rows["int8"].weights < 8.5 * GIB
    assert {p: rows[p].smallest_gpu() for p in rows} == {"fp32": 40, "bf16": 24, "fp16": 24, "int8": 16}


def test_the_script_prints_one_row_per_precision(capsys):
    from command_line.estimate_inference_memory import main

    main([])
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith(INFERENCE_PRECISIONS)]
    assert [r[0] for r in rows] == list(INFERENCE_PRECISIONS) and [r[-1] for r in rows] == ["40", "24", "24", "16"]
