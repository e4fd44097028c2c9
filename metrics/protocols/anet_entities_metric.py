"""The ActivityNet-Entities metrics during validation and test (:class:`ANetEntitiesMetric`), on the
functions of :mod:`metrics.protocols.anet_entities` that ``grove anet-entities`` scores files with;
kept apart from them so that the offline evaluator does not import torchmetrics."""
from __future__ import annotations

from typing import Iterable

from metrics.evaluator.prediction_set import PredictionSetMetric
from metrics.protocols.anet_entities import (
    IOU_THRESHOLD,
    Lemmatizer,
    evaluate_anet_entities,
    evaluate_gt_grounding,
    reference_from_records,
    spacy_lemmatizer,
    submission_from_predictions,
)


class ANetEntitiesMetric(PredictionSetMetric):
    """The ActivityNet-Entities metrics as a torchmetrics ``Metric`` (predictions in, F1s out).

    ``mode='gen'`` scores generated captions (F1_all, F1_loc and their per-sentence variants);
    ``mode='GT'`` scores teacher-forced grounding of the GT sentences (localisation accuracy).
    References are the DataModule's records (:meth:`set_references`).
    """

    def __init__(self, mode: str = "gen", lemmatize: Lemmatizer | None = None,
                 iou_threshold: float = IOU_THRESHOLD, **kwargs):
        super().__init__(**kwargs)
        if mode not in ("gen", "GT"):
            raise ValueError(f"mode must be 'gen' or 'GT', got {mode!r}")
        self.mode = mode
        self.lemmatize = lemmatize
        self.iou_threshold = iou_threshold
        self.reference: dict[str, dict[str, dict]] = {}
        self.keys: set[str] = set()

    def set_references(self, records: Iterable) -> None:
        records = list(records)
        self.reference = reference_from_records(records)
        self.keys = {r.key for r in records}

    def evaluate(self) -> dict[str, float]:
        preds = self.checked_predictions(self.keys, unit="segment")
        if not preds:
            return {}
        lemmatize = self.lemmatize or spacy_lemmatizer()
        submission = submission_from_predictions(preds, self.reference, lemmatize)
        if self.mode == "GT":
            return evaluate_gt_grounding(self.reference, submission, self.iou_threshold)
        return evaluate_anet_entities(self.reference, submission, lemmatize, self.iou_threshold)
