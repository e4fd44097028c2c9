"""MeViS (Ding et al., "MeViS: A Large-scale Benchmark for Video Segmentation with Motion Expressions",
ICCV 2023): referring video segmentation scored by J&F, from the files as distributed.

A split folder (``valid_u``, the split with public masks; ``train`` has the same layout) holds

* ``meta_expressions.json``: ``{"videos": {video: {"frames": [frame names], "expressions": {exp_id:
  {"exp": text, "obj_id": [...], "anno_id": [...]}}}}}``;
* ``mask_dict.json``: ``{anno_id: [one COCO RLE per frame of the video, or null]}``;
* ``JPEGImages/<video>/<frame>.jpg``.

The true mask of an expression in a frame is the union of its annotations' masks there (an expression
may name several objects, or none in a frame). Each expression is one clip: J and F are the means over
all its frames (:mod:`metrics.functional.region_contour`, DAVIS's conventions), and the benchmark's
figures are the means over expressions of J and F, J&F their mean, as MeViS's evaluation script
computes them. An expression without a prediction scores J = F = 0, as in that script.

Predictions come in one of two forms:

* the project's predictions JSON, one clip per expression keyed ``{video}_{exp_id}``, whose frames
  are numbered by their position in the video's ``frames`` list; the predicted mask of a frame is
  the union of the frame's ``masks`` (a frame not listed is empty);
* MeViS's own submission layout, a folder of ``<video>/<exp_id>/<frame>.png`` (non-zero = object); an
  expression without its folder is missing (scores 0), a missing frame image inside one is an error.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from formats.mask_rle import decode_masks, to_compressed
from metrics.functional.region_contour import BOUND_TH, dataset_j_and_f, j_and_f


class MevisFormatError(ValueError):
    """A MeViS file or prediction is malformed; the message names the file, video, expression and field."""


@dataclass(frozen=True)
class MevisExpression:
    """One referring expression of a video."""

    video: str
    exp_id: str
    text: str
    frames: tuple[str, ...]
    anno_ids: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.video}_{self.exp_id}"


def _load_json(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"MeViS file {path} does not exist")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise MevisFormatError(f"{path}: not valid JSON ({err})") from None


def read_mevis_expressions(path: str | Path) -> list[MevisExpression]:
    """Every expression of ``meta_expressions.json`` (videos and expressions in file order)."""
    path = Path(path)
    data = _load_json(path)
    videos = data.get("videos") if isinstance(data, Mapping) else None
    if not isinstance(videos, Mapping):
        raise MevisFormatError(f"{path}: expected an object with a 'videos' object")
    out = []
    for video, entry in videos.items():
        where = f"{path}, video '{video}'"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("frames"), list) \
                or not isinstance(entry.get("expressions"), Mapping):
            raise MevisFormatError(f"{where}: expected 'frames' (a list) and 'expressions' (an object)")
        frames = tuple(str(f) for f in entry["frames"])
        for exp_id, expression in entry["expressions"].items():
            at = f"{where}, expression '{exp_id}'"
            if not isinstance(expression, Mapping) or "exp" not in expression or \
                    not isinstance(expression.get("anno_id"), list):
                raise MevisFormatError(f"{at}: expected 'exp' (the text) and 'anno_id' (a list)")
            out.append(MevisExpression(str(video), str(exp_id), str(expression["exp"]), frames,
                                       tuple(str(a) for a in expression["anno_id"])))
    return out


def read_mask_dict(path: str | Path) -> dict[str, list]:
    """``mask_dict.json``: annotation id -> one RLE (or null) per frame."""
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        raise MevisFormatError(f"{path}: expected an object mapping annotation ids to lists of per-frame masks")
    return dict(data)


def truth_masks(expression: MevisExpression, mask_dict: Mapping[str, list], size: tuple[int, int] | None = None,
                source: str = "mask_dict.json") -> np.ndarray:
    """``(frames, H, W)`` bool: the union of the expression's annotation masks per frame. ``size``
    (height, width) is needed only when no annotation has a mask in any frame."""
    where = f"{source}, video '{expression.video}', expression '{expression.exp_id}'"
    per_frame: list[list[dict]] = [[] for _ in expression.frames]
    for anno in expression.anno_ids:
        if anno not in mask_dict:
            raise MevisFormatError(f"{where}: annotation id '{anno}' is not in the mask file")
        masks = mask_dict[anno]
        if len(masks) != len(expression.frames):
            raise MevisFormatError(f"{where}: annotation '{anno}' has {len(masks)} masks for "
                                   f"{len(expression.frames)} frames")
        for i, rle in enumerate(masks):
            if rle:
                per_frame[i].append(rle)
    sizes = {tuple(int(v) for v in r["size"]) for rles in per_frame for r in rles}
    if len(sizes) > 1:
        raise MevisFormatError(f"{where}: masks of several sizes {sorted(sizes)}")
    height, width = sizes.pop() if sizes else (size or (0, 0))
    if not height or not width:
        raise MevisFormatError(f"{where}: no annotation mask gives the frame size")
    out = np.zeros((len(expression.frames), height, width), dtype=bool)
    flat = [(i, to_compressed(r, height, width, f"{where}, frame {expression.frames[i]}"))
            for i, rles in enumerate(per_frame) for r in rles]
    if flat:
        decoded = decode_masks([r for _, r in flat])
        np.logical_or.at(out, np.asarray([i for i, _ in flat]), decoded)
    return out


def json_prediction_masks(predictions: Mapping[str, Any], source: str = "<memory>"
                          ) -> Callable[[MevisExpression, tuple[int, int]], np.ndarray | None]:
    """Predicted masks of an expression from the project's predictions JSON (see the module docstring)."""

    def masks(expression: MevisExpression, size: tuple[int, int]) -> np.ndarray | None:
        prediction = predictions.get(expression.key)
        if prediction is None:
            return None
        where = f"{source}, clip '{expression.key}'"
        frames = prediction.get("frames") if isinstance(prediction, Mapping) else None
        if not isinstance(frames, list):
            raise MevisFormatError(f"{where}: expected a 'frames' list")
        out = np.zeros((len(expression.frames), *size), dtype=bool)
        for frame in frames:
            index = frame.get("frame") if isinstance(frame, Mapping) else None
            if not isinstance(index, int) or not 0 <= index < len(expression.frames):
                raise MevisFormatError(f"{where}: frame {index!r} is not a position in the video's "
                                       f"{len(expression.frames)} frames")
            rles = [to_compressed(m, size[0], size[1], f"{where}, frame {index}, mask {j}")
                    for j, m in enumerate(frame.get("masks") or []) if m is not None]
            if rles:
                out[index] = decode_masks(rles).any(axis=0)
        return out

    return masks


