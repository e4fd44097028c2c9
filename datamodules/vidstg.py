"""VidSTG (spatio-temporal video grounding of a sentence) in its public layouts, one sample per sentence.

Two layouts are read:

* **VidSTG's own files** (``train_annotations.json``, ...): a list of entries, each with ``vid``,
  ``frame_count``, ``fps``, ``width``, ``height``, ``used_segment`` and ``temporal_gt``
  (``{begin_fid, end_fid}``), ``captions`` (declarative sentences) and ``questions``
  (interrogative ones), each ``{description, type, target_id}``. The target's boxes come from
  the VidOR trajectories (per frame a list of ``{tid, bbox: {xmin, ymin, xmax, ymax}}``): inline
  in the entry under ``trajectories``, or from the VidOR annotation folder
  (``<root>/**/<vid>.json``, which also gives ``video_path``).
* **TubeDETR's preprocessed files** (``train.json``, ...; what the GROVE release ships):
  ``{"videos": [...], "trajectories": {vid: {target_id: {frame: {"bbox": [x, y, w, h]}}}}}``.

Both give the same records with the same keys: sentences are numbered as TubeDETR numbers them
(per entry, questions first, then captions), the key is ``{vid}_s{number}``.

Conventions (documented choices):

* ``end_fid`` is exclusive (VidOR's convention; TubeDETR's evaluator uses ``[begin, end)``).
* The caption is the whole sentence, tagged as its one grounded phrase (``<p>sentence</p>``), as
  the public GROVE code does: interrogative sentences do not name their target, so there is no
  noun phrase to tag, and the task is teacher-forced grounding of the given sentence.
* ``segment="tube"`` (default) makes the clip span the ground-truth tube: the paper's setting
  (videos temporally segmented with the GT timestamps; spatial m_vIoU). ``segment="used"`` spans
  VidSTG's ``used_segment``: the target is then absent outside the tube, and only a model with a
  temporal objectness head can localise it in time.
* ``grid="tubedetr"`` (default): a record annotates the frames TubeDETR samples and evaluates
  (:func:`formats.frame_grids.tubedetr_frame_grid` over the used segment, at most 200 frames)
  that lie in the clip, so the validation metric scores the frames of TubeDETR's evaluator. A
  tube with no such frame (shorter than the grid's spacing on a long segment) keeps its first
  frame, marked ``extra["off_grid"]`` and counted in a warning: TubeDETR scores such a sentence
  0, and so does the metric on its grid. ``grid="project"``: the 5-fps grid of the other
  datasets, ``range(start, end, round(fps / 5))`` over the clip.
* A grid frame of the tube where the trajectory has no box leaves that frame unannotated.
"""
from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from datamodules.grounded_datamodule import GroundedVideoDataModule, require_path
from formats.frame_grids import annotation_grid, tubedetr_frame_grid
from formats.records import REQUIRED_FIELDS, GroundedRecord, RecordError

log = logging.getLogger(__name__)

SEGMENTS = ("tube", "used")
GRIDS = ("tubedetr", "project")
SENTENCE_TYPES = ("declarative", "interrogative")


@dataclass
class VidSTGRecord(GroundedRecord):
    """A sentence record whose annotated frames are given (TubeDETR's grid) rather than derived
    from the clip span; ``bboxes[i]`` / ``labels[i]`` describe ``grid_frames[i]``."""

    grid_frames: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)

    @property
    def frame_indices(self) -> np.ndarray:
        return self.grid_frames

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "frame_indices": self.grid_frames.tolist()}


def clip_frames(fps: float, used: tuple[int, int], tube: tuple[int, int], segment: str = "tube",
                grid: str = "tubedetr") -> np.ndarray:
    """Source frames a sentence's record annotates: the grid frames of its clip (the tube or the
    used segment, ``[begin, end)``); on TubeDETR's grid, its first frame when none lies in it."""
    begin, end = tube if segment == "tube" else used
    if grid == "project":
        return annotation_grid(fps, begin, end - 1)
    frames = tubedetr_frame_grid(fps, *used)
    frames = frames[(frames >= begin) & (frames < end)]
    return frames if len(frames) else np.array([begin], dtype=np.int64)


def _check_video(fps: float, width: int, height: int, where: str) -> None:
    if not math.isfinite(fps) or fps <= 0:
        raise RecordError(f"{where}: field 'fps' must be a positive number, got {fps}")
    if width <= 0 or height <= 0:
        raise RecordError(f"{where}: fields 'width'/'height' must be positive, got {width}x{height}")


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"VidSTG annotation file {path} does not exist") from None
    except ValueError as err:
        raise RecordError(f"{path}: not valid JSON ({err})") from None


