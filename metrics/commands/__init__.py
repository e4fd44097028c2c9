"""The metrics' commands: each module holds one command's options and its ``main(argv=None)``;
``python -m metrics.<name>`` runs them through the small modules of the same name in ``metrics/``."""
from __future__ import annotations

import importlib
import warnings


def forward_to(old: str, new: str):
    """A module ``__getattr__`` for ``old``, a command module whose code moved to ``new``: old
    imports of its names keep working for one release, with a warning naming the new module."""
    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(importlib.import_module(new), name)
        warnings.warn(f"{old}.{name} moved to {new}.{name}; import it from {new} (the old path goes in the next "
                      "release)", FutureWarning, stacklevel=2)
        return value

    return __getattr__
