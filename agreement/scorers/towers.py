"""CLIP-style image and text towers from local files, behind one small interface the embedding
scores use: unit-free image embeddings, caption (EOS) embeddings and per-token embeddings.

Two backends: open_clip (a named architecture or a custom ``{embed_dim, vision_cfg, text_cfg}``
config, weights from an open_clip / OpenAI-CLIP / PAC-S checkpoint file) and Hugging Face
``transformers`` CLIP (a local folder, or a ``CLIPConfig`` dict for random towers). Nothing is
downloaded; weights are read with :func:`core.weights.load_state_dict_file` (no code run).

Spec (a dict in the agreement config)::

    {open_clip: ViT-B-32, checkpoint: path/to/weights.pt}        # named architecture + weights
    {open_clip_config: {embed_dim: 16, vision_cfg: {...}, text_cfg: {...}}, seed: 0}   # random tower
    {hf_clip: path/to/clip-vit-base-patch32}                       # transformers folder
    {hf_clip_config: {text_config: {...}, vision_config: {...}}, seed: 0}

Tokens are CLIP's BPE (open_clip's tokenizer; the OpenAI CLIP vocabulary, which the Hugging Face
CLIP checkpoints share), truncated to the tower's context with the EOS token kept last.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility before open_clip imports it)
from core.weights import load_state_dict_file

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


class TowerSpecError(ValueError):
    """A tower spec in the agreement config is malformed; the message names the key."""


def _unwrap_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """PAC-S checkpoints keep the model under ``state_dict``; DDP saves prefix ``module.``."""
    nested = {k[len("state_dict."):]: v for k, v in state.items() if k.startswith("state_dict.")}
    state = nested or state
    if state and all(k.startswith("module.") for k in state):
        state = {k[len("module."):]: v for k, v in state.items()}
    return state


class ClipTowers:
    """An image tower and a text tower sharing one embedding space."""

    def __init__(self, backend: str, model: torch.nn.Module, image_size: int, context_length: int,
                 mean=OPENAI_MEAN, std=OPENAI_STD, device: str = "cpu"):
        import open_clip

        self.backend = backend
        self.model = model.to(device).eval().requires_grad_(False)
        self.image_size = int(image_size)
        self.context_length = int(context_length)
        self.tokenizer = open_clip.tokenizer.SimpleTokenizer(context_length=self.context_length)
        self.eos_id = self.tokenizer.eot_token_id
        self.mean = torch.tensor(mean).view(1, 3, 1, 1)
        self.std = torch.tensor(std).view(1, 3, 1, 1)
        self.device = device

    # -- inputs -------------------------------------------------------------------------------
    def preprocess(self, frames: np.ndarray) -> torch.Tensor:
        """``(T, H, W, 3)`` uint8 frames -> ``(T, 3, S, S)``: shorter side to S (bicubic), centre crop, normalise."""
        x = torch.as_tensor(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float() / 255.0
        h, w = x.shape[-2:]
        scale = self.image_size / min(h, w)
        size = (max(self.image_size, round(h * scale)), max(self.image_size, round(w * scale)))
        x = F.interpolate(x, size=size, mode="bicubic", align_corners=False, antialias=True).clamp(0, 1)
        top, left = (size[0] - self.image_size) // 2, (size[1] - self.image_size) // 2
        x = x[..., top:top + self.image_size, left:left + self.image_size]
        return (x - self.mean) / self.std

    def tokenize(self, captions: list[str]) -> torch.Tensor:
        return self.tokenizer(captions)

    # -- embeddings ---------------------------------------------------------------------------
    @torch.no_grad()
    def encode_frames(self, frames: np.ndarray, batch_size: int = 64) -> torch.Tensor:
        """``(T, D)`` embeddings of ``(T, H, W, 3)`` frames (not normalised)."""
        pixels = self.preprocess(frames)
        out = [self._encode_pixels(pixels[i:i + batch_size].to(self.device)) for i in range(0, len(pixels), batch_size)]
        return torch.cat(out).float().cpu()

    @torch.no_grad()
    def encode_tokens(self, captions: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-token embeddings ``(N, L, D)`` after the final norm and projection, the token ids
        ``(N, L)`` and the mask of SOS..EOS ``(N, L)``; the caption embedding is the EOS row."""
        ids = self.tokenize(captions).to(self.device)
        hidden = self._token_states(ids)
        eos = (ids == self.eos_id).int().argmax(-1)
        mask = torch.arange(ids.shape[1], device=ids.device)[None] <= eos[:, None]
        return hidden.float().cpu(), ids.cpu(), mask.cpu()

    def encode_text(self, captions: list[str]) -> torch.Tensor:
        """``(N, D)`` caption embeddings (the EOS token's)."""
        tokens, ids, mask = self.encode_tokens(captions)
        eos = mask.sum(-1) - 1
        return tokens[torch.arange(len(captions)), eos]

    # -- backends -----------------------------------------------------------------------------
    def _encode_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        if self.backend == "open_clip":
            return self.model.encode_image(pixels)
        out = self.model.vision_model(pixel_values=pixels)
        return self.model.visual_projection(out.pooler_output)

    def _token_states(self, ids: torch.Tensor) -> torch.Tensor:
        if self.backend == "open_clip":
            m = self.model
            cast = m.transformer.get_cast_dtype() if hasattr(m.transformer, "get_cast_dtype") else torch.float32
            x = m.token_embedding(ids).to(cast) + m.positional_embedding[: ids.shape[1]].to(cast)
            x = m.transformer(x, attn_mask=m.attn_mask[: ids.shape[1], : ids.shape[1]])
            x = m.ln_final(x)
            return x @ m.text_projection if isinstance(m.text_projection, torch.Tensor) else m.text_projection(x)
        eos = (ids == self.eos_id).int().argmax(-1)
        attention = (torch.arange(ids.shape[1], device=ids.device)[None] <= eos[:, None]).long()
        out = self.model.text_model(input_ids=ids, attention_mask=attention)
        return self.model.text_projection(out.last_hidden_state)


