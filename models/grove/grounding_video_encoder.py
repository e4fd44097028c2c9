"""Grounding video encoder V_g: SAM's ViT image encoder at 512 px with spatio-temporal adapters.

SAM was trained at 1024 px; 8 frames at that size do not fit in memory, so the encoder runs at
512 px with its absolute positional embedding bilinearly interpolated (64x64 -> 32x32 grid for
ViT-H) and fine-tuned (paper, supp. C). The backbone is built at the pretraining size so the
checkpoint loads shape-for-shape (the global-attention blocks' relative position tables are
resized on the fly by SAM itself), then the positional embedding is replaced. Adapters follow each
global-attention block; the blocks run here so the adapters can sit between them.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility before segment_anything imports it)

from functools import partial

import torch
import torch.nn.functional as F
from segment_anything.modeling import ImageEncoderViT
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from models.grove.adapters import SpatioTemporalAdapter
from models.grove.configuration import GroundingEncoderConfig, load_weights, require_path

CHECKPOINT_KEY = "model.grounding_encoder.checkpoint"
SAM_VARIANTS = {
    "vit_h": {"embed_dim": 1280, "depth": 32, "num_heads": 16, "global_attn_indexes": (7, 15, 23, 31)},
    "vit_l": {"embed_dim": 1024, "depth": 24, "num_heads": 16, "global_attn_indexes": (5, 11, 17, 23)},
    "vit_b": {"embed_dim": 768, "depth": 12, "num_heads": 12, "global_attn_indexes": (2, 5, 8, 11)},
}
_SAM_COMMON = {"patch_size": 16, "out_chans": 256, "window_size": 14, "mlp_ratio": 4.0}


def interpolate_pos_embed(pos: Tensor, new_hw: tuple[int, int]) -> Tensor:
    """Bilinearly resample a ``(1, H, W, C)`` positional-embedding grid to ``(1, h, w, C)``.

    ``align_corners=False`` treats embeddings as values at patch centres, so halving the grid
    averages 2x2 neighbourhoods exactly.
    """
    if tuple(pos.shape[1:3]) == tuple(new_hw):
        return pos.clone()
    grid = pos.permute(0, 3, 1, 2).float()
    grid = F.interpolate(grid, size=tuple(new_hw), mode="bilinear", align_corners=False)
    return grid.permute(0, 2, 3, 1).to(pos.dtype)


def sincos_pos_embed(hw: tuple[int, int], dim: int) -> Tensor:
    """2D sine-cosine positional embedding ``(1, h, w, dim)`` (MAE's; SAM's encoder descends from MAE).

    Half the channels encode the row, half the column, each as sin/cos pairs at geometric
    frequencies; values lie in [-1, 1], so positions are as loud as the patch content from step 0.
    """
    if dim % 4:
        raise ValueError(f"model.grounding_encoder: embed_dim {dim} must be a multiple of 4 for sin-cos positions")
    h, w = hw
    omega = 1.0 / 10000 ** (torch.arange(dim // 4, dtype=torch.float64) / (dim // 4))
    rows = torch.arange(h, dtype=torch.float64)[:, None] * omega  # (h, dim/4)
    cols = torch.arange(w, dtype=torch.float64)[:, None] * omega  # (w, dim/4)
    row_part = torch.cat((rows.sin(), rows.cos()), dim=1)[:, None, :].expand(h, w, dim // 2)
    col_part = torch.cat((cols.sin(), cols.cos()), dim=1)[None, :, :].expand(h, w, dim // 2)
    return torch.cat((row_part, col_part), dim=2).unsqueeze(0).float()


def encoder_sizes(config: GroundingEncoderConfig) -> dict:
    """SAM's sizes for ``variant``, overridden by ``encoder_config``; unknown keys are errors."""
    if config.variant not in SAM_VARIANTS:
        raise ValueError(f"model.grounding_encoder.variant: {config.variant!r} is not one of {sorted(SAM_VARIANTS)}")
    sizes = {**_SAM_COMMON, **SAM_VARIANTS[config.variant]}
    overrides = dict(config.encoder_config or {})
    unknown = sorted(set(overrides) - set(sizes))
    if unknown:
        raise ValueError(f"model.grounding_encoder.encoder_config: unknown keys {unknown}; allowed {sorted(sizes)}")
    sizes.update(overrides)
    sizes["global_attn_indexes"] = tuple(int(i) for i in sizes["global_attn_indexes"])
    if any(not 0 <= i < sizes["depth"] for i in sizes["global_attn_indexes"]):
        raise ValueError(f"model.grounding_encoder: global_attn_indexes {sizes['global_attn_indexes']} "
                         f"outside a depth-{sizes['depth']} encoder")
    return sizes


def resize_rel_pos(table: Tensor, length: int) -> Tensor:
    """Linearly resample a ``(L, C)`` relative-position table to ``length`` rows (SAM's ``get_rel_pos`` rule)."""
    if table.shape[0] == length:
        return table
    resized = F.interpolate(table.float().t().unsqueeze(0), size=length, mode="linear")
    return resized.squeeze(0).t().to(table.dtype)


def resize_position_tables(state: dict[str, Tensor], backbone: ImageEncoderViT) -> dict[str, Tensor]:
    """Checkpoint position tables resized to the built encoder's (a 1024-px SAM into a 512-px encoder).

    The absolute embedding is resampled bilinearly, the relative tables linearly; tables that
    already match are left as they are. Other keys pass through untouched.
    """
    target = backbone.state_dict(keep_vars=True)
    out = dict(state)
    for key, value in state.items():
        want = target.get(key)
        if want is None or tuple(value.shape) == tuple(want.shape):
            continue
        if key == "pos_embed" and value.dim() == 4:
            out[key] = interpolate_pos_embed(value, tuple(want.shape[1:3]))
        elif key.endswith((".attn.rel_pos_h", ".attn.rel_pos_w")) and value.dim() == 2:
            out[key] = resize_rel_pos(value, want.shape[0])
    return out


