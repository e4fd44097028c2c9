"""LightningModules: training and evaluation logic, no architecture."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
