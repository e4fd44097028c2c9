"""torchmetrics wrapper: grounded-caption predictions in, AP50/mIoU/recall/METEOR/CIDEr/CAPTURE out.

The state is the predictions themselves (:class:`metrics.evaluator.prediction_set.PredictionSetMetric`),
gathered under DDP and de-duplicated by clip key; ``compute`` runs the same plain functions the
offline evaluator uses (metrics.functional.grounding, metrics.functional.captioning, metrics.capture), so online and
offline numbers cannot drift apart.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

from metrics.evaluator.prediction_set import PredictionSetMetric


class GroundedCaptionMetrics(PredictionSetMetric):
    """Grounding and captioning metrics over a set of clips.

    Args:
        references: GT records (``GroundedRecord``) or a mapping key -> record; may also be set
            later with :meth:`set_references` (the evaluation callback takes them from the
            DataModule).
        level: ``video``, ``frame`` or ``both`` grounding levels.
        score_source: ``constant`` (every box 1.0, as the public evaluator) or ``objectness``.
        text_encoder: recall's phrase encoder (instance or build_text_encoder spec; None = MiniLM).
        caption_metrics: COCO caption metrics to compute (empty to skip; needs Java).
        capture: also compute CAPTURE (offline spaCy parser).
        invalid: predicted boxes that cannot be right (:mod:`metrics.evaluator.prediction_validation`):
            ``error`` (default) stops with the clip, frame and field; ``skip`` drops them and
            reports their number as ``invalid_boxes_skipped``.
    """

    def __init__(self, references: Iterable | Mapping | None = None, level: str = "both",
                 score_source: str = "constant", text_encoder: Any = None,
                 caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                 capture: bool = True, invalid: str = "error", **kwargs):
        super().__init__(**kwargs)
        from metrics.evaluator.prediction_validation import INVALID_POLICIES

        if invalid not in INVALID_POLICIES:
            raise ValueError(f"invalid must be one of {INVALID_POLICIES}, got {invalid!r}")
        self.invalid = invalid
        self.level = level
        self.score_source = score_source
        self.text_encoder = text_encoder
        self.caption_metrics = tuple(caption_metrics)
        self.capture = capture
        self.references: dict[str, Any] = {}
        if references is not None:
            self.set_references(references)

    def set_references(self, references: Iterable | Mapping) -> None:
        items = references.values() if isinstance(references, Mapping) else references
        self.references = {r.key: r for r in items}



    def evaluate(self) -> dict[str, float]:
        preds = self.checked_predictions(self.references, unit="clip")
        if not preds:
            return {}
        from metrics.evaluator.evaluation import evaluate_predictions

        report = evaluate_predictions({k: self.references[k] for k in preds}, preds, level=self.level,
                                      score_source=self.score_source, text_encoder=self.encoder(),
                                      caption_metrics=self.caption_metrics, capture=self.capture,
                                      invalid=self.invalid)
        out = {**report["metrics"], "num_clips": float(report["num_clips"])}
        if self.invalid == "skip":
            out["invalid_boxes_skipped"] = float(report["invalid_predictions"]["skipped_boxes"])
        return out

    def encoder(self):
        """The phrase/sentence encoder, built once and shared by recall and CAPTURE."""
        if self.text_encoder is None or isinstance(self.text_encoder, (str, os.PathLike)):
            from metrics.text_encoder import build_text_encoder

            self.text_encoder = build_text_encoder(self.text_encoder)
        return self.text_encoder

