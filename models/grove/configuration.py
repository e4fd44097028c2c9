"""Configuration of GROVE's parts as plain dataclasses.

They are the ``model`` init arguments the CLI reads from YAML, so every field is a plain typed
value. The defaults describe the paper's model (CLIP ViT-L/14-336, SAM ViT-H at 512 px, Vicuna-7B,
SAM's two-way decoder); :func:`tiny_configs` gives a CPU-sized model built from the same classes.
"""
from __future__ import annotations

from core.dict_merge import merge_dicts

from dataclasses import dataclass, field
from pathlib import Path

import torch


@dataclass
class GlobalEncoderConfig:
    """Global video encoder V_c: an open_clip ViT with spatio-temporal adapters, pooling and VL.

    ``vision_config`` is an open_clip ``vision_cfg`` dict (``width``, ``layers``, ``patch_size``,
    ``image_size``, ...) for a custom (tiny) tower; when set, ``model_name`` is ignored.
    ``checkpoint`` is a local file or folder with open_clip, OpenAI-CLIP (JIT) or Hugging Face
    CLIP weights. ``feature_layer`` indexes the hidden-state list as LLaVA does (0 = patch
    embeddings, i = output of block i, -2 = the second-last block's output).

    Adapters sit after the 0-based blocks ``adapter_blocks`` when given (the released GROVE:
    ``[0, 3, 6, ..., 21]``), else after every ``adapter_every``-th block (blocks 2, 5, 8, ...).
    ``adapter_grid_rows`` lays a frame's patch tokens out as ``rows x (N / rows)`` for the
    adapters' 3D convolution; ``None`` uses the true square patch grid (24 x 24 for ViT-L/14 at
    336 px). The released GROVE reshapes with 16 rows (a 16 x 36 layout of the 24 x 24 grid, so
    the convolution's vertical neighbours are not the image's): set 16 to load its adapters.
    """

    model_name: str = "ViT-L-14-336"
    vision_config: dict | None = None
    checkpoint: str | None = None
    image_size: int = 336
    adapter_every: int = 3
    pool_grid: tuple[int, int, int] = (8, 8, 9)
    adapter_kernel: tuple[int, int, int] = (3, 3, 3)
    feature_layer: int = -2
    adapters: bool = True
    adapter_blocks: list[int] | None = None
    adapter_grid_rows: int | None = None
    quick_gelu: bool = True
    gradient_checkpointing: bool = False


@dataclass
class GroundingEncoderConfig:
    """Grounding video encoder V_g: SAM's ViT image encoder with adapters after global attention.

    ``variant`` picks SAM's published sizes (``vit_h``, ``vit_l``, ``vit_b``); ``encoder_config``
    overrides them for tiny models (keys: ``embed_dim``, ``depth``, ``num_heads``,
    ``global_attn_indexes``, ``patch_size``, ``out_chans``, ``window_size``, ``mlp_ratio``).
    The encoder is built at ``pretrain_image_size`` (so checkpoint shapes match), then its
    absolute positional embedding is interpolated to the ``image_size`` grid and kept trainable.
    With ``pretrain_image_size == image_size`` the encoder is built at the working size, as the
    released GROVE does (SAM ViT-H at 512 px: ``pos_embed`` 32 x 32, global blocks' relative
    position tables of 63 rows); a checkpoint at another size then has its absolute (bilinear)
    and relative (linear, as SAM's ``get_rel_pos``) position tables resized when it loads.
    """

    variant: str = "vit_h"
    encoder_config: dict | None = None
    checkpoint: str | None = None
    image_size: int = 512
    pretrain_image_size: int = 1024
    adapters: bool = True
    adapter_kernel: tuple[int, int, int] = (3, 3, 3)
    gradient_checkpointing: bool = False


@dataclass
class LanguageModelConfig:
    """The LLM (Vicuna-7B in the paper) and its tokenizer.

    ``path`` is a local Hugging Face folder; with ``path`` unset, ``llama_config`` (LlamaConfig
    kwargs) builds a randomly initialised LLaMA. ``tokenizer_path`` defaults to ``path``; with
    neither set, the project's tiny byte-level BPE tokenizer is built (once) under the data dir.
    ``lora_r > 0`` injects LoRA adapters (peft) into ``lora_target_modules``.

    ``special_tokens``: ``compact`` adds GROVE's own four tokens (``[DET]``, ``<p>``, ``</p>`` and
    a ``<vid>`` placeholder repeated once per video token); ``official`` reproduces the released
    vocabulary: GLaMM's seven tokens then ``<vid_start>``, ``<vid_end>``, ``[DET]`` (ids
    32000..32009 after LLaMA's 32000), the video marked by one out-of-vocabulary placeholder id
    that expands to the video tokens, as LLaVA does. ``query_token``: the [DET] query is the
    last hidden state at ``det`` (the [DET] token) or at ``before_det`` (the token before it,
    as the released code takes it). ``tiny_vocab_size`` sizes the offline tokenizer
    built when neither ``path`` nor ``tokenizer_path`` is set (before GROVE's tokens are added).
    ``pretrained_weights=False`` builds ``path``'s architecture from its config.json without
    reading its weights (set by the CLI when a checkpoint provides every weight).
    """

    path: str | None = None
    llama_config: dict | None = None
    tokenizer_path: str | None = None
    lora_r: int = 0
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
    torch_dtype: str = "float32"
    attn_implementation: str | None = None
    gradient_checkpointing: bool = False
    special_tokens: str = "compact"
    query_token: str = "det"
    tiny_vocab_size: int = 1536
    pretrained_weights: bool = True