def png_prediction_masks(folder: str | Path) -> Callable[[MevisExpression, tuple[int, int]], np.ndarray | None]:
    """Predicted masks from MeViS's submission layout ``<folder>/<video>/<exp_id>/<frame>.png``."""
    folder = Path(folder)

    def masks(expression: MevisExpression, size: tuple[int, int]) -> np.ndarray | None:
        from PIL import Image

        base = folder / expression.video / expression.exp_id
        if not base.is_dir():  # MeViS's script scores a missing video 0 (and fails on a missing expression)
            return None
        out = np.zeros((len(expression.frames), *size), dtype=bool)
        for i, name in enumerate(expression.frames):
            path = base / f"{name}.png"
            if not path.is_file():
                raise MevisFormatError(f"{path}: predicted mask missing (video '{expression.video}', expression "
                                       f"'{expression.exp_id}', frame '{name}')")
            image = np.asarray(Image.open(path).convert("L"))
            if image.shape != tuple(size):
                raise MevisFormatError(f"{path}: mask is {image.shape[1]}x{image.shape[0]}, the frame "
                                       f"{size[1]}x{size[0]}")
            out[i] = image > 0
        return out

    return masks


def frame_size(split: str | Path, expression: MevisExpression) -> tuple[int, int] | None:
    """(height, width) of the video's first frame image, when the split folder has it."""
    path = Path(split) / "JPEGImages" / expression.video / f"{expression.frames[0]}.jpg"
    if not path.is_file():
        return None
    from PIL import Image

    with Image.open(path) as image:
        return image.height, image.width


def evaluate_mevis(expressions: Iterable[MevisExpression], mask_dict: Mapping[str, list],
                   predicted: Callable[[MevisExpression, tuple[int, int]], np.ndarray | None],
                   sizes: Callable[[MevisExpression], tuple[int, int] | None] = lambda e: None,
                   bound_th: float = BOUND_TH, source: str = "mask_dict.json") -> dict[str, Any]:
    """``{"metrics": {"J", "F", "J&F", "num_expressions", "num_missing"}, "per_expression": {key: {...}}}``."""
    per_expression, missing = {}, 0
    for expression in expressions:
        truth = truth_masks(expression, mask_dict, sizes(expression), source)
        pred = predicted(expression, truth.shape[1:])
        if pred is None:
            missing += 1
            per_expression[expression.key] = {"J": 0.0, "F": 0.0, "J&F": 0.0}
            continue
        per_expression[expression.key] = j_and_f(truth, pred, bound_th)
    figures = dataset_j_and_f(list(per_expression.values()))
    return {"metrics": {**figures, "num_expressions": float(len(per_expression)), "num_missing": float(missing)},
            "per_expression": per_expression}


__all__ = ["MevisExpression", "MevisFormatError", "evaluate_mevis", "frame_size", "json_prediction_masks",
           "png_prediction_masks", "read_mask_dict", "read_mevis_expressions", "truth_masks"]