def _seeded(seed: int):
    torch.manual_seed(int(seed))


def load_towers(spec: Mapping[str, Any], key: str, device: str = "cpu") -> ClipTowers:
    """Towers from a spec (module docstring); ``key`` names the config entry in errors."""
    import open_clip

    if not isinstance(spec, Mapping):
        raise TowerSpecError(f"{key}: expected a mapping (open_clip / open_clip_config / hf_clip / hf_clip_config)")
    if "open_clip_config" in spec:
        cfg = dict(spec["open_clip_config"])
        _seeded(spec.get("seed", 0))
        model = open_clip.CLIP(**cfg)
        vision = cfg.get("vision_cfg", {})
        text = cfg.get("text_cfg", {})
        return ClipTowers("open_clip", model, vision.get("image_size", 224), text.get("context_length", 77),
                          device=device)
    if "open_clip" in spec:
        name = str(spec["open_clip"])
        cfg = open_clip.get_model_config(name)
        if cfg is None:
            raise TowerSpecError(f"{key}.open_clip: {name!r} is not an open_clip architecture "
                                 "(open_clip.list_models())")
        checkpoint = spec.get("checkpoint")
        if not checkpoint:
            raise TowerSpecError(f"{key}.checkpoint: a local weight file is required for {name}")
        model = open_clip.create_model(name, pretrained=None)
        state = _unwrap_state(load_state_dict_file(checkpoint, key=f"{key}.checkpoint"))
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [k for k in missing if k != "logit_bias"]
        if missing or [k for k in unexpected if k not in ("input_resolution", "context_length", "vocab_size")]:
            raise TowerSpecError(f"{key}.checkpoint: {checkpoint} does not match open_clip {name} "
                                 f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
        return ClipTowers("open_clip", model, cfg["vision_cfg"].get("image_size", 224),
                          cfg["text_cfg"].get("context_length", 77), device=device)
    if "hf_clip_config" in spec or "hf_clip" in spec:
        from transformers import CLIPConfig, CLIPModel

        if "hf_clip_config" in spec:
            _seeded(spec.get("seed", 0))
            config = CLIPConfig(**dict(spec["hf_clip_config"]))
            model = CLIPModel(config)
        else:
            folder = Path(spec["hf_clip"])
            if not (folder / "config.json").is_file():
                raise TowerSpecError(f"{key}.hf_clip: {folder} is not a local transformers CLIP folder "
                                     "(no config.json)")
            model = CLIPModel.from_pretrained(str(folder), local_files_only=True)
        return ClipTowers("hf_clip", model, model.config.vision_config.image_size,
                          model.config.text_config.max_position_embeddings, device=device)
    raise TowerSpecError(f"{key}: needs one of open_clip, open_clip_config, hf_clip, hf_clip_config; "
                         f"got {sorted(spec)}")
