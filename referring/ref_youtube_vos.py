"""Ref-YouTube-VOS J&F (Seo et al., "URVOS", ECCV 2020) of a submission folder, where the true masks are at
hand (the train split, or Ref-DAVIS17 in the same layout as ReferFormer's conversion writes it).

Truth: ``Annotations/<video>/<frame>.png``, palette images whose value is the object id; an expression's
``obj_id`` (in ``meta_expressions.json``) names its object. Prediction: ``<pred>/Annotations/<video>/
<exp_id>/<frame>.png`` (non-zero = object), the layout the benchmark's server takes. J and F are the
means over an expression's listed frames (:mod:`metrics.functional.region_contour`, DAVIS's
conventions), the figures the means over expressions; a missing expression scores 0. The validation
split's masks are not public: its J&F comes from the benchmark's server, fed the same folder.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from metrics.functional.region_contour import BOUND_TH, dataset_j_and_f, j_and_f
from referring.benchmarks import ReferringFormatError


def _png(path: Path) -> np.ndarray:
    from PIL import Image

    if not path.is_file():
        raise FileNotFoundError(f"mask {path} does not exist")
    with Image.open(path) as image:
        return np.asarray(image if image.mode in ("P", "L") else image.convert("L"))


def evaluate_ref_youtube_vos(meta: str | Path, annotations: str | Path, pred: str | Path,
                             bound_th: float = BOUND_TH) -> dict[str, Any]:
    """``{"metrics": {"J", "F", "J&F", "num_expressions", "num_missing"}, "per_expression": {...}}``."""
    meta, annotations, pred = Path(meta), Path(annotations), Path(pred) / "Annotations"
    data = json.loads(meta.read_text(encoding="utf-8"))
    per_expression, missing = {}, 0
    for video, entry in data.get("videos", {}).items():
        frames = [str(f) for f in entry["frames"]]
        labels = np.stack([_png(annotations / video / f"{name}.png") for name in frames])
        for exp_id, expression in entry["expressions"].items():
            if "obj_id" not in expression:
                raise ReferringFormatError(f"{meta}, video '{video}', expression '{exp_id}': no 'obj_id' (the "
                                           "validation split has no public masks: score it on the server)")
            truth = labels == int(expression["obj_id"])
            folder = pred / video / str(exp_id)
            key = f"{video}_{exp_id}"
            if not folder.is_dir():
                missing += 1
                per_expression[key] = {"J": 0.0, "F": 0.0, "J&F": 0.0}
                continue
            predicted = np.stack([_png(folder / f"{name}.png") > 0 for name in frames])
            if predicted.shape != truth.shape:
                raise ReferringFormatError(f"{folder}: masks are {predicted.shape[1:]}, the truth {truth.shape[1:]}")
            per_expression[key] = j_and_f(truth, predicted, bound_th)
    figures = dataset_j_and_f(list(per_expression.values()))
    return {"metrics": {**figures, "num_expressions": float(len(per_expression)), "num_missing": float(missing)},
            "per_expression": per_expression}


__all__ = ["evaluate_ref_youtube_vos"]
