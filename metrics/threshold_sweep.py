"""``python -m metrics.threshold_sweep``: the objectness-threshold sweep.
The command is :func:`metrics.commands.threshold_sweep.main`,
the code it runs :mod:`metrics.protocols.threshold_sweep`."""
from metrics.commands import forward_to
from metrics.commands.threshold_sweep import main

__getattr__ = forward_to(__name__, "metrics.protocols.threshold_sweep")

if __name__ == "__main__":
    main()
