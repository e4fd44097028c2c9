"""Shared low-level pieces: the torchvision compatibility shim and pure-torch box ops."""
from core import torchvision_compat as _torchvision_compat  # noqa: F401  (must run before torchvision)
