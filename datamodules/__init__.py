"""Formats, video decoding, sampling and DataModules."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

# Short names (``package.Class``) for run configs saved before configs named each class by its
# module; configs and docs name classes as ``package.module.Class``.
from datamodules.anet_entities import ActivityNetEntitiesDataModule  # noqa: F401
from datamodules.grounded_datamodule import GroundedVideoDataModule, SyntheticGroundedDataModule  # noqa: F401
from datamodules.howtoground import HowToGroundDataModule  # noqa: F401
from datamodules.vidstg import VidSTGDataModule  # noqa: F401
