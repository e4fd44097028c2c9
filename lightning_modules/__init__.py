"""LightningModules: training and evaluation logic, no architecture."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

from lightning_modules.grove_module import GroveModule  # noqa: F401
from lightning_modules.schedules import WarmupLinearDecay  # noqa: F401
