"""The pipeline's YAML config: which backend runs each stage, and its options.

Several files stack (later ones override keys of earlier ones, like experiment overlays), then
every key is checked: an unknown section, backend or option is an error naming the files and
the dotted key. The merged config is a plain dict, so the Ray engine ships it to its workers,
which build their stages from it (:mod:`annotation.engines.workers`).

Sections: ``clips`` (how videos are cut when there is no ground truth: fixed ``seconds`` windows, or
the clips of a HowToCaption ``timestamps`` file; ``clamp_spans: true`` annotates a span that starts
before 0 s from 0 s, reported either way), ``decode`` (``every``:
Stage 1 on every n-th frame of the 5-fps grid), ``stage1`` / ``stage2`` / ``stage3`` (``backend``
plus that backend's options), ``llm`` (the chat model Stages 2 and 3 share when their backend is
``llm``), ``tracks``, ``max_retries`` and ``engine``.
"""
from __future__ import annotations

from core.dict_merge import merge_dicts

import copy
import inspect
from pathlib import Path
from typing import Any, Sequence

import yaml

DEFAULTS: dict[str, Any] = {
    "clips": {"seconds": None, "min_seconds": 2.0, "timestamps": None, "clamp_spans": False},
    "decode": {"every": 1},
    "stage1": {"backend": "noisy_oracle"},
    "stage2": {"backend": "rule"},
    "stage3": {"backend": "embedding"},
    "llm": None,
    "max_retries": 2,
    "tracks": {"same_class_boxes": "best", "min_boxes": 1},
    "engine": {"batch_size": 16, "torch_threads": None,
               "ray": {"frame_actors": 1, "text_actors": 1, "cpus_per_actor": 1, "gpus_per_frame_actor": None,
                       "num_cpus": None, "object_store_mb": None}},
}
SECTION_KEYS = {
    "clips": {"seconds", "min_seconds", "timestamps", "clamp_spans"},
    "decode": {"every"},
    "tracks": {"same_class_boxes", "min_boxes"},
    "engine": {"batch_size", "torch_threads", "ray"},
    "engine.ray": {"frame_actors", "text_actors", "cpus_per_actor", "gpus_per_frame_actor", "num_cpus",
                   "object_store_mb"},
}


class ConfigError(ValueError):
    """The config names an unknown key or backend, or a wrong value; the message names files and key."""


def backend_classes() -> dict[str, dict[str, type]]:
    """Stage -> backend name -> class (imported here so configs name backends by short name)."""
    from annotation.llm.openai_chat import OpenAIChat
    from annotation.llm.transformers_chat import TransformersChat
    from annotation.stage1.captioner_detector import CaptionerDetectorFrameAnnotator
    from annotation.stage1.detail_caption_annotator import DetailCaptionFrameAnnotator
    from annotation.stage1.glamm_annotator import GLaMMFrameAnnotator
    from annotation.stage1.noisy_oracle import NoisyOracleFrameAnnotator
    from annotation.stage2.caption_aggregation import LLMCaptionAggregator, RuleCaptionAggregator
    from annotation.stage3.by_tracking import CoTrackerStage3, OracleTrackerStage3, SAM2Stage3
    from annotation.stage3.phrase_classification import EmbeddingPhraseClassifier, LLMPhraseClassifier

    return {
        "stage1": {"noisy_oracle": NoisyOracleFrameAnnotator, "captioner_detector": CaptionerDetectorFrameAnnotator,
                   "glamm": GLaMMFrameAnnotator, "detail_captions": DetailCaptionFrameAnnotator},
        "stage2": {"rule": RuleCaptionAggregator, "llm": LLMCaptionAggregator},
        "stage3": {"embedding": EmbeddingPhraseClassifier, "llm": LLMPhraseClassifier, "cotracker": CoTrackerStage3,
                   "sam2": SAM2Stage3, "oracle_tracker": OracleTrackerStage3},
        "llm": {"transformers": TransformersChat, "openai": OpenAIChat},
    }


