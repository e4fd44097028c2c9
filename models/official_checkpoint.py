"""The released GROVE checkpoints (``GROVEForCausalLM`` state dicts) in this project's layout.

The released files are DeepSpeed ``zero_to_fp32.py`` outputs (one ``torch.save`` of an ordered
dict of tensors: frozen weights as trained, bf16; trainable ones fp32 views of one flat
storage) or a Hugging Face folder of the same keys. Every official key is either mapped onto
a parameter of :class:`models.grove.Grove` (one table, :data:`RENAMES`, plus the few keys that
merge or change shape) or on an explicit drop list (:data:`DROPPED`) with the reason; anything
else is an error that names the key. Shapes are checked against the model built on the meta
device, so a check never allocates the 8.4 B weights.

Grove parameters with no official counterpart are listed in :data:`PROJECT_ONLY` with the value
they get.
"""
from __future__ import annotations

from core.output_files import atomic_write
from core.weights import load_state_dict_file, read_safetensors_shapes

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import torch
from torch import Tensor

from models.global_video_encoder import hf_clip_vision_name

CLIP = "model.vision_tower.vision_tower.vision_model."
SAM = "model.grounding_encoder."

# (official key pattern, project key template): applied in order, first match wins.
RENAMES: tuple[tuple[str, str], ...] = (
    (rf"^{re.escape(CLIP)}encoder\.adapters\.(\d+)\.conv3d\.(weight|bias)$", r"global_encoder.adapters.\1.conv.\2"),
    (rf"^{re.escape(CLIP)}encoder\.adapters\.(\d+)\.alpha$", r"global_encoder.adapters.\1.alpha"),
    (r"^model\.mm_projector\.(0|2)\.(weight|bias)$", r"global_encoder.projector.\1.\2"),
    (r"^model\.embed_tokens\.weight$", r"language_model.model.model.embed_tokens.weight"),
    (r"^model\.layers\.(.+)$", r"language_model.model.model.layers.\1"),
    (r"^model\.norm\.weight$", r"language_model.model.model.norm.weight"),
    (r"^lm_head\.weight$", r"language_model.model.lm_head.weight"),
    (rf"^{re.escape(SAM)}image_encoder\.adapters\.(\d+)\.conv3d\.(weight|bias)$",
     r"grounding_encoder.adapters.\1.conv.\2"),
    (rf"^{re.escape(SAM)}image_encoder\.adapters\.(\d+)\.alpha$", r"grounding_encoder.adapters.\1.alpha"),
    (rf"^{re.escape(SAM)}image_encoder\.(.+)$", r"grounding_encoder.backbone.\1"),
    (rf"^{re.escape(SAM)}prompt_encoder\.pe_layer\.positional_encoding_gaussian_matrix$",
     r"box_decoder.pe_layer.positional_encoding_gaussian_matrix"),
    (rf"^{re.escape(SAM)}prompt_encoder\.no_mask_embed\.weight$", r"box_decoder.no_mask_embed"),
    (rf"^{re.escape(SAM)}mask_decoder\.transformer\.(.+)$", r"box_decoder.transformer.\1"),
    (rf"^{re.escape(SAM)}mask_decoder\.bbox_prediction_head\.(0|2)\.(weight|bias)$", r"box_head.mlp.\1.\2"),
    (rf"^{re.escape(SAM)}mask_decoder\.temporal_objectness_head\.(weight|bias)$", r"objectness_head.linear.\1"),
    (r"^model\.text_hidden_fcs\.0\.(0|2)\.(weight|bias)$", r"query_projector.\1.\2"),
)

# Official key prefixes that grounded captioning does not use, with the reason.
DROPPED: dict[str, str] = {
    "model.region_encoder.": "GLaMM's region encoder (region-level inputs; unused for grounded captioning)",
    f"{SAM}mask_decoder.output_upscaling.": "SAM's mask up-scaling (GROVE predicts boxes, not masks)",
    f"{SAM}mask_decoder.output_hypernetworks_mlps.": "SAM's mask hyper-network MLPs (no masks)",
    f"{SAM}mask_decoder.iou_prediction_head.": "SAM's mask-IoU head (no masks)",
    f"{SAM}prompt_encoder.point_embeddings.": "SAM's point/box prompt embeddings (the prompts are [DET] queries)",
    f"{SAM}prompt_encoder.not_a_point_embed.": "SAM's padding-point embedding (no point prompts)",
    f"{SAM}prompt_encoder.mask_downscaling.": "SAM's mask-prompt encoder (no mask prompts)",
}

# Grove parameters the released file does not hold, and what they are set to.
PROJECT_ONLY: dict[str, str] = {
    "global_encoder.backbone.proj": "zeros: CLIP's output projection, unused (GROVE reads patch features before it)",
}

MERGED_OUTPUT_TOKENS = (f"{SAM}mask_decoder.iou_token.weight", f"{SAM}mask_decoder.mask_tokens.weight")


