"""Evaluates generated grounded captions at validation/test and logs ``val/*`` / ``test/*`` metrics.

The LightningModule returns predictions (in the predictions-file format) from its eval steps;
this callback feeds them to a :class:`metrics.grounded_caption_metric.GroundedCaptionMetrics` (references taken from the
DataModule's records by clip key), logs AP50 / mIoU / recall at video and frame level, METEOR,
CIDEr, BLEU-4, ROUGE-L and CAPTURE, and writes a JSON report per evaluation into the run folder.
``invalid`` chooses what a predicted box that cannot be right does (:mod:`metrics.evaluator.prediction_validation`):
``error`` (default) stops naming the clip, frame and field; ``skip`` drops it and logs the number
skipped as ``{stage}/invalid_boxes_skipped``.
"""
from __future__ import annotations

from typing import Sequence

from callbacks.task_evaluation import TaskEvaluation
from metrics.evaluator.prediction_validation import INVALID_POLICIES
from metrics.grounded_caption_metric import GroundedCaptionMetrics


class GroundedEvaluation(TaskEvaluation):
    def __init__(self, level: str = "both", score_source: str = "constant",
                 text_encoder: str | None = "minilm",
                 caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                 capture: bool = True, invalid: str = "error", write_report: bool = True):
        if invalid not in INVALID_POLICIES:
            raise ValueError(f"GroundedEvaluation: invalid must be one of {INVALID_POLICIES}, got {invalid!r}")
        super().__init__(write_report)
        self.invalid = invalid
        self.level = level
        self.score_source = score_source
        self.caption_metrics = tuple(caption_metrics)
        self.capture = capture
        self.text_encoder_spec = text_encoder
        self._text_encoder = None  # built on first evaluation, shared by both stages

    def make_metric(self, pl_module) -> GroundedCaptionMetrics:
        if self._text_encoder is None:
            from metrics.text_encoder import build_text_encoder

            self._text_encoder = build_text_encoder(self.text_encoder_spec)
        return GroundedCaptionMetrics(level=self.level, score_source=self.score_source,
                                      text_encoder=self._text_encoder, caption_metrics=self.caption_metrics,
                                      capture=self.capture, invalid=self.invalid)
