"""The stages as two workers every engine runs: frames (decode + Stage 1) and text (Stages 2-3 + tracks).

Both are built from the plain config dict (so a Ray actor builds its own copy, loading its model
once) and work on batches of clips. Each returns, per clip, its result or why it has none, plus
the seconds spent in each stage, which the report turns into clips per second.
"""
from __future__ import annotations

import inspect
import time
from collections import defaultdict
from pathlib import Path

from annotation.clips import ClipSpec, SkippedClip
from annotation.config import backend_options
from annotation.outcomes import Rejection
from annotation.stage1.decoding import ClipUnreadable, DecodedClip, decode_clip
from annotation.stage1.frame_annotations import ClipFrameAnnotations
from annotation.stage2.caption_aggregation import VideoCaption
from annotation.stage3.phrase_classification import ClassificationTask
from annotation.stage3.tracks import build_record
from formats.records import GroundedRecord


def _set_torch_threads(config: dict) -> None:
    threads = config["engine"].get("torch_threads")
    if threads:
        import torch

        torch.set_num_threads(int(threads))


class FrameWorker:
    """Decoding and Stage 1 for batches of clips; unreadable videos come back as :class:`SkippedClip`."""

    def __init__(self, config: dict, videos: str | Path, truth: str | Path | None = None):
        _set_torch_threads(config)
        self.videos, self.every = Path(videos), int(config["decode"]["every"])
        cls, options = backend_options(config, "stage1")
        if config["stage1"]["backend"] == "noisy_oracle":
            options["truth"] = truth
        self.stage1 = cls(**options)
        self.tracker = None  # a tracker Stage 3 tracks here, where the pixels are
        cls, options = backend_options(config, "stage3")
        if getattr(cls, "needs_pixels", False):
            if "truth" in inspect.signature(cls.__init__).parameters:
                options["truth"] = truth
            self.tracker = cls(**options)

    def run(self, specs: list[ClipSpec]) -> tuple[list[ClipFrameAnnotations | SkippedClip], dict[str, float]]:
        timings: dict[str, float] = defaultdict(float)
        start = time.perf_counter()
        decoded: list[DecodedClip | SkippedClip] = []
        for spec in specs:
            try:
                decoded.append(decode_clip(self.videos, spec, self.every))
            except ClipUnreadable as err:
                decoded.append(SkippedClip(spec.key, spec.video_fname, str(err)))
        timings["decode"] += time.perf_counter() - start
        start = time.perf_counter()
        readable = [d for d in decoded if isinstance(d, DecodedClip)]
        annotated = self.stage1.annotate(readable) if readable else []
        timings["stage1"] += time.perf_counter() - start
        start = time.perf_counter()
        tracks = self.tracker.track(readable, annotated) if self.tracker is not None and readable else None
        if tracks is not None:
            timings["stage3_tracking"] += time.perf_counter() - start
        frames, tracks = iter(annotated), iter(tracks or ())
        out: list[ClipFrameAnnotations | SkippedClip] = []
        for d in decoded:
            if isinstance(d, SkippedClip):
                out.append(d)
            else:
                out.append(ClipFrameAnnotations(d.spec, d.fps, d.start_frame, d.end_frame, d.width, d.height,
                                                next(frames), next(tracks, None)))
        return out, dict(timings)


class TextWorker:
    """Stages 2 and 3 and the tracks for batches of Stage 1 outputs."""

    def __init__(self, config: dict):
        _set_torch_threads(config)
        chat = None
        if config.get("llm") is not None and "llm" in (config["stage2"]["backend"], config["stage3"]["backend"]):
            cls, options = backend_options(config, "llm")
            chat = cls(**options)
        retries = int(config.get("max_retries", 2))
        cls, options = backend_options(config, "stage2")
        if config["stage2"]["backend"] == "llm":
            options.update(chat=chat, max_retries=options.get("max_retries", retries))
        self.stage2 = cls(**options)
        cls, options = backend_options(config, "stage3")
        if config["stage3"]["backend"] == "llm":
            options.update(chat=chat, max_retries=options.get("max_retries", retries))
        if getattr(cls, "needs_pixels", False):
            options.pop("truth", None)
        self.stage3 = cls(**options)
        self.same_class_boxes = config["tracks"]["same_class_boxes"]
        self.min_boxes = int(config["tracks"]["min_boxes"])

    def run(self, clips: list[ClipFrameAnnotations]) -> tuple[list[GroundedRecord | Rejection], dict[str, float]]:
        timings: dict[str, float] = {}
        start = time.perf_counter()
        captions = self.stage2.aggregate(clips) if clips else []
        timings["stage2"] = time.perf_counter() - start
        start = time.perf_counter()
        if getattr(self.stage3, "needs_pixels", False):  # boxes from the tracks made in the frame worker
            clips = [self.stage3.tracked_frames(clip) for clip in clips]
        todo = [(clip, cap) for clip, cap in zip(clips, captions) if isinstance(cap, VideoCaption)]
        tasks = [ClassificationTask(clip.key, tuple(dict.fromkeys(p for f in clip.frames for p in f.phrases)),
                                    cap.phrases) for clip, cap in todo]
        classes = iter(self.stage3.classify(tasks) if tasks else [])
        timings["stage3"] = time.perf_counter() - start
        start = time.perf_counter()
        out: list[GroundedRecord | Rejection] = []
        for clip, cap in zip(clips, captions):
            if isinstance(cap, Rejection):
                out.append(cap)
                continue
            mapping = next(classes)
            if isinstance(mapping, Rejection):
                out.append(mapping)
                continue
            out.append(build_record(clip, cap, mapping, self.same_class_boxes, self.min_boxes))
        timings["tracks"] = time.perf_counter() - start
        return out, timings