# options the pipeline passes itself (not set in YAML)
_INTERNAL = {"truth", "records", "parser", "chat", "text_encoder", "self", "sam_model"}


def _check_backend(config: dict, section: str, where: str) -> None:
    options = config.get(section)
    if options is None and section == "llm":
        return
    if not isinstance(options, dict) or "backend" not in options:
        raise ConfigError(f"{where}: section '{section}' needs a 'backend' key")
    known = backend_classes()[section]
    name = options["backend"]
    if name not in known:
        raise ConfigError(f"{where}: {section}.backend {name!r} is unknown (known: {', '.join(sorted(known))})")
    params = set(inspect.signature(known[name].__init__).parameters) - _INTERNAL
    unknown = sorted(set(options) - params - {"backend"})
    if unknown:
        raise ConfigError(f"{where}: key '{section}.{unknown[0]}' is not an option of {section} backend {name!r} "
                          f"(options: {', '.join(sorted(params)) or 'none'})")


def validate(config: dict, where: str = "<config>") -> dict:
    """Raise :class:`ConfigError` on an unknown key, backend or option, or a missing LLM section."""
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"{where}: unknown section '{unknown[0]}' (sections: {', '.join(sorted(DEFAULTS))})")
    for section, keys in SECTION_KEYS.items():
        value = config
        for part in section.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: '{section}' must be a mapping, got {type(value).__name__}")
        extra = sorted(set(value) - keys)
        if extra:
            raise ConfigError(f"{where}: unknown key '{section}.{extra[0]}' (keys: {', '.join(sorted(keys))})")
    for section in ("stage1", "stage2", "stage3", "llm"):
        _check_backend(config, section, where)
    uses_llm = [s for s in ("stage2", "stage3") if config[s]["backend"] == "llm"]
    if uses_llm and config.get("llm") is None:
        raise ConfigError(f"{where}: {' and '.join(uses_llm)} use backend 'llm' but there is no 'llm' section "
                          "(backend: transformers with a path, or openai with a url)")
    if config["clips"]["timestamps"] is not None and config["clips"]["seconds"] is not None:
        raise ConfigError(f"{where}: clips.timestamps (HowToCaption clips) and clips.seconds (fixed windows) "
                          "are two ways to cut clips: set one")
    if not isinstance(config["clips"]["clamp_spans"], bool):
        raise ConfigError(f"{where}: clips.clamp_spans must be true or false, got {config['clips']['clamp_spans']!r}")
    if int(config["decode"]["every"]) < 1:
        raise ConfigError(f"{where}: decode.every must be >= 1, got {config['decode']['every']}")
    if int(config["engine"]["batch_size"]) < 1:
        raise ConfigError(f"{where}: engine.batch_size must be >= 1, got {config['engine']['batch_size']}")
    return config


def load_config(paths: Sequence[str | Path], overrides: dict | None = None) -> dict:
    """Merge ``DEFAULTS`` with the YAML files in order (then ``overrides``) and validate the result."""
    config = copy.deepcopy(DEFAULTS)
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config {path} does not exist")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML ({err})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
        for section in ("stage1", "stage2", "stage3", "llm"):
            # a file that switches a stage's backend starts that stage's options afresh
            if isinstance(data.get(section), dict) and "backend" in data[section]:
                if (not isinstance(config.get(section), dict)
                        or config[section].get("backend") != data[section]["backend"]):
                    config[section] = {}
        config = merge_dicts(config, data)
    if overrides:
        config = merge_dicts(config, overrides)
    return validate(config, ", ".join(str(p) for p in paths) or "<defaults>")


def backend_options(config: dict, section: str) -> tuple[type, dict]:
    """The class and keyword options of a section's backend."""
    options = dict(config[section])
    name = options.pop("backend")
    return backend_classes()[section][name], options
