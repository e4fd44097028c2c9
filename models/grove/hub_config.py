"""The official inference package's hub folder (``GroveForCausalLM.save_pretrained``: config.json,
preprocessor_config.json, weight shards) carries the released model's settings; converting it here
takes them from the folder, not from the project's YAML.

:data:`HUB_SETTINGS` maps each setting of the folder onto the project config key that holds it. A
key the file lacks has the package's default (``GroveConfig`` over transformers 4.46's ``LlamaConfig``,
:data:`PACKAGE_DEFAULTS`), as the package reads it. :func:`hub_config_layer` compares them with the
stacked YAML: a key the YAML does not set takes the folder's value, one it sets to the same value is
fine, and one it sets otherwise is an error naming the folder's file and key, the YAML key and both
values, unless that key is overridden (then the YAML wins, with a warning). The result is one more
YAML layer, stacked over the configs when the converted model is built or exported.

:data:`NOT_READ` lists the settings of the folder that do not describe the model this project runs,
with the reason.
"""
from __future__ import annotations

from core.dict_merge import merge_dicts
from core.user_errors import UserInputError

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor_config.json"
LLAMA = "model.init_args.language_model.llama_config."

# (file, folder key) -> project config key, from the YAML root.
HUB_SETTINGS: dict[tuple[str, str], str] = {
    **{(CONFIG_FILE, key): LLAMA + key for key in (
        "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
        "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias")},
    (CONFIG_FILE, "temp_objectness_threshold"): "model.init_args.objectness_threshold",
    (CONFIG_FILE, "use_temp_objectness"): "model.init_args.decoder.use_objectness",
    (CONFIG_FILE, "out_dim"): "model.init_args.decoder.dim",
    (CONFIG_FILE, "mm_vision_select_layer"): "model.init_args.global_encoder.feature_layer",
    (CONFIG_FILE, "num_frames"): "data.init_args.num_frames",
    (PREPROCESSOR_FILE, "num_frames"): "data.init_args.num_frames",
    (PREPROCESSOR_FILE, "grounding_image_size"): "data.init_args.grounding_image_size",
    (PREPROCESSOR_FILE, "conv_type"): "model.init_args.chat_template",
}
# What the package reads for a key its file lacks (GroveConfig's defaults, then LlamaConfig's in
# transformers 4.46; num_key_value_heads None means num_attention_heads).
PACKAGE_DEFAULTS: dict[tuple[str, str], Any] = {
    (CONFIG_FILE, "vocab_size"): 32000, (CONFIG_FILE, "hidden_size"): 4096, (CONFIG_FILE, "intermediate_size"): 11008,
    (CONFIG_FILE, "num_hidden_layers"): 32, (CONFIG_FILE, "num_attention_heads"): 32,
    (CONFIG_FILE, "num_key_value_heads"): None, (CONFIG_FILE, "max_position_embeddings"): 2048,
    (CONFIG_FILE, "rms_norm_eps"): 1e-6, (CONFIG_FILE, "rope_theta"): 10000.0, (CONFIG_FILE, "rope_scaling"): None,
    (CONFIG_FILE, "hidden_act"): "silu", (CONFIG_FILE, "tie_word_embeddings"): False,
    (CONFIG_FILE, "attention_bias"): False, (CONFIG_FILE, "mlp_bias"): False,
    (CONFIG_FILE, "temp_objectness_threshold"): 0.5, (CONFIG_FILE, "use_temp_objectness"): True,
    (CONFIG_FILE, "out_dim"): 512, (CONFIG_FILE, "mm_vision_select_layer"): -2, (CONFIG_FILE, "num_frames"): 1,
    (PREPROCESSOR_FILE, "num_frames"): 8, (PREPROCESSOR_FILE, "grounding_image_size"): 512,
    (PREPROCESSOR_FILE, "conv_type"): "llava_v1",
}
# What each setting must be (the package reads it with these types; a string "0.3" would reach the
# project as a string): (description, check).
_POSITIVE_INT = ("a positive integer", lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0)
_POSITIVE_NUMBER = ("a positive finite number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
                    and math.isfinite(v) and v > 0)
_BOOL = ("true or false", lambda v: isinstance(v, bool))
_TEXT = ("a non-empty string", lambda v: isinstance(v, str) and bool(v))
HUB_TYPES: dict[str, tuple[str, Any]] = {
    **{key: _POSITIVE_INT for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                      "num_attention_heads", "max_position_embeddings", "out_dim", "num_frames",
                                      "grounding_image_size")},
    "num_key_value_heads": ("a positive integer or null", lambda v: v is None or _POSITIVE_INT[1](v)),
    "rms_norm_eps": _POSITIVE_NUMBER, "rope_theta": _POSITIVE_NUMBER,
    "rope_scaling": ("an object or null", lambda v: v is None or isinstance(v, dict)),
    "hidden_act": _TEXT, "conv_type": _TEXT,
    **{key: _BOOL for key in ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_temp_objectness")},
    "temp_objectness_threshold": ("a number in [0, 1]", lambda v: isinstance(v, (int, float))
                                  and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1),
    "mm_vision_select_layer": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
}
HUB_MODEL_TYPE = "grove"


