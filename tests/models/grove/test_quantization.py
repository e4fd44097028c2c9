"""Weight-only int8 GROVE (models.grove.quantization): which layers hold int8 weights, the bytes they
save (hand-computed from the tiny model's shapes), and agreement with fp32 outputs: greedy tokens
equal up to the first step where int8's logit changes could reorder fp32's top token, boxes within
0.005 of the frame (0.64 px at the tiny 128-px grounding size) and objectness within 0.005, over
five seeds (measured worst cases: bench/bench_int8.py, docs/precision.md)."""
from __future__ import annotations

import core  # noqa: F401

import copy

import pytest
import torch
from torch import nn

from models.grove.quantization import (
    SCHEMES,
    check_scheme,
    is_int8,
    quantizable_linears,
    quantize_weights,
    quantized_weight_bytes,
    weight_bytes,
)
from tests.fixtures.tiny_grove import tiny_grove

SEEDS = range(5)
BOX_TOL = 5e-3
OBJECTNESS_TOL = 5e-3
CAPTION = ["a <p> red shape </p> [DET] near <p> a blue circle </p> [DET] and <p> a wall </p> [DET]"]


def _inputs(seed: int):
    gen = torch.Generator().manual_seed(100 + seed)
    return (torch.randn(1, 4, 3, 64, 64, generator=gen), torch.randn(1, 4, 3, 128, 128, generator=gen),
            torch.ones(1, 4, dtype=torch.bool))


@pytest.fixture(scope="module")
def pairs():
    out = []
    for seed in SEEDS:
        fp32 = tiny_grove(seed)
        int8 = copy.deepcopy(fp32)
        report = quantize_weights(int8, "int8")
        out.append((seed, fp32, int8, report))
    return out


def test_the_backbones_linear_weights_become_int8_tensors_and_nothing_else(pairs):
    _, fp32, int8, report = pairs[0]
    modules = dict(int8.named_modules())
    # hand-listed: 2 LLaMA blocks x 7, 6 CLIP blocks x 2 (c_fc, c_proj; attention is nn.MultiheadAttention),
    # 4 SAM blocks x 4 (qkv, proj, lin1, lin2)
    assert len(report.layers) == 2 * 7 + 6 * 2 + 4 * 4
    assert all(n.startswith(("language_model.model.model.layers.", "global_encoder.backbone.transformer.resblocks.",
                             "grounding_encoder.backbone.blocks.")) for n in report.layers)
    for name, module in modules.items():
        if isinstance(module, nn.Linear):
            assert is_int8(module.weight) == (name in report.layers), name
    weight = modules["language_model.model.model.layers.0.mlp.gate_proj"].weight
    assert type(weight).__name__ == "Int8Tensor" and weight.shape == (256, 128)
    assert weight.qdata.dtype == torch.int8 and weight.qdata.shape == (256, 128)
    assert weight.scale.dtype == torch.float32 and weight.scale.numel() == 256
    # per-row symmetric: the dequantised weight is within half a step of the fp32 weight
    original = dict(fp32.named_modules())["language_model.model.model.layers.0.mlp.gate_proj"].weight
    step = original.abs().amax(dim=1, keepdim=True) / 127
    assert ((weight.dequantize() - original).abs() <= step / 2 + 1e-7).all()
    for name in ("language_model.model.lm_head", "box_decoder.transformer.layers.0.mlp.lin1", "box_head.mlp.0",
                 "global_encoder.projector.0", "query_projector.0",
                 "global_encoder.backbone.transformer.resblocks.0.attn.out_proj"):
        assert not is_int8(modules[name].weight), name
    assert int8.language_model.get_input_embeddings().weight.dtype == torch.float32


