"""The predictions file: clip key -> ``{"caption", "tagged_caption", "phrases", "frames": [{"frame",
"boxes", "labels", "scores"}]}``, one JSON object per evaluation, as ``predict``/``test`` write it
and the evaluator, the threshold sweep and the judge read it. The field checks live in
:mod:`metrics.prediction_validation`; here the file is written atomically and read with every key
unique.
"""
from __future__ import annotations

from core.output_files import write_json_atomic

import json
from pathlib import Path
from typing import Any


class DuplicateKeyError(ValueError):
    """A JSON object that gives one key twice (JSON readers would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def load_predictions(path: str | Path) -> dict[str, dict]:
    """The predictions JSON (clip key -> prediction); a clip key (or any key of one object) given
    twice is an error naming it."""
    path = Path(path)
    try:
        with path.open() as handle:
            data = json.load(handle, object_pairs_hook=_unique_keys)
    except FileNotFoundError:
        raise FileNotFoundError(f"predictions file {path} does not exist") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    except DuplicateKeyError as err:
        raise ValueError(f"{path}: key '{err.args[0]}' appears twice in one JSON object (a clip predicted twice?); "
                         "keys must be unique") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object mapping clip keys to predictions, got {type(data).__name__}")
    return data


def write_predictions(predictions: dict, path: Path) -> Path:
    """The predictions JSON, written to a temporary file and renamed into place."""
    return write_json_atomic(path, predictions, indent=None)
