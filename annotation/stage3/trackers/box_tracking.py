"""Boxes through a clip from a few key-frame boxes: the interface the tracker Stage 3 backends share.

The GROVE paper's "Alt. Stage 3" (sec. 6.4) takes 5 uniformly sampled frames and their Stage 1
boxes and tracks the objects in between. A :class:`BoxTracker` gets, per clip, its decoded frames
and the query boxes (each on one frame row) and returns every query's box on every row, with a
``present`` flag (False where the tracker says the object is not visible).

Point trackers (CoTracker3, and the oracle below) share the geometry here: a grid of query points
inside each box, and on every other frame the box moved by the per-axis scale and shift that maps
the query points onto their tracked positions (fitted on the points that stay visible; absent when
fewer than ``min_visible`` of them do).
"""
from __future__ import annotations

from core.box_ops import numpy_box_iou_pairwise

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class TrackingInput:
    """One clip: ``frames`` (T, H, W, 3) uint8; query ``boxes`` (K, 4) pixel xyxy on frame rows ``rows`` (K,)."""

    key: str
    frames: np.ndarray
    frame_indices: np.ndarray
    rows: np.ndarray
    boxes: np.ndarray


@dataclass
class TrackingOutput:
    """``boxes`` (T, K, 4) and ``present`` (T, K): query k's box on frame row t, if visible there."""

    boxes: np.ndarray
    present: np.ndarray


