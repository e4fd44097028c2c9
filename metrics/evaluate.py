"""``python -m metrics.evaluate``: the offline evaluator. The command is :func:`metrics.commands.evaluate.main`,
the code it runs :mod:`metrics.evaluator.evaluation`."""
from metrics.commands import forward_to
from metrics.commands.evaluate import main

__getattr__ = forward_to(__name__, "metrics.evaluator.evaluation")

if __name__ == "__main__":
    main()
