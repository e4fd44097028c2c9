"""Reading a JSON file a user gave (configs, indexes, annotations): an error names the file.

``json.loads(path.read_text())`` fails with a bare ``JSONDecodeError: Expecting value: line 1
column 1`` that does not say which of a command's many files is damaged; :func:`read_json` says
it, with the line and column.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["JSONFileError", "read_json"]


class JSONFileError(ValueError):
    """A file that should hold JSON and does not; the message names the file and the place."""


def read_json(path: str | Path, **kwargs: Any) -> Any:
    """The JSON value in ``path`` (UTF-8); ``kwargs`` go to :func:`json.loads` (e.g. ``object_pairs_hook``).

    Raises :class:`JSONFileError` naming the file for text that is not JSON or not UTF-8;
    a missing file stays a ``FileNotFoundError``.
    """
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"), **kwargs)
    except json.JSONDecodeError as err:
        raise JSONFileError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except UnicodeDecodeError as err:
        raise JSONFileError(f"{path}: not JSON text (not UTF-8: {err.reason} at byte {err.start})") from None
