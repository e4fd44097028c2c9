"""A weight's stored type must be the kind of number the model holds there.

``Module.load_state_dict`` copies a tensor into a parameter with ``copy_``, which casts: a float
weight stored as integers (a file written by a broken converter, an int32 dump) would load as
whole numbers and the model would run on them without a word. Precision may differ (bf16 or fp16
release files into an fp32 model is usual); the kind may not: floating, complex, integer and bool.
"""
from __future__ import annotations

from typing import Mapping

import torch

__all__ = ["WeightDtypeError", "dtype_kind", "refuse_dtype_mismatch"]


class WeightDtypeError(ValueError):
    """A weight whose stored kind of number differs from the model's; the message names the keys."""


def dtype_kind(dtype: torch.dtype) -> str:
    """``floating``, ``complex``, ``bool`` or ``integer``."""
    if dtype.is_floating_point:
        return "floating"
    if dtype.is_complex:
        return "complex"
    if dtype == torch.bool:
        return "bool"
    return "integer"


def refuse_dtype_mismatch(expected: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], where: str) -> None:
    """Raise :class:`WeightDtypeError` naming ``where`` and each key of ``state`` whose dtype is of
    another kind than the model's tensor of that key in ``expected`` (``module.state_dict()``)."""
    wrong = [f"{key}: stored {state[key].dtype}, model {tensor.dtype}" for key, tensor in expected.items()
             if key in state and isinstance(state[key], torch.Tensor)
             and dtype_kind(state[key].dtype) != dtype_kind(tensor.dtype)]
    if wrong:
        shown = "; ".join(wrong[:3]) + (f"; and {len(wrong) - 3} more" if len(wrong) > 3 else "")
        raise WeightDtypeError(f"{where}: {len(wrong)} weight(s) stored as another kind of number than the model "
                               f"holds ({shown}); loading would cast them: the weight file is damaged or not "
                               "this model's")
