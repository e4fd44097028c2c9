"""Command-line entry: ``python cli.py {fit,validate,test,predict} --config configs/<name>.yaml``.

The CLI itself is :class:`command_line.grove_cli.GroveCLI`; config stacking, ``--ckpt_path``
hyper-parameters and path checks are :class:`core.config_loader.ConfigLoader`.
"""
import core  # noqa: F401  (torchvision compatibility: must precede lightning)

from command_line.grove_cli import cli_main

if __name__ == "__main__":
    cli_main()
