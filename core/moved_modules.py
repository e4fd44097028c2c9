"""Old module paths of moved code keep importing, for one release, with a warning naming the new path.

Configs, Lightning checkpoints (their saved ``class_path`` hyper-parameters), exported folders and
user scripts name classes by module path. When a module moves, its old name is listed in
:data:`MOVED` (old dotted name -> new dotted name); importing the old name then returns the new
module object itself (classes keep one identity, so ``isinstance`` and pickles agree) and emits a
:class:`FutureWarning` that names the new path. Nothing is copied and no module is executed twice.

The finder sits at the end of ``sys.meta_path``: a module that still exists under the old name is
always found first, so an alias can never shadow real code. A parent package that no longer exists
(every module of it moved) is made as an empty namespace so its moved children import.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install", "new_name"]

# old dotted module name -> new dotted module name. Add a line when a module moves; remove it a
# release later. Keep it sorted by old name.
MOVED: dict[str, str] = {
    "annotation.box_tracking": "annotation.stage3.trackers.box_tracking",
    "annotation.caption_aggregation": "annotation.stage2.caption_aggregation",
    "annotation.chat": "annotation.llm.chat",
    "annotation.chat_factory": "annotation.llm.factory",
    "annotation.chat_openai": "annotation.llm.openai_chat",
    "annotation.chat_transformers": "annotation.llm.transformers_chat",
    "annotation.compare": "annotation.commands.compare",
    "annotation.cotracker_tracker": "annotation.stage3.trackers.cotracker_tracker",
    "annotation.decoding": "annotation.stage1.decoding",
    "annotation.detail_caption_command": "annotation.commands.detail_captions",
    "annotation.detail_caption_models": "annotation.stage1.detail_caption_models",
    "annotation.detail_caption_stage1": "annotation.stage1.detail_caption_annotator",
    "annotation.detail_captions": "annotation.stage1.detail_captions",
    "annotation.frame_annotations": "annotation.stage1.frame_annotations",
    "annotation.glamm_frame_annotator": "annotation.stage1.glamm_annotator",
    "annotation.hf_frame_annotator": "annotation.stage1.captioner_detector",
    "annotation.local_engine": "annotation.engines.local",
    "annotation.noisy_oracle": "annotation.stage1.noisy_oracle",
    "annotation.phrase_classification": "annotation.stage3.phrase_classification",
    "annotation.pipeline": "annotation.engines.workers",
    "annotation.prompts": "annotation.llm.prompts",
    "annotation.ray_engine": "annotation.engines.ray",
    "annotation.run": "annotation.commands.run",
    "annotation.sam2_tracker": "annotation.stage3.trackers.sam2_tracker",
    "annotation.scoring": "annotation.commands.score",
    "annotation.svo": "annotation.stage2.svo",
    "annotation.tracker_stage3": "annotation.stage3.by_tracking",
    "annotation.tracks": "annotation.stage3.tracks",
    "core.image_preprocessing": "models.grove.image_processing",
    "datamodules.sampling": "models.grove.frame_sampling",
    "judge.callback": "judge.application.callback",
    "judge.commands": "judge.application.commands",
    "judge.correlation": "judge.training.correlation",
    "judge.corruption.caption_extraction": "judge.data.corruption.caption_extraction",
    "judge.corruption.data_types": "judge.data.corruption.data_types",
    "judge.corruption.english_inflection": "judge.data.corruption.english_inflection",
    "judge.corruption.generator": "judge.data.corruption.generator",
    "judge.corruption.lexicon": "judge.data.corruption.lexicon",
    "judge.corruption.llm_backend": "judge.data.corruption.llm_backend",
    "judge.corruption.rule_backend": "judge.data.corruption.rule_backend",
    "judge.datamodule": "judge.data.datamodule",
    "judge.dataset": "judge.data.dataset",
    "judge.endpoint": "judge.model.endpoint",
    "judge.hallucination": "judge.application.hallucination",
    "judge.loading": "judge.application.loading",
    "judge.model_inputs": "judge.model.prompter",
    "judge.module": "judge.training.module",
    "judge.pairs": "judge.data.pairs",
    "judge.pretrained": "judge.model.pretrained",
    "judge.prompt_format": "judge.model.prompt_format",
    "judge.readers": "judge.data.readers",
    "judge.refinement": "judge.application.refinement",
    "judge.scoring": "judge.application.scoring",
    "judge.targets": "judge.data.targets",
    "judge.tokenizer": "judge.model.tokenizer",
    "judge.video_feature_cache": "judge.model.video_feature_cache",
    "judge.vision_pretext": "judge.training.vision_pretext",
    "lightning_modules.grove_export": "models.grove.export",
    "longvideo.stream": "formats.video_reader",
    "metrics.anet_entities": "metrics.protocols.anet_entities",
    "metrics.captioning": "metrics.functional.captioning",
    "metrics.center_frame": "metrics.protocols.center_frame",
    "metrics.correlation": "metrics.functional.correlation",
    "metrics.embedding_scores": "metrics.functional.embedding_scores",
    "metrics.evaluation": "metrics.evaluator.evaluation",
    "metrics.grounding": "metrics.functional.grounding",
    "metrics.official_iground": "metrics.protocols.official_iground",
    "metrics.pointing": "metrics.protocols.pointing",
    "metrics.prediction_set": "metrics.evaluator.prediction_set",
    "metrics.prediction_validation": "metrics.evaluator.prediction_validation",
    "metrics.streaming_evaluation": "metrics.evaluator.evaluation",
    "metrics.threshold_sweep": "metrics.protocols.threshold_sweep",
    "metrics.vidstg": "metrics.protocols.vidstg",
    "metrics.vidstg_annotations": "metrics.protocols.vidstg_annotations",
    "models.adapters": "models.grove.adapters",
    "models.box_decoder": "models.grove.box_decoder",
    "models.configs": "models.grove.configuration",
    "models.cotracker3_checkpoint": "models.cotracker3.convert_official",
    "models.global_video_encoder": "models.grove.global_video_encoder",
    "models.grounding_video_encoder": "models.grove.grounding_video_encoder",
    "models.grove_checkpoint": "models.grove.convert_official",
    "models.heads": "models.grove.heads",
    "models.inference": "models.grove.windows",
    "models.language_model": "models.grove.language_model",
    "models.loss": "models.grove.loss",
    "models.official_tokenization": "models.grove.official_tokenization",
    "models.pretrained_grove": "models.grove.pretrained",
    "models.prompting": "models.grove.prompting",
    "tools.grove_processor": "models.grove.processing",
    "tools.memory_estimator": "lightning_modules.memory_estimator",
    "tools.tower_pretraining": "lightning_modules.tower_pretraining",
    # judge.model, a module then, is now the package judge.model: its old names resolve through
    # judge/model/__init__.py (to judge.model.vc_inspector)
}


def new_name(old: str) -> str | None:
    """The new dotted path of ``old`` (a module, or ``module.attribute``), or None when it did not move."""
    if old in MOVED:
        return MOVED[old]
    module, _, attr = old.rpartition(".")
    if module in MOVED:
        return f"{MOVED[module]}.{attr}"
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def create_module(self, spec):
        warnings.warn(f"module {self.old} moved to {self.new}; import {self.new} instead (the old path "
                      "goes in the next release)", FutureWarning, stacklevel=3)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[self.old] = module  # the new module object, already executed


class _NamespaceLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.__path__ = []


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        new = MOVED.get(fullname)
        if new is not None:
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new))
        prefix = fullname + "."
        if any(old.startswith(prefix) for old in MOVED):
            return importlib.machinery.ModuleSpec(fullname, _NamespaceLoader(), is_package=True)
        return None


_FINDER = _MovedFinder()


def install() -> None:
    """Put the alias finder last on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_FINDER)
