"""Files a model is *initialised* from are not needed once a checkpoint provides its weights.

A config names the pre-trained parts a run starts from (CLIP, SAM, GLaMM, the LLM folder, the
judge's vision tower). When the weights then come from a checkpoint (``--ckpt_path``, a strict
``InitFromCheckpoint``, an exported folder), reading those files would only be overwritten, and
requiring them means a trained model cannot run on a machine without them. :func:`drop_init_time_paths`
clears them from a parsed config before the model is built; a Hugging Face folder the model's
*architecture* comes from (``language_model.path``, the judge's ``model_path``) is kept, but
only its config.json and tokenizer are read (``pretrained_weights: false``). A judge saved with
``checkpoint_trainable_only`` is left alone: its frozen parts are not in the checkpoint.

:func:`exported_module` reads the LightningModule an exported folder's config.json describes,
for ``cli.py --ckpt_path DIR``.
"""
from __future__ import annotations

from core.user_errors import UserInputError
from core.weights.pretrained_folder import read_config

from pathlib import Path

# model.init_args.<part>.<key> holding weights only
PART_WEIGHT_KEYS = {"global_encoder": "checkpoint", "grounding_encoder": "checkpoint", "decoder": "checkpoint"}
# model.init_args.<key> holding weights only
TOP_WEIGHT_KEYS = ("init_from_glamm", "vision_checkpoint")


def _as_dict(value) -> dict:
    if hasattr(value, "as_dict"):  # jsonargparse Namespace
        return value.as_dict()
    return value if isinstance(value, dict) else {}


def is_init_time_key(key: str) -> bool:
    """Whether a dotted config key (``model.init_args.global_encoder.checkpoint``) names a weight-only file."""
    parts = key.split(".")
    return (parts[-1] in TOP_WEIGHT_KEYS or
            (len(parts) >= 2 and PART_WEIGHT_KEYS.get(parts[-2]) == parts[-1]))


def drop_init_time_paths(config) -> list[str]:
    """Clear the weight-only paths of ``config``'s model and mark architecture folders as config-only.
    Returns the keys changed (``model.<key>``)."""
    model = config.get("model") or {}
    init_args = _as_dict(model.get("init_args"))
    if init_args.get("checkpoint_trainable_only"):
        return []
    changed = []
    for key in TOP_WEIGHT_KEYS:
        if init_args.get(key) is not None:
            config[f"model.init_args.{key}"] = None
            changed.append(f"model.{key}")
    for part, key in PART_WEIGHT_KEYS.items():
        if _as_dict(init_args.get(part)).get(key) is not None:
            config[f"model.init_args.{part}.{key}"] = None
            changed.append(f"model.{part}.{key}")
    language_model = _as_dict(init_args.get("language_model"))
    if language_model.get("path") is not None and language_model.get("pretrained_weights", True):
        config["model.init_args.language_model.pretrained_weights"] = False
        changed.append("model.language_model.pretrained_weights")
    if init_args.get("model_path") is not None and init_args.get("pretrained_weights", True):
        config["model.init_args.pretrained_weights"] = False
        changed.append("model.pretrained_weights")
    return changed


def strict_init_callback(config) -> bool:
    """Whether the trainer's callbacks include an ``InitFromCheckpoint`` that loads every weight (strict)."""
    trainer = config.get("trainer") or {}
    callbacks = trainer.get("callbacks") if hasattr(trainer, "get") else None
    for callback in callbacks or []:
        callback = _as_dict(callback)
        if str(callback.get("class_path", "")).endswith("InitFromCheckpoint"):
            return _as_dict(callback.get("init_args")).get("strict", True) is not False
    return False


def _resolve_relative(value, folder: Path):
    """Paths in an exported module's init arguments are relative to the folder ("." is the folder)."""
    if isinstance(value, dict):
        return {k: (str((folder / v).resolve()) if _is_path_key(k) and isinstance(v, str)
                    else _resolve_relative(v, folder)) for k, v in value.items()}
    return value


def _is_path_key(name: str) -> bool:
    return name.endswith(("_path", "_checkpoint", "_folder")) or name in ("checkpoint", "path")


def exported_module(folder: str | Path) -> tuple[str, dict, str]:
    """``(class_path, init_args, weights_prefix)`` of the LightningModule an exported folder describes:
    its init arguments with folder-relative paths resolved, and the attribute its weights load into."""
    folder = Path(folder)
    import json

    model_type = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    config = read_config(folder, model_type)
    module = config.get("module") or {}
    if "class_path" not in module and model_type == "grove" and "language_model" not in config:
        raise UserInputError(f"{folder / 'config.json'}: a hub folder of the official GROVE package, not an "
                             "exported folder of this project; convert it first (its config.json is honoured): "
                             f"grove convert-grove {folder} --config configs/official/grove.yaml "
                             "--export OUT_FOLDER (docs/official_grove.md)")
    if "class_path" not in module:
        raise ValueError(f"{folder / 'config.json'}: no 'module' entry (class_path, init_args): this folder was "
                         "not written by grove export, so cli.py cannot rebuild its LightningModule")
    return module["class_path"], _resolve_relative(dict(module.get("init_args") or {}), folder), \
        module.get("weights_prefix", "model.")
