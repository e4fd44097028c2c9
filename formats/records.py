"""The canonical grounded-clip record (HowToGround1M / iGround, as the GROVE release ships them) and its file formats.

One :class:`GroundedRecord` per clip. ``bboxes[i]`` / ``labels[i]`` describe the i-th frame of the
clip's 5-fps annotation grid (:func:`formats.frame_grids.annotation_grid`). Readers accept the project's JSON and the
public pickle layouts (one pickle of all records, or a folder of per-key pickles); pickles only go
through :mod:`formats.safe_pickle`. Every validation error names the file, the record key and
the field.

A record may carry ``masks``, parallel to ``bboxes``: per annotated frame one mask per box (COCO
compressed RLE, uncompressed RLE or polygons, stored as compressed RLE by
:func:`formats.mask_rle.to_compressed`) or ``null`` for a box without one. Records without it are
unchanged.
"""
from __future__ import annotations

from core.json_file import JSONFileError, parse_json, unique_keys
from core.output_files import atomic_write
from core.safe_names import safe_file_name, unsafe_id_reason

import json
import math
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from formats.frame_grids import annotation_grid, annotation_grid_length
from formats.jsonl_rows import raw_rows
from formats.mask_rle import to_compressed
from formats.record_errors import RecordError
from formats.safe_pickle import safe_load

REQUIRED_FIELDS = (
    "video_fname", "video_id", "clip_id", "fps", "clip_start_frame", "clip_end_frame",
    "width", "height", "caption", "tagged_caption", "phrases", "bboxes", "labels",
)
# The tagged-caption pattern, one home for the data and the prompts: a phrase inside ``<p>…</p>``, and
# each tag alone (captured, so ``TAG.split`` keeps the tags between the pieces).
PHRASE_TAG = re.compile(r"<p>\s*(.*?)\s*</p>", re.DOTALL)
TAG = re.compile(r"(</?p>)")


def tagged_phrases(tagged_caption: str) -> list[str]:
    """Phrases inside ``<p>…</p>`` in order of appearance (repeats kept)."""
    return [m.strip() for m in PHRASE_TAG.findall(tagged_caption)]


def tag_problem(tagged_caption: str) -> str | None:
    """What is wrong with the ``<p>…</p>`` tags of a caption (unbalanced, nested, empty), or None."""
    open_at = None
    for match in TAG.finditer(tagged_caption):
        if match.group() == "<p>":
            if open_at is not None:
                return f"a <p> at character {match.start()} opens before the <p> at {open_at} is closed"
            open_at = match.start()
        else:
            if open_at is None:
                return f"a </p> at character {match.start()} closes no <p>"
            if not tagged_caption[open_at + 3:match.start()].strip():
                return f"the <p></p> at character {open_at} tags an empty phrase"
            open_at = None
    if open_at is not None:
        return f"the <p> at character {open_at} is never closed"
    return None


def strip_tags(tagged_caption: str) -> str:
    """The plain caption: tags removed, whitespace collapsed."""
    text = re.sub(r"</?p>", " ", tagged_caption).replace("[DET]", " ")
    return re.sub(r"\s+", " ", text).strip()


