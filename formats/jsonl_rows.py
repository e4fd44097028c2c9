"""One clip per line of the Hugging Face hub's JSONL (HowToGround1M, iGround) as a raw record dict.

The clip key ``{video_id}_{clip_id}`` comes, in this order, from the row's ``video_id`` and
``clip_id``, from its ``key`` column, or from the line of the same number in the ``_keys``
companion beside the file. With a ``clip_id`` column the companion's line may name the video
alone; a key without either column splits at its last ``_``, and a key with no ``_`` becomes
``<key>_0``. Columns beyond the record's are kept. Every error names the file, the line and the
field. :mod:`formats.records` builds the records; :mod:`formats.hub_jsonl` indexes large files.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from formats.keys_files import KEY_COLUMNS, line_error, numbered_lines, read_keys_lines
from formats.record_errors import RecordError

JSONL_SUFFIX = ".jsonl"
KEYS_SUFFIX = "_keys.jsonl"


def is_jsonl(path: str | Path) -> bool:
    """Whether ``path`` names a JSON Lines annotation file (``*.jsonl``)."""
    return str(path).lower().endswith(JSONL_SUFFIX)


def companion_keys(path: str | Path) -> Path | None:
    """The hub's ``<name>_keys.jsonl`` beside ``<name>.jsonl``, when it exists."""
    path = Path(path)
    if path.name.endswith(KEYS_SUFFIX):
        return None
    candidate = path.with_name(path.name[: -len(JSONL_SUFFIX)] + KEYS_SUFFIX)
    return candidate if candidate.is_file() else None


def split_key(key: str, video_id: Any = None) -> tuple[str, str]:
    """``(video_id, clip_id)`` of a clip key: after the row's ``video_id`` when the key starts with
    it, else at the key's last ``_`` (``clip_id`` ``"0"`` for a key without one)."""
    if video_id is not None and key.startswith(f"{video_id}_") and len(key) > len(str(video_id)) + 1:
        return str(video_id), key[len(str(video_id)) + 1:]
    head, sep, tail = key.rpartition("_")
    if not sep or not head or not tail:
        return key, "0"
    return head, tail


def raw_from_row(row: Any, source: str | Path, line: int, key: str | None = None,
                 keys_source: str | Path | None = None) -> dict[str, Any]:
    """A hub row as a record dict with ``video_id``/``clip_id`` filled in (see the module doc)."""
    if not isinstance(row, Mapping):
        raise line_error(source, line, f"expected a JSON object (one clip), got {type(row).__name__}")
    raw = dict(row)
    video_id, clip_id = raw.get("video_id"), raw.get("clip_id")
    if video_id is not None and clip_id is not None:
        own = f"{video_id}_{clip_id}"
        if key is not None and key != own:
            raise line_error(source, line, f"fields 'video_id'/'clip_id' give the key '{own}' but line {line} of "
                                            f"{keys_source} gives '{key}': is the keys file the one of this file?")
        return raw
    if key is None:
        for name in KEY_COLUMNS:
            if isinstance(raw.get(name), (str, int)) and not isinstance(raw[name], bool):
                key = str(raw[name])
                break
    if key is None:
        missing = "video_id, clip_id" if video_id is None and clip_id is None else ("clip_id" if video_id is not None
                                                                                    else "video_id")
        raise line_error(source, line, f"missing field(s) {missing}, no '{KEY_COLUMNS[0]}' column and no "
                                        f"{Path(str(source)).name[:-len(JSONL_SUFFIX)]}{KEYS_SUFFIX} companion "
                                        "to take the clip key from")
    if clip_id is not None and video_id is None:  # the key names the video, or the whole clip
        tail = f"_{clip_id}"
        raw["video_id"] = key[:-len(tail)] if key.endswith(tail) and len(key) > len(tail) else key
        return raw
    raw["video_id"], raw["clip_id"] = split_key(key, video_id)
    return raw


def parse_row(text: str | bytes, source: str | Path, line: int, key: str | None = None,
              keys_source: str | Path | None = None) -> dict[str, Any]:
    """Decode one JSONL line into a raw record dict with its ids; failures name file and line."""
    try:
        row = json.loads(text)
    except (ValueError, UnicodeDecodeError) as err:
        detail = f"{err.msg} at column {err.colno}" if isinstance(err, json.JSONDecodeError) else str(err)
        raise line_error(source, line, f"not valid JSON ({detail})") from None
    return raw_from_row(row, source, line, key, keys_source)


def check_key_lines(keys: Mapping[int, str], rows: Sequence[int], source: Path, keys_source: Path) -> None:
    """The companion gives a key on the line of each row and on no other line."""
    row_set = set(rows)
    without = [n for n in rows if n not in keys]
    if without:
        raise RecordError(f"{keys_source}: line {without[0]} holds no key, but line {without[0]} of {source} is a "
                          f"clip ({len(without)} row(s) without a key; the keys file must have one line per row)")
    extra = [n for n in keys if n not in row_set]
    if extra:
        raise RecordError(f"{keys_source}: line {extra[0]} holds a key, but line {extra[0]} of {source} is no clip "
                          f"({len(keys)} keys for {len(rows)} rows)")


def raw_rows(path: str | Path, keys: str | Path | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, raw record dict)`` of every row (``keys``: the companion; default: beside it)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"annotation path {path} does not exist")
    keys_path = Path(keys) if keys is not None else companion_keys(path)
    lines = list(numbered_lines(path))
    key_lines = read_keys_lines(keys_path) if keys_path is not None else None
    if key_lines is not None:
        check_key_lines(key_lines, [n for n, _ in lines], path, keys_path)
    for number, text in lines:
        yield number, parse_row(text, path, number, None if key_lines is None else key_lines[number], keys_path)
