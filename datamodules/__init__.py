"""Formats, video decoding, sampling and DataModules."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

from importlib import import_module

# Short names (``package.Class``) for run configs saved before configs named each class by its
# module; configs and docs name classes as ``package.module.Class``. They resolve on first use (a
# module ``__getattr__``, PEP 562), so that the readers and generators here do not import Lightning.
SHORT_NAMES = {
    "ActivityNetEntitiesDataModule": "datamodules.anet_entities",
    "GroundedVideoDataModule": "datamodules.grounded_datamodule",
    "SyntheticGroundedDataModule": "datamodules.grounded_datamodule",
    "HowToGroundDataModule": "datamodules.howtoground",
    "VidSTGDataModule": "datamodules.vidstg",
}


def __getattr__(name: str):
    if name in SHORT_NAMES:
        return getattr(import_module(SHORT_NAMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
