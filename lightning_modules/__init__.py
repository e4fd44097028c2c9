"""LightningModules: training and evaluation logic, no architecture."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

from importlib import import_module

# Short names (``package.Class``): jsonargparse names a class by the shortest path it imports from,
# so the run configs and checkpoints cli.py writes name these two so; configs and docs name classes
# as ``package.module.Class``. They resolve on first use (a module ``__getattr__``, PEP 562), so
# that a command of this package (``grove pretrain-towers --help``) does not import GROVE's model.
SHORT_NAMES = {"GroveModule": "lightning_modules.grove_module", "WarmupLinearDecay": "lightning_modules.schedules"}


def __getattr__(name: str):
    if name in SHORT_NAMES:
        return getattr(import_module(SHORT_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
