"""``python -m metrics.pointing``: pointing-game accuracy. The command is :func:`metrics.commands.pointing.main`,
the code it runs :mod:`metrics.protocols.pointing`."""
from metrics.commands import forward_to
from metrics.commands.pointing import main

__getattr__ = forward_to(__name__, "metrics.protocols.pointing")

if __name__ == "__main__":
    main()
