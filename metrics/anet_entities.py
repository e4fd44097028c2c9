"""``python -m metrics.anet_entities``: ActivityNet-Entities grounding evaluation.
The command is :func:`metrics.commands.anet_entities.main`,
the code it runs :mod:`metrics.protocols.anet_entities`."""
from metrics.commands import forward_to
from metrics.commands.anet_entities import main

__getattr__ = forward_to(__name__, "metrics.protocols.anet_entities")

if __name__ == "__main__":
    main()
