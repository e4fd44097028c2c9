"""ActivityNet-Entities (Zhou et al. 2019) in its public layout: one grounded sample per event segment.

Read from the public files:

* ``anet_entities_cleaned_class_thresh50_trainval.json``: ``{"annotations": {video: {"segments":
  {segment id: {tokens, process_clss, process_idx, process_bnd_box, frame_ind, crowds}}}}}``:
  the sentence's tokens, and per box its object class(es), the index of the object word(s) in
  the sentence, the box ``[x1, y1, x2, y2]`` and the one of the segment's 10 sampled frames it
  is drawn on;
* ``split_ids_anet_entities.json``: the video ids of each split (``training``, ``validation``,
  ``testing``);
* the segment times: a ``timestamps`` field in the segment (as in GROVE's copy of the file), or
  ActivityNet Captions files (``train.json``, ``val_1.json``, ...: ``{video: {"timestamps":
  [[start, end], ...]}}``, segment ``k`` = the k-th timestamp);
* the frame size boxes are drawn in: ``rwidth``/``rheight`` of the video (720 px wide, aspect
  kept), from the video entry or the raw ``anet_entities_trainval.json``; otherwise read from the
  video's header.

The 10 sampled frames are the centres of 10 equal parts of the segment. A record numbers them 0-9:
its frame grid is ``0..9`` (``fps=5, clip 0..9``), ``frame_ind`` of a box is the frame it lies on,
and predictions use the same numbers. :class:`ActivityNetEntitiesDataset` maps them to source
frames when it decodes (time ``start + (i + 0.5) (end - start) / 10``).

The caption is the sentence's tokens joined by spaces; each annotated object word (at its
``process_idx``) is tagged as a one-word phrase, so the model learns to ground object words, and a
predicted word's class is its lemma (:mod:`metrics.protocols.anet_entities`). A word repeated in the
sentence is one phrase (the record's phrases are unique): its boxes are that phrase's boxes.
Only annotated segments (some ``frame_ind``) with ``end > start`` are read: training needs boxes,
and the official per-sentence averages count only the segments a submission predicts.
"""
from __future__ import annotations

from core.json_file import read_json

import logging
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from datamodules.grounded_datamodule import GroundedVideoDataModule, require_path
from datamodules.grounded_dataset import GroundedClipDataset
from formats.records import GroundedRecord, RecordError
from formats.video_files import open_video
from formats.video_reader import VideoDecodeError

log = logging.getLogger(__name__)

NUM_SAMPLED_FRAMES = 10
RESIZED_WIDTH = 720  # ActivityNet-Entities boxes are drawn on frames resized to 720 px wide
SPLIT_NAMES = ("training", "validation", "testing", "hidden_testing")


def sampled_frame_times(start: float, end: float, num: int = NUM_SAMPLED_FRAMES) -> np.ndarray:
    """Times (s) of the centres of ``num`` equal parts of ``[start, end]``."""
    return start + (np.arange(num) + 0.5) * (end - start) / num


def _load_json(path: Path, what: str) -> Any:
    try:
        return read_json(Path(path))
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} file {path} does not exist") from None
    except ValueError as err:
        raise RecordError(f"{path}: not valid JSON ({err})") from None


def read_split_ids(path: str | Path, splits: Sequence[str]) -> set[str]:
    """Video ids of the named splits of ``split_ids_anet_entities.json``."""
    data = _load_json(Path(path), "ActivityNet-Entities split")
    unknown = [s for s in splits if s not in data]
    if unknown:
        raise RecordError(f"{path}: no split(s) {unknown}; it has {sorted(data)}")
    return {str(v) for s in splits for v in data[s]}


def read_segment_timestamps(paths: Iterable[str | Path]) -> dict[str, list]:
    """``{video: [[start, end], ...]}`` from ActivityNet Captions files (the first file naming a video wins)."""
    out: dict[str, list] = {}
    for path in paths:
        data = _load_json(Path(path), "ActivityNet Captions")
        for vid, entry in data.items():
            if isinstance(entry, Mapping) and "timestamps" in entry:
                out.setdefault(str(vid), entry["timestamps"])
    return out


def read_frame_sizes(path: str | Path) -> dict[str, tuple[int, int]]:
    """``{video: (rwidth, rheight)}`` from the raw ``anet_entities_trainval.json``."""
    data = _load_json(Path(path), "ActivityNet-Entities raw annotation")
    videos = data.get("database", data)
    return {str(v): (int(e["rwidth"]), int(e["rheight"])) for v, e in videos.items()
            if isinstance(e, Mapping) and "rwidth" in e and "rheight" in e}


