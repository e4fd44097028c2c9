"""From Stage 3's classes to a record: boxes of one video-level phrase across frames form its track.

A frame can hold several boxes put in the same class (a paraphrase and a spurious detection, two
detector hits); ``same_class_boxes`` keeps the best-scored one (``best``, one box per phrase and
frame, like a track) or their union (``union``). Frames of the 5-fps grid that Stage 1 did not
look at carry no box.
"""
from __future__ import annotations

import re

import numpy as np

from annotation.outcomes import Rejection
from annotation.stage1.frame_annotations import ClipFrameAnnotations
from annotation.stage2.caption_aggregation import VideoCaption
from formats.frame_grids import annotation_grid
from formats.records import GroundedRecord, RecordError, strip_tags

SAME_CLASS_BOXES = ("best", "union")


def plain_caption(tagged: str) -> str:
    """The caption without tags, and without the space a removed tag leaves before punctuation."""
    return re.sub(r"\s+([.,;:!?])", r"\1", strip_tags(tagged))


def build_record(clip: ClipFrameAnnotations, caption: VideoCaption, classes: dict[str, str | None],
                 same_class_boxes: str = "best", min_boxes: int = 1) -> GroundedRecord | Rejection:
    """The HowToGround1M record of a clip, or a rejection if fewer than ``min_boxes`` boxes remain."""
    if same_class_boxes not in SAME_CLASS_BOXES:
        raise ValueError(f"tracks.same_class_boxes must be one of {SAME_CLASS_BOXES}, got {same_class_boxes!r}")
    phrases = list(caption.phrases)
    index = {p: j for j, p in enumerate(phrases)}
    grid = annotation_grid(clip.fps, clip.start_frame, clip.end_frame)
    num_frames = len(grid)
    # every Stage 1 box of the clip as one table: grid row, class, score, box
    counts = np.array([len(f.phrases) for f in clip.frames], dtype=np.int64)
    rows_of_frames = np.searchsorted(grid, np.array([f.frame for f in clip.frames], dtype=np.int64))
    if len(clip.frames) and ((rows_of_frames >= num_frames) | (grid[np.minimum(rows_of_frames, num_frames - 1)]
                                                               != [f.frame for f in clip.frames])).any():
        raise ValueError(f"clip '{clip.key}': Stage 1 frames are not on the clip's 5-fps annotation grid")
    rows = np.repeat(rows_of_frames, counts)
    labels = [classes.get(p) for f in clip.frames for p in f.phrases]
    cls = np.array([index[l] if l in index else -1 for l in labels], dtype=np.int64)
    boxes = np.concatenate([f.boxes for f in clip.frames]) if len(clip.frames) else np.zeros((0, 4), np.float32)
    scores = np.concatenate([f.scores for f in clip.frames]) if len(clip.frames) else np.zeros(0, np.float32)
    limits = np.array([clip.width, clip.height, clip.width, clip.height], dtype=np.float32)
    boxes = np.clip(boxes, 0.0, limits)
    keep = (cls >= 0) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])  # drop boxes empty in the frame
    rows, cls, boxes, scores = rows[keep], cls[keep], boxes[keep], scores[keep]
    if len(rows) < max(1, int(min_boxes)):
        return Rejection(clip.key, "stage3", f"{len(rows)} box(es) matched a video-level phrase "
                         f"(at least {max(1, int(min_boxes))} needed)")
    slot = rows * len(phrases) + cls
    if same_class_boxes == "best":
        order = np.lexsort((-scores, slot))  # by slot, best score first
        slot_sorted = slot[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = slot_sorted[1:] != slot_sorted[:-1]
        chosen = order[first]
        out_slot, out_box = slot[chosen], boxes[chosen]
    else:
        order = np.argsort(slot, kind="stable")
        slot_sorted = slot[order]
        starts = np.flatnonzero(np.r_[True, slot_sorted[1:] != slot_sorted[:-1]])
        out_slot = slot_sorted[starts]
        out_box = np.concatenate([np.minimum.reduceat(boxes[order, :2], starts),
                                  np.maximum.reduceat(boxes[order, 2:], starts)], axis=1)
    out_row, out_cls = out_slot // len(phrases), out_slot % len(phrases)
    per_row = np.bincount(out_row, minlength=num_frames)
    splits = np.cumsum(per_row)[:-1]
    bboxes = np.split(out_box.astype(np.float32), splits)  # out_slot is sorted: rows ascending, phrase order within
    frame_labels = [[phrases[j] for j in chunk] for chunk in np.split(out_cls, splits)]
    raw = {
        "video_fname": clip.spec.video_fname, "video_id": clip.spec.video_id, "clip_id": clip.spec.clip_id,
        "fps": float(clip.fps), "clip_start_frame": int(clip.start_frame), "clip_end_frame": int(clip.end_frame),
        "width": int(clip.width), "height": int(clip.height), "caption": plain_caption(caption.tagged_caption),
        "tagged_caption": caption.tagged_caption, "phrases": phrases, "bboxes": bboxes, "labels": frame_labels,
    }
    try:
        return GroundedRecord.from_dict(raw, source="annotation pipeline", key=clip.key)
    except RecordError as err:
        return Rejection(clip.key, "tracks", str(err))