@dataclass
class GroundedRecord:
    """One annotated clip. Boxes are pixel ``xyxy`` float32 arrays of shape ``(n, 4)`` per frame."""

    video_fname: str
    video_id: str
    clip_id: str
    fps: float
    clip_start_frame: int
    clip_end_frame: int
    width: int
    height: int
    caption: str
    tagged_caption: str
    phrases: list[str]
    bboxes: list[np.ndarray]
    labels: list[list[str]]
    extra: dict[str, Any] = field(default_factory=dict)
    masks: list[list[dict | None]] | None = None  # per frame, one compressed RLE (or None) per box

    @property
    def key(self) -> str:
        return f"{self.video_id}_{self.clip_id}"

    @property
    def frame_indices(self) -> np.ndarray:
        """Source-frame index of each annotated frame (aligned with ``bboxes``)."""
        return annotation_grid(self.fps, self.clip_start_frame, self.clip_end_frame)

    def presence(self) -> np.ndarray:
        """``(num_frames, num_phrases)`` bool: phrase j has a box in annotated frame i."""
        index = {p: j for j, p in enumerate(self.phrases)}
        out = np.zeros((len(self.labels), len(self.phrases)), dtype=bool)
        for i, frame_labels in enumerate(self.labels):
            for label in frame_labels:
                out[i, index[label]] = True
        return out

    def phrase_boxes(self) -> tuple[np.ndarray, np.ndarray]:
        """Union box per (frame, phrase): ``boxes (F, P, 4)`` pixel xyxy and ``present (F, P)``.

        Several instances of one phrase in a frame ("raw" iGround files) merge into their union,
        which is what the "processed" files hold and what the model is trained on.
        """
        num_frames, num_phrases = len(self.bboxes), len(self.phrases)
        boxes = np.zeros((num_frames, num_phrases, 4), dtype=np.float32)
        present = np.zeros((num_frames, num_phrases), dtype=bool)
        index = {p: j for j, p in enumerate(self.phrases)}
        for i, (frame_boxes, frame_labels) in enumerate(zip(self.bboxes, self.labels)):
            for box, label in zip(frame_boxes, frame_labels):
                j = index[label]
                if present[i, j]:
                    boxes[i, j, :2] = np.minimum(boxes[i, j, :2], box[:2])
                    boxes[i, j, 2:] = np.maximum(boxes[i, j, 2:], box[2:])
                else:
                    boxes[i, j] = box
                    present[i, j] = True
        return boxes, present

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (numpy arrays become lists)."""
        out = {
            "video_fname": self.video_fname, "video_id": self.video_id, "clip_id": self.clip_id,
            "fps": self.fps, "clip_start_frame": self.clip_start_frame,
            "clip_end_frame": self.clip_end_frame, "width": self.width, "height": self.height,
            "caption": self.caption, "tagged_caption": self.tagged_caption,
            "phrases": list(self.phrases),
            "bboxes": [np.asarray(b, dtype=np.float64).reshape(-1, 4).tolist() for b in self.bboxes],
            "labels": [list(l) for l in self.labels],
        }
        out.update(self.extra)
        if self.masks is not None:
            out["masks"] = [list(m) for m in self.masks]
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "<memory>", key: str | None = None,
                  clip_boxes: bool = True) -> "GroundedRecord":
        """Validate a raw record (JSON or unpickled) and build it; errors name source/key/field."""
        where = f"{source}, record '{key if key is not None else raw.get('video_id', '?')}'"
        if not isinstance(raw, Mapping):
            raise RecordError(f"{where}: expected a dict, got {type(raw).__name__}")
        missing = [f for f in REQUIRED_FIELDS if f not in raw]
        if missing:
            raise RecordError(f"{where}: missing field(s) {', '.join(missing)}")
        where = f"{source}, record '{raw['video_id']}_{raw['clip_id']}'"
        for name in ("video_id", "clip_id"):  # the record key names its files (core.safe_names)
            why = unsafe_id_reason(raw[name])
            if why is not None:
                raise RecordError(f"{where}: field '{name}' = {str(raw[name])!r} cannot be part of a record key: {why}")

        def number(name, kind):
            value = raw[name]
            if isinstance(value, np.generic):
                value = value.item()
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise RecordError(f"{where}: field '{name}' must be a finite number, got {value!r}")
            if kind is int and float(value) != int(value):
                raise RecordError(f"{where}: field '{name}' must be an integer, got {value!r}")
            return kind(value)

        fps = number("fps", float)
        start, end = number("clip_start_frame", int), number("clip_end_frame", int)
        width, height = number("width", int), number("height", int)
        if fps <= 0:
            raise RecordError(f"{where}: field 'fps' must be positive, got {fps}")
        if end < start or start < 0:
            raise RecordError(
                f"{where}: fields 'clip_start_frame'..'clip_end_frame' = {start}..{end} is not a valid range")
        if width <= 0 or height <= 0:
            raise RecordError(f"{where}: fields 'width'/'height' must be positive, got {width}x{height}")
        for name in ("video_fname", "caption", "tagged_caption"):
            if not isinstance(raw[name], str):
                raise RecordError(f"{where}: field '{name}' must be a string, got {type(raw[name]).__name__}")

        phrases = [str(p) for p in _as_list(raw["phrases"], where, "phrases")]
        empty = [i for i, p in enumerate(phrases) if not p.strip()]
        if empty:
            raise RecordError(f"{where}: field 'phrases[{empty[0]}]' is an empty phrase")
        problem = tag_problem(raw["tagged_caption"])
        if problem is not None:
            raise RecordError(f"{where}: field 'tagged_caption': {problem} ({raw['tagged_caption']!r})")
        if len(set(phrases)) != len(phrases):
            raise RecordError(f"{where}: field 'phrases' has duplicates: {phrases}")
        tagged = set(tagged_phrases(raw["tagged_caption"]))
        for p in phrases:
            if p.strip() not in tagged:
                raise RecordError(f"{where}: field 'phrases': {p!r} does not appear as <p>{p}</p> in 'tagged_caption'")

        bboxes_raw = _as_list(raw["bboxes"], where, "bboxes")
        labels_raw = _as_list(raw["labels"], where, "labels")
        grid_len = annotation_grid_length(fps, start, end)  # checked before any grid is built
        if len(bboxes_raw) != len(labels_raw):
            raise RecordError(
                f"{where}: fields 'bboxes' and 'labels' cover {len(bboxes_raw)} and {len(labels_raw)} frames")
        if len(bboxes_raw) != grid_len:
            raise RecordError(
                f"{where}: field 'bboxes' covers {len(bboxes_raw)} frames but the 5-fps grid of frames "
                f"{start}..{end} at {fps} fps has {grid_len}")
        phrase_set = {p: p for p in phrases}  # labels share the phrases' string objects (memory of large GT files)
        limits = np.array([width, height, width, height], dtype=np.float64)
        bboxes, labels = [], []
        for i, (frame_boxes, frame_labels) in enumerate(zip(bboxes_raw, labels_raw)):
            frame_labels = [phrase_set.get(l, l) for l in map(str, _as_list(frame_labels, where, f"labels[{i}]"))]
            try:
                arr = np.asarray(frame_boxes if len(frame_boxes) else np.zeros((0, 4)), dtype=np.float64).reshape(-1, 4)
            except (ValueError, TypeError) as err:
                raise RecordError(
                    f"{where}: field 'bboxes[{i}]' is not a list of [x1, y1, x2, y2] boxes ({err})") from None
            if len(arr) != len(frame_labels):
                raise RecordError(f"{where}: frame {i}: {len(arr)} boxes in 'bboxes[{i}]' "
                                  f"but {len(frame_labels)} labels in 'labels[{i}]'")
            unknown = [l for l in frame_labels if l not in phrase_set]
            if unknown:
                raise RecordError(f"{where}: field 'labels[{i}]' has label(s) {unknown} that are not in 'phrases'")
            if not np.isfinite(arr).all():
                raise RecordError(f"{where}: field 'bboxes[{i}]' has a non-finite coordinate")
            if clip_boxes:
                arr = np.clip(arr, 0.0, limits)
            degenerate = (arr[:, 2] <= arr[:, 0]) | (arr[:, 3] <= arr[:, 1])
            if degenerate.any():
                raise RecordError(
                    f"{where}: field 'bboxes[{i}]' has a degenerate box {arr[degenerate][0].tolist()} "
                    f"(x2 <= x1 or y2 <= y1 after clipping to {width}x{height})")
            bboxes.append(arr.astype(np.float32))
            labels.append(frame_labels)
        extra = {k: v for k, v in raw.items() if k not in REQUIRED_FIELDS and k != "masks"}
        masks = None if raw.get("masks") is None else _read_masks(raw["masks"], bboxes, width, height, where)
        return cls(
            video_fname=raw["video_fname"], video_id=str(raw["video_id"]), clip_id=str(raw["clip_id"]),
            fps=fps, clip_start_frame=start, clip_end_frame=end, width=width, height=height,
            caption=raw["caption"], tagged_caption=raw["tagged_caption"], phrases=phrases,
            bboxes=bboxes, labels=labels, extra=extra, masks=masks,
        )


def _read_masks(raw_masks, bboxes: list[np.ndarray], width: int, height: int, where: str) -> list[list]:
    """The optional ``masks`` field: per frame one mask (or None) per box, as compressed RLEs."""
    frames = _as_list(raw_masks, where, "masks")
    if len(frames) != len(bboxes):
        raise RecordError(f"{where}: field 'masks' covers {len(frames)} frames but 'bboxes' covers {len(bboxes)}")
    out = []
    for i, (frame_masks, boxes) in enumerate(zip(frames, bboxes)):
        frame_masks = _as_list(frame_masks, where, f"masks[{i}]")
        if len(frame_masks) != len(boxes):
            raise RecordError(f"{where}: frame {i}: {len(boxes)} boxes in 'bboxes[{i}]' but {len(frame_masks)} "
                              f"masks in 'masks[{i}]'")
        try:
            out.append([None if m is None else to_compressed(m, height, width, f"{where}, field 'masks[{i}][{j}]'")
                        for j, m in enumerate(frame_masks)])
        except ValueError as err:
            raise RecordError(str(err)) from None
    return out


def _as_list(value, where: str, name: str) -> list:
    if isinstance(value, np.ndarray):
        return list(value)
    if not isinstance(value, (list, tuple)):
        raise RecordError(f"{where}: field '{name}' must be a list, got {type(value).__name__}")
    return list(value)


# ---------------------------------------------------------------- readers and writers

def _records_from_container(data, source: str) -> list[GroundedRecord]:
    """Records of a freshly loaded container, which is consumed: each raw record is released once
    built, so the raw and the built forms of a large file are never both held whole."""
    if isinstance(data, Mapping) and "records" in data and isinstance(data["records"], (list, tuple)):
        data = data["records"]
    if isinstance(data, Mapping):
        if all(f in data for f in REQUIRED_FIELDS):  # a single record
            return [GroundedRecord.from_dict(data, source)]
        if isinstance(data, dict):
            out = []
            for k in list(data):
                out.append(GroundedRecord.from_dict(data.pop(k), source, key=str(k)))
            return out
        return [GroundedRecord.from_dict(v, source, key=str(k)) for k, v in data.items()]
    if isinstance(data, list):
        out = []
        for i in range(len(data)):
            raw, data[i] = data[i], None
            out.append(GroundedRecord.from_dict(raw, source, key=f"#{i}"))
        return out
    if isinstance(data, tuple):
        return [GroundedRecord.from_dict(v, source, key=f"#{i}") for i, v in enumerate(data)]
    raise RecordError(f"{source}: expected a dict of records, a list of records or {{'records': [...]}}, "
                      f"got {type(data).__name__}")


def read_records(path: str | Path) -> list[GroundedRecord]:
    """Read records from the project's JSON, a pickle of all records, a folder of per-key pickles/JSONs,
    or a hub JSONL file (with its ``_keys`` companion when one lies beside it)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"annotation path {path} does not exist")
    if path.suffix.lower() == ".jsonl":  # the Hugging Face hub's layout (formats.jsonl_rows)
        return read_jsonl_records(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".pkl", ".pickle", ".json"))
        if not files:
            raise RecordError(f"{path}: folder holds no .pkl/.pickle/.json annotation files")
        records = []
        for f in files:
            records.extend(_file_records(f))
        return records
    return _file_records(path)


