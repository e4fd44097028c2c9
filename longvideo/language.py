"""The annotation pipeline's language steps, one level up: clip captions instead of frame captions.

The GROVE paper's pipeline summarises a clip's frame captions into one caption (Stage 2) and then
"tracks by language", putting every frame-level phrase into one of that caption's phrases
(Stage 3). Here each clip of a long video plays the part of a frame: Stage 2 turns the clip
captions, in order, into one video-level summary caption whose tagged phrases are the video's
entities, and Stage 3 assigns every clip phrase to one of them (or to none). The backends are
the pipeline's own (rule/LLM aggregation, embedding/LLM classification; a local transformers
model or an OpenAI-compatible endpoint), configured by an annotation config file.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from annotation.clips import ClipSpec
from annotation.config import load_config
from annotation.engines.workers import TextWorker
from annotation.outcomes import Rejection
from annotation.stage1.frame_annotations import ClipFrameAnnotations, FrameAnnotation
from annotation.stage2.caption_aggregation import VideoCaption
from annotation.stage3.phrase_classification import ClassificationTask


class LanguageLinker:
    """Stages 2 and 3 of the annotation config at ``config_path`` applied to a video's clip captions."""

    def __init__(self, config_path: str | Path):
        self.config_path = str(config_path)
        self.worker = TextWorker(load_config([config_path]))

    def story(self, video_id: str, fps: float, segments: Sequence[Mapping[str, Any]]
              ) -> tuple[str | None, dict[str, list[str | None]], str | None]:
        """``(summary tagged caption, clip key -> video-level phrase per distinct clip phrase, problem)``.

        ``segments``: the predicted clips in order, each ``key, start_frame, caption, phrases``. On a
        rejection the summary is None, every phrase maps to None, and ``problem`` says why."""
        frames = [FrameAnnotation(frame=int(s["start_frame"]), caption=s["caption"] or "",
                                  phrases=list(s["phrases"]), boxes=np.zeros((len(s["phrases"]), 4), np.float32),
                                  scores=np.ones(len(s["phrases"]), np.float32)) for s in segments]
        clip = ClipFrameAnnotations(ClipSpec(video_fname=video_id, video_id=video_id, clip_id="video"), fps=fps,
                                    start_frame=frames[0].frame if frames else 0,
                                    end_frame=frames[-1].frame if frames else 0, width=1, height=1, frames=frames)
        empty = {s["key"]: [None] * len(s["phrases"]) for s in segments}
        if not frames:
            return None, empty, "no clip was predicted"
        caption = self.worker.stage2.aggregate([clip])[0]
        if isinstance(caption, Rejection):
            return None, empty, f"summary: {caption.reason}"
        assert isinstance(caption, VideoCaption)
        phrases = tuple(dict.fromkeys(p for s in segments for p in s["phrases"]))
        mapping = self.worker.stage3.classify([ClassificationTask(video_id, phrases, caption.phrases)])[0]
        if isinstance(mapping, Rejection):
            return caption.tagged_caption, empty, f"linking: {mapping.reason}"
        return (caption.tagged_caption, {s["key"]: [mapping.get(p) for p in s["phrases"]] for s in segments}, None)
