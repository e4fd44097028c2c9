"""Formats, video decoding, sampling and DataModules."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

from datamodules.anet_entities import ActivityNetEntitiesDataModule  # noqa: F401
from datamodules.grounded_datamodule import GroundedVideoDataModule, SyntheticGroundedDataModule  # noqa: F401
from datamodules.howtoground import HowToGroundDataModule  # noqa: F401
from datamodules.vidstg import VidSTGDataModule  # noqa: F401
