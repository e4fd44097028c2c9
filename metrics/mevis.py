"""``python -m metrics.mevis``: MeViS J&F. The command is :func:`metrics.commands.mevis.main`, the code it
runs :mod:`metrics.protocols.mevis`."""
from core.user_errors import run_command

from metrics.commands.mevis import main

if __name__ == "__main__":
    run_command(main)
