"""ViCLIP (Wang et al., 2024, InternVid) video and text towers, for ViCLIPScore.

The video tower is a CLIP ViT whose patch embedding runs on every frame (a 3-D convolution with a
temporal kernel of 1), with a learned temporal position embedding (linearly resampled to the number
of frames; its mean for a single frame) added to the patch tokens, and one joint space-time
attention over a shared class token and every frame's patches; the clip embedding is the class
token after the final norm and projection. The text tower is CLIP's (causal attention, 32-token
context, the EOS token projected). Blocks are CLIP's (pre-norm, QuickGELU, ``nn.MultiheadAttention``)
with the release's parameter names, so ``ViCLIP-L_InternVid-FLT-10M.pth`` (``{"model":
{"vision_encoder.*", "text_encoder.*"}}``) loads as it is. Frames are resized to the input size and
normalised with the ImageNet statistics, as the authors' demo does.
"""
from __future__ import annotations

from core.weights import load_state_dict_file

from collections import OrderedDict
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SIZES = {  # the released ViCLIP-L/14 and ViCLIP-B/16
    "L": {"width": 1024, "layers": 24, "heads": 16, "patch_size": 14, "embed_dim": 768,
          "text_width": 768, "text_layers": 12, "text_heads": 12},
    "B": {"width": 768, "layers": 12, "heads": 12, "patch_size": 16, "embed_dim": 512,
          "text_width": 512, "text_layers": 12, "text_heads": 8},
}


class QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    """CLIP's pre-norm block; sequence-first input ``(L, N, D)`` as ``nn.MultiheadAttention`` defaults."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(width, 4 * width)), ("gelu", QuickGELU()),
                                              ("c_proj", nn.Linear(4 * width, width))]))
        self.ln_2 = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False, attn_mask=mask)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int):
        super().__init__()
        self.resblocks = nn.ModuleList(ResidualAttentionBlock(width, heads) for _ in range(layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for block in self.resblocks:
            x = block(x, mask)
        return x


def resample_temporal(embedding: torch.Tensor, frames: int) -> torch.Tensor:
    """``(1, T0, D)`` temporal embedding at ``frames`` steps (linear), or its mean for one frame."""
    if frames == 1:
        return embedding.mean(1, keepdim=True)
    if embedding.shape[1] == frames:
        return embedding
    return F.interpolate(embedding.transpose(1, 2), frames, mode="linear").transpose(1, 2)


class VideoTower(nn.Module):
    """ViCLIP's joint space-time ViT: ``(B, 3, T, H, W)`` -> ``(B, embed_dim)``."""

    def __init__(self, width: int, layers: int, heads: int, patch_size: int, embed_dim: int,
                 image_size: int = 224, num_frames: int = 8):
        super().__init__()
        self.conv1 = nn.Conv3d(3, width, (1, patch_size, patch_size), (1, patch_size, patch_size), bias=False)
        scale = width ** -0.5
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn((image_size // patch_size) ** 2 + 1, width))
        self.temporal_positional_embedding = nn.Parameter(torch.zeros(1, num_frames, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = Transformer(width, layers, heads)
        self.ln_post = nn.LayerNorm(width)
        self.proj = nn.Parameter(scale * torch.randn(width, embed_dim))

    def forward(self, video: torch.Tensor) -> torch.Tensor:
        x = self.conv1(video)  # (B, D, T, h, w)
        b, d, t = x.shape[:3]
        patches = x.flatten(3).permute(0, 2, 3, 1)  # (B, T, N, D)
        patches = patches + self.positional_embedding[1:].to(x.dtype)
        patches = patches + resample_temporal(self.temporal_positional_embedding, t)[:, :, None].to(x.dtype)
        cls = (self.class_embedding + self.positional_embedding[0]).to(x.dtype).expand(b, 1, d)
        # patch order: all frames of one position together, as the release arranges them
        tokens = torch.cat([cls, patches.transpose(1, 2).reshape(b, -1, d)], dim=1)
        tokens = self.transformer(self.ln_pre(tokens).transpose(0, 1))
        return self.ln_post(tokens[0]) @ self.proj


class TextTower(nn.Module):
    """CLIP's text transformer with ViCLIP's 32-token context: token ids ``(B, L)`` -> ``(B, embed_dim)``."""

    def __init__(self, width: int, layers: int, heads: int, embed_dim: int, context_length: int = 32,
                 vocab_size: int = 49408):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, width)
        self.positional_embedding = nn.Parameter(0.01 * torch.randn(context_length, width))
        self.transformer = Transformer(width, layers, heads)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(width ** -0.5 * torch.randn(width, embed_dim))
        self.register_buffer("causal", torch.full((context_length, context_length), float("-inf")).triu(1),
                             persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.token_embedding(ids) + self.positional_embedding[: ids.shape[1]]
        x = self.transformer(x.transpose(0, 1), self.causal[: ids.shape[1], : ids.shape[1]]).transpose(0, 1)
        x = self.ln_final(x)
        return x[torch.arange(ids.shape[0]), ids.argmax(-1)] @ self.text_projection


class ViClip(nn.Module):
    """Both towers, named as in the release (``vision_encoder``, ``text_encoder``)."""

    def __init__(self, width: int, layers: int, heads: int, patch_size: int, embed_dim: int, text_width: int,
                 text_layers: int, text_heads: int, image_size: int = 224, num_frames: int = 8,
                 context_length: int = 32):
        super().__init__()
        self.image_size, self.num_frames, self.context_length = image_size, num_frames, context_length
        self.vision_encoder = VideoTower(width, layers, heads, patch_size, embed_dim, image_size, num_frames)
        self.text_encoder = TextTower(text_width, text_layers, text_heads, embed_dim, context_length)


class ViClipTowers:
    """``encode_clip(frames)`` and ``encode_text(captions)``, what ViCLIPScore reads."""

    def __init__(self, model: ViClip, device: str = "cpu"):
        import open_clip

        self.model = model.to(device).eval().requires_grad_(False)
        self.device = device
        self.tokenizer = open_clip.tokenizer.SimpleTokenizer(context_length=model.context_length)
        self.mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)

    @torch.no_grad()
    def encode_clip(self, frames: np.ndarray) -> torch.Tensor:
        """``(T, H, W, 3)`` uint8 -> ``(D,)``; the frames are resampled to the tower's ``num_frames``."""
        picks = np.linspace(0, len(frames) - 1, self.model.num_frames).round().astype(int) if len(frames) > 1 else [0]
        x = torch.as_tensor(np.ascontiguousarray(frames[picks])).permute(0, 3, 1, 2).float() / 255.0
        size = self.model.image_size
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
        x = ((x - self.mean) / self.std).permute(1, 0, 2, 3)[None]  # (1, 3, T, H, W)
        return self.model.vision_encoder(x.to(self.device))[0].float().cpu()

    @torch.no_grad()
    def encode_text(self, captions: list[str]) -> torch.Tensor:
        return self.model.text_encoder(self.tokenizer(captions).to(self.device)).float().cpu()


def load_viclip(spec: Mapping[str, Any], key: str, device: str = "cpu") -> ViClipTowers:
    """``{size: L, checkpoint: ViCLIP-L_InternVid-FLT-10M.pth}``, or ``{architecture: {...}}`` (ViClip's
    arguments; random weights from ``seed`` unless a ``checkpoint`` is given)."""
    if "architecture" in spec:
        arch = dict(spec["architecture"])
    else:
        size = str(spec.get("size", "L")).upper()
        if size not in SIZES:
            raise ValueError(f"{key}.size: one of {', '.join(SIZES)}, got {spec.get('size')!r}")
        arch = {**SIZES[size], "num_frames": int(spec.get("num_frames", 8))}
    torch.manual_seed(int(spec.get("seed", 0)))
    model = ViClip(**arch)
    if spec.get("checkpoint"):
        checkpoint = Path(spec["checkpoint"])
        state = load_state_dict_file(checkpoint, key=f"{key}.checkpoint")
        state = {k: v for k, v in state.items() if k.startswith(("vision_encoder.", "text_encoder."))}
        try:
            missing, unexpected = model.load_state_dict(state, strict=False)
        except RuntimeError as err:  # shape mismatches
            raise ValueError(f"{key}.checkpoint: {checkpoint} does not match the ViCLIP architecture: {err}") from None
        if missing or unexpected:
            raise ValueError(f"{key}.checkpoint: {checkpoint} does not match the ViCLIP architecture "
                             f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
    return ViClipTowers(model, device)
