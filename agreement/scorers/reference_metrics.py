"""Reference-based text metrics as agreement scorers, reusing the project's implementations:
BLEU / METEOR / ROUGE-L / CIDEr (:func:`metrics.functional.captioning.evaluate_captions`, the COCO evaluator's
scorers) and CAPTURE (:class:`metrics.capture.CaptureScorer`). Each item is scored against its own
references; CIDEr's document frequencies come from the benchmark's references, as in the COCO
evaluator."""
from __future__ import annotations

from typing import Any

import numpy as np

from agreement.scorers.base import CaptionScorer, require_references
from metrics.functional.captioning import evaluate_captions, resolve_metric_names


class CaptionMetricScorer(CaptionScorer):
    """One COCO caption metric (``BLEU-1`` .. ``BLEU-4``, ``METEOR``, ``ROUGE-L``, ``CIDEr``) per caption."""

    uses_references = True
    uses_visual = False

    def __init__(self, metric: str = "CIDEr", name: str | None = None):
        (self.metric,) = resolve_metric_names([metric])
        self.name = name or self.metric

    def score(self, items, frames, progress=False):
        require_references(self, items)
        gts = {n: list(i.references) for n, i in enumerate(items)}
        res = {n: i.caption for n, i in enumerate(items)}
        _, per_sample = evaluate_captions(gts, res, metrics=[self.metric], return_per_sample=True)
        return np.array([per_sample[self.metric][n] for n in range(len(items))], dtype=np.float64)


class CaptureMetricScorer(CaptionScorer):
    """CAPTURE (CAPTURE paper, section 4) per caption, the mean over its references; ``scorer_kwargs``
    go to :class:`metrics.capture.CaptureScorer` (parser, soft matching, text encoder, ...)."""

    uses_references = True
    uses_visual = False

    def __init__(self, name: str = "CAPTURE", **scorer_kwargs: Any):
        from metrics.capture import CaptureScorer

        self.name = name
        self.scorer = CaptureScorer(**scorer_kwargs)

    def score(self, items, frames, progress=False):
        require_references(self, items)
        rows = self.scorer.score_per_sample([i.caption for i in items], [list(i.references) for i in items])
        return np.array([r["CAPTURE"] for r in rows], dtype=np.float64)
