"""Stage 1 with detail captions: the captioner + detector backend whose frame captions come from the
CAPTURE paper's five-stage pipeline (:mod:`annotation.stage1.detail_captions`) instead of one captioner pass.

The captioner and OWLv2 folders are loaded once and serve both roles (Stages I/III of the detail
pipeline and Stage IV's phrase scores; then the grounding of the caption's noun phrases); SAM
(``segmenter``), the phrase extractor and the merging LLM (``merge_llm``, an annotation ``llm``
section) are the detail pipeline's own.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from annotation.stage1.captioner_detector import CaptionerDetectorFrameAnnotator
from annotation.stage2.svo import SPACY_MODEL


class _SharedCaptioner:
    def __init__(self, owner: CaptionerDetectorFrameAnnotator):
        self.owner = owner

    def caption(self, images: list[np.ndarray], prompt: str) -> list[str]:
        return CaptionerDetectorFrameAnnotator.caption(self.owner, images)


class _SharedScorer:
    def __init__(self, owner: CaptionerDetectorFrameAnnotator):
        self.owner = owner

    @torch.inference_mode()
    def score(self, image: np.ndarray, phrases: Sequence[str]) -> np.ndarray:
        if not phrases:
            return np.zeros(0)
        o = self.owner
        batch = o.detect_processor(text=[list(phrases)], images=[image], return_tensors="pt", padding="max_length",
                                   truncation=True, max_length=o.max_query_tokens).to(o.device)
        return torch.sigmoid(o.detector(**batch).logits[0].max(0).values[:len(phrases)]).float().cpu().numpy()


class DetailCaptionFrameAnnotator(CaptionerDetectorFrameAnnotator):
    """``stage1.backend: detail_captions``: options of ``captioner_detector`` plus ``segmenter`` (SAM:
    ``checkpoint``, ``model_type``, ...), ``extractor`` (``backend: factual|spacy``), ``merge_llm``
    (``backend: transformers|openai`` ...) and ``detail`` (prompts and thresholds of the five stages)."""

    name = "detail_captions"

    def __init__(self, captioner: str, detector: str, merge_llm: dict, segmenter: dict | None = None,
                 extractor: dict | None = None, detail: dict | None = None, max_new_tokens: int = 30,
                 box_threshold: float = 0.1, max_phrases: int = 8, batch_size: int = 8, device: str = "auto",
                 spacy_model: str = SPACY_MODEL, sam_model=None):
        super().__init__(captioner, detector, max_new_tokens, box_threshold, max_phrases, batch_size, device,
                         spacy_model)
        from annotation.llm.factory import make_chat
        from annotation.stage1.detail_caption_models import SAMSegmenter, SceneGraphExtractor
        from annotation.stage1.detail_captions import DetailCaptioner

        chat = make_chat(merge_llm, "stage1.merge_llm")
        seg = dict(segmenter or {})
        seg.setdefault("device", device)
        self.detail = DetailCaptioner(_SharedCaptioner(self), SAMSegmenter(model=sam_model, **seg),
                                      _SharedScorer(self), SceneGraphExtractor(**dict(extractor or {})), chat,
                                      **dict(detail or {}))

    def caption(self, images: list[np.ndarray]) -> list[str]:
        return [d.caption for d in self.detail.run(list(images))]
