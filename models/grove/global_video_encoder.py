"""Global video encoder V_c: CLIP ViT + spatio-temporal adapters + pooling + VL projection.

The frozen CLIP tower encodes every frame; an adapter after every ``adapter_every``-th block mixes
neighbouring frames. The patch tokens of ``feature_layer`` (LLaVA's second-last block) are pooled
spatio-temporally (T x 24 x 24 -> 8 x 8 x 9 = 576 tokens for ViT-L/14 at 336 px) and projected
into the LLM's embedding space. The blocks run here, not inside open_clip's forward, so adapters
can sit between them; nothing runs under ``torch.no_grad`` because the adapters' gradients flow
back through the frozen blocks that follow them.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility before open_clip imports it)

import math
import re

import open_clip
import torch
import torch.nn.functional as F
from open_clip.model import _build_vision_tower
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from models.grove.adapters import SpatioTemporalAdapter
from models.grove.configuration import GlobalEncoderConfig, load_weights, require_path
from models.grove.heads import VisionLanguageProjector

CHECKPOINT_KEY = "model.global_encoder.checkpoint"
_FOLDER_WEIGHT_FILES = ("open_clip_model.safetensors", "open_clip_pytorch_model.bin", "model.safetensors",
                        "pytorch_model.bin")


def build_clip_vision_tower(config: GlobalEncoderConfig) -> nn.Module:
    """An open_clip ``VisionTransformer`` from a named architecture or a custom ``vision_config``."""
    if config.vision_config is not None:
        vision_cfg = dict(config.vision_config)
        output_dim = int(vision_cfg.pop("embed_dim", vision_cfg.get("width", 768)))
    else:
        model_cfg = open_clip.get_model_config(config.model_name)
        if model_cfg is None:
            raise ValueError(f"model.global_encoder.model_name: {config.model_name!r} is not an open_clip "
                             f"architecture (see open_clip.list_models())")
        vision_cfg, output_dim = dict(model_cfg["vision_cfg"]), int(model_cfg["embed_dim"])
    if isinstance(vision_cfg.get("layers"), (list, tuple)) or vision_cfg.get("timm_model_name"):
        raise ValueError("model.global_encoder: only ViT vision towers are supported (no ResNet/timm towers)")
    vision_cfg["image_size"] = config.image_size
    vision_cfg["patch_dropout"] = 0.0  # dropping patches would break the (T, h, w) grid the adapters need
    return _build_vision_tower(output_dim, vision_cfg, quick_gelu=config.quick_gelu)


_HF_CLIP_RENAMES = {"embeddings.class_embedding": "class_embedding",
                    "embeddings.patch_embedding.weight": "conv1.weight",
                    "embeddings.position_embedding.weight": "positional_embedding",
                    "pre_layrnorm.weight": "ln_pre.weight", "pre_layrnorm.bias": "ln_pre.bias",
                    "post_layernorm.weight": "ln_post.weight", "post_layernorm.bias": "ln_post.bias"}
_HF_CLIP_LAYER_PARTS = {"layer_norm1": "ln_1", "layer_norm2": "ln_2", "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj",
                        "self_attn.out_proj": "attn.out_proj"}
_HF_CLIP_LAYER = re.compile(r"encoder\.layers\.(\d+)\.(layer_norm1|layer_norm2|mlp\.fc1|mlp\.fc2|self_attn\.out_proj|"
                            r"self_attn\.q_proj|self_attn\.k_proj|self_attn\.v_proj)\.(weight|bias)")


def hf_clip_vision_name(name: str) -> tuple[str, str | None] | None:
    """A Hugging Face CLIP vision key (after ``vision_model.``) -> ``(open_clip name, part)``.

    ``part`` is ``q``, ``k`` or ``v`` for attention projections, which open_clip stacks into one
    ``in_proj`` in that order, else None. Keys with no open_clip counterpart give None.
    """
    if name in _HF_CLIP_RENAMES:
        return _HF_CLIP_RENAMES[name], None
    m = _HF_CLIP_LAYER.fullmatch(name)
    if m is None:
        return None
    index, layer_part, kind = m.groups()
    if layer_part.endswith(("q_proj", "k_proj", "v_proj")):
        return f"transformer.resblocks.{index}.attn.in_proj_{kind}", layer_part[-6]
    return f"transformer.resblocks.{index}.{_HF_CLIP_LAYER_PARTS[layer_part]}.{kind}", None


def convert_hf_clip_vision(state_dict: dict[str, Tensor]) -> dict[str, Tensor]:
    """Hugging Face ``CLIPVisionModel``/``CLIPModel`` vision weights -> open_clip ``visual`` names."""
    out: dict[str, Tensor] = {}
    # CLIPModel files prefix the tower with "vision_model."; CLIPVisionModel files may not.
    pre = "vision_model." if any(k.startswith("vision_model.") for k in state_dict) else ""
    qkv: dict[str, dict[str, Tensor]] = {}
    for key, value in state_dict.items():
        if key == "visual_projection.weight":
            out["proj"] = value.t().contiguous()
            continue
        hit = hf_clip_vision_name(key[len(pre):]) if key.startswith(pre) else None
        if hit is None:
            continue  # e.g. position_ids buffers
        name, part = hit
        if part is None:
            out[name] = value
        else:
            qkv.setdefault(name, {})[part] = value
    for name, parts in qkv.items():  # open_clip keeps q, k, v stacked in one in_proj
        out[name] = torch.cat([parts["q"], parts["k"], parts["v"]], dim=0)
    return out


def load_clip_vision_weights(tower: nn.Module, path: str | None) -> None:
    """Load open_clip, OpenAI (JIT) or Hugging Face CLIP weights into the vision tower.

    Only the unused output projection may be absent (``CLIPVisionModel`` has none).
    """
    location = require_path(path, CHECKPOINT_KEY)
    if location.is_dir():
        found = [location / name for name in _FOLDER_WEIGHT_FILES if (location / name).exists()]
        if not found:
            raise FileNotFoundError(f"{CHECKPOINT_KEY}: folder {location} holds none of {_FOLDER_WEIGHT_FILES}")
        location = found[0]
    raw = load_weights(location, CHECKPOINT_KEY)
    if any(k.startswith("vision_model.") for k in raw) or "embeddings.patch_embedding.weight" in raw:
        state = convert_hf_clip_vision(raw)
    elif any(k.startswith("visual.") for k in raw):
        state = {k[len("visual."):]: v for k, v in raw.items() if k.startswith("visual.")}
    else:
        state = raw
    try:
        missing, unexpected = tower.load_state_dict(state, strict=False)
    except RuntimeError as err:  # shape mismatches
        raise ValueError(f"{CHECKPOINT_KEY}: {location} does not match the vision tower: {err}") from err
    missing = [k for k in missing if k != "proj"]
    if missing or unexpected:
        raise ValueError(f"{CHECKPOINT_KEY}: {location} does not match the vision tower "
                         f"(missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                         f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''})")


def adapter_block_indices(config: GlobalEncoderConfig, num_blocks: int) -> list[int]:
    """0-based blocks (among the ``num_blocks`` that run) followed by an adapter.

    Explicit ``adapter_blocks`` win; otherwise every ``adapter_every``-th block (1-based), i.e.
    blocks 2, 5, 8, ... for ``adapter_every=3``.
    """
    if config.adapter_blocks is not None:
        blocks = sorted(int(b) for b in config.adapter_blocks)
        bad = [b for b in blocks if not 0 <= b < num_blocks]
        if bad or len(set(blocks)) != len(blocks):
            raise ValueError(f"model.global_encoder.adapter_blocks: {config.adapter_blocks} must be distinct block "
                             f"indices in [0, {num_blocks}) (the blocks up to feature_layer)")
        return blocks
    if config.adapter_every < 1:
        raise ValueError(f"model.global_encoder.adapter_every must be >= 1, got {config.adapter_every}")
    return [i for i in range(num_blocks) if (i + 1) % config.adapter_every == 0]


def adapter_grid(num_patches: int, side: int, rows: int | None) -> tuple[int, int]:
    """The ``(rows, cols)`` layout of a frame's patch tokens seen by the adapters' convolution."""
    if rows is None:
        return side, side
    if rows < 1 or num_patches % rows:
        raise ValueError(f"model.global_encoder.adapter_grid_rows: {rows} does not divide the {num_patches} patch "
                         f"tokens of a frame")
    return int(rows), num_patches // int(rows)


class GlobalVideoEncoder(nn.Module):
    """Frames ``(B, T, 3, H, W)`` -> video tokens ``(B, T'*H'*W', llm_dim)`` for the LLM."""

    def __init__(self, config: GlobalEncoderConfig, llm_dim: int):
        super().__init__()
        self.config = config
        self.backbone = build_clip_vision_tower(config)
        if config.checkpoint is not None:
            load_clip_vision_weights(self.backbone, config.checkpoint)
        depth = len(self.backbone.transformer.resblocks)
        layer = config.feature_layer if config.feature_layer >= 0 else depth + 1 + config.feature_layer
        if not 1 <= layer <= depth:
            raise ValueError(f"model.global_encoder.feature_layer: {config.feature_layer} selects no block of a "
                             f"{depth}-block tower")
        self.num_blocks = layer
        after = adapter_block_indices(config, layer) if config.adapters else []
        self.adapter_positions = {block: slot for slot, block in enumerate(after)}
        width = self.backbone.conv1.out_channels
        grid = self.backbone.conv1.weight.shape[-1]  # patch size
        side = config.image_size // grid
        self.adapter_grid_hw = adapter_grid(side * side, side, config.adapter_grid_rows)
        self.adapters = nn.ModuleList(SpatioTemporalAdapter(width, config.adapter_kernel) for _ in after)
        self.pool_grid = tuple(int(s) for s in config.pool_grid)
        if len(self.pool_grid) != 3:
            raise ValueError(f"model.global_encoder.pool_grid must be (T', H', W'), got {config.pool_grid}")
        self.projector = VisionLanguageProjector(width, llm_dim)

    @property
    def num_video_tokens(self) -> int:
        return math.prod(self.pool_grid)

    @property
    def width(self) -> int:
        return self.backbone.conv1.out_channels

    def _block(self, block: nn.Module, x: Tensor) -> Tensor:
        if self.config.gradient_checkpointing and torch.is_grad_enabled() and x.requires_grad:
            return checkpoint(block, x, use_reentrant=False)
        return block(x)

    def encode_frames(self, frames: Tensor) -> Tensor:
        """Adapted patch features of ``feature_layer``: ``(B, T, h, w, C)``."""
        if frames.dim() != 5:
            raise ValueError(f"global frames must be (B, T, 3, H, W), got shape {tuple(frames.shape)}")
        b, t = frames.shape[:2]
        if tuple(frames.shape[-2:]) != (self.config.image_size,) * 2:
            raise ValueError(f"global frames are {tuple(frames.shape[-2:])} px but "
                             f"model.global_encoder.image_size is {self.config.image_size}")
        tower = self.backbone
        x = tower.conv1(frames.flatten(0, 1).to(tower.conv1.weight.dtype))
        h, w = x.shape[-2:]
        x = x.flatten(2).transpose(1, 2)
        cls = tower.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        x = torch.cat((cls, x), dim=1) + tower.positional_embedding.to(x.dtype)
        x = tower.ln_pre(x)
        for index, block in enumerate(tower.transformer.resblocks[: self.num_blocks]):
            x = self._block(block, x)
            slot = self.adapter_positions.get(index)
            if slot is not None:
                x = self.adapters[slot](x, t, num_prefix_tokens=1, grid_hw=self.adapter_grid_hw)
        return x[:, 1:].reshape(b, t, h, w, x.shape[-1])

    def pool(self, features: Tensor) -> Tensor:
        """Adaptive average pooling of ``(B, T, h, w, C)`` to ``(B, T'*H'*W', C)``."""
        pooled = F.adaptive_avg_pool3d(features.permute(0, 4, 1, 2, 3), self.pool_grid)
        return pooled.flatten(2).transpose(1, 2)

    def forward(self, frames: Tensor) -> Tensor:
        return self.projector(self.pool(self.encode_frames(frames)))