@dataclass
class DecoderConfig:
    """Box decoder D: SAM's two-way transformer with [DET] queries, plus the prediction heads.

    ``checkpoint`` is a SAM ``.pth``; its ``mask_decoder.transformer.*`` weights (and SAM's output
    tokens, no-mask embedding and random-Fourier positional encoding) initialise the decoder.
    ``sam_output_tokens`` prepends SAM's learned IoU and mask tokens to each query, as the public
    code does by feeding each [DET] embedding to SAM's mask decoder as a sparse prompt.
    """

    dim: int = 256
    depth: int = 2
    num_heads: int = 8
    mlp_dim: int = 2048
    checkpoint: str | None = None
    use_objectness: bool = True
    sam_output_tokens: bool = True


def tiny_configs() -> dict:
    """A CPU-sized GROVE (same classes, tiny widths) for tests and the demo.

    Returns ``Grove`` keyword arguments: ``global_encoder``, ``grounding_encoder``,
    ``language_model``, ``decoder``. The same values belong in ``configs/demo.yaml``.
    """
    return {
        "global_encoder": GlobalEncoderConfig(
            vision_config={"image_size": 64, "layers": 6, "width": 64, "head_width": 16, "patch_size": 16},
            image_size=64, adapter_every=3, pool_grid=(4, 2, 2), quick_gelu=False,
        ),
        "grounding_encoder": GroundingEncoderConfig(
            encoder_config={"embed_dim": 64, "depth": 4, "num_heads": 4, "global_attn_indexes": [1, 3],
                            "patch_size": 16, "out_chans": 64, "window_size": 4},
            image_size=128, pretrain_image_size=128,
        ),
        "language_model": LanguageModelConfig(
            llama_config={"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                          "num_key_value_heads": 4, "intermediate_size": 256, "max_position_embeddings": 512,
                          "tie_word_embeddings": False},
        ),
        "decoder": DecoderConfig(dim=64, depth=2, num_heads=4, mlp_dim=128),
    }


def paper_configs(clip_checkpoint: str | None = None, sam_checkpoint: str | None = None,
                  llm_path: str | None = None) -> dict:
    """The paper's sizes. Without ``llm_path`` the LLM is a LLaMA-7B-shaped random model."""
    llama_7b = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000,
                "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
    return {
        "global_encoder": GlobalEncoderConfig(checkpoint=clip_checkpoint),
        "grounding_encoder": GroundingEncoderConfig(checkpoint=sam_checkpoint),
        "language_model": LanguageModelConfig(path=llm_path, llama_config=None if llm_path else llama_7b),
        "decoder": DecoderConfig(checkpoint=sam_checkpoint),
    }


def read_stacked_yaml(paths: list[str | Path]) -> dict:
    """The merged YAML of stacked ``cli.py`` configs: later files override earlier ones key by key
    (:func:`core.dict_merge.merge_dicts`; lists are replaced, not merged), as ``cli.py --config a.yaml
    --config b.yaml`` does. The command line's parser needs Lightning, which ``models`` does not
    import; ``tests/models/test_configs.py`` checks that both give the same part configs for every
    stack of the project's configs."""
    import yaml

    merged: dict = {}
    for path in paths:
        loaded = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: a config must be a YAML mapping")
        merged = merge_dicts(merged, loaded)
    return merged


PART_CONFIGS = {"global_encoder": GlobalEncoderConfig, "grounding_encoder": GroundingEncoderConfig,
                "language_model": LanguageModelConfig, "decoder": DecoderConfig}


def part_configs(init_args: dict, source: str = "config") -> dict:
    """The four part dataclasses from a GroveModule's ``init_args``; unknown keys are errors naming ``source``."""
    out = {}
    for name, cls in PART_CONFIGS.items():
        values = dict(init_args.get(name) or {})
        unknown = sorted(set(values) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"{source}: model.init_args.{name} has unknown keys {unknown}")
        for key in ("pool_grid", "adapter_kernel"):
            if key in values:
                values[key] = tuple(values[key])
        out[name] = cls(**values)
    return out


def model_configs_from_yaml(paths: list[str | Path]) -> dict:
    """``Grove`` keyword arguments (the four part configs) from stacked ``cli.py`` YAML configs."""
    merged = read_stacked_yaml(paths)
    return part_configs((merged.get("model") or {}).get("init_args") or {}, ", ".join(map(str, paths)))


def require_path(path: str | None, key: str) -> Path:
    """The local file or folder a config key names; a clear error when it is missing."""
    if path is None or not Path(path).expanduser().exists():
        raise FileNotFoundError(
            f"{key}: {path!r} does not exist. See the README section 'Pretrained weights' for how to "
            f"obtain it, then set {key} (in the config or as --{key.replace('model.', 'model.init_args.', 1)}=PATH)")
    return Path(path).expanduser()


def load_weights(path: str | Path, key: str) -> dict[str, torch.Tensor]:
    """A state dict from ``.safetensors``, a ``torch.save`` file or a TorchScript archive (OpenAI's CLIP
    releases), read by :func:`core.weights.load_state_dict_file` (tensors only, no code run); a
    ``{"state_dict": ...}`` wrapper and a ``module.`` prefix are removed. ``key`` names the config
    entry in error messages."""
    from core.weights import load_state_dict_file

    obj = load_state_dict_file(path, key)
    return {(k[len("module."):] if k.startswith("module.") else k): v for k, v in obj.items()}
