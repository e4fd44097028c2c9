"""Formats, video decoding, sampling and DataModules."""
import core  # noqa: F401  (torchvision compatibility before anything imports torchvision)

from datamodules.grounded_datamodule import GroundedVideoDataModule, SyntheticGroundedDataModule  # noqa: E402,F401
from datamodules.howtoground import HowToGroundDataModule  # noqa: E402,F401
from datamodules.vidstg import VidSTGDataModule  # noqa: E402,F401
from datamodules.anet_entities import ActivityNetEntitiesDataModule  # noqa: E402,F401
