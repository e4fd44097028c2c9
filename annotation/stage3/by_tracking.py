"""Stage 3 by tracking (the GROVE paper's "Alt. Stage 3", sec. 6.4): boxes from a tracker, not from
Stage 1 on every frame.

``key_frames`` uniformly sampled Stage 1 frames give the query boxes; a :class:`BoxTracker` carries
each through the clip (this part runs in the frame worker, beside Stage 1, where the pixels and
the GPU are). Each track keeps the frame-level phrase of its query box, and the tracks are
associated with the video-level phrases of Stage 2 through that phrase (the embedding classifier
of the language Stage 3, ``encoder`` / ``threshold``). Several tracks of one video phrase (the
object seen on several key frames) are merged per frame by temporal distance: the track queried
nearest in time wins (through ``tracks.same_class_boxes: best``).

Backends: ``cotracker`` (CoTracker3 point tracks), ``sam2`` (SAM 2 masks from box prompts) and
``oracle_tracker`` (points moved with the synthetic truth's boxes: the plumbing without a model).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from annotation.stage1.decoding import DecodedClip
from annotation.stage1.frame_annotations import ClipFrameAnnotations, FrameAnnotation
from annotation.stage3.phrase_classification import ClassificationTask, EmbeddingPhraseClassifier
from annotation.stage3.trackers.box_tracking import OraclePointTracker, Track, TrackingInput


def key_rows(num_frames: int, key_frames: int) -> np.ndarray:
    """Rows of ``key_frames`` uniformly sampled frames (all of them when the clip has fewer)."""
    if num_frames <= key_frames:
        return np.arange(num_frames)
    return np.unique(np.round(np.linspace(0, num_frames - 1, key_frames)).astype(np.int64))


class TrackerStage3:
    """Base of the tracker backends: the frame side (:meth:`track`) and the text side (:meth:`classify`,
    :meth:`tracked_frames`). Models load on first use, so each worker loads only its own part."""

    name = "tracker"
    needs_pixels = True

    def __init__(self, key_frames: int = 5, encoder: str = "minilm", threshold: float = 0.5,
                 keep_humans_apart: bool = True, text_encoder=None):
        if int(key_frames) < 1:
            raise ValueError(f"stage3.key_frames must be >= 1, got {key_frames}")
        self.key_frames = int(key_frames)
        self.classifier_options = {"encoder": encoder, "threshold": threshold, "keep_humans_apart": keep_humans_apart,
                                   "text_encoder": text_encoder}
        self._classifier = None

    def make_tracker(self):
        raise NotImplementedError

    @property
    def tracker(self):
        if getattr(self, "_tracker", None) is None:
            self._tracker = self.make_tracker()
        return self._tracker

    def track(self, decoded: list[DecodedClip], frames: list[list[FrameAnnotation]]) -> list[list[Track]]:
        """The tracks of each clip's key-frame boxes (runs the tracker on all clips at once)."""
        inputs, queries = [], []
        for clip, annotated in zip(decoded, frames):
            rows = key_rows(len(annotated), self.key_frames)
            picked = [(int(r), p, b, s) for r in rows for p, b, s in zip(annotated[r].phrases, annotated[r].boxes,
                                                                          annotated[r].scores)]
            picked = [q for q in picked if q[2][2] > q[2][0] and q[2][3] > q[2][1]]
            queries.append(picked)
            inputs.append(TrackingInput(clip.spec.key, clip.frames, clip.frame_indices,
                                        np.array([q[0] for q in picked], np.int64),
                                        np.array([q[2] for q in picked], np.float32).reshape(-1, 4)))
        outputs = self.tracker.track(inputs) if inputs else []
        return [[Track(p, r, float(s), out.boxes[:, k], out.present[:, k]) for k, (r, p, _, s) in enumerate(picked)]
                for picked, out in zip(queries, outputs)]

    @property
    def classifier(self) -> EmbeddingPhraseClassifier:
        if self._classifier is None:
            self._classifier = EmbeddingPhraseClassifier(**self.classifier_options)
        return self._classifier

    def classify(self, tasks: list[ClassificationTask]):
        return self.classifier.classify(tasks)

    @staticmethod
    def tracked_frames(clip: ClipFrameAnnotations) -> ClipFrameAnnotations:
        """The clip with its frames' boxes replaced by the tracks' (scored by nearness to the key frame)."""
        tracks = clip.tracks or []
        frames = []
        for t, frame in enumerate(clip.frames):
            live = [tr for tr in tracks if tr.present[t]]
            frames.append(FrameAnnotation(frame.frame, frame.caption, [tr.phrase for tr in live],
                                          np.array([tr.boxes[t] for tr in live], np.float32).reshape(-1, 4),
                                          np.array([1.0 / (1.0 + abs(t - tr.row)) for tr in live], np.float32)))
        return ClipFrameAnnotations(clip.spec, clip.fps, clip.start_frame, clip.end_frame, clip.width, clip.height,
                                    frames)


