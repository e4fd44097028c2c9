"""Box decoder D: SAM's mask-decoder transformer turned into a per-frame [DET]-query decoder.

Each [DET] embedding (after LQ) is a query; the grounding features of ONE frame, plus SAM's dense
random-Fourier positional encoding, are the keys/values, and the same query is decoded against
every frame of the clip (frame-wise cross-attention). The output is one embedding per
(frame, phrase), which the heads turn into a box and an objectness logit.

Every (query, frame) pair is decoded as its own sequence - SAM's learned IoU/mask output tokens
followed by the query - exactly as the public code feeds each [DET] to SAM's mask decoder as a
separate sparse prompt. TwoWayTransformer's self-attention therefore never mixes phrases: a
padded phrase slot cannot change a valid one, and padded slots are simply not decoded (their
outputs are zeros). All pairs of the batch are decoded in one transformer call.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility before segment_anything imports it)

import torch
from segment_anything.modeling import TwoWayTransformer
from torch import Tensor, nn

from models.grove.configuration import DecoderConfig, load_weights, require_path
from models.grove.fp32_buffers import Fp32PositionEmbeddingRandom

CHECKPOINT_KEY = "model.decoder.checkpoint"
SAM_NUM_OUTPUT_TOKENS = 5  # SAM's IoU token + 4 mask tokens


class BoxDecoder(nn.Module):
    """``features (B, T, dim, h, w)`` x ``queries (B, P, dim)`` -> ``(B, T, P, dim)``."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.config = config
        if config.dim % 2:
            raise ValueError(f"model.decoder.dim must be even (Fourier positional encoding), got {config.dim}")
        self.transformer = TwoWayTransformer(depth=config.depth, embedding_dim=config.dim,
                                             num_heads=config.num_heads, mlp_dim=config.mlp_dim)
        self.pe_layer = Fp32PositionEmbeddingRandom(config.dim // 2)  # fp32 in every model dtype
        # SAM adds its "no mask" dense prompt embedding to the image features when no mask is given.
        self.no_mask_embed = nn.Parameter(torch.randn(config.dim) * 0.02)
        self.output_tokens = nn.Parameter(torch.randn(SAM_NUM_OUTPUT_TOKENS, config.dim)) \
            if config.sam_output_tokens else None
        if config.checkpoint is not None:
            self.load_sam_decoder(config.checkpoint)

    @property
    def dim(self) -> int:
        return self.config.dim

    def load_sam_decoder(self, path: str) -> None:
        """Initialise from an official SAM checkpoint (``mask_decoder.*`` and ``prompt_encoder.*``)."""
        location = require_path(path, CHECKPOINT_KEY)
        raw = load_weights(location, CHECKPOINT_KEY)
        prefix = "mask_decoder.transformer."
        state = {k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)}
        if not state:
            raise ValueError(f"{CHECKPOINT_KEY}: {location} holds no '{prefix}*' weights (not a SAM checkpoint?)")
        try:
            self.transformer.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise ValueError(f"{CHECKPOINT_KEY}: {location} does not match the decoder sizes "
                             f"(model.decoder dim/depth/num_heads/mlp_dim): {err}") from err
        with torch.no_grad():
            gaussian = raw.get("prompt_encoder.pe_layer.positional_encoding_gaussian_matrix")
            if gaussian is not None:
                self.pe_layer.positional_encoding_gaussian_matrix.copy_(gaussian)
            no_mask = raw.get("prompt_encoder.no_mask_embed.weight")
            if no_mask is not None:
                self.no_mask_embed.copy_(no_mask.reshape(-1))
            iou, masks = raw.get("mask_decoder.iou_token.weight"), raw.get("mask_decoder.mask_tokens.weight")
            if self.output_tokens is not None and iou is not None and masks is not None:
                self.output_tokens.copy_(torch.cat((iou, masks), dim=0))

    def dense_pe(self, hw: tuple[int, int], like: Tensor) -> Tensor:
        """SAM's positional encoding of the feature grid: ``(1, dim, h, w)``, computed in fp32, then cast to
        ``like``'s dtype (:mod:`models.grove.fp32_buffers`)."""
        return self.pe_layer(hw).unsqueeze(0).to(like.dtype)

    def forward(self, features: Tensor, queries: Tensor, phrase_mask: Tensor | None = None) -> Tensor:
        if features.dim() != 5 or queries.dim() != 3:
            raise ValueError(f"expected features (B, T, C, h, w) and queries (B, P, C), got "
                             f"{tuple(features.shape)} and {tuple(queries.shape)}")
        b, t, c, h, w = features.shape
        p = queries.shape[1]
        valid = torch.ones(b, p, dtype=torch.bool, device=queries.device) if phrase_mask is None else phrase_mask
        batch_index, phrase_index = valid.nonzero(as_tuple=True)
        n = batch_index.numel()
        if n == 0:  # no phrase at all: zeros, still connected to the graph
            return features.new_zeros(b, t, p, c) + 0 * queries.sum()
        src = features[batch_index].flatten(0, 1) + self.no_mask_embed.to(features.dtype).view(1, c, 1, 1)
        tokens = queries[batch_index, phrase_index].to(features.dtype).unsqueeze(1)  # (n, 1, c)
        tokens = tokens.unsqueeze(1).expand(n, t, 1, c).reshape(n * t, 1, c)
        if self.output_tokens is not None:
            lead = self.output_tokens.to(tokens.dtype).unsqueeze(0).expand(n * t, -1, -1)
            tokens = torch.cat((lead, tokens), dim=1)
        pos = self.dense_pe((h, w), src).expand(n * t, -1, -1, -1)
        decoded, _ = self.transformer(src, pos, tokens)
        decoded = decoded[:, -1].reshape(n, t, c)
        out = decoded.new_zeros(b, p, t, c).index_put((batch_index, phrase_index), decoded)
        return out.permute(0, 2, 1, 3)
