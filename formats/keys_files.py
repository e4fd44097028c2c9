"""Lists of clip keys: the lines of a hub ``_keys.jsonl`` companion (the key of the row on the same
line of its data file), and keys files that select a split's clips: a pickled or JSON list (or set,
array, dict) of keys, like the release's ``train_keys_deduplicated.pkl``, companion-style lines
(e.g. a sample of them), or a text file with one key per line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from formats.record_errors import RecordError
from formats.safe_pickle import safe_load

KEY_COLUMNS = ("key", "video_key", "clip_key")  # a row's own clip key, when it carries one


def line_error(source: str | Path, line: int, message: str) -> RecordError:
    """A :class:`RecordError` naming the file and the line."""
    return RecordError(f"{source}, line {line}: {message}")


def key_of_keys_line(text: str | bytes, source: str | Path, line: int) -> str:
    """The clip key on one line of a ``_keys`` file: a JSON string or number, an object with
    ``video_id`` + ``clip_id`` or one key column (``key``, ``video_key``, ``clip_key``, ``video_id``,
    ``id``) or a single field, or bare text."""
    text = text.decode("utf-8") if isinstance(text, bytes) else text
    text = text.strip()
    if not text:
        raise line_error(source, line, "blank line where a clip key is expected")
    try:
        value = json.loads(text)
    except ValueError:
        return text  # bare text: the key itself
    if isinstance(value, Mapping):
        if value.get("video_id") is not None and value.get("clip_id") is not None:
            return f"{value['video_id']}_{value['clip_id']}"
        for name in KEY_COLUMNS + ("video_id", "id"):
            if value.get(name) is not None:
                value = value[name]
                break
        else:
            if len(value) != 1:
                raise line_error(source, line, f"cannot tell the clip key among the fields {sorted(value)}; "
                                                f"expected one of {', '.join(KEY_COLUMNS + ('video_id', 'id'))}")
            (value,) = value.values()
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and not value.strip()):
        raise line_error(source, line, f"the clip key must be a non-empty string, got {value!r}")
    return str(value).strip()


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of the non-blank lines of a text file."""
    with path.open("r", encoding="utf-8", newline="\n") as handle:
        for number, text in enumerate(handle, start=1):
            if text.rstrip("\r\n"):  # the rule of line_spans: empty (or only "\r") is blank
                yield number, text


def read_keys_lines(path: str | Path) -> dict[int, str]:
    """``{line number: key}`` of a ``_keys`` companion."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"keys file {path} does not exist")
    return {number: key_of_keys_line(text, path, number) for number, text in numbered_lines(path)}


def read_keys_file(path: str | Path) -> list[str]:
    """The keys of a keys file (pickles through the restricted unpickler)."""
    path = Path(path)
    if path.suffix in (".pkl", ".pickle"):
        data = safe_load(path)
    elif path.suffix == ".json":
        data = json.loads(path.read_text())
    elif path.suffix == ".jsonl":
        data = list(read_keys_lines(path).values())
    else:
        data = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    if isinstance(data, Mapping):
        data = list(data)
    if isinstance(data, np.ndarray):
        data = data.tolist()
    if not isinstance(data, (list, tuple, set, frozenset)):
        raise RecordError(f"{path}: expected a list of record keys, got {type(data).__name__}")
    return [str(k) for k in data]