def _probe_frame_size(video_root: Path, vid: str) -> tuple[int, int]:
    with open_video(video_root, f"{vid}.mp4") as video:
        width, height = video.width, video.height
    return RESIZED_WIDTH, int(round(RESIZED_WIDTH * height / width))


def segment_record(vid: str, seg: str, ann: Mapping[str, Any], timestamps: Sequence[float],
                   frame_size: tuple[int, int], source: str) -> GroundedRecord:
    """One segment -> a :class:`GroundedRecord` on the 10 sampled frames (see the module doc)."""
    where = f"{source}, video '{vid}', segment '{seg}'"
    try:
        tokens = [str(t) for t in ann["tokens"]]
        clss = [list(c) for c in ann.get("process_clss", [])]
        idx = [[int(i) for i in ix] for ix in ann.get("process_idx", [])]
        boxes = np.asarray(ann.get("process_bnd_box", []), dtype=np.float64).reshape(-1, 4)
        frame_ind = np.asarray(ann.get("frame_ind", []), dtype=np.int64).reshape(-1)
    except (KeyError, TypeError, ValueError) as err:
        raise RecordError(f"{where}: malformed segment ({type(err).__name__}: {err})") from None
    if not (len(clss) == len(idx) == len(boxes) == len(frame_ind)):
        raise RecordError(f"{where}: process_clss, process_idx, process_bnd_box and frame_ind have lengths "
                          f"{len(clss)}, {len(idx)}, {len(boxes)}, {len(frame_ind)}")
    if ((frame_ind < 0) | (frame_ind >= NUM_SAMPLED_FRAMES)).any():
        raise RecordError(f"{where}: frame_ind must lie in 0..{NUM_SAMPLED_FRAMES - 1}, got {frame_ind.tolist()}")
    bad = [i for ix in idx for i in ix if not 0 <= i < len(tokens)]
    if bad or any(not ix for ix in idx):
        raise RecordError(f"{where}: process_idx {idx} points outside the {len(tokens)} tokens")
    width, height = frame_size
    # the object word of a box is the token at its first word index
    words = [tokens[ix[0]] for ix in idx]
    tagged_idx = sorted({i for ix in idx for i in ix})
    tagged = " ".join(f"<p>{t}</p>" if i in tagged_idx else t for i, t in enumerate(tokens))
    phrases = list(dict.fromkeys(tokens[i] for i in tagged_idx))
    clipped = np.clip(boxes, 0.0, np.array([width, height, width, height], dtype=np.float64))
    usable = (clipped[:, 2] > clipped[:, 0]) & (clipped[:, 3] > clipped[:, 1])  # zero-area boxes: metric only
    bboxes = [clipped[usable & (frame_ind == f)] for f in range(NUM_SAMPLED_FRAMES)]
    labels = [[w for w, u, fi in zip(words, usable, frame_ind) if u and fi == f] for f in range(NUM_SAMPLED_FRAMES)]
    start, end = float(timestamps[0]), float(timestamps[1])
    raw = {
        "video_fname": f"{vid}.mp4", "video_id": vid, "clip_id": str(seg), "fps": 5.0,
        "clip_start_frame": 0, "clip_end_frame": NUM_SAMPLED_FRAMES - 1, "width": width, "height": height,
        "caption": " ".join(tokens), "tagged_caption": tagged, "phrases": phrases,
        "bboxes": bboxes, "labels": labels,
        # the official annotation, for the official metric (kept whole, zero-area boxes included)
        "anet_video": vid, "anet_segment": str(seg), "timestamps": [start, end], "tokens": tokens,
        "process_clss": clss, "process_idx": idx, "process_bnd_box": boxes.tolist(),
        "frame_ind": frame_ind.tolist(),
    }
    return GroundedRecord.from_dict(raw, source)


