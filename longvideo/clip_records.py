"""Per-clip ground-truth records of a long synthetic video, so the project's clip metrics (AP50, mIoU,
recall, METEOR, CIDEr, ...) can score a long-video predict run next to the identity measures.

The clips are those long-video predict cuts in grid mode (:class:`longvideo.segments.ClipPlanner`
on the 5-fps grid: tiled, the last aligned to the end), keyed ``<video stem>_<clip index>`` as
the predictions file is. Each record holds the objects visible in its clip: their phrases in
order of first appearance, their exact boxes on every grid frame, and a caption in the style of
the built-in synthetic captions (``<p>a red diamond</p> and <p>a green square</p> move across the
scene.``). Look-alikes seen in one clip need distinct phrases, so the second is "another red
diamond", the third "a third red diamond". A clip where no object is visible has no phrase and
the caption "nothing moves across the scene."

``grove clip-records OUT.json`` writes ``OUT_clips.json`` for a ground truth made
earlier (the generator writes it too); ``grove evaluate`` reads it as ``--gt``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from datamodules.video_folder import seconds_to_grid_frames
from formats.frame_grids import annotation_step
from formats.records import GroundedRecord, write_records_json
from longvideo.segments import ClipPlanner

TRUTH_FIELDS = ("video", "fps", "num_frames", "width", "height", "objects", "frames")
ORDINALS = ("third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def truth_clips(truth: Mapping[str, Any], clip_seconds: float = 8.0) -> Iterator[tuple[int, np.ndarray]]:
    """``(clip index, grid frames)`` of the clips long-video predict cuts (grid mode) from this video."""
    planner = ClipPlanner(seconds_to_grid_frames(clip_seconds, float(truth["fps"])))
    for frame in sorted(int(entry["frame"]) for entry in truth["frames"]):
        for clip in planner.push(frame, None):
            yield clip.index, clip.frames
    for clip in planner.close():
        yield clip.index, clip.frames


def video_stem(truth: Mapping[str, Any]) -> str:
    """The video id long-video predict gives the truth's video (its file's stem)."""
    return Path(str(truth["video"])).stem


def clip_phrases(objects: list[tuple[int, str]]) -> list[str]:
    """Distinct phrases for ``(id, phrase)`` in caption order: look-alikes become "another ...", "a third ..."."""
    seen: dict[str, int] = {}
    out = []
    for _, phrase in objects:
        n = seen.get(phrase, 0)
        seen[phrase] = n + 1
        if n > len(ORDINALS) + 1:
            raise ValueError(f"{n + 1} look-alikes '{phrase}' in one clip: more than the ordinals name")
        if n:
            noun = phrase.split(" ", 1)[1]  # drop the article
            phrase = f"another {noun}" if n == 1 else f"a {ORDINALS[n - 2]} {noun}"
        out.append(phrase)
    return out


def clip_caption(phrases: list[str], tagged: bool = True) -> str:
    """The clip's caption: every phrase once, in order (inside ``<p>...</p>`` when ``tagged``), and what
    they do."""
    if not phrases:
        return "nothing moves across the scene."
    named = [f"<p>{p}</p>" if tagged else p for p in phrases]
    subject = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    return f"{subject} {'moves' if len(named) == 1 else 'move'} across the scene."


def records_from_truth(truth: Mapping[str, Any], clip_seconds: float = 8.0, video_id: str | None = None,
                       source: str = "<truth>") -> list[GroundedRecord]:
    """One record per clip of the long video (see the module's docstring), in clip order.

    ``video_id``: the id the predict run gave the video (default: the video file's stem).
    """
    if not isinstance(truth, Mapping) or truth.get("format") != "grove-long-synthetic":
        got = truth.get("format") if isinstance(truth, Mapping) else type(truth).__name__
        raise ValueError(f"{source}: not a long synthetic ground truth (format {got!r}, "
                         "expected 'grove-long-synthetic')")
    missing = [k for k in TRUTH_FIELDS if k not in truth]
    if missing:
        raise ValueError(f"{source}: missing field(s) {', '.join(missing)}")
    fps, num_frames = float(truth["fps"]), int(truth["num_frames"])
    step = annotation_step(fps)
    phrase_of = {int(o["id"]): str(o["phrase"]) for o in truth["objects"]}
    frames = {int(f["frame"]): f for f in truth["frames"]}
    video_id = video_stem(truth) if video_id is None else video_id
    records = []
    for index, grid in truth_clips(truth, clip_seconds):
        entries = [frames[int(f)] for f in grid]
        order = list(dict.fromkeys(int(i) for e in entries for i in sorted(e["ids"])))  # first seen, ties by id
        unknown = [i for i in order if i not in phrase_of]
        if unknown:
            raise ValueError(f"{source}: frame ids {unknown} are not in 'objects'")
        phrases = clip_phrases([(i, phrase_of[i]) for i in order])
        name = dict(zip(order, phrases))
        raw = {
            "video_fname": str(truth["video"]), "video_id": video_id, "clip_id": str(index), "fps": fps,
            "clip_start_frame": int(grid[0]), "clip_end_frame": min(int(grid[-1]) + step - 1, num_frames - 1),
            "width": int(truth["width"]), "height": int(truth["height"]),
            "caption": clip_caption(phrases, tagged=False), "tagged_caption": clip_caption(phrases),
            "phrases": phrases,
            "bboxes": [np.asarray(e["boxes"], dtype=np.float64).reshape(-1, 4) for e in entries],
            "labels": [[name[int(i)] for i in e["ids"]] for e in entries],
            "long_synthetic": {"objects": [{"id": i, "phrase": name[i]} for i in order]},
        }
        records.append(GroundedRecord.from_dict(raw, source=source, key=f"{video_id}_{index}", clip_boxes=False))
    return records


def clip_records_path(truth_path: str | Path) -> Path:
    """Where the clip records of ``OUT.json`` go: ``OUT_clips.json``."""
    truth_path = Path(truth_path)
    return truth_path.with_name(f"{truth_path.stem}_clips.json")


def write_clip_records(truth: Mapping[str, Any], truth_path: str | Path, clip_seconds: float = 8.0,
                       out: str | Path | None = None) -> Path:
    """Write the clip records of ``truth`` (read from ``truth_path``) to ``out`` (default: beside it)."""
    return write_records_json(records_from_truth(truth, clip_seconds, source=str(truth_path)),
                              clip_records_path(truth_path) if out is None else out)