class CoTrackerStage3(TrackerStage3):
    """``stage3.backend: cotracker`` (options of
    :class:`annotation.stage3.trackers.cotracker_tracker.CoTrackerBoxTracker`)."""

    name = "cotracker"

    def __init__(self, path: str | Path | None, model_config: dict | None = None, points_per_side: int = 4,
                 min_visible: float = 0.5, iters: int = 6, support_grid_size: int = 6,
                 visibility_threshold: float = 0.9, batch_size: int = 4, device: str = "auto", seed: int = 0,
                 key_frames: int = 5,
                 encoder: str = "minilm", threshold: float = 0.5, keep_humans_apart: bool = True, text_encoder=None):
        super().__init__(key_frames, encoder, threshold, keep_humans_apart, text_encoder)
        self.tracker_options = dict(path=path, model_config=model_config, points_per_side=points_per_side,
                                    min_visible=min_visible, iters=iters, support_grid_size=support_grid_size,
                                    visibility_threshold=visibility_threshold, batch_size=batch_size, device=device,
                                    seed=seed)

    def make_tracker(self):
        from annotation.stage3.trackers.cotracker_tracker import CoTrackerBoxTracker

        return CoTrackerBoxTracker(**self.tracker_options)


class SAM2Stage3(TrackerStage3):
    """``stage3.backend: sam2`` (options of :class:`annotation.stage3.trackers.sam2_tracker.SAM2BoxTracker`)."""

    name = "sam2"

    def __init__(self, model_config: str, checkpoint: str | None = None, mask_threshold: float = 0.0,
                 device: str = "auto", seed: int = 0, key_frames: int = 5, encoder: str = "minilm",
                 threshold: float = 0.5, keep_humans_apart: bool = True, text_encoder=None):
        super().__init__(key_frames, encoder, threshold, keep_humans_apart, text_encoder)
        self.tracker_options = dict(model_config=model_config, checkpoint=checkpoint, mask_threshold=mask_threshold,
                                    device=device, seed=seed)

    def make_tracker(self):
        from annotation.stage3.trackers.sam2_tracker import SAM2BoxTracker

        return SAM2BoxTracker(**self.tracker_options)


class OracleTrackerStage3(TrackerStage3):
    """``stage3.backend: oracle_tracker``: :class:`annotation.stage3.trackers.box_tracking.OraclePointTracker`
    on ``--truth``."""

    name = "oracle_tracker"

    def __init__(self, truth: str | Path | None = None, records: dict | None = None, points_per_side: int = 4,
                 min_visible: float = 0.5, match_iou: float = 0.5, key_frames: int = 5, encoder: str = "minilm",
                 threshold: float = 0.5, keep_humans_apart: bool = True, text_encoder=None):
        super().__init__(key_frames, encoder, threshold, keep_humans_apart, text_encoder)
        self.truth, self.records = truth, records
        self.tracker_options = dict(points_per_side=points_per_side, min_visible=min_visible, match_iou=match_iou)

    def make_tracker(self):
        records = self.records
        if records is None:
            if self.truth is None:
                raise ValueError("stage3 backend 'oracle_tracker' needs the ground truth: pass --truth ANNOTATIONS")
            from formats.records import read_records

            records = {r.key: r for r in read_records(self.truth)}
        return OraclePointTracker(records, **self.tracker_options)
