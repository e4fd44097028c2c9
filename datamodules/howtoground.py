"""HowToGround1M / iGround in their public layouts, with records read lazily through a compact index.

HowToGround1M holds about 1M clips and 80M boxes. Reading every record up front would take
minutes and put tens of GB into every DataLoader worker. Instead a compact index is built once:
the sorted record keys (and, for single-file layouts, where each record lies in a packed file),
saved as ``.npy`` arrays that every process memory-maps, so the pages are shared and nothing is
copied into workers. A record is read and validated only when its sample is drawn.

Layouts read (as the HowToGround1M and iGround releases ship them):

* a folder of per-key pickles ``{video_id}_{clip_id}.pkl`` (what the public
  ``preprocess_howtoground_annot.py`` writes), optionally restricted to the keys of a keys file
  (a pickled, JSON or one-per-line list, like the public ``train_keys_deduplicated.pkl``);
* one pickle of all records ``{key: record}`` (``HowToGround1M.pkl``, ``iGround_*_raw.pkl``, ...);
* the project's JSON ``{"records": [...]}``;
* the Hugging Face hub's JSONL (:mod:`formats.hub_jsonl`), indexed in place (byte spans of its lines).

A single-file layout cannot be read one record at a time, so it is loaded once (through the
restricted unpickler) and rewritten as a packed file of independently pickled records plus their
byte ranges. iGround ships "raw" files (instances of a phrase kept apart; evaluation) and
"processed" files (one union box per phrase and frame; training): :func:`merge_instances` turns
the first into the second, and training targets are the same from either (the dataset takes the
union per slot).
"""
from __future__ import annotations

from core.json_file import read_json
from core.paths import DATA_DIR

import hashlib
import json
import logging
import os
import pickle
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from datamodules.grounded_datamodule import GroundedVideoDataModule, require_path
from formats.hub_jsonl import build_jsonl_index, is_jsonl, open_jsonl_records
from formats.keys_files import read_keys_file
from formats.mapped_index import MappedRecordIndex, file_identity, staged_index
from formats.records import REQUIRED_FIELDS, GroundedRecord, RecordError, read_records
from formats.safe_pickle import safe_load, safe_loads

log = logging.getLogger(__name__)

INDEX_VERSION = 1
FOLDER_SUFFIXES = (".pkl", ".pickle", ".json")  # a per-key file's suffix is stored as its position here
LAYOUT_FOLDER, LAYOUT_PACKED = "folder", "packed"


# ---------------------------------------------------------------- reading one record

def record_from_file(path: str | Path) -> GroundedRecord:
    """The single record of a per-key file (pickle through the restricted loader, or JSON).

    Every failure (missing, truncated, unsafe or malformed file) is a :class:`RecordError` naming
    the file, so a training run can skip the clip and report it.
    """
    path = Path(path)
    try:
        if path.suffix == ".json":
            data = read_json(path)
        else:
            data = safe_load(path)
    except FileNotFoundError:
        raise RecordError(f"{path}: annotation file does not exist") from None
    except (pickle.UnpicklingError, EOFError, ValueError, OSError) as err:
        raise RecordError(f"{path}: cannot read annotation file ({type(err).__name__}: {err})") from None
    return _single_record(data, str(path))


def _single_record(data: Any, source: str) -> GroundedRecord:
    if isinstance(data, Mapping) and all(f in data for f in REQUIRED_FIELDS):
        return GroundedRecord.from_dict(data, source)
    if isinstance(data, Mapping) and len(data) == 1:  # {key: record}
        (key, value), = data.items()
        return GroundedRecord.from_dict(value, source, key=str(key))
    raise RecordError(f"{source}: expected one record (a dict with the fields {', '.join(REQUIRED_FIELDS)})")


def merge_instances(record: GroundedRecord) -> GroundedRecord:
    """iGround "raw" -> "processed": the instances of a phrase in a frame merged into their union box."""
    boxes, present = record.phrase_boxes()
    bboxes = [boxes[i][present[i]] for i in range(len(boxes))]
    labels = [[record.phrases[j] for j in np.flatnonzero(present[i])] for i in range(len(boxes))]
    return GroundedRecord(
        video_fname=record.video_fname, video_id=record.video_id, clip_id=record.clip_id, fps=record.fps,
        clip_start_frame=record.clip_start_frame, clip_end_frame=record.clip_end_frame, width=record.width,
        height=record.height, caption=record.caption, tagged_caption=record.tagged_caption,
        phrases=list(record.phrases), bboxes=bboxes, labels=labels, extra=dict(record.extra))


