"""Writes the predictions file (:mod:`formats.predictions`) into the run folder: one JSON per evaluation."""
from __future__ import annotations

from core.output_folder import claim_output_folder, hold_run_folder, output_file

from contextlib import ExitStack
from pathlib import Path

import lightning as L

from formats.predictions import write_predictions


def run_dir(trainer: L.Trainer) -> Path:
    """The versioned log folder of the run (falls back to the trainer's root dir)."""
    if trainer.logger is not None and getattr(trainer.logger, "log_dir", None):
        return Path(trainer.logger.log_dir)
    return Path(trainer.default_root_dir)


class RunFolderHold:
    """Holds the run folder from ``setup`` to ``teardown`` of the stages a writer writes (rank 0;
    the other ranks write files of their own names): a second run that picked the same folder
    (an explicit ``output_dir``, or a logger version chosen at the same moment) is refused with
    a message instead of both writing the same files. Writers in one process share the hold."""

    def __init__(self):
        self._stack: ExitStack | None = None

    def take(self, trainer: L.Trainer, folder: Path, what: str) -> None:
        if self._stack is None and trainer.global_rank == 0:
            stack = ExitStack()
            stack.enter_context(hold_run_folder(folder, what))
            self._stack = stack

    def release(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            stack.close()


def gather_clips(trainer: L.Trainer, clips: dict[str, dict]) -> dict[str, dict]:
    """Every rank's ``clips`` merged by key on every rank (one process: ``clips`` itself)."""
    if trainer.world_size <= 1:
        return dict(clips)
    import torch.distributed as dist

    parts: list = [None] * trainer.world_size
    dist.all_gather_object(parts, clips)
    merged: dict[str, dict] = {}
    for part in parts:
        merged.update(part or {})
    return merged


class PredictionWriter(L.Callback):
    """Collects ``outputs["predictions"]`` of test/predict batches; writes ``predictions_<stage>.json``.

    Under DDP rank 0 gathers every rank's clips and writes the one ``predictions_<stage>.json``
    a single process would write; a clip key found on two ranks (a sampler that pads with repeats)
    is written once.
    """

    def __init__(self, output_dir: str | None = None, stages: tuple[str, ...] = ("test", "predict")):
        self.output_dir = output_dir
        self.stages = tuple(stages)
        self.buffer: dict[str, dict] = {}
        self.last_paths: dict[str, Path] = {}
        self._hold = RunFolderHold()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_hold"] = RunFolderHold()  # a copy holds nothing
        return state

    def folder(self, trainer: L.Trainer) -> Path:
        """Where the predictions go: ``output_dir``, else the run folder."""
        return Path(self.output_dir) if self.output_dir else run_dir(trainer)

    def setup(self, trainer, pl_module, stage):
        stage = getattr(stage, "value", stage)
        if stage in self.stages:
            folder = self.folder(trainer)
            if trainer.global_rank == 0:  # refused before any work: a foreign folder, a link at the file's name
                output_file(folder, f"predictions_{stage}.json")
                if stage == "predict":
                    claim_output_folder(folder, "cli.py predict", option="predictions folder", overwrite_option=None)
            self._hold.take(trainer, folder, f"cli.py {stage} (predictions)")

    def teardown(self, trainer, pl_module, stage):
        self._hold.release()

    def on_exception(self, trainer, pl_module, exception):
        self._hold.release()

    def _collect(self, outputs) -> None:
        if isinstance(outputs, dict) and outputs.get("predictions"):
            self.buffer.update(outputs["predictions"])

    def _flush(self, trainer: L.Trainer, stage: str) -> None:
        if stage not in self.stages:
            self.buffer = {}
            return
        merged = gather_clips(trainer, self.buffer)
        self.buffer = {}
        path = output_file(self.folder(trainer), f"predictions_{stage}.json")
        if trainer.global_rank == 0:
            write_predictions(dict(sorted(merged.items())), path)
        self.last_paths[stage] = path

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