@dataclass
class ConversionReport:
    """What became of every official key and every Grove parameter."""

    mapped: dict[str, list[str]] = field(default_factory=dict)  # project key -> official keys
    dropped: dict[str, list[str]] = field(default_factory=dict)  # reason -> official keys
    unaccounted: list[str] = field(default_factory=list)  # official keys with no rule
    missing: list[str] = field(default_factory=list)  # project keys nothing maps to
    filled: list[str] = field(default_factory=list)  # PROJECT_ONLY keys absent from the file
    mismatched: list[tuple[str, str, tuple, tuple]] = field(default_factory=list)  # (project, official, got, want)
    wrong_dtype: list[tuple[str, str, str, str]] = field(default_factory=list)  # (project, official, got, want)

    @property
    def ok(self) -> bool:
        return not (self.unaccounted or self.missing or self.mismatched or self.wrong_dtype)

    def table(self) -> str:
        """A plain-text summary: counts per outcome, then every problem by name."""
        official_mapped = sum(len(v) for v in self.mapped.values())
        rows = [("mapped", f"{official_mapped} official keys -> {len(self.mapped)} project tensors")]
        rows += [(f"dropped ({len(keys)})", reason) for reason, keys in self.dropped.items()]
        rows += [("filled", f"{key} ({PROJECT_ONLY[key]})") for key in self.filled]
        rows += [("UNACCOUNTED", key) for key in self.unaccounted]
        rows += [("MISSING", key) for key in self.missing]
        rows += [("SHAPE MISMATCH", f"{official} -> {key}: checkpoint gives {list(got)}, model needs {list(want)}")
                 for key, official, got, want in self.mismatched]
        rows += [("WRONG DTYPE", f"{official} -> {key}: checkpoint holds {got}, model needs {want} (quantised or "
                                 "integer weights are not converted)") for key, official, got, want in self.wrong_dtype]
        width = max(len(r[0]) for r in rows)
        lines = [f"{name.ljust(width)}  {text}" for name, text in rows]
        verdict = "OK: every official key is mapped or dropped, every model tensor is filled" if self.ok else (
            f"FAILED: {len(self.unaccounted)} unaccounted, {len(self.missing)} missing, "
            f"{len(self.mismatched)} shape mismatches, {len(self.wrong_dtype)} wrong dtypes")
        return "\n".join(lines + [verdict])


def drop_reason(key: str) -> str | None:
    return next((reason for prefix, reason in DROPPED.items() if key.startswith(prefix)), None)


def convert_official(official: Mapping[str, Tensor], target: Mapping[str, Tensor],
                     materialize: Callable[[Tensor], Tensor] = lambda t: t,
                     device: str | torch.device = "cpu") -> tuple[dict[str, Tensor], ConversionReport]:
    """Map an official state dict onto Grove's keys (``target``: Grove's state dict, real or meta).

    ``materialize`` is applied to each official tensor before use (e.g. ``.to("meta")`` for a
    shape-only check); :data:`PROJECT_ONLY` tensors are created on ``device``. Returns the
    converted tensors, cast to the target's dtypes, and the report.
    """
    report = ConversionReport()
    out: dict[str, Tensor] = {}
    qkv: dict[str, dict[str, tuple[str, Tensor]]] = {}
    tokens: dict[str, Tensor] = {}
    rules = [(re.compile(p), r) for p, r in RENAMES]
    for key, value in official.items():
        reason = drop_reason(key)
        if reason is not None:
            report.dropped.setdefault(reason, []).append(key)
            continue
        if key in MERGED_OUTPUT_TOKENS:
            tokens[key] = materialize(value)
            continue
        new = None
        if key.startswith(CLIP) and ".adapters." not in key:
            hit = hf_clip_vision_name(key[len(CLIP):])
            if hit is not None and hit[1] is not None:  # q/k/v: stacked below
                qkv.setdefault(f"global_encoder.backbone.{hit[0]}", {})[hit[1]] = (key, materialize(value))
                continue
            new = None if hit is None else f"global_encoder.backbone.{hit[0]}"
        else:
            for pattern, template in rules:
                if pattern.match(key):
                    new = pattern.sub(template, key)
                    break
        if new is None:
            report.unaccounted.append(key)
            continue
        tensor = materialize(value)
        if new.endswith(".alpha") or new == "box_decoder.no_mask_embed":
            want = target.get(new)
            if want is not None and tensor.numel() == want.numel():
                tensor = tensor.reshape(want.shape)  # official [1] / [1, C] vs Grove's [] / [C]
        out[new] = tensor
        report.mapped[new] = [key]
    for name, parts in qkv.items():  # open_clip keeps q, k, v stacked in one in_proj
        if set(parts) != {"q", "k", "v"}:
            report.unaccounted.extend(k for k, _ in parts.values())
            continue
        out[name] = torch.cat([parts[p][1] for p in "qkv"], dim=0)
        report.mapped[name] = [parts[p][0] for p in "qkv"]
    if tokens:
        if len(tokens) == 2 and "box_decoder.output_tokens" in target:
            out["box_decoder.output_tokens"] = torch.cat([tokens[k] for k in MERGED_OUTPUT_TOKENS], dim=0)
            report.mapped["box_decoder.output_tokens"] = list(MERGED_OUTPUT_TOKENS)
        else:
            report.unaccounted.extend(tokens)
    converted: dict[str, Tensor] = OrderedDict()
    for key, want in target.items():
        got = out.pop(key, None)
        if got is None:
            if key in PROJECT_ONLY:
                report.filled.append(key)
                converted[key] = torch.zeros(want.shape, dtype=want.dtype, device=device)
            else:
                report.missing.append(key)
            continue
        if tuple(got.shape) != tuple(want.shape):
            report.mismatched.append((key, " + ".join(report.mapped.pop(key)), tuple(got.shape), tuple(want.shape)))
            continue
        if want.is_floating_point() and not got.is_floating_point():  # a cast would turn codes into weights
            report.wrong_dtype.append((key, " + ".join(report.mapped.pop(key)), str(got.dtype).replace("torch.", ""),
                                       str(want.dtype).replace("torch.", "")))
            continue
        converted[key] = got.to(want.dtype)
    for key in out:  # mapped onto a name Grove does not have (e.g. an adapter this config lacks)
        report.unaccounted.extend(report.mapped.pop(key))
    return converted, report


