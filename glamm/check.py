"""Check a GLaMM checkpoint folder against GLaMM built on the meta device: every key and shape,
reading no weights (a folder of meta tensors checks too)."""
from __future__ import annotations

from core.weights import read_weights

from pathlib import Path

from torch import Tensor

from glamm.checkpoint import GLAMM_LAYOUT, folder_config_notes
from glamm.model import GLAMM_CONFIG, build_on_meta
from models.grove.convert_official import ConversionReport, convert_official, target_model


def glamm_target(config_paths: list[str | Path]) -> tuple[dict[str, Tensor], list[str]]:
    """GLaMM's state dict on the meta device for the configs (no weights read), and notes."""
    return target_model(config_paths, build=build_on_meta)


def check_glamm(folder: str | Path, config_paths: list[str | Path] | None = None
                ) -> tuple[ConversionReport, list[str]]:
    """Every key and shape of a GLaMM checkpoint folder against GLaMM built on the meta device;
    reads no weights (a folder of meta tensors checks too)."""
    target, notes = glamm_target(list(config_paths or [GLAMM_CONFIG]))
    official = read_weights(folder, shapes_only=True)
    _, report = convert_official(official, target, materialize=lambda t: t.to("meta"), device="meta",
                                 layout=GLAMM_LAYOUT)
    return report, notes + (folder_config_notes(folder, target) if Path(folder).is_dir() else [])
