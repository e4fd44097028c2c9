"""A torchmetrics state holding predictions (the JSON format predict writes) per clip key, gathered correctly under DDP.

Predictions are variable-sized nested dicts with strings, which torchmetrics cannot reduce. Each
clip's prediction is serialised to a uint8 tensor and its length kept in a second state; both are
concatenated across processes in rank order, then decoded and de-duplicated by clip key
(DistributedSampler-style padding repeats clips). Task metrics subclass :class:`PredictionSetMetric`
and implement ``evaluate`` from :meth:`PredictionSetMetric.checked_predictions`; ``compute`` runs
it on one rank only (every rank holds the same gathered predictions) and broadcasts the result.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import torch
import torch.distributed as dist
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


class PredictionSetMetric(Metric):
    full_state_update = False
    higher_is_better = True

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.add_state("payload", default=[], dist_reduce_fx="cat")
        self.add_state("lengths", default=[], dist_reduce_fx="cat")

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

    def evaluate(self) -> dict[str, float]:
        """The task's scores from the gathered predictions (subclasses implement it)."""
        raise NotImplementedError

    def compute(self) -> dict[str, float]:
        """:meth:`evaluate` on the first rank of the metric's process group, broadcast to the others.

        After the sync every rank holds the same predictions, so evaluating on each would repeat
        the same work (METEOR's Java, the text encoder) once per GPU. An error on the first rank
        is raised on every rank, so none is left waiting. Without a sync (``sync_on_compute=False``,
        or a single process) each rank evaluates its own predictions.
        """
        group = self.process_group
        if not (self.sync_on_compute and dist.is_available() and dist.is_initialized()
                and dist.get_world_size(group) > 1):
            return self.evaluate()
        first = dist.get_global_rank(group, 0) if group is not None else 0
        box: list[Any] = [None]
        if dist.get_rank() == first:
            try:
                box = [("ok", self.evaluate())]
            except Exception as err:  # noqa: BLE001 - re-raised below, on every rank
                box = [("error", err)]
        dist.broadcast_object_list(box, src=first, group=group)
        status, value = box[0]
        if status == "error":
            raise value
        return value

    def checked_predictions(self, reference_keys, unit: str = "clip") -> dict[str, dict]:
        """:meth:`predictions`, refusing any key absent from ``reference_keys``.

        A prediction without a reference is a mismatch between the evaluated split and the
        predictions (wrong split, wrong key format): scoring the rest would hide it.
        """
        preds = self.predictions()
        unknown = [k for k in preds if k not in reference_keys]
        if unknown:
            raise KeyError(f"{len(unknown)} predicted {unit}(s) have no reference record, e.g. {unknown[:3]}")
        return preds