def read_jsonl_records(path: str | Path, keys: str | Path | None = None,
                       clip_boxes: bool = True) -> list[GroundedRecord]:
    """Every record of a hub JSONL file (``keys``: its ``_keys`` companion; default: found beside it).

    For small files (iGround's splits) and tools that want every record; a training file goes
    through :func:`formats.hub_jsonl.open_jsonl_records`. A key on two lines is an error naming both.
    """
    records, seen = [], {}
    for number, raw in raw_rows(path, keys):
        record = GroundedRecord.from_dict(raw, f"{path}, line {number}", key=f"{raw['video_id']}_{raw['clip_id']}",
                                          clip_boxes=clip_boxes)
        if record.key in seen:
            raise RecordError(f"{path}: clip key '{record.key}' appears twice (lines {seen[record.key]} and "
                              f"{number}); keys must be unique")
        seen[record.key] = number
        records.append(record)
    return records


def records_by_key(records: Iterable[GroundedRecord], source: str | Path,
                   into: dict[str, GroundedRecord] | None = None,
                   sources: dict[str, str] | None = None) -> dict[str, GroundedRecord]:
    """``{key: record}``; a key given twice (in one file, or again in ``into``, e.g. from another
    file of the same folder, whose name ``sources`` keeps) is a :class:`RecordError` naming the key
    and both files, never a silent last-wins."""
    out = {} if into is None else into
    sources = {} if sources is None else sources
    for record in records:
        if record.key in out:
            first = sources.get(record.key, str(source))
            where = f"in {source}" if first == str(source) else f"in {first} and in {source}"
            raise RecordError(f"clip key '{record.key}' appears twice ({where}); keys must be unique")
        out[record.key] = record
        sources[record.key] = str(source)
    return out


