"""LightningModules: training and evaluation logic, no architecture."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

# Short names (``package.Class``): jsonargparse names a class by the shortest path it imports from,
# so the run configs and checkpoints cli.py writes name these two so; configs and docs name classes
# as ``package.module.Class``.
from lightning_modules.grove_module import GroveModule  # noqa: F401
from lightning_modules.schedules import WarmupLinearDecay  # noqa: F401
