"""torchmetrics wrapper: grounded-caption predictions in, AP50/mIoU/recall/METEOR/CIDEr/CAPTURE out.

The state is the predictions themselves (SPEC §3 dicts, one per clip, serialised to byte tensors
plus their lengths), gathered by concatenation under DDP; ``compute`` de-duplicates them by clip
key (DistributedSampler-style padding repeats clips) and runs the same plain functions the
offline evaluator uses (metrics.grounding, metrics.captioning, metrics.capture), so online and
offline numbers cannot drift apart.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping, Sequence

import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat



def encode_payload(obj: Any) -> torch.Tensor:
    return torch.frombuffer(bytearray(json.dumps(obj).encode("utf-8")), dtype=torch.uint8).clone()


def decode_payloads(payload: torch.Tensor, lengths: torch.Tensor) -> list[Any]:
    data = payload.cpu().numpy().tobytes()
    out, start = [], 0
    for n in lengths.cpu().tolist():
        out.append(json.loads(data[start:start + n].decode("utf-8")))
        start += n
    return out


class GroundedCaptionMetrics(Metric):
    """Grounding and captioning metrics over a set of clips.

    Args:
        references: GT records (``GroundedRecord``) or a mapping key -> record; may also be set
            later with :meth:`set_references` (the evaluation callback takes them from the
            DataModule).
        level: ``video``, ``frame`` or ``both`` grounding levels (SPEC §5).
        score_source: ``constant`` (every box 1.0, as the public evaluator) or ``objectness``.
        text_encoder: recall's phrase encoder (instance or build_text_encoder spec; None = MiniLM).
        caption_metrics: COCO caption metrics to compute (empty to skip; needs Java).
        capture: also compute CAPTURE (offline spaCy parser).
    """

    full_state_update = False
    higher_is_better = True

    def __init__(self, references: Iterable | Mapping | None = None, level: str = "both",
                 score_source: str = "constant", text_encoder: Any = None,
                 caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                 capture: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.add_state("payload", default=[], dist_reduce_fx="cat")
        self.add_state("lengths", default=[], dist_reduce_fx="cat")
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

    def update(self, predictions: Mapping[str, Mapping[str, Any]]) -> None:
        for key, pred in predictions.items():
            blob = encode_payload([key, pred])
            self.payload.append(blob)
            self.lengths.append(torch.tensor([blob.numel()], dtype=torch.int64))

    def predictions(self) -> dict[str, dict]:
        """The gathered predictions, one per clip key (the first copy of a repeated clip wins)."""
        if isinstance(self.payload, list):
            if not self.payload:
                return {}
            payload, lengths = dim_zero_cat(self.payload), dim_zero_cat(self.lengths)
        else:
            payload, lengths = self.payload, self.lengths
        out: dict[str, dict] = {}
        for key, pred in decode_payloads(payload, lengths):
            out.setdefault(key, pred)
        return out

    def compute(self) -> dict[str, float]:
        preds = self.predictions()
        missing = [k for k in preds if k not in self.references]
        if missing:
            raise KeyError(f"{len(missing)} predicted clip(s) have no reference record, e.g. {missing[:3]}")
        if not preds:
            return {}
        from metrics.evaluate import evaluate_predictions

        report = evaluate_predictions({k: self.references[k] for k in preds}, preds, level=self.level,
                                      score_source=self.score_source, text_encoder=self.encoder(),
                                      caption_metrics=self.caption_metrics, capture=self.capture)
        return {**report["metrics"], "num_clips": float(report["num_clips"])}

    def encoder(self):
        """The phrase/sentence encoder, built once and shared by recall and CAPTURE."""
        if self.text_encoder is None or isinstance(self.text_encoder, (str, os.PathLike)):
            from metrics.text_encoder import build_text_encoder

            self.text_encoder = build_text_encoder(self.text_encoder)
        return self.text_encoder