# ---------------------------------------------------------------- the index

def _fingerprint(path: Path) -> dict[str, Any]:
    """What tells a stale index (:func:`formats.mapped_index.file_identity`: inode, ctime and sampled
    content besides size and mtime; a folder's mtime and ctime change when files are added or removed)."""
    return file_identity(path)


def default_index_dir(annotations: str | Path, keys_file: str | Path | None = None) -> Path:
    """``<annotations>.index`` beside the annotations when that folder is writable, else under data/cache."""
    annotations = Path(annotations).resolve()
    tag = "" if keys_file is None else "-" + hashlib.sha1(str(Path(keys_file).resolve()).encode()).hexdigest()[:8]
    beside = annotations.parent / f"{annotations.name}{tag}.index"
    if os.access(annotations.parent, os.W_OK):
        return beside
    digest = hashlib.sha1(str(annotations).encode()).hexdigest()[:16]
    return DATA_DIR / "cache" / "record_index" / f"{digest}{tag}"


def _index_meta(annotations: Path, keys_file: Path | None) -> dict[str, Any]:
    return {
        "version": INDEX_VERSION,
        "source": str(annotations.resolve()),
        "source_fingerprint": _fingerprint(annotations),
        "keys_file": None if keys_file is None else str(keys_file.resolve()),
        "keys_fingerprint": None if keys_file is None else _fingerprint(keys_file),
    }


def _index_is_current(index_dir: Path, meta: dict[str, Any]) -> bool:
    try:
        stored = read_json((index_dir / "meta.json"))
    except (OSError, ValueError):
        return False
    return all(stored.get(k) == v for k, v in meta.items())


