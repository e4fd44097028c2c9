"""GROVE in true bf16 / fp16 (every weight 16-bit, the fp32 islands of docs/precision.md kept fp32):
it runs, keeps its positional tables fp32, loads 16-bit from an exported folder, and predicts what the
fp32 model predicts within the tolerance docs/precision.md states.

The agreement test uses a tiny model whose LLM is first fitted to one tagged caption (80 Adam steps,
under a second; experiments/sixteen_bit_agreement.py, which measured the tolerance): a random LLM's
next-token logits are nearly tied, so bf16 rounding flips its greedy choice on some seeds (2 of 10 at
12 tokens), which says nothing about the model; a fitted LLM has the clear margins a trained one has,
and its caption carries phrases to ground."""
from __future__ import annotations

import core  # noqa: F401

import math

import numpy as np
import pytest
import torch

from experiments.sixteen_bit_agreement import cast_copy, fitted_tiny_grove, predict
from models.grove import Grove
from models.grove.configuration import tiny_configs
from models.grove.fp32_buffers import GAUSSIAN, ROTARY

# docs/precision.md: the measured worst case over 20 seeds, with head-room (boxes are normalised to the frame)
TOLERANCE = {torch.bfloat16: {"box": 0.004, "objectness": 0.01},
             torch.float16: {"box": 0.001, "objectness": 0.002}}
FP32_BUFFERS = (GAUSSIAN, *ROTARY)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_16bit_predictions_agree_with_fp32_within_the_documented_tolerance(seed, dtype):
    model = fitted_tiny_grove(seed)
    reference = predict(model, seed)
    assert reference.phrases[0], "the fitted caption must tag phrases, or there is nothing to compare"
    half = predict(cast_copy(model, dtype), seed, dtype)
    assert half.tagged_captions == reference.tagged_captions and half.phrases == reference.phrases
    assert half.boxes.dtype == half.scores.dtype == torch.float32
    assert reference.boxes.abs().sum() > 0
    box_error = float((half.boxes - reference.boxes).abs().max())
    objectness_error = float((half.scores - reference.scores).abs().max())
    assert box_error <= TOLERANCE[dtype]["box"] and objectness_error <= TOLERANCE[dtype]["objectness"]
    assert box_error > 0  # the 16-bit model really computed in 16 bits


@pytest.mark.parametrize("cast", [lambda m: m.to(torch.bfloat16), lambda m: m.half(),
                                  lambda m: m.to("cpu", torch.bfloat16)])
def test_casting_leaves_the_positional_tables_fp32_and_every_weight_16bit(cast):
    model = cast(Grove(**tiny_configs()))
    buffers = dict(model.named_buffers())
    kept = {name for name, b in buffers.items() if b.dtype == torch.float32}
    assert kept == {n for n in buffers if n.rsplit(".", 1)[-1] in FP32_BUFFERS} and len(kept) == 3
    assert {p.dtype for p in model.parameters()} == {next(model.parameters()).dtype} != {torch.float32}
    assert set(model.state_dict()) == set(Grove(**tiny_configs()).state_dict())  # the same keys as fp32


def test_the_grid_encoding_of_a_bf16_model_is_the_fp32_one():
    torch.manual_seed(0)
    model = Grove(**tiny_configs())
    decoder = model.box_decoder
    gaussian = decoder.pe_layer.positional_encoding_gaussian_matrix.double()
    h, w = 5, 7
    ys, xs = torch.meshgrid((torch.arange(h, dtype=torch.float64) + 0.5) / h,
                            (torch.arange(w, dtype=torch.float64) + 0.5) / w, indexing="ij")
    phase = 2 * math.pi * ((2 * torch.stack((xs, ys), dim=-1) - 1) @ gaussian)  # SAM's formula, by hand
    expected = torch.cat((phase.sin(), phase.cos()), dim=-1).permute(2, 0, 1).unsqueeze(0)
    like = torch.zeros(1, dtype=torch.bfloat16)
    encoded = model.to(torch.bfloat16).box_decoder.dense_pe((h, w), like)
    assert encoded.dtype == torch.bfloat16
    # only the final rounding to bf16 (8 significant bits: 2**-8 of values within [-1, 1])
    np.testing.assert_allclose(encoded.double().numpy(), expected.numpy(), atol=2 ** -8, rtol=0)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    model = Grove(**tiny_configs()).eval()
    model.settings = {"prompt": {"chat_template": "plain", "target_text": "as_is", "sample_question": False},
                      "preprocessing": {"num_frames": 4, "global_image_size": 64, "grounding_image_size": 128}}
    model.prompter = model.make_prompter(sample_question=False, template="plain")
    folder = tmp_path_factory.mktemp("grove16") / "grove"
    model.save_pretrained(folder)
    return model, folder


