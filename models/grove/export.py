"""A trained GroveModule as an exported folder: :func:`grove_settings` gives its GROVE what the
module adds (the prompt and inference settings it predicts with, its data module's preprocessing,
and its own init arguments, so ``cli.py --ckpt_path DIR`` rebuilds it); the folder's layout is
:mod:`models.grove.pretrained`, the writing under the output-folder contract is
:func:`command_line.model_export.export`. The module is read by its attributes only, so this needs
no Lightning."""
from __future__ import annotations

import json

from models.grove.pretrained import part_configs_of

# data-module settings that decide what the model sees (the processor's preprocessing config)
PREPROCESSING_KEYS = ("num_frames", "global_image_size", "global_resize", "grounding_image_size", "grounding_resize",
                      "video_clip_seconds", "video_clip_stride_seconds")


def _jsonable(value) -> bool:
    try:
        json.dumps(value)
    except TypeError:
        return False
    return True


def grove_settings(module, data_hparams: dict | None = None, card: dict | None = None) -> dict:
    """``prompt``, ``inference``, ``preprocessing``, ``module`` and ``card`` entries for config.json."""
    hp = dict(module.hparams)
    parts = part_configs_of(module.model)
    parts["language_model"]["tokenizer_path"] = "."  # the folder itself
    inference = {"objectness_threshold": module.objectness_threshold, "objectness_strict": module.objectness_strict,
                 "max_new_tokens": module.max_new_tokens, "window_mode": module.window_mode,
                 "text_protocol": module.text_protocol, "teacher_forced": bool(hp.get("teacher_forced", False))}
    skip = {"global_encoder", "grounding_encoder", "language_model", "decoder", "optimizer", "lr_scheduler",
            "init_from_glamm"}
    init_args = {k: v for k, v in hp.items() if k not in skip and not k.startswith("_") and _jsonable(v)}
    init_args.update(parts)
    init_args.update({k: v for k, v in inference.items() if k != "teacher_forced"})
    data = dict(data_hparams or {})
    preprocessing = {k: data[k] for k in PREPROCESSING_KEYS if k in data}
    return {
        "prompt": {"chat_template": hp.get("chat_template", "vicuna_v1"), "target_text": hp.get("target_text", "as_is"),
                   "sample_question": bool(hp.get("sample_question", True))},
        "inference": inference,
        "preprocessing": preprocessing,
        "module": {"class_path": "lightning_modules.grove_module.GroveModule", "init_args": init_args,
                   "weights_prefix": "model."},
        "card": dict(card or {}),
    }
