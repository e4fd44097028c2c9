"""``python -m metrics.vidstg``: VidSTG evaluation. The command is :func:`metrics.commands.vidstg.main`,
the code it runs :mod:`metrics.protocols.vidstg`."""
from metrics.commands import forward_to
from metrics.commands.vidstg import main

__getattr__ = forward_to(__name__, "metrics.protocols.vidstg")

if __name__ == "__main__":
    main()
