"""Spatio-temporal adapter a(o) = o + tanh(alpha) * f(o) inserted between frozen image-encoder blocks.

Image encoders see frames independently; the adapter mixes information across neighbouring frames
and patches so that the encoders become video encoders. ``alpha`` starts at 0, so at the start of
training the adapted encoder is exactly the pretrained one and the adapter's contribution grows
only as the loss asks for it (paper §4).

Choice of ``f``: a full (C -> C) 3D convolution over the (T, h, w) grid of patch tokens, kernel
3x3x3, stride 1, zero padding that keeps the grid size, followed by a ReLU - the layer the paper
describes and the public code uses (no channel bottleneck). Prefix tokens such as CLIP's class
token have no place on the grid; they pass through unchanged.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class SpatioTemporalAdapter(nn.Module):
    """Gated residual 3D convolution over a clip's patch-token grid."""

    def __init__(self, dim: int, kernel: tuple[int, int, int] = (3, 3, 3)):
        super().__init__()
        kernel = tuple(int(k) for k in kernel)
        if len(kernel) != 3 or any(k < 1 or k % 2 == 0 for k in kernel):
            raise ValueError(f"adapter kernel must be three odd sizes (T, h, w), got {kernel}")
        self.conv = nn.Conv3d(dim, dim, kernel, stride=1, padding=tuple(k // 2 for k in kernel))
        self.alpha = nn.Parameter(torch.zeros(()))

    def residual(self, grid: Tensor) -> Tensor:
        """f(o) on a ``(B, T, h, w, C)`` grid."""
        y = self.conv(grid.permute(0, 4, 1, 2, 3))
        return F.relu(y).permute(0, 2, 3, 4, 1)

    def forward(self, x: Tensor, num_frames: int, num_prefix_tokens: int = 0,
                grid_hw: tuple[int, int] | None = None) -> Tensor:
        """Apply the adapter; the output has the input's layout.

        Layouts: ``(B, T, h, w, C)``; ``(B*T, h, w, C)`` (SAM's blocks); ``(B*T, N, C)`` token
        sequences (CLIP's blocks) whose first ``num_prefix_tokens`` are passed through and whose
        remaining tokens form an ``h x w`` grid (``grid_hw``, square when omitted).
        """
        if x.dim() == 5:
            return x + torch.tanh(self.alpha) * self.residual(x)
        if x.dim() == 4:
            bt, h, w, c = x.shape
            grid = x.reshape(bt // num_frames, num_frames, h, w, c)
            return x + torch.tanh(self.alpha) * self.residual(grid).reshape(bt, h, w, c)
        if x.dim() != 3:
            raise ValueError(f"adapter input must be 3-, 4- or 5-dimensional, got shape {tuple(x.shape)}")
        bt, n, c = x.shape
        prefix, patches = x[:, :num_prefix_tokens], x[:, num_prefix_tokens:]
        if grid_hw is None:
            side = math.isqrt(patches.shape[1])
            if side * side != patches.shape[1]:
                raise ValueError(f"{patches.shape[1]} patch tokens do not form a square grid; pass grid_hw")
            grid_hw = (side, side)
        if bt % num_frames:
            raise ValueError(f"batch of {bt} frame sequences is not a multiple of num_frames={num_frames}")
        grid = patches.reshape(bt // num_frames, num_frames, grid_hw[0], grid_hw[1], c)
        patches = patches + torch.tanh(self.alpha) * self.residual(grid).reshape(bt, -1, c)
        return torch.cat((prefix, patches), dim=1)
