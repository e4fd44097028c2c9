"""Command-line entry: ``python cli.py {fit,validate,test,predict} --config configs/<name>.yaml``.

The CLI itself is :class:`command_line.grove_cli.GroveCLI`; config stacking, ``--ckpt_path``
hyper-parameters and path checks are :class:`core.config_loader.ConfigLoader`. Bad input (a
missing file, a broken checkpoint folder) ends in one ``error:`` line
(:func:`core.user_errors.run_command`); ``grove fit|validate|test|predict`` runs the same.
"""
import core  # noqa: F401  (torchvision compatibility: must precede lightning)
from core.user_errors import run_command

from command_line.grove_cli import cli_main

if __name__ == "__main__":
    run_command(cli_main)