_RECORDS_HEAD = re.compile(r'\s*\{\s*"records"\s*:\s*\[\s*')
_RECORDS_TAIL = re.compile(r'\s*\]\s*\}\s*\Z')
_SEPARATOR = re.compile(r'\s*,\s*')


def _stream_records_json(text: str, path: Path) -> list[GroundedRecord] | None:
    """Records of the project's own layout (``{"records": [...]}`` and nothing else), parsed one
    record at a time from the text, so the whole raw structure never exists next to the records;
    None for any other layout (read whole instead)."""
    head = _RECORDS_HEAD.match(text)
    if head is None or _RECORDS_TAIL.search(text) is None:
        return None
    decoder, pos, end = json.JSONDecoder(object_pairs_hook=unique_keys), head.end(), _RECORDS_TAIL.search(text).start()
    records: list[GroundedRecord] = []
    while pos < end:
        try:
            raw, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise RecordError(f"{path}: not valid JSON ({err})") from None
        except (JSONFileError, RecursionError) as err:
            raise RecordError(f"{path}, record #{len(records)}: "
                              f"{err if isinstance(err, JSONFileError) else 'nested too deeply to read'}") from None
        records.append(GroundedRecord.from_dict(raw, str(path), key=f"#{len(records)}"))
        if pos == end:
            break
        sep = _SEPARATOR.match(text, pos)
        if sep is None or sep.end() >= end:
            return None  # not a plain list of objects: the whole-file reader names what is wrong
        pos = sep.end()
    return records


