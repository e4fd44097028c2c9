"""The predictions file: clip key -> ``{"caption", "tagged_caption", "phrases", "frames": [{"frame",
"boxes", "labels", "scores"[, "masks"]}]}``, one JSON object per evaluation, as ``predict``/``test`` write it
and the evaluator, the threshold sweep and the judge read it. The field checks live in
:mod:`metrics.evaluator.prediction_validation`; here the file is written atomically and read with every key
unique, whole (:func:`load_predictions`) or one clip at a time (:func:`iter_prediction_file`, whose
memory does not grow with the number of clips).

``masks``, where present, is parallel to ``boxes``: one COCO RLE (:mod:`formats.mask_rle`) per box, of
the source video's frame size, or ``null`` for a box without a mask. Files without it stay valid.
"""
from __future__ import annotations

from core.output_files import write_json_atomic

import json
import re
from pathlib import Path
from typing import Any, Iterator

_CHUNK = 1 << 20  # characters read at a time by the streaming reader
_WHITESPACE = re.compile(r"[ \t\n\r]*")


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
    """The whole predictions JSON (clip key -> prediction); a clip key (or any key of one object)
    given twice is an error naming it. The evaluator streams the file instead
    (:func:`iter_prediction_file`)."""
    return dict(iter_prediction_file(path))


class _Stream:
    """A text file read in chunks, parsed one JSON value at a time."""

    def __init__(self, handle, path: Path):
        self.handle, self.path = handle, path
        self.buffer, self.pos, self.consumed, self.eof = "", 0, 0, False
        self.decoder = json.JSONDecoder(object_pairs_hook=_unique_keys)

    def _fill(self) -> bool:
        if self.eof:
            return False
        chunk = self.handle.read(_CHUNK)
        self.consumed += self.pos
        self.buffer, self.pos = self.buffer[self.pos:] + chunk, 0
        self.eof = not chunk
        return bool(chunk)

    def _error(self, what: str, at: int | None = None) -> ValueError:
        where = self.consumed + (self.pos if at is None else at)
        return ValueError(f"{self.path}: not valid JSON ({what} at character {where})")

    def peek(self) -> str:
        """The next non-blank character ('' at the end of the file), not consumed."""
        while True:
            self.pos = _WHITESPACE.match(self.buffer, self.pos).end()
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self._fill():
                return ""

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            got = self.peek()
            raise self._error(f"expected {what}, found {got!r}" if got else f"expected {what}, found the end")
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value; the buffer grows until the value is complete."""
        self.peek()
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.pos)
            except DuplicateKeyError:
                raise
            except json.JSONDecodeError as err:
                if self._fill():
                    continue
                raise self._error(err.msg, err.pos) from None
            if end >= len(self.buffer) and self._fill():  # a number may go on in the next chunk
                continue
            self.pos = end
            return value


def iter_prediction_file(path: str | Path) -> Iterator[tuple[str, Any]]:
    """``(clip key, prediction)`` pairs of a predictions JSON object, read one clip at a time.

    Errors name the file: not JSON (with the character offset), not an object, a key given twice
    in one object (top level or inside a clip).
    """
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"predictions file {path} does not exist") from None
    seen: set[str] = set()
    with handle:
        stream = _Stream(handle, path)
        first = stream.peek()
        if first != "{":
            if first in "[\"-0123456789tfn" and first:
                kind = {"[": "list", '"': "str", "t": "bool", "f": "bool", "n": "null"}.get(first, "number")
                raise ValueError(f"{path}: expected an object mapping clip keys to predictions, got {kind}")
            stream.expect("{", "an object")
        stream.pos += 1
        if stream.peek() == "}":
            stream.pos += 1
        else:
            while True:
                key = stream.value()
                if not isinstance(key, str):
                    raise stream._error("expected a clip key (a string)")
                if key in seen:
                    raise ValueError(f"{path}: key '{key}' appears twice in one JSON object (a clip predicted "
                                     "twice?); keys must be unique")
                seen.add(key)
                stream.expect(":", "':' after a clip key")
                try:
                    value = stream.value()
                except DuplicateKeyError as err:
                    raise ValueError(f"{path}: key '{err.args[0]}' appears twice in one JSON object (in clip "
                                     f"'{key}'); keys must be unique") from None
                yield key, value
                if stream.peek() == ",":
                    stream.pos += 1
                    continue
                stream.expect("}", "',' or '}' after a clip's prediction")
                break
        if stream.peek():
            raise stream._error("extra data after the predictions object")


def write_predictions(predictions: dict, path: Path) -> Path:
    """The predictions JSON, written to a temporary file and renamed into place."""
    return write_json_atomic(path, predictions, indent=None)