def check_hub_value(path: Path, key: str, value: Any) -> Any:
    """``value`` of ``key`` in the folder file ``path`` if it has the type and range the package reads;
    otherwise a :class:`core.user_errors.UserInputError` naming the file, the key and what it must be."""
    what, ok = HUB_TYPES[key]
    if not ok(value):
        raise UserInputError(f"{path}: {key} must be {what}, got {json.dumps(value)[:60]}")
    return value


# The LlamaConfig keys above also describe the language model when the YAML gives it as a folder
# (language_model.path), whose own config.json then holds them: they are compared only with llama_config.
NOT_READ: dict[str, str] = {
    "ce_loss_weight": "training loss weight (the package does not train; the recipe is the YAML's)",
    "giou_loss_weight": "training loss weight (the package does not train; the recipe is the YAML's)",
    "temp_objectness_loss_weight": "training loss weight (the package does not train; the recipe is the YAML's)",
    "train_mask_decoder": "training switch",
    "with_region": "GLaMM's region encoder (dropped: unused for grounded captioning)",
    "special_tokens": "token ids, taken from the tokenizer",
    "torch_dtype": "the dtype the weights were written in (the YAML's language_model.torch_dtype and the "
                   "trainer's precision choose the running dtype)",
    "attn_implementation": "attention kernel (the YAML's language_model.attn_implementation)",
    "target_fps": "frames are read on the annotations' 5-fps grid",
}
# The CLIP tower a folder names -> the project keys that select it.
KNOWN_TOWERS = {"openai/clip-vit-large-patch14-336": {"model.init_args.global_encoder.model_name": "ViT-L-14-336",
                                                      "model.init_args.global_encoder.image_size": 336}}


@dataclass(frozen=True)
class HubSetting:
    """One setting of a hub folder: where it is, the project key that holds it, its value."""

    file: str
    key: str
    target: str
    value: Any
    defaulted: bool  # the file lacks the key: the package's default

    @property
    def where(self) -> str:
        return f"{self.file}: {self.key}" + (" (absent: the package's default)" if self.defaulted else "")


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(data, dict):
        raise ValueError(f"{path}: must hold a JSON object")
    return data


def is_hub_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder the official package wrote: config.json of ``model_type: grove``
    in the package's layout (LLaMA keys at the top level; this project's own exports nest them)."""
    config = Path(path) / CONFIG_FILE
    if not Path(path).is_dir() or not config.is_file():
        return False
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and data.get("model_type") == "grove" and "language_model" not in data


def hub_settings(folder: str | Path) -> tuple[list[HubSetting], list[str]]:
    """The settings of a hub folder (:data:`HUB_SETTINGS`, the vision tower) and notes on what is not read."""
    folder = Path(folder)
    files = {CONFIG_FILE: _read_json(folder / CONFIG_FILE)}
    model_type = files[CONFIG_FILE].get("model_type", HUB_MODEL_TYPE)
    if model_type != HUB_MODEL_TYPE:
        raise UserInputError(f"{folder / CONFIG_FILE}: model_type is {json.dumps(model_type)[:60]}, not "
                             f"{HUB_MODEL_TYPE!r}: this folder holds another model, which this project cannot convert")
    notes = []
    if (folder / PREPROCESSOR_FILE).is_file():
        files[PREPROCESSOR_FILE] = _read_json(folder / PREPROCESSOR_FILE)
    else:
        notes.append(f"{folder / PREPROCESSOR_FILE} is absent: frames, image size and chat template come from "
                     f"{CONFIG_FILE} and the YAML")
    settings = []
    for (name, key), target in HUB_SETTINGS.items():
        if name not in files:
            continue
        present = key in files[name]
        value = check_hub_value(folder / name, key, files[name][key]) if present else PACKAGE_DEFAULTS[(name, key)]
        settings.append(HubSetting(name, key, target, value, not present))
    heads = next(s.value for s in settings if s.key == "num_attention_heads")
    settings = [HubSetting(s.file, s.key, s.target, heads, s.defaulted)
                if s.key == "num_key_value_heads" and s.value is None else s for s in settings]
    for name in files:
        tower_key = "mm_vision_tower" if name == CONFIG_FILE else "vision_tower"
        tower = files[name].get(tower_key)
        if tower in KNOWN_TOWERS:
            settings += [HubSetting(name, tower_key, target, value, False)
                         for target, value in KNOWN_TOWERS[tower].items()]
        elif tower is not None:
            notes.append(f"{folder / name}: {tower_key} {tower!r} is not a tower this project knows: the YAML's "
                         "global_encoder describes it")
    config = files[CONFIG_FILE]
    if config.get("mm_vision_select_feature", "patch") != "patch":
        raise ValueError(f"{folder / CONFIG_FILE}: mm_vision_select_feature is "
                         f"{config['mm_vision_select_feature']!r}; this project reads CLIP's patch tokens ('patch')")
    skipped = sorted(k for k in config if k in NOT_READ)
    if skipped:
        notes.append(f"{folder / CONFIG_FILE}: not read: " + "; ".join(f"{k} ({NOT_READ[k]})" for k in skipped))
    return settings, notes


_MISSING = object()


def _get(tree: dict, dotted: str):
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _nested(dotted: str, value) -> dict:
    out: dict = value
    for part in reversed(dotted.split(".")):
        out = {part: out}
    return out


def _overridden(setting: HubSetting, override: bool | Iterable[str]) -> bool:
    if isinstance(override, bool):
        return override
    names = set(override)
    return setting.target in names or setting.key in names


class HubConfigMismatch(ValueError):
    """The YAML sets a model setting otherwise than the hub folder's config."""


