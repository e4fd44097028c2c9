"""CoTracker3 (Karaev et al., "CoTracker3: Simpler and Better Point Tracking by Pseudo-Labelling Real
Videos"), the point tracker of the annotation pipeline's alternative stage 3: ``modeling`` (the
network and its predictor) and ``convert_official`` (the released checkpoints)."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

import importlib

# the public names, each imported from its module on first use (``models.cotracker3.CoTracker3Offline``
# also keeps the class paths written before the family had a folder)
_PUBLIC = {"CoTracker3Config": "modeling", "CoTracker3Offline": "modeling", "CoTracker3Predictor": "modeling",
           "support_grid": "modeling", "load_cotracker3": "convert_official", "check_cotracker3": "convert_official"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
