"""Writes the predictions file (:mod:`formats.predictions`) into the run folder: one JSON per evaluation."""
from __future__ import annotations

from pathlib import Path

import lightning as L

from formats.predictions import write_predictions


def run_dir(trainer: L.Trainer) -> Path:
    """The versioned log folder of the run (falls back to the trainer's root dir)."""
    if trainer.logger is not None and getattr(trainer.logger, "log_dir", None):
        return Path(trainer.logger.log_dir)
    return Path(trainer.default_root_dir)


class PredictionWriter(L.Callback):
    """Collects ``outputs["predictions"]`` of test/predict batches; writes ``predictions_<stage>.json``.

    Under DDP each rank writes its own ``predictions_<stage>.rank<k>.json``; clips repeated by
    the sampler's padding carry the same key and are written once.
    """

    def __init__(self, output_dir: str | None = None, stages: tuple[str, ...] = ("test", "predict")):
        self.output_dir = output_dir
        self.stages = tuple(stages)
        self.buffer: dict[str, dict] = {}
        self.last_paths: dict[str, Path] = {}

    def _collect(self, outputs) -> None:
        if isinstance(outputs, dict) and outputs.get("predictions"):
            self.buffer.update(outputs["predictions"])

    def _flush(self, trainer: L.Trainer, stage: str) -> None:
        if stage not in self.stages:
            self.buffer = {}
            return
        folder = Path(self.output_dir) if self.output_dir else run_dir(trainer)
        suffix = f".rank{trainer.global_rank}" if trainer.world_size > 1 else ""
        path = write_predictions(dict(sorted(self.buffer.items())), folder / f"predictions_{stage}{suffix}.json")
        self.last_paths[stage] = path
        self.buffer = {}

    def on_test_epoch_start(self, trainer, pl_module):
        self.buffer = {}

    def on_predict_epoch_start(self, trainer, pl_module):
        self.buffer = {}

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._collect(outputs)

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._collect(outputs)

    def on_test_epoch_end(self, trainer, pl_module):
        self._flush(trainer, "test")

    def on_predict_epoch_end(self, trainer, pl_module):
        self._flush(trainer, "predict")
