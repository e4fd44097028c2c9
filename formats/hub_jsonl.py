"""HowToGround1M and iGround as the Hugging Face hub distributes them: JSON Lines, one clip per line.

The hub files (``datasets.load_dataset`` reads the same files):

* HowToGround1M, one configuration per file: ``HowToGround1M_automatic_annotation_method.jsonl``
  (the automatic annotation method's labels) with ``HowToGround1M_automatic_annotation_method_keys.jsonl``,
  and ``HowToGround1M_model_preds.jsonl`` with ``HowToGround1M_model_preds_keys.jsonl``;
* iGround, per split and kind: ``iGround_<split>_set_processed.jsonl`` (one union box per phrase
  and frame, for training) and ``iGround_<split>_set_raw.jsonl`` (separate instances, for evaluation).

A row holds one clip in the fields of the released pickles (:data:`formats.records.REQUIRED_FIELDS`
less the ids); columns beyond those are kept in ``GroundedRecord.extra``. The clip key
``{video_id}_{clip_id}`` comes, in this order, from the row's ``video_id`` and ``clip_id``, from
its ``key`` column, or from the line of the same number in the ``_keys`` companion (found beside
the file, or given). With a ``clip_id`` column the companion's line may name the video alone; a
key without either column splits at its last ``_``, and a key with no ``_`` becomes ``<key>_0``.
Every error names the file, the line and the field.

About a million rows do not fit a DataModule's workers as objects. :func:`build_jsonl_index`
scans the file once (newlines found with numpy, chunk by chunk) and saves each row's byte span,
line number and key as ``.npy`` arrays beside the file (or under ``data/cache``), rebuilt when the
file, its companion or the restricting keys file changes. :class:`JsonlRecords` memory-maps those
arrays and parses one row when it is asked for: the index is all it holds.
"""
from __future__ import annotations

from core.paths import DATA_DIR

import hashlib
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from formats.jsonl_rows import (  # noqa: F401 (the hub layout's names, one import away)
    JSONL_SUFFIX,
    KEYS_SUFFIX,
    check_key_lines,
    companion_keys,
    is_jsonl,
    parse_row,
    raw_from_row,
    split_key,
)
from formats.keys_files import key_of_keys_line, line_error, read_keys_file, read_keys_lines  # noqa: F401
from formats.mapped_index import MappedRecordIndex, current_index, file_identity, identity_changed, staged_index
from formats.records import GroundedRecord, RecordError, read_jsonl_records  # noqa: F401

log = logging.getLogger(__name__)

INDEX_VERSION = 2
_CHUNK = 1 << 24  # bytes read at a time while scanning for newlines


# ---------------------------------------------------------------- one line

def record_from_line(text: str | bytes, source: str | Path, line: int, key: str | None = None,
                     keys_source: str | Path | None = None, clip_boxes: bool = True) -> GroundedRecord:
    """Parse and validate one JSONL line; every failure is a :class:`RecordError` naming file and line."""
    raw = parse_row(text, source, line, key, keys_source)
    return GroundedRecord.from_dict(raw, f"{source}, line {line}", key=f"{raw['video_id']}_{raw['clip_id']}",
                                    clip_boxes=clip_boxes)


# ---------------------------------------------------------------- writing the layout

def write_jsonl_records(records, path: str | Path, keys_companion: bool = False) -> Path:
    """Records as a hub-layout JSONL file; ``keys_companion``: ids left out of the rows and written,
    one per line, to ``<name>_keys.jsonl`` (the HowToGround1M layout)."""
    from core.output_files import atomic_write

    path = Path(path)
    keys_path = path.with_name(path.name[: -len(JSONL_SUFFIX)] + KEYS_SUFFIX) if keys_companion else None
    with atomic_write(path) as out:
        keys_out = []
        for record in records:
            row = record.to_dict()
            if keys_companion:
                keys_out.append(json.dumps(f"{row.pop('video_id')}_{row.pop('clip_id')}"))
            out.write(json.dumps(row) + "\n")
    if keys_path is not None:
        with atomic_write(keys_path) as out:
            out.write("".join(k + "\n" for k in keys_out))
    return path


# ---------------------------------------------------------------- the lazy index

