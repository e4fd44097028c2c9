"""Buffers GROVE keeps in fp32 whatever dtype the model is cast to (its deliberate fp32 islands).

Two fixed tables turn positions into phases that reach tens or hundreds of radians: SAM's
random-Fourier positional encoding of the grounding-feature grid, ``sin/cos(2 pi (2 x - 1) G)``
with a Gaussian ``G`` (Tancik et al., "Fourier features let networks learn high frequency
functions"), and the LLM's rotary position embedding, ``position * inv_freq`` (RoFormer). Rounded
to bf16 (8 significant bits) the table moves each phase by up to ``2**-9`` of its size: a sizeable
fraction of a period, i.e. the model would be shown other positions than it was trained with. So
``.to(torch.bfloat16)``, ``.half()`` and Lightning's ``bf16-true`` / ``16-true`` move these buffers
to the new device but leave them fp32, and the code that reads them computes in fp32 and casts
the result to the activations' dtype. docs/precision.md lists every fp32 island.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility before segment_anything imports it)

import torch
from segment_anything.modeling.prompt_encoder import PositionEmbeddingRandom
from torch import nn

GAUSSIAN = "positional_encoding_gaussian_matrix"
ROTARY = ("inv_freq", "original_inv_freq")


class KeepsBuffersFp32(nn.Module):
    """Mixin: buffers named in ``fp32_buffers`` (in this module or any submodule) stay fp32 across
    casts; they follow the device. Names are matched on the buffer's own name, not its path."""

    fp32_buffers: tuple[str, ...] = ()

    def _apply(self, fn, recurse: bool = True):
        held = [(module, name, module._buffers.pop(name)) for module in self.modules() for name in self.fp32_buffers
                if isinstance(module._buffers.get(name), torch.Tensor) and module._buffers[name].is_floating_point()]
        try:
            result = super()._apply(fn, recurse)
        finally:
            for module, name, buffer in held:  # fn gives the target device (its dtype is not taken)
                moved = fn(buffer)
                # a meta buffer has no values to keep (to_empty): fn's new storage, as fp32
                module._buffers[name] = moved.float() if buffer.is_meta else buffer.to(device=moved.device,
                                                                                        dtype=torch.float32)
        return result


class Fp32PositionEmbeddingRandom(KeepsBuffersFp32, PositionEmbeddingRandom):
    """SAM's :class:`PositionEmbeddingRandom` (same buffer name, same state dict) whose Gaussian matrix
    stays fp32, so its ``forward`` computes the grid's encoding in fp32."""

    fp32_buffers = (GAUSSIAN,)

    def __init__(self, num_pos_feats: int = 64, scale: float | None = None) -> None:
        super().__init__(num_pos_feats, scale)
        # built under a 16-bit default dtype (Lightning's true-precision init context): back to fp32
        self._buffers[GAUSSIAN] = self._buffers[GAUSSIAN].float()
