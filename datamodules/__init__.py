"""Formats, video decoding, sampling and DataModules."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)
