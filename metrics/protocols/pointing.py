"""Pointing-game accuracy on YouCook-Interactions and GroundingYouTube, as the released GROVE scores them.

For each segment and each of its target seconds whose ground-truth box exists, the second counts;
it is correct when the centre of the predicted box lies inside the ground-truth box, borders
included. A missing prediction (None) or one with a NaN coordinate is a miss. Accuracy is the
percentage of correct seconds over the counted ones (0 when none count).

The rule follows the released ``eval_youcookinteractions.py`` case by case:

- the centre ``(x1 + x2) / 2`` is computed in the predictions' own dtype (float32 for the released
  inference's arrays, float64 for JSON numbers) and compared with the float64 GT, so a centre on a
  GT border is in or out exactly as the script finds it;
- a clip's predictions are its ``final_boxes`` list, one entry per target second; an entry holds
  the boxes predicted for the caption's phrases (one, ``[[x1, y1, x2, y2]]``) and the first is
  scored; a plain ``[x1, y1, x2, y2]`` is read as that one box;
- predictions and target seconds are paired in order and only as far as both lists go: seconds
  beyond a short ``final_boxes`` list are not counted (reported as ``unscored_seconds``);
- ground-truth boxes with a NaN coordinate count and are never hit.

Where the released script fails, this module decides:

- a clip absent from the predictions (the released script stops with an AttributeError): with
  ``missing="miss"`` (default) each of its boxed seconds counts as a miss, so leaving clips out
  can only lower the score; ``missing="error"`` refuses the file naming the clips;
- an entry without boxes (``[]``, where the released script fails with an IndexError): a miss.

Predictions are read from the project's predictions JSON (``cli.py predict`` with
``configs/overlays/youcook_interactions.yaml`` or ``configs/overlays/groundingyoutube.yaml``) or from the released
inference's pickle ``{clip_key: {"final_boxes": [...], ...}}`` (restricted unpickler)::

    grove pointing --gt full_annotations.pkl --pred predictions_predict.json --dataset youcook
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from formats.pointing_records import PointingRecord, read_pointing_records
from formats.safe_pickle import safe_load

MISSING_POLICIES = ("miss", "error")
MAX_EXAMPLES = 10


class PointingInputError(ValueError):
    """Predictions that cannot be scored; the message names the file, clip and entry."""


def _centres(rows: np.ndarray) -> np.ndarray:
    """Box centres ``(n, 2)`` computed in the boxes' own dtype, as the released script's
    ``(x1 + x2) / 2`` on numpy scalars does (float32 boxes give float32 centres), held in float64
    exactly so they compare with the float64 GT as the script compares them."""
    if rows.dtype.kind not in "fiu":
        rows = rows.astype(np.float64)
    return ((rows[:, :2] + rows[:, 2:4]) / 2).astype(np.float64)


def first_box_centres(final_boxes: Sequence[Any], where: str) -> np.ndarray:
    """``final_boxes`` -> ``(n, 2)`` the centre of the first box of each entry, NaN rows for misses
    (None, an entry with any NaN, an entry without boxes)."""
    n = len(final_boxes)
    dtypes = {getattr(entry, "dtype", None) for entry in final_boxes}
    try:  # the common case: every entry the same shape and dtype, e.g. (n, 1, 4) float32
        stacked = np.asarray(final_boxes) if len(dtypes) == 1 else None
    except (TypeError, ValueError):
        stacked = None
    if stacked is not None and stacked.dtype.kind in "fiu" and stacked.ndim in (2, 3) and stacked.shape[-1] == 4 \
            and stacked.size:
        rows = stacked if stacked.ndim == 2 else stacked[:, 0]
        nan = np.isnan(stacked.astype(np.float64)).reshape(n, -1).any(axis=1)
        return np.where(nan[:, None], np.nan, _centres(rows))
    out = np.full((n, 2), np.nan)
    for i, entry in enumerate(final_boxes):  # ragged or mixed entries (None, [], mixed shapes or dtypes)
        if entry is None:
            continue
        try:
            box = np.asarray(entry)
            if box.dtype.kind not in "fiu":
                box = box.astype(np.float64)
        except (TypeError, ValueError):
            raise PointingInputError(f"{where}: final_boxes[{i}] is not a box or a list of boxes: {entry!r}") from None
        if box.size == 0 or np.isnan(box.astype(np.float64)).any():
            continue
        box = box.reshape(-1, box.shape[-1]) if box.ndim else box.reshape(1, 1)
        if box.shape[-1] != 4:
            raise PointingInputError(f"{where}: final_boxes[{i}] must hold (x1, y1, x2, y2) boxes, got {entry!r}")
        out[i] = _centres(box[:1])[0]
    return out


def read_predictions(path: str | Path) -> dict[str, Any]:
    """``{clip_key: {"final_boxes": [...], ...}}`` from a predictions JSON or the released pickle."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: predictions not found")
    if path.suffix.lower() == ".json":
        def unique_keys(pairs):  # a JSON object may repeat a key; json.load keeps the last
            seen = {}
            for key, value in pairs:
                if key in seen:
                    raise PointingInputError(f"{path}, key {key!r}: appears twice in one object; keep one "
                                             "value per key (one prediction per clip)")
                seen[key] = value
            return seen

        with path.open(encoding="utf-8") as f:
            try:
                data = json.load(f, object_pairs_hook=unique_keys)
            except json.JSONDecodeError as err:
                raise PointingInputError(f"{path}: not valid JSON ({err}); give the predictions file that "
                                         "cli.py predict wrote") from None
            except UnicodeDecodeError as err:
                raise PointingInputError(f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset "
                                         f"{err.start}); save the file as UTF-8") from None
    else:
        data = safe_load(path)
    if not isinstance(data, Mapping):
        raise PointingInputError(f"{path}: expected a mapping from clip key to prediction, got {type(data).__name__}")
    if data and not any(isinstance(v, Mapping) and "final_boxes" in v for v in data.values()):
        raise PointingInputError(f"{path}: no clip has 'final_boxes'; pointing predictions come from "
                                 "cli.py predict with configs/overlays/youcook_interactions.yaml or "
                                 "configs/overlays/groundingyoutube.yaml")
    return dict(data)


