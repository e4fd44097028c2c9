"""Counts clips whose video was missing or unreadable and reports them once per epoch.

Datasets never kill a long run over one bad file (unless ``data.on_corrupt: raise``): they skip
the clip and put ``(key, reason)`` in the batch's ``skipped`` list, which reaches the main process
from any worker. This callback makes sure the skip is never silent.
"""
from __future__ import annotations

import logging
from collections import OrderedDict

import lightning as L
from lightning.pytorch.utilities import rank_zero_warn

log = logging.getLogger(__name__)


class SkippedVideoReport(L.Callback):
    def __init__(self, max_listed: int = 20):
        self.max_listed = max_listed
        self.skipped: dict[str, "OrderedDict[str, str]"] = {}
        self.totals: dict[str, int] = {}

    def _add(self, stage: str, entries) -> None:
        if entries:
            bucket = self.skipped.setdefault(stage, OrderedDict())
            for key, reason in entries:
                bucket.setdefault(key, reason)

    def _report(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        bucket = self.skipped.pop(stage, OrderedDict())
        self.totals[stage] = len(bucket)
        if trainer.logger is not None and stage in ("train", "val", "test"):
            trainer.logger.log_metrics({f"data/skipped_{stage}": float(len(bucket))}, step=trainer.global_step)
        if bucket:
            listed = "\n".join(f"  {k}: {r}" for k, r in list(bucket.items())[: self.max_listed])
            more = f"\n  ... and {len(bucket) - self.max_listed} more" if len(bucket) > self.max_listed else ""
            rank_zero_warn(f"{stage}: skipped {len(bucket)} clip(s) with missing or unreadable videos "
                           f"(epoch {trainer.current_epoch}):\n{listed}{more}")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._add("train", batch.get("skipped"))

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._add("val", batch.get("skipped"))

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._add("test", batch.get("skipped"))

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._add("predict", batch.get("skipped"))

    def on_train_epoch_end(self, trainer, pl_module):
        self._report(trainer, pl_module, "train")

    def on_validation_epoch_end(self, trainer, pl_module):
        self._report(trainer, pl_module, "val")

    def on_test_epoch_end(self, trainer, pl_module):
        self._report(trainer, pl_module, "test")

    def on_predict_epoch_end(self, trainer, pl_module):
        self._report(trainer, pl_module, "predict")