def _folder_listing(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Sorted keys (bytes) of the per-key files in ``folder`` and the index of each one's suffix."""
    names, suffixes = [], []
    with os.scandir(folder) as entries:
        for entry in entries:
            stem, dot, suffix = entry.name.rpartition(".")
            if dot and f".{suffix}" in FOLDER_SUFFIXES and not entry.name.startswith("."):
                names.append(stem)
                suffixes.append(FOLDER_SUFFIXES.index(f".{suffix}"))
    keys = np.array([n.encode("utf-8") for n in names], dtype=bytes)
    codes = np.array(suffixes, dtype=np.uint8)
    order = np.argsort(keys, kind="stable")
    keys, codes = keys[order], codes[order]
    if len(keys) > 1 and (keys[1:] == keys[:-1]).any():
        dup = keys[1:][keys[1:] == keys[:-1]][0].decode()
        raise RecordError(f"{folder}: record key '{dup}' has several files ({', '.join(FOLDER_SUFFIXES)})")
    return keys, codes


def _restrict_to_keys(keys: np.ndarray, codes: np.ndarray, wanted: list[str], source: Path,
                      keys_file: Path) -> tuple[np.ndarray, np.ndarray]:
    """The listing restricted to a keys file (vectorised membership); unknown keys are reported."""
    want = np.unique(np.array([k.encode("utf-8") for k in wanted], dtype=bytes))
    pos = np.minimum(np.searchsorted(keys, want), max(len(keys) - 1, 0))
    found = keys[pos] == want if len(keys) else np.zeros(len(want), dtype=bool)
    if not found.any():
        raise RecordError(f"{keys_file}: none of its {len(want)} keys has a file in {source}")
    if not found.all():
        missing = [k.decode() for k in want[~found][:5]]
        log.warning("%s: %d of %d keys have no file in %s (e.g. %s); they are left out",
                    keys_file, int((~found).sum()), len(want), source, ", ".join(missing))
    return keys[pos[found]], codes[pos[found]]


def _pack_records(records: Iterable[tuple[str, Any]], blob_path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pickle each raw record dict on its own into one file; returns sorted keys, offsets, lengths."""
    keys, offsets, lengths = [], [], []
    with blob_path.open("wb") as f:
        for key, raw in records:
            blob = pickle.dumps(raw, protocol=pickle.HIGHEST_PROTOCOL)
            keys.append(key.encode("utf-8"))
            offsets.append(f.tell())
            lengths.append(len(blob))
            f.write(blob)
    keys_arr = np.array(keys, dtype=bytes)
    order = np.argsort(keys_arr, kind="stable")
    keys_arr = keys_arr[order]
    if len(keys_arr) > 1 and (keys_arr[1:] == keys_arr[:-1]).any():
        dup = keys_arr[1:][keys_arr[1:] == keys_arr[:-1]][0].decode()
        raise RecordError(f"two records share the key '{dup}'")
    return keys_arr, np.asarray(offsets, dtype=np.int64)[order], np.asarray(lengths, dtype=np.int64)[order]


def _raw_records_of_file(path: Path) -> list[tuple[str, Any]]:
    """``(key, raw record dict)`` of every record of a single-file layout, loaded once."""
    if path.suffix == ".json":
        try:
            data = read_json(path)
        except ValueError as err:
            raise RecordError(f"{path}: not valid JSON ({err})") from None
    else:
        data = safe_load(path)
    if isinstance(data, Mapping) and isinstance(data.get("records"), (list, tuple)):
        data = data["records"]
    if isinstance(data, Mapping) and all(f in data for f in REQUIRED_FIELDS):
        data = [data]
    if isinstance(data, Mapping):
        return [(str(k), v) for k, v in data.items()]
    if isinstance(data, (list, tuple)):
        out = []
        for i, raw in enumerate(data):
            if not isinstance(raw, Mapping) or "video_id" not in raw or "clip_id" not in raw:
                raise RecordError(f"{path}, record #{i}: missing field(s) video_id/clip_id")
            out.append((f"{raw['video_id']}_{raw['clip_id']}", raw))
        return out
    raise RecordError(f"{path}: expected a dict of records, a list of records or {{'records': [...]}}, "
                      f"got {type(data).__name__}")


def build_index(annotations: str | Path, index_dir: str | Path | None = None,
                keys_file: str | Path | None = None, rebuild: bool = False) -> Path:
    """Build (once) the compact index of an annotation folder or file; returns its folder.

    The index is reused while the annotations (and the keys file) are unchanged. It is written
    to a temporary folder and renamed into place, so a reader never sees half an index.
    """
    annotations = Path(annotations)
    if not annotations.exists():
        raise FileNotFoundError(f"annotation path {annotations} does not exist")
    if is_jsonl(annotations):  # the hub's JSONL is indexed where it lies (formats.hub_jsonl)
        return build_jsonl_index(annotations, index_dir, restrict_to=keys_file, rebuild=rebuild)
    keys_path = Path(keys_file) if keys_file is not None else None
    if keys_path is not None and not keys_path.exists():
        raise FileNotFoundError(f"keys file {keys_path} does not exist")
    index_dir = Path(index_dir) if index_dir is not None else default_index_dir(annotations, keys_path)
    meta = _index_meta(annotations, keys_path)
    if not rebuild and _index_is_current(index_dir, meta):
        return index_dir
    start = time.perf_counter()
    with staged_index(index_dir, dict(meta)) as tmp:  # the version named by what it indexes
        if annotations.is_dir():
            keys, codes = _folder_listing(annotations)
            if keys_path is not None:
                keys, codes = _restrict_to_keys(keys, codes, read_keys_file(keys_path), annotations, keys_path)
            if len(keys) == 0:
                raise RecordError(f"{annotations}: folder holds no {'/'.join(FOLDER_SUFFIXES)} annotation files")
            np.save(tmp / "suffix.npy", codes)
            meta["layout"] = LAYOUT_FOLDER
        else:
            raw = _raw_records_of_file(annotations)
            if keys_path is not None:
                wanted = set(read_keys_file(keys_path))
                raw = [(k, r) for k, r in raw if k in wanted]
            keys, offsets, lengths = _pack_records(raw, tmp / "records.bin")
            del raw
            np.save(tmp / "offsets.npy", offsets)
            np.save(tmp / "lengths.npy", lengths)
            meta["layout"] = LAYOUT_PACKED
        np.save(tmp / "keys.npy", keys)
        meta["num_records"] = int(len(keys))
        meta["build_seconds"] = round(time.perf_counter() - start, 3)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    log.info("indexed %d records of %s in %.1f s (%s)", meta["num_records"], annotations,
             meta["build_seconds"], index_dir)
    return index_dir


class LazyRecords(MappedRecordIndex):
    """The records of an index, read and validated one at a time when asked for.

    Holds only memory-mapped arrays (opened on first use in each process, so a pickled copy sent
    to a worker is a few paths), never the records themselves.
    """

    def __init__(self, index_dir: str | Path):
        self.index_dir = Path(index_dir)
        meta_path = self.index_dir / "meta.json"
        try:
            self.meta = read_json(meta_path)
        except (OSError, ValueError) as err:
            raise RecordError(f"{meta_path}: not a record index ({err}); build it with build_index") from None
        if self.meta.get("version") != INDEX_VERSION:
            raise RecordError(f"{meta_path}: index version {self.meta.get('version')} != {INDEX_VERSION}; rebuild it")
        self.source = Path(self.meta["source"])
        self.layout = self.meta["layout"]
        self._arrays: dict[str, np.ndarray] | None = None
        self._fd: int | None = None

    def _array(self, name: str) -> np.ndarray:
        if self._arrays is None:
            names = ("keys", "suffix") if self.layout == LAYOUT_FOLDER else ("keys", "offsets", "lengths")
            self._arrays = {n: np.load(self.index_dir / f"{n}.npy", mmap_mode="r") for n in names}
        return self._arrays[name]

    def key(self, position: int) -> str:
        """The key of the record at ``position`` (no file is read)."""
        return bytes(self._array("keys")[self._check(position)]).decode("utf-8")

    def position(self, key: str) -> int:
        """Position of ``key`` (binary search in the sorted keys); KeyError when absent."""
        keys, needle = self._array("keys"), key.encode("utf-8")
        i = int(np.searchsorted(keys, needle))
        if i >= len(keys) or bytes(keys[i]) != needle:
            raise KeyError(key)
        return i

    def path_of(self, position: int) -> Path:
        """The per-key file of a folder-layout record."""
        position = self._check(position)
        return self.source / (self.key(position) + FOLDER_SUFFIXES[int(self._array("suffix")[position])])

    def __getitem__(self, position):
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        position = self._check(position)
        if self.layout == LAYOUT_FOLDER:
            return record_from_file(self.path_of(position))
        offset, length = int(self._array("offsets")[position]), int(self._array("lengths")[position])
        try:
            blob = self._pread(self.index_dir / "records.bin", offset, length)
        except OSError as err:
            raise RecordError(f"{self.index_dir / 'records.bin'}: cannot open ({err}); rebuild the index") from None
        source = f"{self.source} (packed in {self.index_dir})"
        if len(blob) != length:
            raise RecordError(f"{source}: record '{self.key(position)}' is truncated; rebuild the index")
        return GroundedRecord.from_dict(safe_loads(blob, source), source, key=self.key(position))

    def keys(self) -> list[str]:
        return [bytes(k).decode("utf-8") for k in self._array("keys")]


def open_lazy_records(annotations: str | Path, index_dir: str | Path | None = None,
                      keys_file: str | Path | None = None) -> LazyRecords:
    """Build the index if needed and return the lazy records."""
    if is_jsonl(annotations):
        return open_jsonl_records(annotations, index_dir, restrict_to=keys_file)
    return LazyRecords(build_index(annotations, index_dir, keys_file))


# ---------------------------------------------------------------- the DataModule

class HowToGroundDataModule(GroundedVideoDataModule):
    """HowToGround1M pre-training and iGround fine-tuning/evaluation.

    Splits in ``lazy_splits`` (default: train) are read per sample through the compact index;
    the others are read whole (iGround's 500/1000 evaluation clips; the evaluation callback needs
    their records). Train on "processed" iGround files, evaluate on "raw" ones (the iGround release).

    Args (beyond :class:`GroundedVideoDataModule`):
        train_keys: optional keys file restricting the training split (e.g. the public
            ``train_keys_deduplicated.pkl``).
        index_dir: where the index of the training annotations is cached (default: beside them
            when writable, else ``data/cache/record_index/``).
        lazy_splits: splits read lazily.
    """

    def __init__(self, train_keys: str | None = None, index_dir: str | None = None,
                 lazy_splits: tuple[str, ...] = ("train",), **kwargs):
        kwargs.setdefault("readme_section", "Datasets")
        super().__init__(**kwargs)  # saves this class's arguments too (Lightning walks the __init__ frames)

    def _keys_file(self, split: str) -> Path | None:
        if split != "train" or self.hparams.train_keys is None:
            return None
        return require_path(self.hparams.train_keys, "data.init_args.train_keys", self.readme_section,
                            "training keys file")

    def _index_dir(self, split: str) -> str | None:
        return self.hparams.index_dir if split == "train" else None

    def prepare_data(self) -> None:
        # Built once on the first process of each node; setup on every process then just opens it.
        for split in self.hparams.lazy_splits:
            path = self.annotation_path(split)
            if path is not None and Path(path).exists():
                build_index(path, self._index_dir(split), self._keys_file(split))

    def load_records(self, split: str, path: Path):
        if split in self.hparams.lazy_splits:
            return open_lazy_records(path, self._index_dir(split), self._keys_file(split))
        return read_records(path)