def default_jsonl_index_dir(path: str | Path, restrict_to: str | Path | None = None) -> Path:
    """``<file>.index`` beside the file when its folder is writable, else under ``data/cache/record_index``."""
    path = Path(path).resolve()
    tag = "" if restrict_to is None else "-" + hashlib.sha1(str(Path(restrict_to).resolve()).encode()).hexdigest()[:8]
    if os.access(path.parent, os.W_OK):
        return path.parent / f"{path.name}{tag}.index"
    return DATA_DIR / "cache" / "record_index" / (hashlib.sha1(str(path).encode()).hexdigest()[:16] + tag)


def line_spans(path: str | Path, chunk: int = _CHUNK) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, lengths, line numbers)`` of the non-blank lines of a file, line ends excluded.

    Reads ``chunk`` bytes at a time and finds the newlines with numpy, so memory is the chunk plus
    a few bytes per line. A line holding nothing (or only the ``\\r`` of a CRLF end) is blank.
    """
    ends, carriage, size = [], [], 0
    buffer = np.empty(chunk, dtype=np.uint8)
    previous = 0  # the byte before the chunk (a newline at a chunk's first byte looks back at it)
    with open(path, "rb", buffering=0) as handle:
        while True:
            got = handle.readinto(buffer)
            if not got:
                break
            view = buffer[:got]
            newline = np.flatnonzero(view == 10)
            before = np.where(newline > 0, view[np.maximum(newline - 1, 0)], previous)
            ends.append(newline.astype(np.int64) + size)
            carriage.append(before == 13)
            previous = int(view[-1])
            size += got
    newlines = np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)
    cr = np.concatenate(carriage) if carriage else np.zeros(0, dtype=bool)
    if size and previous != 10:  # a last line without its newline
        newlines = np.append(newlines, size)
        cr = np.append(cr, previous == 13)
    starts = np.concatenate([[0], newlines[:-1] + 1]).astype(np.int64) if len(newlines) else newlines
    lengths = newlines - starts
    lengths = lengths - (cr & (lengths > 0))
    numbers = np.arange(1, len(starts) + 1, dtype=np.int64)
    keep = lengths > 0
    return starts[keep], lengths[keep], numbers[keep]


def _keys_of_rows(path: Path, starts: np.ndarray, lengths: np.ndarray, numbers: np.ndarray,
                  keys_path: Path | None) -> np.ndarray:
    """The clip key of every row (bytes; empty where a row is unreadable: reading it names the error)."""
    if keys_path is not None:
        k_starts, k_lengths, k_numbers = line_spans(keys_path)
        if len(k_numbers) != len(numbers) or (k_numbers != numbers).any():
            lines = dict.fromkeys(int(n) for n in k_numbers)
            check_key_lines(lines, [int(n) for n in numbers], path, keys_path)
        keys = []
        with open(keys_path, "rb") as handle:
            for start, length, number in zip(k_starts.tolist(), k_lengths.tolist(), k_numbers.tolist()):
                keys.append(key_of_keys_line(os.pread(handle.fileno(), length, start), keys_path, number).encode())
        return np.array(keys, dtype=bytes) if keys else np.zeros(0, dtype="S1")
    keys, first_error = [], None
    with open(path, "rb") as handle:
        for start, length, number in zip(starts.tolist(), lengths.tolist(), numbers.tolist()):
            text = os.pread(handle.fileno(), length, start)
            try:
                raw = raw_from_row(json.loads(text), path, number)
                keys.append(f"{raw['video_id']}_{raw['clip_id']}".encode())
            except (RecordError, ValueError, UnicodeDecodeError) as err:
                first_error = first_error or (err if isinstance(err, RecordError) else None) or line_error(
                    path, number, f"not valid JSON ({err})")
                keys.append(b"")
    if keys and first_error is not None and not any(keys):  # not one row has a key: the file, not a row, is wrong
        raise first_error
    return np.array(keys, dtype=bytes) if keys else np.zeros(0, dtype="S1")


def _index_meta(path: Path, keys_path: Path | None, restrict_to: Path | None) -> dict[str, Any]:
    return {"version": INDEX_VERSION, "format": "hub-jsonl", "source": file_identity(path),
            "keys": file_identity(keys_path), "restrict_to": file_identity(restrict_to)}


def build_jsonl_index(path: str | Path, index_dir: str | Path | None = None, keys: str | Path | None = None,
                      restrict_to: str | Path | None = None, rebuild: bool = False) -> Path:
    """Index a hub JSONL file once (reused while the file, ``keys`` and ``restrict_to`` are
    unchanged); returns the index's path, a link to its current version.

    ``keys``: the ``_keys`` companion (default: found beside the file). ``restrict_to``: a keys
    file (pickle, JSON, one per line, e.g. ``train_keys_deduplicated.pkl``, or lines of a ``_keys``
    companion) keeping only its clips. Written to a temporary folder and published atomically
    (:func:`formats.mapped_index.staged_index`): a reader never sees half an index, and processes
    building it at the same moment all end with the same one.
    """
    return _build_jsonl_index(path, index_dir, keys, restrict_to, rebuild)[0]


def _build_jsonl_index(path: str | Path, index_dir: str | Path | None = None, keys: str | Path | None = None,
                       restrict_to: str | Path | None = None, rebuild: bool = False) -> tuple[Path, Path]:
    """:func:`build_jsonl_index`'s work: ``(index_dir, the version folder it points to)``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"annotation path {path} does not exist")
    keys_path = Path(keys) if keys is not None else companion_keys(path)
    if keys_path is not None and not keys_path.is_file():
        raise FileNotFoundError(f"keys file {keys_path} does not exist")
    restrict_path = Path(restrict_to) if restrict_to is not None else None
    if restrict_path is not None and not restrict_path.is_file():
        raise FileNotFoundError(f"keys file {restrict_path} does not exist")
    index_dir = Path(index_dir) if index_dir is not None else default_jsonl_index_dir(path, restrict_path)
    meta = _index_meta(path, keys_path, restrict_path)
    found = None if rebuild else current_index(index_dir, meta)
    if found is not None:
        return index_dir, found
    began = time.perf_counter()
    starts, lengths, numbers = line_spans(path)
    row_keys = _keys_of_rows(path, starts, lengths, numbers, keys_path)
    if restrict_path is not None:
        wanted = np.unique(np.array([k.encode() for k in read_keys_file(restrict_path)], dtype=bytes))
        keep = np.isin(row_keys, wanted)
        if not keep.any():
            raise RecordError(f"{restrict_path}: none of its {len(wanted)} keys is a clip of {path}")
        if keep.sum() < len(wanted):
            log.warning("%s: %d of its %d keys are not clips of %s; they are left out", restrict_path,
                        len(wanted) - int(np.isin(wanted, row_keys[keep]).sum()), len(wanted), path)
        starts, lengths, numbers, row_keys = starts[keep], lengths[keep], numbers[keep], row_keys[keep]
    order = np.argsort(row_keys, kind="stable")
    known = row_keys[order] != b""
    sorted_keys = row_keys[order][known]
    if len(sorted_keys) > 1 and (sorted_keys[1:] == sorted_keys[:-1]).any():
        dup = sorted_keys[1:][sorted_keys[1:] == sorted_keys[:-1]][0]
        lines = numbers[row_keys == dup][:2].tolist()
        raise RecordError(f"{path}: clip key '{dup.decode()}' appears twice (lines {lines[0]} and {lines[1]}); "
                          "keys must be unique")
    identity = dict(meta)
    with staged_index(index_dir, identity) as tmp:
        for name, array in (("starts", starts), ("lengths", lengths), ("lines", numbers), ("keys", row_keys),
                            ("order", order[known].astype(np.int64))):
            np.save(tmp / f"{name}.npy", array)
        meta = {**meta, "num_records": int(len(starts)), "build_seconds": round(time.perf_counter() - began, 3)}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    log.info("indexed %d rows of %s in %.1f s (%s)", meta["num_records"], path, meta["build_seconds"], index_dir)
    found = current_index(index_dir, identity)
    if found is None:
        raise RecordError(f"{index_dir}: the index of {path} was built but is not there; is its folder shared "
                          "with a process indexing another file?")
    return index_dir, found


