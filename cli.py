"""Command-line entry: ``python cli.py {fit,validate,test,predict} --config configs/<name>.yaml``.

LightningCLI in subclass mode, so configs name any LightningModule / LightningDataModule of the
project by class path; configs stack (``--config base.yaml --config configs/ablations/x.yaml``)
and every key can be overridden on the command line. The run's config is saved next to its logs.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility: must precede lightning)

from lightning.pytorch.cli import LightningCLI  # noqa: E402

import callbacks  # noqa: E402,F401  (registers the project's classes for short names)
import datamodules  # noqa: E402,F401
import lightning_modules  # noqa: E402,F401


def _prompter_of(model):
    return getattr(model, "prompter", None)


class GroveCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        # The data pipeline tokenises with the model's own prompter (one tokenizer, one source).
        parser.link_arguments("model", "data.init_args.prompter", compute_fn=_prompter_of, apply_on="instantiate")


def cli_main(args: list[str] | None = None, run: bool = True) -> GroveCLI:
    """Run the CLI; tests call this in-process with a list of arguments."""
    return GroveCLI(
        subclass_mode_model=True,
        subclass_mode_data=True,
        save_config_kwargs={"overwrite": True},
        parser_kwargs={"parser_mode": "omegaconf"},
        args=args,
        run=run,
    )


if __name__ == "__main__":
    cli_main()
