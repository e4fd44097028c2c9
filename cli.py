"""Command-line entry: ``python cli.py {fit,validate,test,predict} --config configs/<name>.yaml``.

The CLI itself (config stacking, ``--ckpt_path`` hyper-parameters, path checks) is
:class:`core.lightning_cli.GroveCLI`.
"""
import core  # noqa: F401  (torchvision compatibility: must precede lightning)
from core.lightning_cli import cli_main

if __name__ == "__main__":
    cli_main()