@pytest.mark.parametrize("kwargs, dtype", [({"torch_dtype": torch.bfloat16}, torch.bfloat16),
                                           ({"dtype": torch.bfloat16}, torch.bfloat16),
                                           ({"torch_dtype": "float16"}, torch.float16),
                                           ({"dtype": "torch.bfloat16", "torch_dtype": torch.bfloat16},
                                            torch.bfloat16)])
def test_from_pretrained_loads_in_the_asked_dtype(exported, kwargs, dtype):
    reference, folder = exported
    model = Grove.from_pretrained(folder, **kwargs)
    state = model.state_dict()
    fp32 = {k for k, v in state.items() if v.dtype == torch.float32}
    assert fp32 == {f"box_decoder.pe_layer.{GAUSSIAN}"}  # the rotary tables are not saved
    assert all(v.dtype == dtype for k, v in state.items() if v.is_floating_point() and k not in fp32)
    ref = reference.state_dict()
    assert all(torch.equal(v, ref[k].to(v.dtype)) for k, v in state.items())  # the saved values, rounded once
    rotary = [b for n, b in model.named_buffers() if n.endswith(ROTARY)]
    assert rotary and all(b.dtype == torch.float32 for b in rotary)


def test_from_pretrained_refuses_an_unknown_or_contradictory_dtype(exported):
    _, folder = exported
    with pytest.raises(ValueError, match="torch.float32, torch.bfloat16 or torch.float16"):
        Grove.from_pretrained(folder, torch_dtype=torch.int8)
    with pytest.raises(ValueError, match="disagree"):
        Grove.from_pretrained(folder, dtype=torch.float16, torch_dtype=torch.bfloat16)


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    from formats.video_writer import write_video

    frames = np.random.default_rng(0).integers(0, 256, (25, 48, 64, 3), dtype=np.uint8)
    return write_video(tmp_path_factory.mktemp("grove16_video") / "clip.mp4", frames, fps=25)


@pytest.mark.parametrize("load", [lambda f: Grove.from_pretrained(f, torch_dtype=torch.bfloat16),
                                  lambda f: Grove.from_pretrained(f).to(torch.bfloat16),
                                  lambda f: Grove.from_pretrained(f, dtype=torch.float16)])
def test_the_processor_generates_with_a_16bit_model(exported, video, load, monkeypatch):
    from models.grove.processing import GroveProcessor
    from tests.webdemo.fixed_caption_server import FIXED_PLAIN, fixed_generate_captions

    _, folder = exported
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)  # phrases to box
    processor = GroveProcessor.from_pretrained(folder)
    out = processor.generate(load(folder), str(video), max_new_tokens=5, temp_objectness_threshold=0.0)
    reference = processor.generate(Grove.from_pretrained(folder), str(video), max_new_tokens=5,
                                   temp_objectness_threshold=0.0)
    assert out["text"] == reference["text"] == FIXED_PLAIN and out["phrases"] == reference["phrases"]
    assert len(out["bboxes"]) == len(reference["bboxes"]) > 0
    for ours, theirs in zip(out["bboxes"], reference["bboxes"]):
        assert ours.dtype == torch.float32 and ours.shape == theirs.shape
        assert float((ours - theirs).abs().max()) <= 4 * 64 * TOLERANCE[torch.bfloat16]["box"]  # pixels of 64


def test_a_model_built_on_meta_gets_fp32_tables_when_materialised_and_cast():
    from models.grove.modeling import build_on_meta

    model = build_on_meta(**tiny_configs())
    model.to_empty(device="cpu").to(torch.bfloat16)
    tables = {n: b for n, b in model.named_buffers() if n.rsplit(".", 1)[-1] in FP32_BUFFERS}
    assert len(tables) == 3 and all(b.dtype == torch.float32 and b.device.type == "cpu" for b in tables.values())