def reconcile(merged: dict, settings: list[HubSetting], folder: str | Path, sources: str,
              override: bool | Iterable[str] = False) -> tuple[dict, list[str]]:
    """``(layer, warnings)``: the YAML layer of the folder's settings to stack over ``merged`` (the
    stacked YAML, read from ``sources``), and a warning per overridden disagreement; raises
    :class:`HubConfigMismatch` naming every disagreement that is not overridden."""
    folder = Path(folder)
    layer: dict = {}
    warnings, errors = [], []
    uses_llm_folder = _get(merged, "model.init_args.language_model.path") not in (_MISSING, None)
    placed: dict[str, HubSetting] = {}  # project key -> the folder setting that gave its value
    for setting in settings:
        if setting.target.startswith("data.") and "data" not in merged:
            continue  # a model-only config: the data settings are the caller's
        if setting.target.startswith(LLAMA) and uses_llm_folder:
            continue
        given = _get(merged, setting.target)
        first = placed.get(setting.target)
        if first is not None and first.value != setting.value:  # two files of the folder disagree
            errors.append(f"{folder / first.file} has {first.key} = {first.value!r}, but {folder / setting.file} "
                          f"has {setting.key} = {setting.value!r} (both are {setting.target}); set it in the YAML "
                          "and override the folder")
        elif given is _MISSING or given is None and setting.target.startswith(LLAMA):
            layer = merge_dicts(layer, _nested(setting.target, setting.value))
            placed[setting.target] = setting
        elif given != setting.value:
            text = (f"{folder / setting.file} has {setting.key} = {setting.value!r}"
                    f"{' (absent: the package default)' if setting.defaulted else ''}, but {sources} sets "
                    f"{setting.target} = {given!r}")
            (warnings if _overridden(setting, override) else errors).append(text)
    llama = _get(layer, LLAMA[:-1])
    if llama is not _MISSING:  # a dict-valued option: a later config replaces it whole, so the layer holds all of it
        base = _get(merged, LLAMA[:-1])
        layer = merge_dicts(layer, _nested(LLAMA[:-1], merge_dicts(base if isinstance(base, dict) else {}, llama)))
    if errors:
        raise HubConfigMismatch(
            "the hub folder's config is the model's config, and the YAML disagrees with it:\n  " + "\n  ".join(errors)
            + "\nRemove these keys from the YAML (the folder's values are then used), or override the folder "
              "(grove convert-grove --override-hub-config [KEY ...]: the YAML wins, with a warning)")
    return layer, [f"overridden: {w}; the YAML's value is used" for w in warnings]


def hub_config_layer(folder: str | Path, merged: dict, sources: str,
                     override: bool | Iterable[str] = False) -> tuple[dict, list[str]]:
    """The YAML layer of a hub folder's settings over the stacked YAML ``merged`` (see :func:`reconcile`),
    and notes: what was not read, what the YAML overrode, what the folder set."""
    settings, notes = hub_settings(folder)
    layer, warnings = reconcile(merged, settings, folder, sources, override)
    taken = sorted({s.target for s in settings
                    if _get(merged, s.target) in (_MISSING, None) and _get(layer, s.target) is not _MISSING})
    if taken:
        notes.append(f"from {Path(folder)}: " + ", ".join(f"{t} = {_get(layer, t)!r}" for t in taken))
    return layer, notes + warnings


__all__ = ["HUB_SETTINGS", "PACKAGE_DEFAULTS", "NOT_READ", "HubSetting", "HubConfigMismatch", "is_hub_folder",
           "hub_settings", "reconcile", "hub_config_layer"]
