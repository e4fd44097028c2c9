"""GROVE's small MLPs: the projections between spaces (VL, LQ) and the prediction heads."""
from __future__ import annotations

from torch import Tensor, nn


class TwoLayerMLP(nn.Sequential):
    """Linear -> activation -> Linear; the shape of every projection and head in GROVE."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, activation: type[nn.Module] = nn.ReLU):
        super().__init__(nn.Linear(in_dim, hidden_dim), activation(), nn.Linear(hidden_dim, out_dim))


class VisionLanguageProjector(TwoLayerMLP):
    """VL: pooled video tokens -> LLM embedding space (LLaVA's two-layer GELU MLP)."""

    def __init__(self, vision_dim: int, llm_dim: int):
        super().__init__(vision_dim, llm_dim, llm_dim, activation=nn.GELU)


class QueryProjector(TwoLayerMLP):
    """LQ: LLM hidden state at a [DET] token -> box-decoder query (4096 -> 4096 -> 256)."""

    def __init__(self, llm_dim: int, decoder_dim: int):
        super().__init__(llm_dim, llm_dim, decoder_dim, activation=nn.ReLU)


class BoxHead(nn.Module):
    """h_bb: decoder output -> normalised ``(cx, cy, w, h)`` in [0, 1] (two FC layers, ReLU, sigmoid).

    The sigmoid runs in fp32 whatever the model's dtype: in bf16 a box near the image border would be
    rounded by up to 2**-9 of the image (a pixel at 512), and the box losses take fp32 boxes."""

    def __init__(self, dim: int):
        super().__init__()
        self.mlp = TwoLayerMLP(dim, dim, 4, activation=nn.ReLU)

    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(x).float().sigmoid()


class TemporalObjectnessHead(nn.Module):
    """h_tobj: decoder output -> logit that the phrase's object is visible in that frame, as fp32 (the
    sigmoid, the threshold and the focal/BCE loss read it in fp32 whatever the model's dtype)."""

    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x).squeeze(-1).float()