def read_official(path: str | Path, shapes_only: bool = False) -> dict[str, Tensor]:
    """An official state dict from a ``.bin``/``.pt`` file or a Hugging Face folder.

    ``.bin`` files are read with ``weights_only=True`` and memory-mapped, so a tensor's data is
    read from disk only when used; meta tensors load as they are. With ``shapes_only``,
    safetensors give meta tensors from their headers, without reading any data.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.safetensors")) or sorted(path.glob("pytorch_model*.bin"))
        if not files:
            raise FileNotFoundError(
                f"{path}: a Hugging Face folder must hold *.safetensors or pytorch_model*.bin files")
        state: dict[str, Tensor] = {}
        for file in files:
            state.update(_read_file(file, shapes_only))
        return state
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such checkpoint file or folder")
    return _read_file(path, shapes_only)


def _read_file(path: Path, shapes_only: bool) -> dict[str, Tensor]:
    if shapes_only and path.suffix == ".safetensors":
        return read_safetensors_shapes(path, "checkpoint")
    return load_state_dict_file(path, "checkpoint")


def lightning_checkpoint(state: Mapping[str, Tensor], prefix: str = "model.") -> dict:
    """A checkpoint that ``Trainer.{predict,test,validate}(ckpt_path=...)`` restores into GroveModule.

    Weights only (no optimizer or loop state), so it is safe to read with ``weights_only=True``.
    """
    import lightning

    return {"state_dict": OrderedDict((prefix + k, v) for k, v in state.items()),
            "pytorch-lightning_version": lightning.__version__, "epoch": 0, "global_step": 0}


def target_model(config_paths: list[str | Path]) -> tuple[dict[str, Tensor], list[str]]:
    """Grove's state dict on the meta device for the configs, and notes on what was assumed.

    No weights are read. A configured tokenizer folder that is absent is replaced by the offline
    tokenizer (shapes come from ``llama_config.vocab_size``), and said so in the notes.
    """
    from dataclasses import replace

    from models.configs import model_configs_from_yaml
    from models.grove import build_on_meta

    configs = model_configs_from_yaml(list(config_paths))
    notes = []
    lm = configs["language_model"]
    if lm.tokenizer_path is not None and not Path(lm.tokenizer_path).expanduser().exists():
        notes.append(f"model.language_model.tokenizer_path {lm.tokenizer_path!r} not found: the vocabulary size is "
                     f"taken from llama_config (shapes only)")
        configs["language_model"] = replace(lm, tokenizer_path=None)
    model = build_on_meta(**configs)
    return model.state_dict(), notes


def check_official(checkpoint: str | Path, config_paths: list[str | Path]) -> tuple[ConversionReport, list[str]]:
    """Every key and shape of an official checkpoint against the configured model, reading no weights."""
    target, notes = target_model(config_paths)
    official = read_official(checkpoint, shapes_only=True)
    _, report = convert_official(official, target, materialize=lambda t: t.to("meta"), device="meta")
    return report, notes


def convert_official_file(checkpoint: str | Path, config_paths: list[str | Path],
                          out: str | Path) -> tuple[ConversionReport, list[str]]:
    """Convert an official checkpoint into a Lightning checkpoint at ``out`` (written only when the
    check passes). Tensors that are views of a larger storage (DeepSpeed's flat buffer) are copied,
    so the file holds each weight once and nothing that was dropped."""
    target, notes = target_model(config_paths)
    official = read_official(checkpoint)
    converted, report = convert_official(official, target)
    if not report.ok:
        return report, notes
    for key, value in converted.items():
        if value.untyped_storage().nbytes() != value.numel() * value.element_size():
            converted[key] = value.clone()
    with atomic_write(out, "wb") as handle:
        torch.save(lightning_checkpoint(converted), handle)
    return report, notes