def load_sam_image_encoder(backbone: ImageEncoderViT, path: str | None) -> None:
    """Load ``image_encoder.*`` weights of an official SAM checkpoint (or a bare encoder state dict).

    Position tables are resized to the encoder's build size (:func:`resize_position_tables`).
    """
    location = require_path(path, CHECKPOINT_KEY)
    raw = load_weights(location, CHECKPOINT_KEY)
    prefix = "image_encoder."
    state = {k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)} if any(
        k.startswith(prefix) for k in raw) else raw
    state = resize_position_tables(state, backbone)
    try:
        missing, unexpected = backbone.load_state_dict(state, strict=False)
    except RuntimeError as err:  # shape mismatches
        raise ValueError(f"{CHECKPOINT_KEY}: {location} does not match the SAM image encoder: {err}") from err
    if missing or unexpected:
        raise ValueError(f"{CHECKPOINT_KEY}: {location} does not match the SAM image encoder "
                         f"(missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                         f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''})")


class GroundingVideoEncoder(nn.Module):
    """Frames ``(B, T, 3, S, S)`` (SAM-normalised, padded) -> features ``(B, T, out_chans, S/16, S/16)``.

    The trainable positional embedding is ``backbone.pos_embed`` (``(1, S/16, S/16, embed_dim)``).
    """

    def __init__(self, config: GroundingEncoderConfig):
        super().__init__()
        self.config = config
        sizes = encoder_sizes(config)
        patch = int(sizes["patch_size"])
        if config.image_size % patch or config.pretrain_image_size % patch:
            raise ValueError(f"model.grounding_encoder: image sizes {config.image_size}/{config.pretrain_image_size} "
                             f"must be multiples of the patch size {patch}")
        self.global_attn_indexes = sizes["global_attn_indexes"]
        self.backbone = ImageEncoderViT(
            img_size=config.pretrain_image_size, patch_size=patch, embed_dim=int(sizes["embed_dim"]),
            depth=int(sizes["depth"]), num_heads=int(sizes["num_heads"]), mlp_ratio=float(sizes["mlp_ratio"]),
            out_chans=int(sizes["out_chans"]), qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6),
            use_rel_pos=True, window_size=int(sizes["window_size"]), global_attn_indexes=self.global_attn_indexes,
        )
        if config.checkpoint is not None:
            load_sam_image_encoder(self.backbone, config.checkpoint)
        else:
            # SAM's own init is zeros (its weights came from MAE, whose positions are a fixed
            # sin-cos table). A small random init (std 0.02) would be 20x quieter than the patch
            # content, and the box decoder reads positions only through the features: a random
            # model then sits on the "mean box" for hundreds of steps.
            with torch.no_grad():
                grid_hw = tuple(self.backbone.pos_embed.shape[1:3])
                self.backbone.pos_embed.copy_(sincos_pos_embed(grid_hw, self.backbone.pos_embed.shape[-1]))
        grid = config.image_size // patch
        with torch.no_grad():
            pos = interpolate_pos_embed(self.backbone.pos_embed.detach(), (grid, grid))
        self.backbone.pos_embed = nn.Parameter(pos)
        self.backbone.img_size = config.image_size
        self.grid_size = grid
        self.out_chans = int(sizes["out_chans"])
        width = int(sizes["embed_dim"])
        kernel = config.adapter_kernel
        self.adapters = nn.ModuleList(
            SpatioTemporalAdapter(width, kernel) for _ in (self.global_attn_indexes if config.adapters else ()))
        self.adapter_positions = {block: slot for slot, block in enumerate(self.global_attn_indexes)} \
            if config.adapters else {}

    @property
    def pos_embed(self) -> nn.Parameter:
        return self.backbone.pos_embed

    def global_rel_pos_parameters(self) -> list[nn.Parameter]:
        """The relative position tables of the global-attention blocks (sized by the image grid)."""
        return [p for i in self.global_attn_indexes
                for p in (self.backbone.blocks[i].attn.rel_pos_h, self.backbone.blocks[i].attn.rel_pos_w)]

    def _block(self, block: nn.Module, x: Tensor) -> Tensor:
        if self.config.gradient_checkpointing and torch.is_grad_enabled() and x.requires_grad:
            return checkpoint(block, x, use_reentrant=False)
        return block(x)

    def forward(self, frames: Tensor) -> Tensor:
        if frames.dim() != 5:
            raise ValueError(f"grounding frames must be (B, T, 3, S, S), got shape {tuple(frames.shape)}")
        b, t = frames.shape[:2]
        if tuple(frames.shape[-2:]) != (self.config.image_size,) * 2:
            raise ValueError(f"grounding frames are {tuple(frames.shape[-2:])} px but "
                             f"model.grounding_encoder.image_size is {self.config.image_size}")
        enc = self.backbone
        x = enc.patch_embed(frames.flatten(0, 1).to(enc.patch_embed.proj.weight.dtype)) + enc.pos_embed
        for index, block in enumerate(enc.blocks):
            x = self._block(block, x)
            slot = self.adapter_positions.get(index)
            if slot is not None:
                x = self.adapters[slot](x, t)
        features = enc.neck(x.permute(0, 3, 1, 2))
        return features.reshape(b, t, *features.shape[1:])
