"""Evaluates generated grounded captions at validation/test and logs ``val/*`` / ``test/*`` metrics.

The LightningModule returns SPEC §3 predictions from its eval steps; this callback feeds them to a
:class:`metrics.GroundedCaptionMetrics` (references taken from the DataModule's records by clip
key), logs AP50 / mIoU / recall at video and frame level, METEOR, CIDEr, BLEU-4, ROUGE-L and
CAPTURE, and writes a JSON report per evaluation into the run folder.
"""
from __future__ import annotations

import json
from typing import Sequence

import lightning as L

from callbacks.prediction_writer import run_dir
from metrics.grounded_caption_metric import GroundedCaptionMetrics

STAGE_SPLIT = {"val": "val", "test": "test"}


class GroundedEvaluation(L.Callback):
    def __init__(self, level: str = "both", score_source: str = "constant",
                 text_encoder: str | None = "minilm",
                 caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                 capture: bool = True, write_report: bool = True):
        self.metrics = {
            stage: GroundedCaptionMetrics(level=level, score_source=score_source,
                                          caption_metrics=caption_metrics, capture=capture)
            for stage in STAGE_SPLIT
        }
        self.text_encoder_spec = text_encoder
        self._text_encoder = None  # built on first evaluation, shared by both stages
        self.write_report = write_report
        self.last_results: dict[str, dict[str, float]] = {}

    def _start(self, trainer: L.Trainer, stage: str) -> None:
        metric = self.metrics[stage]
        metric.reset()
        if self._text_encoder is None:
            from metrics.text_encoder import build_text_encoder

            self._text_encoder = build_text_encoder(self.text_encoder_spec)
        metric.text_encoder = self._text_encoder
        datasets = getattr(trainer.datamodule, "datasets", {})
        dataset = datasets.get(STAGE_SPLIT[stage])
        if dataset is None or not hasattr(dataset, "records"):
            raise RuntimeError(f"GroundedEvaluation needs the DataModule's '{STAGE_SPLIT[stage]}' dataset records")
        metric.set_references(dataset.records)

    def _end(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        metric = self.metrics[stage]
        results = metric.compute()
        metric.reset()
        if not results:
            return
        for name, value in results.items():
            if not name.startswith("num_"):
                pl_module.log(f"{stage}/{name}", value, sync_dist=False, rank_zero_only=False)
        self.last_results[stage] = results
        # fast_dev_run is a smoke test: no files (its logger has no run folder)
        if self.write_report and trainer.is_global_zero and not trainer.fast_dev_run:
            folder = run_dir(trainer)
            folder.mkdir(parents=True, exist_ok=True)
            name = f"eval_{stage}_epoch{trainer.current_epoch:03d}_step{trainer.global_step:07d}.json"
            (folder / name).write_text(json.dumps({"stage": stage, "epoch": trainer.current_epoch,
                                                    "step": trainer.global_step, "metrics": results}, indent=2))

    def on_validation_epoch_start(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self._start(trainer, "val")

    def on_test_epoch_start(self, trainer, pl_module):
        self._start(trainer, "test")

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if not trainer.sanity_checking and isinstance(outputs, dict):
            self.metrics["val"].update(outputs.get("predictions", {}))

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if isinstance(outputs, dict):
            self.metrics["test"].update(outputs.get("predictions", {}))

    def on_validation_epoch_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self._end(trainer, pl_module, "val")

    def on_test_epoch_end(self, trainer, pl_module):
        self._end(trainer, pl_module, "test")
