"""Which clips a run annotates: from the ground-truth records, or cut from every video in a folder.

A clip is named by ``{video_id}_{clip_id}``, the record key of the HowToGround1M layout. With
ground truth (``--truth``) the clips are exactly its records' clips (same video, frames and key),
so the output can be scored key by key. Without it every video of the folder is one clip, is
cut into consecutive windows of ``seconds`` (the paper annotates 8-s clips), or is cut at the
clip timestamps of HowToCaption (Shvetsova et al., 2023), the clips HowToGround1M was sampled
from (GROVE paper, section 3).
"""
from __future__ import annotations

from core.json_file import read_json

import logging
import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from annotation.howtocaption import is_parquet_source, read_howtocaption, warn_ignored_rows
from formats.video_files import open_video
from formats.video_reader import IMAGE_SUFFIXES, VIDEO_SUFFIXES, VideoDecodeError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClipSpec:
    """One clip to annotate. ``end_frame=None``: up to the video's last frame; ``fps=None``: the video's."""

    video_fname: str
    video_id: str
    clip_id: str
    start_frame: int = 0
    end_frame: int | None = None
    fps: float | None = None

    @property
    def key(self) -> str:
        return f"{self.video_id}_{self.clip_id}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ClipSpec":
        return cls(**data)


@dataclass(frozen=True)
class SkippedClip:
    """A clip (or a whole video) that could not be read; ``reason`` names the file and the failure."""

    key: str
    video_fname: str
    reason: str


def find_videos(folder: str | Path) -> list[str]:
    """Video files (and frame folders holding images) under ``folder``, as sorted relative paths."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"--videos {folder}: not a folder")
    found = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.suffix.lower() in VIDEO_SUFFIXES and not path.name.startswith("."):
            found.append(path.relative_to(folder).as_posix())
        elif path.is_dir() and any(p.suffix.lower() in IMAGE_SUFFIXES for p in path.iterdir()):
            found.append(path.relative_to(folder).as_posix())
    return found


def video_id_of(relative: str) -> str:
    """Record ``video_id`` of a video: its relative path without suffix, folders joined by ``__``."""
    path = Path(relative)
    stem = path.with_suffix("") if path.suffix.lower() in VIDEO_SUFFIXES else path
    return "__".join(stem.parts)


def clips_from_records(records: Iterable) -> list[ClipSpec]:
    """The clips of ground-truth records (their video, frame span, rate and key)."""
    return [ClipSpec(r.video_fname, r.video_id, r.clip_id, int(r.clip_start_frame), int(r.clip_end_frame), float(r.fps))
            for r in records]


@dataclass(frozen=True)
class BadSpan(SkippedClip):
    """A HowToCaption span that cannot be a clip as given (it starts before 0 s, or not before its
    end, or after the video); ``clamped``: annotated anyway from 0 s (``clips.clamp_spans``)."""

    span: tuple[float, float] = (0.0, 0.0)
    clamped: bool = False


def _span_problem(start_s: float, end_s: float, duration_s: float) -> str | None:
    if not (math.isfinite(start_s) and math.isfinite(end_s)):
        return "is not a pair of finite seconds"
    if start_s >= end_s:
        return f"starts at {start_s:g} s, not before its end at {end_s:g} s"
    if start_s < 0:
        return f"starts at {start_s:g} s, before the video's start"
    if start_s >= duration_s:
        return f"starts at {start_s:g} s, after the video's end at {duration_s:g} s"
    return None


def _frame_rate_and_count(folder: str | Path, video: str, purpose: str) -> tuple[float, int] | SkippedClip:
    """A video's frame rate and frame count from its header, or why the video is skipped."""
    key = f"{video_id_of(video)}_*"
    try:
        with open_video(folder, video) as source:
            fps, num_frames = source.fps, source.num_frames
    except (VideoDecodeError, OSError) as err:
        return SkippedClip(key, video, str(err))
    if not fps:
        return SkippedClip(key, video, f"{video}: no frame rate known, {purpose}")
    return fps, num_frames


def clips_from_videos(folder: str | Path, seconds: float | None = None, min_seconds: float = 2.0,
                      ) -> tuple[list[ClipSpec], list[SkippedClip]]:
    """Every video under ``folder`` as one clip (``seconds=None``) or as consecutive ``seconds`` windows.

    A last window shorter than ``min_seconds`` is dropped. Cutting windows reads each video's
    header; a video whose header cannot be read is returned as skipped, with the reason.
    """
    videos = find_videos(folder)
    by_id: dict[str, list[str]] = defaultdict(list)
    for v in videos:
        by_id[video_id_of(v)].append(v)
    clashes = {k: v for k, v in by_id.items() if len(v) > 1}
    if clashes:
        k, v = next(iter(clashes.items()))
        raise ValueError(f"--videos {folder}: {', '.join(v)} would share the record video_id '{k}'; rename one")
    specs, skipped = [], []
    for v in videos:
        vid = video_id_of(v)
        if seconds is None:
            specs.append(ClipSpec(v, vid, "0"))
            continue
        header = _frame_rate_and_count(folder, v, f"cannot cut {seconds}-s clips")
        if isinstance(header, SkippedClip):
            skipped.append(header)
            continue
        fps, num_frames = header
        window = max(1, int(round(seconds * fps)))
        shortest = int(round(min_seconds * fps))
        for i, start in enumerate(range(0, num_frames, window)):
            end = min(start + window, num_frames) - 1
            if end - start + 1 >= shortest or i == 0:
                specs.append(ClipSpec(v, vid, str(i), start, end, float(fps)))
    return specs, skipped