@dataclass
class Track:
    """One key-frame box carried through the clip: ``boxes`` (T, 4) and ``present`` (T,) per decoded frame."""

    phrase: str
    row: int
    score: float
    boxes: np.ndarray
    present: np.ndarray

    def to_dict(self) -> dict:
        return {"phrase": self.phrase, "row": self.row, "score": self.score, "boxes": self.boxes.tolist(),
                "present": self.present.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> "Track":
        return cls(data["phrase"], int(data["row"]), float(data["score"]),
                   np.asarray(data["boxes"], np.float32).reshape(-1, 4), np.asarray(data["present"], bool))


class BoxTracker(Protocol):
    def track(self, clips: list[TrackingInput]) -> list[TrackingOutput]: ...


def box_grid_points(boxes: np.ndarray, per_side: int, margin: float = 0.1) -> np.ndarray:
    """(K, per_side², 2) points on a regular grid inside each box, ``margin`` of its size from the edges."""
    boxes = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    u = np.linspace(margin, 1.0 - margin, per_side, dtype=np.float32) if per_side > 1 else np.array([0.5], np.float32)
    gx, gy = np.meshgrid(u, u, indexing="xy")
    wh = boxes[:, 2:] - boxes[:, :2]
    return boxes[:, None, :2] + np.stack([gx.ravel(), gy.ravel()], axis=-1)[None] * wh[:, None]


def boxes_from_points(query_points: np.ndarray, query_boxes: np.ndarray, tracks: np.ndarray, visible: np.ndarray,
                      size: tuple[int, int], min_visible: float = 0.5) -> TrackingOutput:
    """Each query box carried to every frame by its points' motion.

    ``query_points`` (K, P, 2) on the query frame, ``tracks`` (T, K, P, 2) and ``visible`` (T, K, P)
    their tracked positions; per frame and axis the scale is the ratio of the visible points'
    spreads and the shift maps their mean, so points moving with a box (shift and stretch) give
    that box back exactly. ``size`` is (width, height); boxes are clipped to the frame.
    """
    visible = visible.astype(bool)
    w = visible.astype(np.float64)
    count = w.sum(-1)  # (T, K)
    num_points = query_points.shape[1]
    safe = np.maximum(count, 1.0)[..., None]
    q = np.broadcast_to(query_points[None].astype(np.float64), tracks.shape)
    q_mean = (q * w[..., None]).sum(-2) / safe
    t_mean = (tracks * w[..., None]).sum(-2) / safe
    q_std = np.sqrt((((q - q_mean[..., None, :]) ** 2) * w[..., None]).sum(-2) / safe)
    t_std = np.sqrt((((tracks - t_mean[..., None, :]) ** 2) * w[..., None]).sum(-2) / safe)
    scale = np.where(q_std > 1e-6, t_std / np.maximum(q_std, 1e-6), 1.0)  # (T, K, 2)
    shift = t_mean - scale * q_mean
    boxes = np.concatenate([scale * query_boxes[None, :, :2] + shift, scale * query_boxes[None, :, 2:] + shift], -1)
    limits = np.array([size[0], size[1], size[0], size[1]], dtype=np.float64)
    boxes = np.clip(boxes, 0.0, limits)
    present = (count >= max(1.0, min_visible * num_points)) & (boxes[..., 2] > boxes[..., 0]) & (
        boxes[..., 3] > boxes[..., 1])
    return TrackingOutput(boxes.astype(np.float32), present)


class OraclePointTracker:
    """A point tracker that reads the synthetic truth: each query box is matched to the true object
    with the highest IoU on its frame (at least ``match_iou``), and its points move with that
    object's true box (same place relative to the box), visible exactly where the object is.
    Points of an unmatched box are visible on their own frame only. With exact Stage 1 boxes the
    tracked boxes equal the truth; it tests the tracker plumbing without a model."""

    name = "oracle"

    def __init__(self, records: dict, points_per_side: int = 4, min_visible: float = 0.5, match_iou: float = 0.5):
        self.records, self.per_side = records, int(points_per_side)
        self.min_visible, self.match_iou = float(min_visible), float(match_iou)

    def track_points(self, clip: TrackingInput, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Tracks (T, K, P, 2) and visibility (T, K, P) of ``points`` (K, P, 2) queried on ``clip.rows``."""
        record = self.records.get(clip.key)
        if record is None:
            raise KeyError(f"oracle tracker: clip '{clip.key}' is not in the ground truth")
        grid_boxes, grid_present = record.phrase_boxes()  # (F, O, 4), (F, O) on the record's grid
        rows = np.clip(np.searchsorted(record.frame_indices, clip.frame_indices), 0, len(record.frame_indices) - 1)
        on_grid = record.frame_indices[rows] == clip.frame_indices
        truth, present = grid_boxes[rows].astype(np.float64), grid_present[rows] & on_grid[:, None]  # (T, O, ...)
        num_frames, num_queries = len(clip.frame_indices), len(clip.rows)
        tracks = np.repeat(points[None].astype(np.float64), num_frames, axis=0)
        visible = np.zeros(tracks.shape[:3], dtype=bool)
        visible[clip.rows, np.arange(num_queries)] = True
        if truth.shape[1] == 0 or num_queries == 0:
            return tracks, visible
        at_query = truth[clip.rows]  # (K, O, 4)
        ious = numpy_box_iou_pairwise(clip.boxes[:, None].astype(np.float64), at_query)  # (K, O)
        ious = np.where(present[clip.rows], ious, 0.0)
        obj = ious.argmax(1)
        matched = ious[np.arange(num_queries), obj] >= self.match_iou
        src = at_query[np.arange(num_queries), obj]  # (K, 4): the object's true box on the query frame
        rel = (points - src[:, None, :2]) / np.maximum(src[:, None, 2:] - src[:, None, :2], 1e-9)
        dst = truth[:, obj]  # (T, K, 4)
        moved = dst[:, :, None, :2] + rel[None] * (dst[:, :, None, 2:] - dst[:, :, None, :2])
        tracks = np.where(matched[None, :, None, None], moved, tracks)
        visible = np.where(matched[None, :, None], present[:, obj][..., None], visible)
        return tracks, visible

    def track(self, clips: list[TrackingInput]) -> list[TrackingOutput]:
        out = []
        for clip in clips:
            points = box_grid_points(clip.boxes, self.per_side)
            tracks, visible = self.track_points(clip, points)
            out.append(boxes_from_points(points, clip.boxes, tracks, visible, (clip.frames.shape[2],
                                                                                 clip.frames.shape[1]),
                                         self.min_visible))
        return out
