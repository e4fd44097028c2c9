"""GROVE, the model family: configuration, modeling, processing, official-checkpoint conversion and
exported folders, with no Lightning.

``from models.grove import Grove, GroveProcessor`` is the public entry; each name is imported from
its own module on first use, so importing one part (``models.grove.image_processing``) does not
pull in transformers or open_clip.

Files: ``configuration`` (the four part configs), ``modeling`` (:class:`Grove`) and its parts
(``global_video_encoder``, ``grounding_video_encoder``, ``adapters``, ``language_model``,
``box_decoder``, ``heads``, ``loss``), ``prompting`` / ``official_tokenization`` (text),
``frame_sampling`` / ``image_processing`` / ``clip_processing`` (frames -> model inputs),
``windows`` (full-clip inference schedules), ``postprocessing`` (model outputs -> prediction
records), ``processing`` (:class:`GroveProcessor` and :func:`predict_clips`, the one path from
a clip to predictions), ``convert_official`` (released checkpoints), ``pretrained`` / ``export``
(exported folders).
"""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

import importlib

_PUBLIC = {
    "Grove": "modeling", "GroveOutput": "modeling", "GrovePrediction": "modeling", "build_on_meta": "modeling",
    "gather_det_hidden": "modeling", "PARAMETER_GROUPS": "modeling", "PAPER_TRAINABLE": "modeling",
    "TEXT_PROTOCOLS": "modeling",
    "GlobalEncoderConfig": "configuration", "GroundingEncoderConfig": "configuration",
    "LanguageModelConfig": "configuration", "DecoderConfig": "configuration", "tiny_configs": "configuration",
    "paper_configs": "configuration",
    "GroveProcessor": "processing", "predict_clips": "processing",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
