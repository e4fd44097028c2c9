"""LightningModules: training and evaluation logic, no architecture."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

# Short names (``package.Class``) for run configs saved before configs named each class by its
# module; configs and docs name classes as ``package.module.Class``.
from lightning_modules.grove_module import GroveModule  # noqa: F401
from lightning_modules.schedules import WarmupLinearDecay  # noqa: F401