def read_anet_entities(path: str | Path, split_file: str | Path | None = None,
                       splits: Sequence[str] = ("validation",), timestamp_files: Sequence[str | Path] = (),
                       frame_size_file: str | Path | None = None,
                       video_root: str | Path | None = None) -> list[GroundedRecord]:
    """Records of the annotated segments of the chosen splits (all videos without a split file)."""
    path = Path(path)
    data = _load_json(path, "ActivityNet-Entities annotation")
    videos = data.get("annotations") if isinstance(data, Mapping) else None
    if not isinstance(videos, Mapping):
        raise RecordError(f"{path}: expected {{'annotations': {{video: {{'segments': ...}}}}}} "
                          "(anet_entities_cleaned_class_thresh50_trainval.json)")
    wanted = read_split_ids(split_file, splits) if split_file is not None else None
    captions = read_segment_timestamps(timestamp_files) if timestamp_files else {}
    sizes = read_frame_sizes(frame_size_file) if frame_size_file is not None else {}
    records, skipped = [], {"unannotated": 0, "no_timestamps": 0, "empty_span": 0}
    for vid in sorted(videos):
        if wanted is not None and vid not in wanted:
            continue
        entry = videos[vid]
        segments = entry.get("segments", {}) if isinstance(entry, Mapping) else {}
        if "rwidth" in entry and "rheight" in entry:
            size = (int(entry["rwidth"]), int(entry["rheight"]))
        elif vid in sizes:
            size = sizes[vid]
        else:
            size = None
        for seg in sorted(segments, key=lambda s: (len(s), s)):
            ann = segments[seg]
            if not ann.get("frame_ind"):
                skipped["unannotated"] += 1
                continue
            times = ann.get("timestamps")
            if times is None:
                listed = captions.get(vid)
                listed_here = listed is not None and str(seg).isdigit() and int(seg) < len(listed)
                times = listed[int(seg)] if listed_here else None
            if times is None:
                skipped["no_timestamps"] += 1
                continue
            if not float(times[1]) > float(times[0]):
                skipped["empty_span"] += 1
                continue
            if size is None:
                if video_root is None:
                    raise RecordError(f"{path}, video '{vid}': no rwidth/rheight; give the raw annotation file "
                                      "(data.init_args.frame_size_annotations) or the video root")
                size = _probe_frame_size(Path(video_root), vid)
            records.append(segment_record(vid, seg, ann, times, size, str(path)))
    if skipped["no_timestamps"]:
        log.warning("%s: %d annotated segment(s) have no timestamps (give the ActivityNet Captions files); "
                    "left out", path, skipped["no_timestamps"])
    log.info("%s: %d segments read; left out: %s", path, len(records), skipped)
    return records


class ActivityNetEntitiesDataset(GroundedClipDataset):
    """Decodes a segment's 10 sampled frames: record frame ``i`` -> the source frame shown at its time."""

    def decode_frames(self, record: GroundedRecord, frame_indices: np.ndarray) -> np.ndarray:
        start, end = record.extra["timestamps"]
        times = sampled_frame_times(start, end)[np.asarray(frame_indices, dtype=np.int64)]
        with open_video(self.video_root, record.video_fname) as video:
            if not video.fps:
                raise VideoDecodeError(f"{self.video_root / record.video_fname}: frame rate unknown "
                                       "(frame folders need videos for ActivityNet-Entities)")
            source = np.clip(np.floor(times * video.fps).astype(np.int64), 0, video.num_frames - 1)
            return video.read_frames(source.tolist())


class ActivityNetEntitiesDataModule(GroundedVideoDataModule):
    """ActivityNet-Entities segments (10 sampled frames each; train without objectness).

    ``train/val/test_annotations`` usually all name the cleaned trainval file; the split file
    picks each split's videos (``train_split``, ``val_split``, ``test_split``; the GROVE paper
    reports on ``validation``).

    Args (beyond :class:`GroundedVideoDataModule`):
        split_annotations: ``split_ids_anet_entities.json`` (None: every video of the file).
        train_split / val_split / test_split: split names in it.
        timestamp_annotations: ActivityNet Captions files with the segments' timestamps (not
            needed when the segments carry ``timestamps``).
        frame_size_annotations: the raw ``anet_entities_trainval.json`` (``rwidth``/``rheight``);
            without it the size is read from each video's header.
    """

    dataset_class = ActivityNetEntitiesDataset

    def __init__(self, split_annotations: str | None = None, train_split: str = "training",
                 val_split: str = "validation", test_split: str = "validation",
                 timestamp_annotations: list[str] | None = None, frame_size_annotations: str | None = None,
                 **kwargs):
        kwargs.setdefault("readme_section", "Datasets")
        super().__init__(**kwargs)

    def load_records(self, split: str, path: Path) -> list[GroundedRecord]:
        hp = self.hparams
        section = self.readme_section
        split_file = None
        if hp.split_annotations is not None:
            split_file = require_path(hp.split_annotations, "data.init_args.split_annotations", section,
                                      "ActivityNet-Entities split file")
        stamps = [require_path(p, "data.init_args.timestamp_annotations", section, "ActivityNet Captions file")
                  for p in (hp.timestamp_annotations or [])]
        sizes = None
        if hp.frame_size_annotations is not None:
            sizes = require_path(hp.frame_size_annotations, "data.init_args.frame_size_annotations", section,
                                 "raw ActivityNet-Entities annotation")
        records = read_anet_entities(path, split_file, [getattr(hp, f"{split}_split")], stamps, sizes,
                                     video_root=self.resolved_video_root(split))
        if not records:
            raise RecordError(f"{path}: no annotated segment with timestamps in split "
                              f"'{getattr(hp, f'{split}_split')}'")
        return records
