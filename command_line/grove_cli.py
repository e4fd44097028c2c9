"""The command line (``python cli.py fit|validate|test|predict``): :class:`GroveCLI`, the project's
config loading (:class:`core.config_loader.ConfigLoader`) that also runs the subcommand and saves
the run's config next to its logs. Only entry points (``cli.py``, ``command_line.grove``, ``bench/``,
``experiments/``) import this package; libraries that build what a config names use
:class:`core.config_loader.ConfigLoader`.
"""
from __future__ import annotations

from core.config_loader import ConfigLoader

from lightning.pytorch.utilities import rank_zero_warn

from command_line.run_folder_config import RunFolderConfig, claim_run_folder


def untrained_weights_warning(subcommand: str | None, ckpt_path) -> str | None:
    """The warning for evaluating or predicting without ``--ckpt_path`` (None when one is given or
    when fitting): the model then keeps the weights its config builds, random wherever the config
    names no pre-trained file, and its outputs mean nothing."""
    if subcommand not in ("validate", "test", "predict") or ckpt_path:
        return None
    return (f"\n{'=' * 78}\n{subcommand} WITHOUT --ckpt_path: the model keeps the weights its config builds; every "
            "part the config does not load from a pre-trained file is RANDOMLY INITIALISED, so its outputs mean "
            "nothing. Give --ckpt_path=<a .ckpt written by `python cli.py fit`, or a converted official GROVE "
            f"checkpoint> to {subcommand} with trained weights.\n{'=' * 78}")


class GroveCLI(ConfigLoader):
    """:class:`ConfigLoader` for running a subcommand: warns when evaluating or predicting without
    trained weights (:func:`untrained_weights_warning`)."""

    def before_instantiate_classes(self) -> None:
        if self.config.get("subcommand"):
            config = self.config[self.config.subcommand]
            warning = untrained_weights_warning(self.config.subcommand, config.get("ckpt_path"))
            if warning:
                rank_zero_warn(warning)
        super().before_instantiate_classes()

    def before_predict(self) -> None:
        # predict may be pointed at any folder: claimed before the weights are loaded or a logger writes
        if self.trainer.global_rank == 0 and self.trainer.logger is not None:
            claim_run_folder(self.trainer.log_dir, "predict", ("config.yaml", "predictions_predict.json"))
        if not self.config.predict.get("video", True):  # --video=false: predictions only
            from callbacks.annotated_video_writer import AnnotatedVideoWriter  # the callbacks: not on --help

            for callback in self.trainer.callbacks:
                if isinstance(callback, AnnotatedVideoWriter):
                    callback.enabled = False


def cli_main(args: list[str] | None = None, run: bool = True) -> GroveCLI:
    """Run the CLI; tests call this in-process with a list of arguments."""
    return GroveCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_callback=RunFolderConfig,  # config.yaml only into a folder the run owns, never through a link
        save_config_kwargs={"overwrite": True},
        parser_kwargs={"parser_mode": "omegaconf"},
        args=args,
        run=run,
    )