def _sentence(text: Any, where: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise RecordError(f"{where}: field 'description' must be a non-empty string, got {text!r}")
    return re.sub(r"\s+", " ", text).strip()


def _span(entry: Mapping, name: str, where: str) -> tuple[int, int]:
    span = entry.get(name)
    if not isinstance(span, Mapping) or "begin_fid" not in span or "end_fid" not in span:
        raise RecordError(f"{where}: field '{name}' must be {{'begin_fid': ..., 'end_fid': ...}}")
    begin, end = int(span["begin_fid"]), int(span["end_fid"])
    if not 0 <= begin < end:
        raise RecordError(f"{where}: field '{name}' = [{begin}, {end}) is not a valid frame range")
    return begin, end


class VidORTrajectories:
    """Finds ``<vid>.json`` under a VidOR annotation root (once) and reads a video's target boxes."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"VidOR annotation folder {self.root} does not exist")
        self._paths = {p.stem: p for p in self.root.rglob("*.json")}
        self._cache: dict[str, dict] = {}

    def video(self, vid: str, where: str) -> dict:
        if vid not in self._cache:
            path = self._paths.get(vid)
            if path is None:
                raise RecordError(f"{where}: no VidOR annotation {vid}.json under {self.root}")
            data = _load_json(path)
            if not isinstance(data.get("trajectories"), list):
                raise RecordError(f"{path}: field 'trajectories' must be a per-frame list")
            self._cache = {vid: data}  # entries of one video are consecutive: keep one file in memory
        return self._cache[vid]


def _boxes_from_frame_lists(trajectories: list, target: int, frames: np.ndarray, offset: int,
                            where: str) -> dict[int, list[float]]:
    """Target boxes at ``frames`` from VidOR per-frame lists (list index = frame - offset)."""
    out = {}
    for f in frames.tolist():
        i = f - offset
        if not 0 <= i < len(trajectories):
            continue
        for obj in trajectories[i] or ():
            if int(obj.get("tid", -1)) == target:
                b = obj.get("bbox")
                try:
                    out[f] = [float(b["xmin"]), float(b["ymin"]), float(b["xmax"]), float(b["ymax"])]
                except (KeyError, TypeError, ValueError):
                    raise RecordError(
                        f"{where}: frame {f}: bbox must be {{xmin, ymin, xmax, ymax}}, got {b!r}") from None
                break
    return out


def _make_record(*, vid: str, number: int, fps: float, width: int, height: int, used: tuple[int, int],
                 tube: tuple[int, int], sentence: str, sentence_type: str, target: int, video_fname: str,
                 boxes_at: dict[int, list[float]], segment: str, grid_name: str, source: str,
                 extra: dict) -> GroundedRecord:
    begin, end = tube if segment == "tube" else used
    grid = clip_frames(fps, used, tube, segment, grid_name)
    in_tube = (grid >= tube[0]) & (grid < tube[1])
    limits = np.array([width, height, width, height], dtype=np.float64)
    bboxes, labels = [], []
    for f, inside in zip(grid.tolist(), in_tube.tolist()):
        box = boxes_at.get(f) if inside else None
        if box is not None:  # a box with no area inside the frame cannot be learnt or scored
            clipped = np.clip(np.asarray(box, dtype=np.float64), 0.0, limits)
            box = clipped.tolist() if clipped[2] > clipped[0] and clipped[3] > clipped[1] else None
        bboxes.append(np.asarray([box] if box is not None else [], dtype=np.float64).reshape(-1, 4))
        labels.append([sentence] if box is not None else [])
    raw = {
        "video_fname": video_fname, "video_id": vid, "clip_id": f"s{number}", "fps": fps,
        "clip_start_frame": begin, "clip_end_frame": end - 1, "width": width, "height": height,
        "caption": sentence, "tagged_caption": f"<p>{sentence}</p>", "phrases": [sentence],
        "bboxes": bboxes, "labels": labels,
        "sentence_type": sentence_type, "target_id": target, "tube": list(tube), "used_segment": list(used),
        **extra,
    }
    if grid_name == "project":
        return GroundedRecord.from_dict(raw, source)
    if len(grid) == 1 and not np.isin(grid, tubedetr_frame_grid(fps, *used)).all():
        raw["off_grid"] = True  # no grid frame in the clip: clip_frames kept its first frame
    fields = {k: raw[k] for k in REQUIRED_FIELDS}
    return VidSTGRecord(**{**fields, "bboxes": [b.astype(np.float32) for b in bboxes]},
                        extra={k: v for k, v in raw.items() if k not in fields}, grid_frames=grid)


def _original_entries(data: list, path: Path, trajectories: VidORTrajectories | None,
                      segment: str, grid_name: str) -> Iterator[GroundedRecord]:
    number = 0
    for e, entry in enumerate(data):
        where = f"{path}, entry #{e} (vid {entry.get('vid', '?') if isinstance(entry, Mapping) else '?'})"
        if not isinstance(entry, Mapping):
            raise RecordError(f"{where}: expected a dict")
        missing = [k for k in ("vid", "fps", "width", "height", "used_segment", "temporal_gt") if k not in entry]
        if missing:
            raise RecordError(f"{where}: missing field(s) {', '.join(missing)}")
        vid = str(entry["vid"])
        try:
            fps, width, height = float(entry["fps"]), int(entry["width"]), int(entry["height"])
        except (TypeError, ValueError) as err:
            raise RecordError(f"{where}: fields 'fps'/'width'/'height' must be numbers ({err})") from None
        _check_video(fps, width, height, where)
        used, tube = _span(entry, "used_segment", where), _span(entry, "temporal_gt", where)
        if not used[0] <= tube[0] < tube[1] <= used[1]:
            raise RecordError(f"{where}: temporal_gt {list(tube)} lies outside used_segment {list(used)}")
        video_fname = entry.get("video_path")
        if "trajectories" in entry:
            traj = entry["trajectories"]
            frame_count = int(entry.get("frame_count", len(traj)))
            # VidOR lists cover the whole video; a list as long as the used segment starts there
            if len(traj) == frame_count:
                offset = 0
            elif len(traj) == used[1] - used[0]:
                offset = used[0]
            else:
                raise RecordError(f"{where}: 'trajectories' has {len(traj)} frames; expected frame_count "
                                  f"({frame_count}) or the used segment's length ({used[1] - used[0]})")
        elif trajectories is not None:
            vidor = trajectories.video(vid, where)
            traj, offset = vidor["trajectories"], 0
            video_fname = video_fname or vidor.get("video_path")
        else:
            raise RecordError(f"{where}: no 'trajectories' in the entry; give the VidOR annotation folder "
                              "(data.init_args.vidor_annotations)")
        video_fname = video_fname or f"{vid}.mp4"
        grid = clip_frames(fps, used, tube, segment, grid_name)
        # questions first, then captions: TubeDETR's numbering, so both layouts share keys
        for kind, sentence_type in (("questions", "interrogative"), ("captions", "declarative")):
            for k, query in enumerate(entry.get(kind) or ()):
                qwhere = f"{where}, {kind}[{k}]"
                if not isinstance(query, Mapping) or "target_id" not in query:
                    raise RecordError(f"{qwhere}: expected a dict with 'description' and 'target_id'")
                target = int(query["target_id"])
                boxes_at = _boxes_from_frame_lists(traj, target, grid, offset, qwhere)
                yield _make_record(
                    vid=vid, number=number, fps=fps, width=width, height=height, used=used, tube=tube,
                    sentence=_sentence(query.get("description"), qwhere), sentence_type=sentence_type,
                    target=target, video_fname=video_fname, boxes_at=boxes_at, segment=segment,
                    grid_name=grid_name, source=str(path), extra={"query_type": query.get("type")})
                number += 1


def _tubedetr_entries(data: Mapping, path: Path, segment: str, grid_name: str) -> Iterator[GroundedRecord]:
    trajectories = data.get("trajectories")
    if not isinstance(data.get("videos"), list) or not isinstance(trajectories, Mapping):
        raise RecordError(f"{path}: expected TubeDETR's {{'videos': [...], 'trajectories': {{...}}}}")
    for i, video in enumerate(data["videos"]):
        where = f"{path}, videos[{i}]"
        try:
            vid = str(video["original_video_id"])
            used = (int(video["start_frame"]), int(video["end_frame"]))
            tube = (int(video["tube_start_frame"]), int(video["tube_end_frame"]))
            target, number = int(video["target_id"]), int(video["video_id"])
            fps, width, height = float(video["fps"]), int(video["width"]), int(video["height"])
        except (KeyError, TypeError, ValueError) as err:
            raise RecordError(f"{where}: missing or malformed field ({type(err).__name__}: {err})") from None
        _check_video(fps, width, height, where)
        if not used[0] <= tube[0] < tube[1] <= used[1]:
            raise RecordError(f"{where}: tube [{tube[0]}, {tube[1]}) lies outside [{used[0]}, {used[1]})")
        track = trajectories.get(vid, {}).get(str(target))
        if track is None:
            raise RecordError(f"{where}: no trajectory for video {vid}, target {target}")
        grid = clip_frames(fps, used, tube, segment, grid_name)
        boxes_at = {}
        for f in grid.tolist():
            item = track.get(str(f))
            if item is not None:
                x, y, w, h = (float(v) for v in item["bbox"])
                boxes_at[f] = [x, y, x + w, y + h]
        sentence_type = video.get("qtype", "declarative")
        if sentence_type not in SENTENCE_TYPES:
            raise RecordError(f"{where}: field 'qtype' must be one of {SENTENCE_TYPES}, got {sentence_type!r}")
        yield _make_record(
            vid=vid, number=number, fps=fps, width=width, height=height, used=used, tube=tube,
            sentence=_sentence(video.get("caption"), where), sentence_type=sentence_type, target=target,
            video_fname=str(video.get("video_path") or f"{vid}.mp4"), boxes_at=boxes_at, segment=segment,
            grid_name=grid_name, source=str(path), extra={"query_type": video.get("type")})


def read_vidstg(path: str | Path, vidor_annotations: str | Path | None = None,
                segment: str = "tube", grid: str = "tubedetr") -> list[GroundedRecord]:
    """One :class:`GroundedRecord` per sentence of a VidSTG file (either layout; see the module doc).

    Each record's ``extra`` holds ``sentence_type`` (declarative / interrogative), ``target_id``,
    ``tube`` and ``used_segment`` (``[begin, end)`` source frames) for the VidSTG metrics. Its
    frames are TubeDETR's grid (``grid="tubedetr"``, a :class:`VidSTGRecord`) or the project's
    (``grid="project"``).
    """
    if segment not in SEGMENTS:
        raise ValueError(f"segment must be one of {SEGMENTS}, got {segment!r}")
    if grid not in GRIDS:
        raise ValueError(f"grid must be one of {GRIDS}, got {grid!r}")
    path = Path(path)
    data = _load_json(path)
    if isinstance(data, Mapping) and "videos" in data:
        records = list(_tubedetr_entries(data, path, segment, grid))
    elif isinstance(data, list):
        trajectories = VidORTrajectories(vidor_annotations) if vidor_annotations is not None else None
        records = list(_original_entries(data, path, trajectories, segment, grid))
    else:
        raise RecordError(f"{path}: expected VidSTG's list of entries or TubeDETR's {{'videos', 'trajectories'}}")
    off_grid = [r.key for r in records if r.extra.get("off_grid")]
    if off_grid:
        log.warning("%s: %d of %d sentences have no frame of TubeDETR's grid in their %s (e.g. %s); they keep "
                    "its first frame and score 0 on TubeDETR's grid, as in TubeDETR's evaluator",
                    path, len(off_grid), len(records), "tube" if segment == "tube" else "used segment", off_grid[0])
    return records


class VidSTGDataModule(GroundedVideoDataModule):
    """VidSTG sentences with their target tubes (teacher-forced grounding; no objectness head).

    Args (beyond :class:`GroundedVideoDataModule`):
        vidor_annotations: VidOR annotation folder, for VidSTG's own files without inline
            trajectories (not needed for TubeDETR's files).
        segment: ``tube`` (the clip spans the GT tube; the paper's setting) or ``used``.
        grid: ``tubedetr`` (the frames TubeDETR samples and evaluates, which
            ``VidSTGEvaluation`` scores by default) or ``project`` (``range(start, end, round(fps / 5))``, the
            grid of the other datasets; evaluate it with the callback's ``grid: record``).
    """

    def __init__(self, vidor_annotations: str | None = None, segment: str = "tube", grid: str = "tubedetr",
                 **kwargs):
        if segment not in SEGMENTS:
            raise ValueError(f"data.segment must be one of {SEGMENTS}, got {segment!r}")
        if grid not in GRIDS:
            raise ValueError(f"data.grid must be one of {GRIDS}, got {grid!r}")
        kwargs.setdefault("readme_section", "Datasets")
        super().__init__(**kwargs)

    def load_records(self, split: str, path: Path) -> list[GroundedRecord]:
        vidor = self.hparams.vidor_annotations
        if vidor is not None:
            vidor = require_path(vidor, "data.init_args.vidor_annotations", self.readme_section,
                                 "VidOR annotation folder")
        return read_vidstg(path, vidor, self.hparams.segment, self.hparams.grid)
