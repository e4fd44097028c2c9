"""The VidSTG metrics during validation and test (:class:`VidSTGMetric`), on the functions of
:mod:`metrics.protocols.vidstg` that ``grove vidstg`` scores files with; kept apart from them so that
the offline evaluator does not import torchmetrics."""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from metrics.evaluator.prediction_set import PredictionSetMetric
from metrics.protocols.vidstg import GRIDS, THRESHOLDS, evaluate_vidstg


class VidSTGMetric(PredictionSetMetric):
    """The VidSTG metrics as a torchmetrics ``Metric``: predictions in, :func:`evaluate_vidstg` out.

    The state is the predictions (prediction dicts serialised to bytes), gathered by concatenation
    under DDP; references (the DataModule's records) are set with :meth:`set_references`.
    ``grid="record"`` (default here) scores the frames the model was given, which is what a
    validation run can score; TubeDETR's grid needs records sampled on it (``grove vidstg``
    reads it from the annotation file).
    """

    def __init__(self, thresholds: Sequence[float] = THRESHOLDS, grid: str = "record", **kwargs):
        super().__init__(**kwargs)
        if grid not in GRIDS:
            raise ValueError(f"grid must be one of {GRIDS}, got {grid!r}")
        self.thresholds = tuple(thresholds)
        self.grid = grid
        self.references: dict[str, Any] = {}

    def set_references(self, references: Iterable | Mapping) -> None:
        items = references.values() if isinstance(references, Mapping) else references
        self.references = {r.key: r for r in items}

    def evaluate(self) -> dict[str, float]:
        preds = self.checked_predictions(self.references, unit="sentence")
        if not preds:
            return {}
        return evaluate_vidstg([self.references[k] for k in preds], preds, self.thresholds, grid=self.grid)
