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
    "core.image_preprocessing": "models.grove.image_processing",
    "datamodules.sampling": "models.grove.frame_sampling",
    "lightning_modules.grove_export": "models.grove.export",
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