def _file_records(path: Path) -> list[GroundedRecord]:
    if path.suffix == ".json":
        text = path.read_text()
        records = _stream_records_json(text, path)
        if records is not None:
            return records
        try:
            data = parse_json(text, str(path))
        except JSONFileError as err:
            raise RecordError(str(err)) from None
        del text
        return _records_from_container(data, str(path))
    return _records_from_container(safe_load(path), str(path))


def write_records_json(records: Iterable[GroundedRecord], path: str | Path) -> Path:
    """The project's safe format: ``{"records": [...]}``."""
    path = Path(path)
    with atomic_write(path) as f:
        json.dump({"records": [r.to_dict() for r in records]}, f)
    return path


def _pickle_dict(record: GroundedRecord, numpy_boxes: bool) -> dict:
    d = record.to_dict()
    if numpy_boxes:  # the public files hold numpy arrays for boxes
        d["bboxes"] = [np.asarray(b, dtype=np.float32).reshape(-1, 4) for b in record.bboxes]
    return d


def write_records_pickle(records: Iterable[GroundedRecord], path: str | Path, numpy_boxes: bool = True) -> Path:
    """Public layout: one pickle holding ``{key: record_dict}``."""
    path = Path(path)
    with atomic_write(path, "wb") as f:
        pickle.dump({r.key: _pickle_dict(r, numpy_boxes) for r in records}, f)
    return path


def write_records_pickle_folder(records: Iterable[GroundedRecord], folder: str | Path,
                                numpy_boxes: bool = True) -> Path:
    """Public layout: one ``{video_id}_{clip_id}.pkl`` per record (the key through
    :func:`core.safe_names.safe_file_name`: unchanged for ordinary ids)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for r in records:
        with atomic_write(folder / safe_file_name(r.key, ".pkl"), "wb") as f:
            pickle.dump(_pickle_dict(r, numpy_boxes), f)
    return folder


# ---------------------------------------------------------------- ground truth by key

ON_CORRUPT = ("skip", "raise")
GT_SUFFIXES = (".pkl", ".pickle", ".json")
_READ_ERRORS = (RecordError, pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, OSError)


def read_ground_truth(path: str | Path, on_corrupt: str = "skip") -> tuple[dict[str, Any], list[str]]:
    """GT records by key, and the files of a GT folder that could not be read (skipped under ``skip``).

    A single GT file that cannot be read is always an error naming it; in a folder of per-key
    files each unreadable file is skipped and listed (``on_corrupt="skip"``, the datasets'
    default policy) or stops the evaluation with its name (``"raise"``).
    """
    if on_corrupt not in ON_CORRUPT:
        raise ValueError(f"on_corrupt must be one of {ON_CORRUPT}, got {on_corrupt!r}")
    path = Path(path)
    if not path.is_dir():
        return records_by_key(_read_gt_file(path), path), []
    files = sorted(p for p in path.iterdir() if p.suffix in GT_SUFFIXES)
    if not files:
        raise RecordError(f"{path}: folder holds no .pkl/.pickle/.json annotation files")
    records, corrupt, sources = {}, [], {}
    for f in files:
        try:
            got = _read_gt_file(f)
        except RecordError as err:
            if on_corrupt == "raise":
                raise
            corrupt.append(f"{f} ({err})")
            continue
        records_by_key(got, f, into=records, sources=sources)
    return records, corrupt


def _read_gt_file(path: Path) -> list:
    try:
        return read_records(path)
    except FileNotFoundError:
        raise
    except _READ_ERRORS as err:
        if isinstance(err, RecordError) and str(path) in str(err):
            raise
        raise RecordError(f"{path}: cannot read ground truth ({type(err).__name__}: {err})") from None
