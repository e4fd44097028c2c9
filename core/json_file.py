"""Reading a JSON file a user gave (configs, indexes, annotations): an error names the file.

``json.loads(path.read_text())`` fails with a bare ``JSONDecodeError: Expecting value: line 1
column 1`` that does not say which of a command's many files is damaged; :func:`read_json` says
it, with the line and column. An object that gives one key twice is refused naming the key
(Python's reader keeps the last silently), and a value nested deeper than the reader's recursion
allows is refused naming the file (instead of a ``RecursionError``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["DuplicateJSONKeyError", "JSONFileError", "parse_json", "read_json", "unique_keys"]


class JSONFileError(ValueError):
    """A file that should hold JSON and does not; the message names the file and the place."""


class DuplicateJSONKeyError(JSONFileError):
    """A JSON object that gives one key twice."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` that refuses an object giving one key twice."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateJSONKeyError(f"key {key!r} is given twice in one object")
        out[key] = value
    return out


def parse_json(text: str, where: str, **kwargs: Any) -> Any:
    """``json.loads(text)`` with duplicate keys refused (:func:`unique_keys`); every error is a
    :class:`JSONFileError` naming ``where`` (a file, or a file and line)."""
    kwargs.setdefault("object_pairs_hook", unique_keys)
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as err:
        raise JSONFileError(f"{where}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except DuplicateJSONKeyError as err:
        raise DuplicateJSONKeyError(f"{where}: {err}") from None
    except RecursionError:
        raise JSONFileError(f"{where}: JSON nested too deeply to read (more than a few hundred levels of "
                            "arrays or objects)") from None


def read_json(path: str | Path, **kwargs: Any) -> Any:
    """The JSON value in ``path`` (UTF-8); ``kwargs`` go to :func:`json.loads` (``object_pairs_hook``
    defaults to :func:`unique_keys`).

    Raises :class:`JSONFileError` naming the file for text that is not JSON or not UTF-8, gives a
    key twice or nests too deeply; a missing file stays a ``FileNotFoundError``.
    """
    path = Path(path)
    try:
        return parse_json(path.read_text(encoding="utf-8"), str(path), **kwargs)
    except UnicodeDecodeError as err:
        raise JSONFileError(f"{path}: not JSON text (not UTF-8: {err.reason} at byte {err.start})") from None
