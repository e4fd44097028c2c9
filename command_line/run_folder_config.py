"""The run's config saved into a run folder the run owns (:mod:`core.output_folder`).

LightningCLI's ``SaveConfigCallback`` writes ``config.yaml`` with ``overwrite=True`` through
whatever is at that name: a symbolic link there sends the config to the link's target. Here the
name is checked at setup (:func:`core.output_folder.output_file`: no link, nothing outside the
folder) before the save, and ``predict``, which may be pointed at any folder, first claims it
(:func:`core.output_folder.claim_output_folder`): a new or empty folder, or one an earlier predict
marked; a folder of other files is refused before any weight is loaded, naming what is in it.
"""
from __future__ import annotations

from core.output_folder import claim_output_folder, hold_run_folder, output_file

from pathlib import Path

from lightning.pytorch.cli import SaveConfigCallback

PREDICT_COMMAND = "cli.py predict"


def claim_run_folder(folder: str | Path, stage: str, names: tuple[str, ...] = ()) -> Path:
    """Check ``folder`` for a run of ``stage``: claimed for predict, and every file of ``names`` a
    plain file inside it (raises :class:`core.output_folder.OutputFolderError`)."""
    folder = Path(folder)
    for name in names:  # a link is named as such, before the folder is judged
        output_file(folder, name)
    if stage == "predict":
        claim_output_folder(folder, PREDICT_COMMAND, option="run folder", overwrite_option=None)
    return folder


class RunFolderConfig(SaveConfigCallback):
    """``SaveConfigCallback`` that writes only into a run folder the run owns (see the module)."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        if self.already_saved or not self.save_to_log_dir:
            return super().setup(trainer, pl_module, stage)
        log_dir = trainer.log_dir  # broadcast by the strategy: every rank calls it
        if not trainer.is_global_zero or log_dir is None:
            return super().setup(trainer, pl_module, stage)
        stage = getattr(stage, "value", stage)
        claim_run_folder(log_dir, stage, (self.config_filename,))
        with hold_run_folder(log_dir, f"cli.py {stage}"):  # a second run into the folder is refused before it saves
            super().setup(trainer, pl_module, stage)
