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

An :class:`OfficialLayout` says, per source, which rules map its keys, which are dropped or
ignored, which target tensors come from elsewhere (OpenAI's CLIP) or start new, and how a tensor
of another shape is resized. :data:`GROVE_LAYOUT` is the released GROVE into
:class:`models.grove.Grove` and :data:`GROVE_FROM_GLAMM_LAYOUT` GLaMM into GROVE as the official
pre-training starts; GLaMM's own layout (GLaMM into :class:`glamm.model.GLaMM`) is
:data:`glamm.checkpoint.GLAMM_LAYOUT`. Weight files and folders are read through :mod:`core.weights`.
"""
from __future__ import annotations

from core.output_files import atomic_write
from core.weights import lightning_checkpoint, read_weights

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import torch
from torch import Tensor

from models.grove.global_video_encoder import hf_clip_vision_name

CLIP = "model.vision_tower.vision_tower.vision_model."
SAM = "model.grounding_encoder."

# Rules shared by every layout: the LLaMA, its embeddings, LLaVA's projector, SAM's image
# encoder and GLaMM's text projection keep their names in GLaMM and GROVE.
SHARED_RENAMES: tuple[tuple[str, str], ...] = (
    (r"^model\.mm_projector\.(0|2)\.(weight|bias)$", r"global_encoder.projector.\1.\2"),
    (r"^model\.embed_tokens\.weight$", r"language_model.model.model.embed_tokens.weight"),
    (r"^model\.layers\.(.+)$", r"language_model.model.model.layers.\1"),
    (r"^model\.norm\.weight$", r"language_model.model.model.norm.weight"),
    (r"^lm_head\.weight$", r"language_model.model.lm_head.weight"),
    (rf"^{re.escape(SAM)}image_encoder\.adapters\.(\d+)\.conv3d\.(weight|bias)$",
     r"grounding_encoder.adapters.\1.conv.\2"),
    (rf"^{re.escape(SAM)}image_encoder\.adapters\.(\d+)\.alpha$", r"grounding_encoder.adapters.\1.alpha"),
    (rf"^{re.escape(SAM)}image_encoder\.(.+)$", r"grounding_encoder.backbone.\1"),
    (r"^model\.text_hidden_fcs\.0\.(0|2)\.(weight|bias)$", r"query_projector.\1.\2"),
)

# (official key pattern, project key template): applied in order, first match wins.
RENAMES: tuple[tuple[str, str], ...] = (
    (rf"^{re.escape(CLIP)}encoder\.adapters\.(\d+)\.conv3d\.(weight|bias)$", r"global_encoder.adapters.\1.conv.\2"),
    (rf"^{re.escape(CLIP)}encoder\.adapters\.(\d+)\.alpha$", r"global_encoder.adapters.\1.alpha"),
    *SHARED_RENAMES,
    (rf"^{re.escape(SAM)}prompt_encoder\.pe_layer\.positional_encoding_gaussian_matrix$",
     r"box_decoder.pe_layer.positional_encoding_gaussian_matrix"),
    (rf"^{re.escape(SAM)}prompt_encoder\.no_mask_embed\.weight$", r"box_decoder.no_mask_embed"),
    (rf"^{re.escape(SAM)}mask_decoder\.transformer\.(.+)$", r"box_decoder.transformer.\1"),
    (rf"^{re.escape(SAM)}mask_decoder\.bbox_prediction_head\.(0|2)\.(weight|bias)$", r"box_head.mlp.\1.\2"),
    (rf"^{re.escape(SAM)}mask_decoder\.temporal_objectness_head\.(weight|bias)$", r"objectness_head.linear.\1"),
)

REGION_ENCODER = {
    "model.region_encoder.": "GLaMM's region encoder (region-level inputs; unused for grounded captioning)"}
# Official key prefixes that grounded captioning does not use, with the reason.
DROPPED: dict[str, str] = {
    **REGION_ENCODER,
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
# Buffers that transformers before 4.32 saved with LLaMA checkpoints; recomputed, never loaded.
ROTARY_INV_FREQ = {r"^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$":
                   "LLaMA rotary inv_freq buffers (saved by older transformers; recomputed at load)"}
CLIP_SOURCE = "OpenAI CLIP (not in the GLaMM file; loaded from the CLIP weights)"


def mean_resized_rows(rows: Tensor, num_rows: int) -> Tensor:
    """Token-embedding rows grown to ``num_rows`` as ``resize_token_embeddings`` does by default in
    transformers 4.46 (``mean_resizing``, which the official GROVE training ran with): old rows
    kept, each new row the mean of the old ones computed in fp32 (the covariance-scaled noise it
    adds is 1e-9 times the rows' covariance: below bf16 resolution, so it is left out)."""
    mean = rows.float().mean(dim=0, keepdim=True).to(rows.dtype)
    return torch.cat([rows, mean.expand(num_rows - rows.shape[0], -1)], dim=0)


def resize_sam_table(key: str, value: Tensor, shape: tuple[int, ...]) -> Tensor | None:
    """A SAM position table resized to ``shape`` with the rule used for SAM checkpoints
    (:func:`models.grove.grounding_video_encoder.resize_position_tables`); None for other keys."""
    from models.grove.grounding_video_encoder import interpolate_pos_embed, resize_rel_pos

    if key.endswith("grounding_encoder.backbone.pos_embed") and value.dim() == 4 and len(shape) == 4:
        return interpolate_pos_embed(value, tuple(shape[1:3]))
    if key.endswith((".attn.rel_pos_h", ".attn.rel_pos_w")) and value.dim() == 2 and value.shape[1] == shape[1]:
        return resize_rel_pos(value, shape[0])
    return None


def resize_glamm_for_grove(key: str, value: Tensor, shape: tuple[int, ...]) -> Tensor | None:
    """GLaMM tensors GROVE holds at another size: the vocabulary (32007 -> 32010 rows) and SAM's
    position tables (1024 px -> 512 px). None: not resizable (a true mismatch)."""
    if key in ("language_model.model.model.embed_tokens.weight", "language_model.model.lm_head.weight"):
        if value.dim() == 2 and len(shape) == 2 and value.shape[1] == shape[1] and value.shape[0] < shape[0]:
            return mean_resized_rows(value, shape[0])
        return None
    return resize_sam_table(key, value, shape)  # meta tensors resize as shapes only


@dataclass(frozen=True)
class OfficialLayout:
    """How one released checkpoint maps onto one project model.

    ``renames``: (pattern, template) rules, first match wins (CLIP keys go through
    :func:`hf_clip_vision_name`). ``dropped``: official key prefix -> why it is not used.
    ``ignored``: official key pattern -> why it is reported but harmless. ``project_only``:
    project key -> the value it gets when the file lacks it (zeros). ``external``: project key
    prefix -> where those tensors come from instead of the file. ``new``: project key prefix ->
    how they start (the model's own init). ``resize``: a tensor of another shape -> the resized
    tensor (or None: a mismatch). ``merge_output_tokens``: SAM's IoU and mask tokens become one
    ``box_decoder.output_tokens`` table.
    """

    name: str
    renames: tuple[tuple[str, str], ...]
    dropped: Mapping[str, str]
    ignored: Mapping[str, str] = field(default_factory=dict)
    project_only: Mapping[str, str] = field(default_factory=dict)
    external: Mapping[str, str] = field(default_factory=dict)
    new: Mapping[str, str] = field(default_factory=dict)
    resize: Callable[[str, Tensor, tuple], Tensor | None] | None = None
    merge_output_tokens: bool = True


GROVE_LAYOUT = OfficialLayout("GROVE", RENAMES, DROPPED, project_only=PROJECT_ONLY)
GROVE_FROM_GLAMM_LAYOUT = OfficialLayout(
    "GLaMM -> GROVE", RENAMES, DROPPED, ignored=ROTARY_INV_FREQ,
    external={"global_encoder.backbone.": CLIP_SOURCE},
    new={"global_encoder.adapters.": "CLIP adapters (alpha 0: identity at the start)",
         "grounding_encoder.adapters.": "SAM adapters (alpha 0: identity at the start)",
         "box_head.": "box head (default init)", "objectness_head.": "temporal objectness head (default init)"},
    resize=resize_glamm_for_grove)


@dataclass
class ConversionReport:
    """What became of every official key and every project parameter."""

    mapped: dict[str, list[str]] = field(default_factory=dict)  # project key -> official keys
    dropped: dict[str, list[str]] = field(default_factory=dict)  # reason -> official keys
    ignored: dict[str, list[str]] = field(default_factory=dict)  # reason -> official keys (not fatal)
    unaccounted: list[str] = field(default_factory=list)  # official keys with no rule
    missing: list[str] = field(default_factory=list)  # project keys nothing maps to
    filled: list[str] = field(default_factory=list)  # PROJECT_ONLY keys absent from the file
    external: dict[str, list[str]] = field(default_factory=dict)  # source -> project keys it fills
    new: dict[str, list[str]] = field(default_factory=dict)  # how they start -> project keys
    resized: list[tuple[str, tuple, tuple]] = field(default_factory=list)  # (project key, from, to)
    mismatched: list[tuple[str, str, tuple, tuple]] = field(default_factory=list)  # (project, official, got, want)
    wrong_dtype: list[tuple[str, str, str, str]] = field(default_factory=list)  # (project, official, got, want)
    layout: OfficialLayout = GROVE_LAYOUT

    @property
    def ok(self) -> bool:
        return not (self.unaccounted or self.missing or self.mismatched or self.wrong_dtype)

    def table(self) -> str:
        """A plain-text summary: counts per outcome, then every problem by name."""
        official_mapped = sum(len(v) for v in self.mapped.values())
        rows = [("mapped", f"{official_mapped} official keys -> {len(self.mapped)} project tensors")]
        rows += [(f"resized ({len(self.resized)})", ", ".join(f"{k} {list(a)} -> {list(b)}"
                                                              for k, a, b in self.resized))] if self.resized else []
        rows += [(f"dropped ({len(keys)})", reason) for reason, keys in self.dropped.items()]
        rows += [(f"ignored ({len(keys)})", reason) for reason, keys in self.ignored.items()]
        rows += [("filled", f"{key} ({self.layout.project_only[key]})") for key in self.filled]
        rows += [(f"external ({len(keys)})", source) for source, keys in self.external.items()]
        rows += [(f"new ({len(keys)})", how) for how, keys in self.new.items()]
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


def drop_reason(key: str, dropped: Mapping[str, str] = DROPPED) -> str | None:
    return next((reason for prefix, reason in dropped.items() if key.startswith(prefix)), None)


def _prefix_reason(key: str, table: Mapping[str, str]) -> str | None:
    return next((reason for prefix, reason in table.items() if key.startswith(prefix)), None)


def convert_official(official: Mapping[str, Tensor], target: Mapping[str, Tensor],
                     materialize: Callable[[Tensor], Tensor] = lambda t: t,
                     device: str | torch.device = "cpu",
                     layout: OfficialLayout = GROVE_LAYOUT) -> tuple[dict[str, Tensor], ConversionReport]:
    """Map an official state dict onto a project model's keys (``target``: its state dict, real or meta).

    ``materialize`` is applied to each official tensor before use (e.g. ``.to("meta")`` for a
    shape-only check); ``project_only`` tensors are created on ``device``. Returns the
    converted tensors, cast to the target's dtypes, and the report. Target tensors the layout
    takes from elsewhere (``external``) or starts new (``new``) are left out of the result.
    """
    report = ConversionReport(layout=layout)
    out: dict[str, Tensor] = {}
    qkv: dict[str, dict[str, tuple[str, Tensor]]] = {}
    tokens: dict[str, Tensor] = {}
    rules = [(re.compile(p), r) for p, r in layout.renames]
    ignored = [(re.compile(p), reason) for p, reason in layout.ignored.items()]
    for key, value in official.items():
        reason = drop_reason(key, layout.dropped)
        if reason is not None:
            report.dropped.setdefault(reason, []).append(key)
            continue
        reason = next((why for pattern, why in ignored if pattern.match(key)), None)
        if reason is not None:
            report.ignored.setdefault(reason, []).append(key)
            continue
        if layout.merge_output_tokens and key in MERGED_OUTPUT_TOKENS:
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
            if key in layout.project_only:
                report.filled.append(key)
                converted[key] = torch.zeros(want.shape, dtype=want.dtype, device=device)
            elif (source := _prefix_reason(key, layout.external)) is not None:
                report.external.setdefault(source, []).append(key)
            elif (how := _prefix_reason(key, layout.new)) is not None:
                report.new.setdefault(how, []).append(key)
            else:
                report.missing.append(key)
            continue
        if tuple(got.shape) != tuple(want.shape):
            resized = layout.resize(key, got, tuple(want.shape)) if layout.resize is not None else None
            if resized is None:
                report.mismatched.append((key, " + ".join(report.mapped.pop(key)), tuple(got.shape),
                                          tuple(want.shape)))
                continue
            report.resized.append((key, tuple(got.shape), tuple(want.shape)))
            got = resized
        if want.is_floating_point() and not got.is_floating_point():  # a cast would turn codes into weights
            report.wrong_dtype.append((key, " + ".join(report.mapped.pop(key)), str(got.dtype).replace("torch.", ""),
                                       str(want.dtype).replace("torch.", "")))
            continue
        converted[key] = got.to(want.dtype)
    for key in out:  # mapped onto a name the model does not have (e.g. an adapter this config lacks)
        report.unaccounted.extend(report.mapped.pop(key))
    return converted, report


# The vocabulary of a LLaMA tokenizer with the released tokens (for shape checks without the tokenizer).
RELEASED_VOCAB_SIZES = {"official": 32010, "glamm": 32007}


def hub_layer(checkpoint: str | Path, config_paths: list[str | Path],
              override: bool | list[str] = False) -> tuple[dict | None, list[str]]:
    """For a hub folder of the official package (:func:`models.grove.hub_config.is_hub_folder`): the
    YAML layer of its config's settings over the configs, and notes (:func:`models.grove.hub_config.hub_config_layer`;
    a YAML that disagrees is an error unless ``override``). ``(None, [])`` for any other checkpoint."""
    from models.grove.configuration import read_stacked_yaml
    from models.grove.hub_config import hub_config_layer, is_hub_folder

    if not is_hub_folder(checkpoint):
        return None, []
    merged = read_stacked_yaml(list(config_paths))
    return hub_config_layer(checkpoint, merged, ", ".join(map(str, config_paths)), override)


def target_model(config_paths: list[str | Path], build: Callable | None = None,
                 layer: dict | None = None) -> tuple[dict[str, Tensor], list[str]]:
    """The model's state dict on the meta device for the configs (with ``layer``, e.g. a hub folder's
    settings, stacked over them), and notes on what was assumed.

    ``build`` makes the model from the four part configs (default: Grove's
    :func:`models.grove.build_on_meta`). No weights are read. A configured tokenizer folder that
    is absent is replaced by the offline tokenizer (shapes come from ``llama_config.vocab_size``),
    and said so in the notes.
    """
    from core.dict_merge import merge_dicts

    from dataclasses import replace

    from models.grove.configuration import part_configs, read_stacked_yaml

    if build is None:
        from models.grove.modeling import build_on_meta as build
    merged = merge_dicts(read_stacked_yaml(list(config_paths)), layer or {})
    configs = part_configs((merged.get("model") or {}).get("init_args") or {}, ", ".join(map(str, config_paths)))
    notes = []
    lm = configs["language_model"]
    if lm.tokenizer_path is not None and not Path(lm.tokenizer_path).expanduser().exists():
        notes.append(f"model.language_model.tokenizer_path {lm.tokenizer_path!r} not found: the vocabulary size is "
                     f"taken from llama_config (shapes only)")
        llama = dict(lm.llama_config or {})
        if lm.special_tokens in RELEASED_VOCAB_SIZES and "vocab_size" not in llama:
            llama["vocab_size"] = RELEASED_VOCAB_SIZES[lm.special_tokens]
            notes.append(f"vocabulary: LLaMA's 32,000 + the released tokens = {llama['vocab_size']}")
        configs["language_model"] = replace(lm, tokenizer_path=None, llama_config=llama or None)
    model = build(**configs)
    return model.state_dict(), notes


def check_official(checkpoint: str | Path, config_paths: list[str | Path],
                   override: bool | list[str] = False) -> tuple[ConversionReport, list[str]]:
    """Every key and shape of an official checkpoint against the configured model, reading no weights
    (a hub folder's config first: :func:`hub_layer`)."""
    layer, hub_notes = hub_layer(checkpoint, config_paths, override)
    target, notes = target_model(config_paths, layer=layer)
    official = read_weights(checkpoint, shapes_only=True)
    _, report = convert_official(official, target, materialize=lambda t: t.to("meta"), device="meta")
    return report, hub_notes + notes


def convert_official_file(checkpoint: str | Path, config_paths: list[str | Path], out: str | Path,
                          override: bool | list[str] = False) -> tuple[ConversionReport, list[str]]:
    """Convert an official checkpoint into a Lightning checkpoint at ``out`` (written only when the
    check passes). Tensors that are views of a larger storage (DeepSpeed's flat buffer) are copied,
    so the file holds each weight once and nothing that was dropped. From a hub folder, the model
    is built with the folder's settings (:func:`hub_layer`), and the model settings the YAML leaves
    unset are saved as the checkpoint's hyper-parameters, which ``cli.py --ckpt_path`` fills in."""
    layer, hub_notes = hub_layer(checkpoint, config_paths, override)
    target, notes = target_model(config_paths, layer=layer)
    notes = hub_notes + notes
    official = read_weights(checkpoint)
    converted, report = convert_official(official, target)
    if not report.ok:
        return report, notes
    for key, value in converted.items():
        if value.untyped_storage().nbytes() != value.numel() * value.element_size():
            converted[key] = value.clone()
    checkpoint_dict = lightning_checkpoint(converted)
    hparams = ((layer or {}).get("model") or {}).get("init_args")
    if hparams:
        checkpoint_dict["hyper_parameters"] = hparams
    data = ((layer or {}).get("data") or {}).get("init_args")
    if data:
        notes.append("a Lightning checkpoint carries model settings only: give "
                     + ", ".join(f"--data.init_args.{k}={v}" for k, v in data.items())
                     + " to cli.py (or set them in the YAML), or convert with --export, whose folder keeps them")
    with atomic_write(out, "wb") as handle:
        torch.save(checkpoint_dict, handle)
    return report, notes


# ----------------------------------------------------------------------------- GROVE from GLaMM

def init_grove_from_glamm(model, folder: str | Path) -> ConversionReport:
    """Start GROVE (``model``: a :class:`models.grove.Grove`) from GLaMM as the official pre-training does.

    From GLaMM: the LLM and its embeddings, ``mm_projector``, all of SAM that GROVE has (image
    encoder, the decoder's transformer, output tokens, no-mask embedding, Fourier positions) and
    ``text_hidden_fcs``; the vocabulary's new rows (32007 -> 32010) are the mean of GLaMM's rows and
    SAM's position tables are resized to GROVE's SAM (1024 px -> 512 px) with the rule used for SAM
    checkpoints. CLIP is left as built (OpenAI's weights from ``global_encoder.checkpoint``); the
    adapters (alpha 0) and the box and objectness heads keep their fresh init. Raises naming every
    key that does not fit; returns the report (see :func:`init_table`).
    """
    target = model.state_dict()
    state, report = convert_official(read_weights(folder), target, layout=GROVE_FROM_GLAMM_LAYOUT)
    if not report.ok:
        raise ValueError(f"{folder}: GLaMM does not fit this GROVE:\n{report.table()}")
    with torch.no_grad():
        for key, value in state.items():
            target[key].copy_(value)
    return report


def init_table(report: ConversionReport, clip_checkpoint: str | None) -> str:
    """Where each GROVE tensor of a GLaMM start comes from: GLaMM, CLIP or new, with counts."""
    clip = sum(len(v) for v in report.external.values())
    new = sum(len(v) for v in report.new.values())
    official = sum(len(v) for v in report.mapped.values())
    rows = [("from GLaMM", f"{len(report.mapped)} tensors ({official} GLaMM keys; {len(report.resized)} resized)")]
    rows += [("  resized", f"{key} {list(a)} -> {list(b)}") for key, a, b in report.resized]
    rows += [("from CLIP", f"{clip} tensors ({clip_checkpoint or 'no global_encoder.checkpoint: random'})"),
             ("new", f"{new} tensors")]
    rows += [("  new", f"{how}: {len(keys)}") for how, keys in report.new.items()]
    rows += [("GLaMM unused", f"{sum(len(v) for v in report.dropped.values())} GLaMM keys")]
    rows += [("  unused", f"{why}: {len(keys)}") for why, keys in report.dropped.items()]
    if report.ignored:
        rows += [("ignored", f"{why}: {len(keys)}") for why, keys in report.ignored.items()]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name.ljust(width)}  {text}" for name, text in rows)


def check_grove_from_glamm(folder: str | Path, config_paths: list[str | Path]) -> tuple[ConversionReport, list[str]]:
    """The GLaMM start of the configured GROVE, on the meta device (reads no weights): what would
    come from GLaMM, be resized, come from CLIP or start new."""
    target, notes = target_model(config_paths)
    official = read_weights(folder, shapes_only=True)
    _, report = convert_official(official, target, materialize=lambda t: t.to("meta"), device="meta",
                                 layout=GROVE_FROM_GLAMM_LAYOUT)
    return report, notes
