"""models."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