class JsonlRecords(MappedRecordIndex):
    """The clips of a hub JSONL file, parsed and validated one at a time when asked for.

    Holds the index's memory-mapped arrays (opened on first use in each process, so a copy sent
    to a DataLoader worker is a few paths) and one file descriptor, never the rows.
    """

    def __init__(self, index_dir: str | Path, clip_boxes: bool = True):
        self.index_dir = Path(os.path.realpath(index_dir))  # this version, even if a newer one is published
        try:
            self.meta = json.loads((self.index_dir / "meta.json").read_text())
        except (OSError, ValueError) as err:
            raise RecordError(f"{self.index_dir / 'meta.json'}: not a JSONL index ({err}); "
                              "build it with build_jsonl_index") from None
        if self.meta.get("version") != INDEX_VERSION or self.meta.get("format") != "hub-jsonl":
            raise RecordError(f"{self.index_dir}: not a version-{INDEX_VERSION} JSONL index; rebuild it")
        self.source = Path(self.meta["source"]["path"])
        self.keys_source = Path(self.meta["keys"]["path"]) if self.meta.get("keys") else None
        self.clip_boxes = clip_boxes
        self._arrays: dict[str, np.ndarray] | None = None
        self._fd: int | None = None

    def refuse_changed(self) -> None:
        """A file or keys file that changed since it was indexed (``stat``: inode, size, times) is an
        error: the index's offsets would hand out rows under other rows' keys."""
        for what, path in (("file", self.source), ("keys file", self.keys_source)):
            changed = identity_changed(self.meta.get("source" if what == "file" else "keys"), path) \
                if path is not None else None
            if changed:
                raise RecordError(f"{path}: the {what} changed after it was indexed ({changed}; index "
                                  f"{self.index_dir}); open it again to rebuild the index")

    def arrays(self) -> dict[str, np.ndarray]:
        """The memory-mapped index: ``starts``, ``lengths``, ``lines``, ``keys`` (file order), ``order``."""
        if self._arrays is None:
            self.refuse_changed()
            self._arrays = {n: np.load(self.index_dir / f"{n}.npy", mmap_mode="r")
                            for n in ("starts", "lengths", "lines", "keys", "order")}
        return self._arrays

    def line(self, position: int) -> int:
        """The line number (1-based) of the row at ``position``."""
        return int(self.arrays()["lines"][self._check(position)])

    def key(self, position: int) -> str:
        """The clip key of the row at ``position`` (no row is read; ``file:line`` when it has none)."""
        position = self._check(position)
        key = bytes(self.arrays()["keys"][position]).decode("utf-8")
        return key or f"{self.source.name}:{self.line(position)}"

    def keys(self) -> list[str]:
        """Every row's key, in file order (``file:line`` for a row without one)."""
        arrays, name = self.arrays(), self.source.name
        return [k.decode("utf-8") or f"{name}:{int(n)}" for k, n in zip(arrays["keys"].tolist(), arrays["lines"])]

    def position(self, key: str) -> int:
        """Position of ``key`` (binary search through ``order``); KeyError when absent."""
        arrays, needle = self.arrays(), key.encode("utf-8")
        order = arrays["order"]
        lo, hi = 0, len(order)
        while lo < hi:  # keys[order] is sorted; searchsorted would copy the gathered keys
            mid = (lo + hi) // 2
            if bytes(arrays["keys"][order[mid]]) < needle:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(order) and bytes(arrays["keys"][order[lo]]) == needle:
            return int(order[lo])
        raise KeyError(key)

    def text(self, position: int) -> bytes:
        """The raw bytes of the row at ``position``."""
        position = self._check(position)
        arrays = self.arrays()
        start, length = int(arrays["starts"][position]), int(arrays["lengths"][position])
        self.refuse_changed()  # on every read: a file rewritten in place after the first row was read
        try:
            blob = self._pread(self.source, start, length)
        except OSError as err:
            raise RecordError(f"{self.source}: cannot open ({err})") from None
        if len(blob) != length:
            raise RecordError(f"{self.source}, line {self.line(position)}: the file is shorter than its index; "
                              "it changed after indexing (open it again to rebuild the index)")
        return blob

    def __getitem__(self, position):
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        position = self._check(position)
        key = bytes(self.arrays()["keys"][position]).decode("utf-8") if self.keys_source is not None else None
        return record_from_line(self.text(position), self.source, self.line(position), key, self.keys_source,
                                self.clip_boxes)


def open_jsonl_records(path: str | Path, index_dir: str | Path | None = None, keys: str | Path | None = None,
                       restrict_to: str | Path | None = None) -> JsonlRecords:
    """Index the file if needed and return its lazy records."""
    return JsonlRecords(_build_jsonl_index(path, index_dir, keys, restrict_to)[1])  # this version
