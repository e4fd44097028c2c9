"""``Grove.from_pretrained(DIR, quantization="int8")``: the folder's weights are loaded, then the backbones
quantised; ``GroveProcessor.generate`` runs on such a model and its boxes and objectness stay within the
tolerances of test_quantization.py of the fp32 model's; an unknown scheme is refused before loading."""
from __future__ import annotations

import core  # noqa: F401

import pytest
import torch

from models.grove import Grove
from models.grove.configuration import tiny_configs
from models.grove.processing import GroveProcessor
from models.grove.quantization import is_int8
from tests.webdemo.fixed_caption_server import FIXED_PLAIN, fixed_generate_captions

GATE = "language_model.model.model.layers.0.mlp.gate_proj"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    torch.manual_seed(0)
    grove = Grove(**tiny_configs()).eval()
    grove.settings = {"prompt": {"chat_template": "plain", "target_text": "as_is", "sample_question": False},
                      "preprocessing": {"num_frames": 4, "global_image_size": 64, "grounding_image_size": 128},
                      "inference": {"objectness_threshold": 0.0}}
    grove.prompter = grove.make_prompter(sample_question=False, template="plain")
    path = tmp_path_factory.mktemp("grove_int8") / "grove"
    grove.save_pretrained(path)
    return path


def test_the_folder_s_weights_are_quantised_after_loading(folder):
    fp32, int8 = Grove.from_pretrained(folder), Grove.from_pretrained(folder, quantization="int8")
    weight, original = dict(int8.named_modules())[GATE].weight, dict(fp32.named_modules())[GATE].weight
    assert is_int8(weight) and not is_int8(original)
    # the loaded weights were quantised (not the random ones of construction): within half a step of them
    step = original.abs().amax(dim=1, keepdim=True) / 127
    assert ((weight.dequantize() - original).abs() <= step / 2 + 1e-7).all()
    assert not int8.training


def test_the_processor_runs_a_quantised_model(folder, tiny_synthetic_root, monkeypatch):
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)  # phrases to box
    video = str(sorted((tiny_synthetic_root / "videos").glob("*.mp4"))[0])
    processor = GroveProcessor.from_pretrained(folder)
    outs = [processor.generate(Grove.from_pretrained(folder, **kw), video, None, "cpu", max_new_tokens=6)
            for kw in ({}, {"quantization": "int8"})]
    assert outs[0]["text"] == outs[1]["text"] == FIXED_PLAIN and outs[0]["phrases"] == outs[1]["phrases"]
    assert outs[0]["frame_indices"] == outs[1]["frame_indices"]
    width, height = outs[0]["original_size"]
    boxes = [torch.cat(o["bboxes"]) for o in outs]  # threshold 0: every phrase on every frame
    assert boxes[0].shape == boxes[1].shape and boxes[0].shape[0] == 2 * len(outs[0]["frame_indices"])
    # 0.005 of the frame (test_quantization.BOX_TOL) in the video's pixels
    assert (boxes[0] - boxes[1]).abs().max() <= 5e-3 * max(width, height)
    probs = [torch.stack(o["probs_temp_objectness"]) for o in outs]
    assert (probs[0] - probs[1]).abs().max() <= 5e-3


def test_an_unknown_scheme_is_refused_before_loading(tmp_path):
    with pytest.raises(ValueError, match=r"Grove.from_pretrained\(quantization=...\): unknown weight quantization "
                                         r"scheme 'int4'"):
        Grove.from_pretrained(tmp_path / "not_a_folder", quantization="int4")


def test_int8_backbones_with_the_rest_in_bf16_run_and_agree(folder, tiny_synthetic_root, monkeypatch):
    """The smallest configuration a user runs: ``torch_dtype=bfloat16`` and int8 backbones together
    (docs/precision.md's int8 row): it loads, generates, and stays within the bf16 tolerance plus int8's."""
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)
    video = str(sorted((tiny_synthetic_root / "videos").glob("*.mp4"))[0])
    processor = GroveProcessor.from_pretrained(folder)
    small = Grove.from_pretrained(folder, torch_dtype=torch.bfloat16, quantization="int8")
    weight = dict(small.named_modules())[GATE].weight
    assert is_int8(weight) and small.language_model.get_input_embeddings().weight.dtype == torch.bfloat16
    outs = [processor.generate(model, video, None, "cpu", max_new_tokens=6)
            for model in (Grove.from_pretrained(folder), small)]
    assert outs[0]["text"] == outs[1]["text"] and outs[0]["phrases"] == outs[1]["phrases"]
    width, height = outs[0]["original_size"]
    boxes = [torch.cat(o["bboxes"]).float() for o in outs]
    assert boxes[0].shape == boxes[1].shape
    diff = (boxes[0] - boxes[1]).abs().max() / max(width, height)
    assert diff <= 4e-3 + 5e-3, diff  # bf16's and int8's tolerances (docs/precision.md)
    probs = [torch.stack(o["probs_temp_objectness"]).float() for o in outs]
    assert (probs[0] - probs[1]).abs().max() <= 1e-2 + 5e-3
