"""Official-format GROVE checkpoints built from the released key lists (no download).

``keys_tiny.json`` / ``keys_real.json`` (in ``tests/fixtures/official_grove/``) list every key of
the released ``GROVEForCausalLM`` state dict with its shape, dtype and kind (buffer, frozen,
trainable), in the order DeepSpeed's ``zero_to_fp32.py`` writes them.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import torch

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "official_grove"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def key_list(variant: str = "tiny") -> dict:
    return json.loads((FIXTURES / f"keys_{variant}.json").read_text())


def official_state_dict(variant: str = "tiny", seed: int = 0, device: str = "cpu") -> "OrderedDict[str, torch.Tensor]":
    """A state dict in the released layout: trainable tensors are fp32 views of ONE flat storage
    (as zero_to_fp32 writes them), frozen ones keep their (bf16) dtype, buffers are fp32.

    ``device="meta"`` gives shapes and dtypes only (for the real-size key list).
    """
    spec = key_list(variant)
    gen = torch.Generator().manual_seed(seed)
    trainable = [k for k in spec["keys"] if spec["kinds"][k] == "trainable"]
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    if device == "meta":
        for key, shape in spec["keys"].items():
            out[key] = torch.empty(shape, dtype=_DTYPES[spec["dtypes"][key]], device="meta")
        return out
    total = sum(int(torch.Size(spec["keys"][k]).numel()) for k in trainable)
    flat = torch.randn(total, generator=gen) * 0.02
    offset = 0
    for key, shape in spec["keys"].items():
        kind, dtype = spec["kinds"][key], _DTYPES[spec["dtypes"][key]]
        if kind == "trainable":
            n = int(torch.Size(shape).numel())
            out[key] = flat[offset:offset + n].view(shape)
            offset += n
        else:
            out[key] = (torch.randn(shape, generator=gen) * 0.02).to(dtype)
    return out


def save_official(path: Path, variant: str = "tiny", seed: int = 0, device: str = "cpu") -> Path:
    state = official_state_dict(variant, seed, device)
    torch.save(state, path)
    return path
