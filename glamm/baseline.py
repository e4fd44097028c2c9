"""The GROVE paper's GLaMM baselines (section 6.2, Table 2 row a) in the project's prediction format.

GLaMM is a still-image model: it gives each frame its own caption and phrases, and no video-level
caption. Two ways to turn it into a grounded video caption, both scored by ``grove evaluate``:

* ``frame``: GLaMM's own grounded caption on every annotated frame; each frame keeps its own
  phrases and boxes, the clip's caption is the centre frame's (GLaMM has no video caption).
* ``video``: the centre frame's caption is the clip's caption and its phrases the clip's phrases;
  every annotated frame is grounded with that caption (teacher-forced, GLaMM's [SEG] masks for
  those phrases), so each phrase gets a box wherever GLaMM's mask for it is not empty.
* ``center``: the paper's "Center" set-up (Table 2 row a): GLaMM's own grounded caption of the
  centre annotated frame (:mod:`metrics.protocols.center_frame`), and that frame only; one GLaMM call per
  clip. Score it with ``grove evaluate --level center``.

With ``teacher_forced``, the ground-truth caption replaces GLaMM's own on every frame (grounding a
known caption, as for VidSTG): a grounding-only reference point.

Boxes are the masks' tight boxes as continuous pixel ``xyxy`` (last row and column included); a
box's score is the mean mask probability over its pixels.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from formats.video_files import open_video
from formats.video_reader import VideoDecodeError
from glamm.model import GLaMM, frame_boxes, ground_in_batches
from metrics.protocols.center_frame import centre_position

LEVELS = ("frame", "video", "center")


def clip_prediction(model: GLaMM, frames: np.ndarray, frame_indices: Iterable[int], level: str = "video",
                    batch_size: int = 8, max_new_tokens: int = 512, caption: str | None = None) -> dict:
    """One clip's prediction (the JSON format ``predict`` writes) from its annotated frames ``(N, H, W, 3)``;
    ``caption`` (tagged ``<p>..</p>``): ground it on every frame instead of generating."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    indices = [int(i) for i in frame_indices]
    centre = centre_position(len(indices))
    if level == "center" and caption is None:
        head = model.ground(frames[centre:centre + 1], max_new_tokens=max_new_tokens)[0]
        labels, boxes, scores = frame_boxes(head) if head.phrases else ([], [], [])
        return {"caption": head.caption, "tagged_caption": head.tagged_caption, "phrases": list(head.phrases),
                "frames": [{"frame": indices[centre], "boxes": boxes, "labels": labels, "scores": scores}]}
    if caption is not None:
        results = ground_in_batches(model, frames, batch_size, captions=[caption] * len(frames))
        head = results[centre]
        level = "video"
    elif level == "frame":
        results = ground_in_batches(model, frames, batch_size, max_new_tokens=max_new_tokens)
        head = results[centre]
    else:
        head = model.ground(frames[centre:centre + 1], max_new_tokens=max_new_tokens)[0]
        results = ground_in_batches(model, frames, batch_size, captions=[head.tagged_caption] * len(frames)) \
            if head.phrases else [head] * len(frames)
    out_frames = []
    for index, result in zip(indices, results):
        labels, boxes, scores = frame_boxes(result) if result.phrases else ([], [], [])
        out_frames.append({"frame": index, "boxes": boxes, "labels": labels, "scores": scores})
    phrases = list(head.phrases) if level == "video" else list(dict.fromkeys(
        label for frame in out_frames for label in frame["labels"]))
    return {"caption": head.caption, "tagged_caption": head.tagged_caption, "phrases": phrases, "frames": out_frames}


def predict_records(model: GLaMM, records: Mapping[str, object], video_root: str | Path, level: str = "video",
                    batch_size: int = 8, max_new_tokens: int = 512,
                    teacher_forced: bool = False) -> tuple[dict[str, dict], dict[str, str]]:
    """Predictions for ground-truth clips (their annotated frames), and the clips whose video could
    not be read, with the reason. ``teacher_forced``: ground each clip's own caption."""
    preds, skipped = {}, {}
    for key, record in records.items():  # one clip at a time: each is one size, its frames batched
        indices = record.frame_indices
        if level == "center" and not teacher_forced:  # only the centre frame is decoded
            indices = indices[centre_position(len(indices)):][:1]
        try:
            with open_video(video_root, record.video_fname) as source:
                frames = source.read_frames(indices)
        except (VideoDecodeError, FileNotFoundError, IndexError, OSError) as err:
            skipped[key] = str(err)
            continue
        caption = record.tagged_caption if teacher_forced else None
        preds[key] = clip_prediction(model, frames, indices, level, batch_size, max_new_tokens, caption)
    return preds, skipped