def test_the_weight_bytes_drop_as_the_shapes_say(pairs):
    _, fp32, int8, report = pairs[0]
    # the quantised shapes (out, in) by hand: LLaMA 4 x (128,128) + 2 x (256,128) + (128,256) per block;
    # CLIP (256,64) + (64,256) per block; SAM (192,64) + (64,64) + (256,64) + (64,256) per block
    shapes = ([(128, 128)] * 4 + [(256, 128)] * 2 + [(128, 256)]) * 2 + [(256, 64), (64, 256)] * 6 \
        + [(192, 64), (64, 64), (256, 64), (64, 256)] * 4
    # fp32: 4 bytes a value; int8: 1 byte a value + a float32 scale and an int8 zero point per row
    saved = sum(4 * o * i - (o * i + 5 * o) for o, i in shapes)
    values = sum(t.numel() for t in [*fp32.parameters(), *fp32.buffers()])  # every tensor is fp32
    assert report.bytes_before == weight_bytes(fp32) == 4 * values
    assert report.bytes_after == report.bytes_before - saved == weight_bytes(int8)
    assert quantized_weight_bytes(fp32) == report.bytes_after  # from shapes alone, as on the meta device


def test_greedy_tokens_agree_where_the_logit_margin_allows(pairs):
    covered = 0
    for seed, fp32, int8, _ in pairs:
        g, _, _ = _inputs(seed)
        prompts = fp32.prompter.encode_prompts(1)
        video = {m: m.encode_video(g) for m in (fp32, int8)}
        ids = {m: m.language_model.generate(video[m], prompts["input_ids"], prompts["attention_mask"],
                                            max_new_tokens=12)[0] for m in (fp32, int8)}
        sequence = torch.cat([prompts["input_ids"][0], torch.tensor(ids[fp32], dtype=torch.long)]).unsqueeze(0)
        start = prompts["input_ids"].shape[1] - 1
        logits = {}
        for m in (fp32, int8):
            _, hidden = m.language_model(sequence, torch.ones_like(sequence), video[m])
            logits[m] = m.language_model.get_output_embeddings()(hidden[0, start:start + len(ids[fp32])])
        # int8 cannot swap fp32's top token t for j where fp32's gap t-j exceeds both logits' changes
        change = (logits[int8] - logits[fp32]).abs()
        top = logits[fp32].argmax(dim=-1, keepdim=True)
        slack = logits[fp32].gather(1, top) - logits[fp32] - change - change.gather(1, top)
        decided = slack.scatter(1, top, float("inf")).amin(dim=-1) > 1e-4
        k = int(decided.long().cumprod(0).sum())  # steps up to the first undecided one
        assert ids[int8][:k] == ids[fp32][:k], (seed, k)
        covered += k
    assert covered >= 25  # measured 33 of the 5 x 12 steps: the check is not vacuous


def test_boxes_and_objectness_stay_close_on_a_given_caption(pairs):
    for seed, fp32, int8, _ in pairs:
        g, s, mask = _inputs(seed)
        out = [m.predict(g, s, mask, caption_positions=torch.arange(4).unsqueeze(0), captions=CAPTION)
               for m in (fp32, int8)]
        assert out[0].boxes.shape == out[1].boxes.shape == (1, 4, 3, 4)
        assert (out[0].boxes - out[1].boxes).abs().max() <= BOX_TOL, seed
        assert (out[0].scores - out[1].scores).abs().max() <= OBJECTNESS_TOL, seed
        assert not torch.equal(out[0].boxes, out[1].boxes)  # int8 did change the computation


def test_unknown_schemes_and_second_quantisation_are_refused(pairs):
    _, fp32, int8, _ = pairs[0]
    assert SCHEMES == ("int8",) and check_scheme("int8") == "int8"
    with pytest.raises(ValueError, match=r"model.weight_quantization: unknown weight quantization scheme 'int4'"):
        check_scheme("int4", "model.weight_quantization")
    with pytest.raises(ValueError, match="unknown weight quantization scheme 'fp8'"):
        quantize_weights(copy.deepcopy(fp32), "fp8")
    with pytest.raises(ValueError, match="already quantised"):
        quantize_weights(int8, "int8")


def test_quantizable_linears_leave_attention_modules_and_trained_parts(pairs):
    _, fp32, _, _ = pairs[0]
    names = quantizable_linears(fp32)
    assert not any(".attn.out_proj" in n and "global_encoder" in n for n in names)
    assert not any(n.startswith(("box_decoder.", "query_projector.", "box_head.", "objectness_head.")) or
                   ".adapters." in n or "lm_head" in n for n in names)