def read_timestamps(path: str | Path, video_ids: Iterable[str] | None = None) -> dict[str, list[tuple[float, float]]]:
    """HowToCaption clip spans per video: ``{video_id: [(start_s, end_s), ...]}``.

    The file (JSON, or a pickle read through the restricted unpickler) maps each HowTo100M video id
    to ``{"start": [...], "end": [...], "text": [...]}`` in seconds, HowTo100M's ``caption.json``
    layout that HowToCaption keeps; a list of ``{"start", "end"}`` entries per video is read too;
    so is the hub's parquet (a file, a folder or a glob of them: :mod:`annotation.howtocaption`),
    keeping only ``video_ids`` when given (a split lists about a million videos).

    An entry that is not a list of start/end seconds is an error naming the file, the video and
    the field when the video is one of ``video_ids`` (or ``video_ids`` is None); the entries of other
    videos are not returned, and the bad ones among them (also non-finite seconds) are counted and
    named in one warning. Non-finite seconds of a wanted video come back as they are: the clip
    planner reports such a span as bad.
    """
    if is_parquet_source(path):  # the hub's parquet splits (annotation.howtocaption)
        return read_howtocaption(path, video_ids)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"clips.timestamps: {path} does not exist")
    if path.suffix.lower() in (".pkl", ".pickle"):
        from formats.safe_pickle import safe_load

        data = safe_load(path)
    else:
        data = read_json(path)
    if not isinstance(data, dict):
        raise ValueError(f"clips.timestamps: {path} must map video ids to their clips, got {type(data).__name__}")
    wanted = None if video_ids is None else set(map(str, video_ids))
    out, ignored = {}, []
    for video_id, entry in data.items():
        video_id = str(video_id)
        try:
            if isinstance(entry, dict):
                spans = list(zip(entry["start"], entry["end"]))
            else:
                spans = [(e["start"], e["end"]) for e in entry]
            spans = [(float(a), float(b)) for a, b in spans]
        except (KeyError, TypeError, ValueError) as err:
            if wanted is None or video_id in wanted:
                raise ValueError(f"clips.timestamps: {path}: video '{video_id}' has no start/end seconds "
                                 f"({type(err).__name__}: {err})") from None
            ignored.append(f"video '{video_id}': no start/end seconds ({type(err).__name__}: {err})")
            continue
        if wanted is None or video_id in wanted:
            out[video_id] = spans
        elif not all(math.isfinite(s) for span in spans for s in span):
            ignored.append(f"video '{video_id}': seconds that are not finite")
    warn_ignored_rows(path, ignored)
    return out


def clips_from_timestamps(folder: str | Path, timestamps: str | Path, min_seconds: float = 2.0,
                          clamp_spans: bool = False) -> tuple[list[ClipSpec], list[SkippedClip]]:
    """The HowToCaption clips of the videos under ``folder``: clip ``i`` of a video spans its i-th
    ``[start, end)`` seconds (frames ``round(start * fps)`` to ``round(end * fps) - 1``, within the
    video). Clips shorter than ``min_seconds`` are dropped; videos without timestamps are skipped.

    A bad span (start < 0, start not before end, start after the video, not finite) is returned
    as a :class:`BadSpan` naming the video and the span, for the run's report. With
    ``clamp_spans`` a span that only starts before 0 s is clamped to 0 s and annotated (and
    still reported); otherwise every bad span is left out.
    """
    videos = find_videos(folder)
    spans = read_timestamps(timestamps, [video_id_of(v) for v in videos])
    specs, skipped = [], []
    for v in videos:
        vid = video_id_of(v)
        if vid not in spans:
            skipped.append(SkippedClip(f"{vid}_*", v, f"{v}: no clips for video id '{vid}' in {timestamps}"))
            continue
        header = _frame_rate_and_count(folder, v, "cannot place timestamps")
        if isinstance(header, SkippedClip):
            skipped.append(header)
            continue
        fps, num_frames = header
        for i, (start_s, end_s) in enumerate(spans[vid]):
            problem = _span_problem(start_s, end_s, num_frames / fps)
            if problem is not None:
                clamp = clamp_spans and start_s < 0 < end_s and math.isfinite(end_s)
                action = "clamped to 0 s (clips.clamp_spans)" if clamp else \
                    ("left out (clips.clamp_spans: true clamps it to 0 s)" if start_s < 0 < end_s else "left out")
                skipped.append(BadSpan(f"{vid}_{i}", v, f"{timestamps}: video '{vid}', span {i} [{start_s:g} s, "
                                       f"{end_s:g} s) {problem}; {action}", (start_s, end_s), clamp))
                if not clamp:
                    continue
            start = max(0, int(round(start_s * fps)))
            end = min(int(round(end_s * fps)) - 1, num_frames - 1)
            if end >= start and (end - start + 1) >= min_seconds * fps:
                specs.append(ClipSpec(v, vid, str(i), start, end, float(fps)))
    return specs, skipped