def pointing_accuracy(records: Sequence[PointingRecord], predictions: Mapping[str, Any], missing: str = "miss",
                      source: str = "predictions") -> dict[str, Any]:
    """The pointing-game report: ``accuracy`` (percent), ``correct``, ``valid``, ``clips``,
    ``missing_clips`` (+ examples), ``unscored_seconds``, ``extra_predictions``,
    ``duplicate_clips`` (+ examples): GT segments listed more than once are scored each time, as
    the released script scores them (it loops over the GT list), and reported."""
    if missing not in MISSING_POLICIES:
        raise ValueError(f"missing must be one of {MISSING_POLICIES}, got {missing!r}")
    keys = [r.key for r in records]
    unique, counts = np.unique(np.asarray(keys, dtype=str), return_counts=True)
    duplicates = unique[counts > 1].tolist()
    absent = [k for k in dict.fromkeys(keys) if k not in predictions]
    if absent and missing == "error":
        raise PointingInputError(f"{source}: {len(absent)} clip(s) of the ground truth have no prediction, "
                                 f"e.g. {absent[:3]}")
    centres, gts, counted, unscored = [], [], [], 0
    for record in records:  # one entry per segment; the boxes of all segments are scored at once below
        gt, has_box = record.boxes, record.has_box
        prediction = predictions.get(record.key)
        if prediction is None:
            centre = np.full((len(gt), 2), np.nan)
        else:
            if not isinstance(prediction, Mapping):
                raise PointingInputError(f"{source}: clip {record.key!r} must be a mapping with 'final_boxes', "
                                         f"got {type(prediction).__name__}")
            final = prediction.get("final_boxes")
            centre = first_box_centres([] if final is None else list(final), f"{source}: clip {record.key!r}")
        n = min(len(centre), len(gt))
        unscored += int(has_box[n:].sum())
        centres.append(centre[:n])
        gts.append(gt[:n])
        counted.append(has_box[:n])
    centre = np.concatenate(centres) if centres else np.zeros((0, 2))
    gt = np.concatenate(gts) if gts else np.zeros((0, 4))
    valid = np.concatenate(counted) if counted else np.zeros(0, dtype=bool)
    with np.errstate(invalid="ignore"):  # NaN centres or GT boxes compare False: a miss
        inside = ((gt[:, 0] <= centre[:, 0]) & (centre[:, 0] <= gt[:, 2])
                  & (gt[:, 1] <= centre[:, 1]) & (centre[:, 1] <= gt[:, 3]))
    correct, total = int((inside & valid).sum()), int(valid.sum())
    known = set(keys)
    return {
        "accuracy": correct / total * 100 if total else 0.0,
        "correct": correct,
        "valid": total,
        "clips": len(records),
        "missing_clips": len(absent),
        "missing_examples": absent[:MAX_EXAMPLES],
        "missing_policy": missing,
        "unscored_seconds": unscored,
        "extra_predictions": sum(1 for k in predictions if k not in known),
        "duplicate_clips": len(duplicates),
        "duplicate_examples": duplicates[:MAX_EXAMPLES],
    }


def evaluate_files(gt: str | Path, pred: str | Path | Sequence[str | Path], dataset: str,
                   missing: str = "miss") -> dict[str, Any]:
    """The report for ``pred`` (one file, or several: one per process of a multi-GPU predict, whose
    clips are merged; a clip in two files keeps the first)."""
    paths = [pred] if isinstance(pred, (str, Path)) else list(pred)
    predictions: dict[str, Any] = {}
    for path in paths:
        for key, value in read_predictions(path).items():
            predictions.setdefault(key, value)
    records = read_pointing_records(gt, dataset)
    if not records:
        raise PointingInputError(f"{gt}: the ground truth holds no segment; give the benchmark's "
                                 "full_annotations.pkl")
    source = ", ".join(map(str, paths))
    report = pointing_accuracy(records, predictions, missing=missing, source=source)
    return {"dataset": dataset, "gt": str(gt), "pred": source, **report}
