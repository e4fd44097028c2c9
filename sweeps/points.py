"""The points of an ablation sweep: presets of the paper's tables, ``--point NAME=ARGS`` and the grid of
``--axis KEY=V1,V2``; each point is a list of command-line arguments stacked on the base config(s)."""
from __future__ import annotations

from core.paths import REPO_ROOT
from core.safe_names import safe_file_name
from core.user_errors import UserInputError

import itertools
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

ABLATIONS = REPO_ROOT / "configs" / "ablations"


def _overlays(*names: str) -> list[str]:
    return [arg for name in names for arg in ("--config", str(ABLATIONS / f"{name}.yaml"))]


# The paper's ablations (GROVE paper §6.4): Table 5 (adapters; box decoder + VL + LQ trained or frozen)
# and Figure 6's companion (objectness head on/off); "freezing" takes the three parts one at a time.
PRESETS: dict[str, dict[str, list[str]]] = {
    "table5": {"full": [], "no_adapters": _overlays("no_adapters"),
               "frozen_decoder_vl_lq": _overlays("frozen_decoder_vl_lq")},
    "freezing": {"full": [], "frozen_decoder": _overlays("frozen_decoder"), "frozen_vl_lq": _overlays("frozen_vl_lq"),
                 "frozen_decoder_vl_lq": _overlays("frozen_decoder_vl_lq")},
    "objectness": {"full": [], "no_objectness": _overlays("no_objectness")},
}
# Table 5's columns, then the rest of the headline metrics.
DEFAULT_COLUMNS = ("METEOR", "CIDEr", "AP50", "recall", "mIoU", "CAPTURE")


@dataclass
class SweepPoint:
    """One run of a sweep: its folder name and the arguments it adds to the base config(s)."""

    name: str
    args: list[str] = field(default_factory=list)


def expand_grid(axes: Sequence[str]) -> list[SweepPoint]:
    """``["KEY=V1,V2", ...]`` -> the cartesian product of the values, one point per combination.

    ``config=base,path/x.yaml`` stacks an overlay (``base``: none); any other KEY becomes
    ``--KEY=value``. A point is named by its values (overlay stems, ``<last key part>=<value>``).
    """
    choices = []
    for axis in axes:
        if "=" not in axis:
            raise UserInputError(f"--axis {axis!r}: expected KEY=V1,V2,...")
        key, values = axis.split("=", 1)
        options = []
        for value in (v.strip() for v in values.split(",")):
            if not value:
                raise UserInputError(f"--axis {axis!r}: empty value")
            if key == "config":
                label = "base" if value in ("base", "-", "none") else Path(value).stem
                options.append((label, [] if label == "base" else ["--config", value]))
            else:
                options.append((f"{key.split('.')[-1]}={value}", [f"--{key}={value}"]))
        choices.append(options)
    points = []
    for combo in itertools.product(*choices):
        labels = [label for label, _ in combo]
        meaningful = [label for label in labels if label != "base"] or ["base"]
        points.append(SweepPoint(safe_file_name("__".join(meaningful)), [a for _, args in combo for a in args]))
    return points


def parse_points(specs: Sequence[str]) -> list[SweepPoint]:
    """``["NAME=ARGS", ...]`` (ARGS split like a shell; empty for the base config alone)."""
    points = []
    for spec in specs:
        if "=" not in spec:
            raise UserInputError(f"--point {spec!r}: expected NAME=ARGS (ARGS may be empty)")
        name, args = spec.split("=", 1)
        points.append(SweepPoint(safe_file_name(name or "point"), shlex.split(args)))
    return points

