"""Restricted unpickling for the public HowToGround1M / iGround pickles.

``pickle.load`` can run arbitrary code. The public annotation files only need plain containers,
numbers, strings and numpy arrays, so the loader resolves just those globals and refuses every
other one with an error naming the file and the global it tried to load.
"""
from __future__ import annotations

import io
import pickle
from pathlib import Path

# (module, name) pairs a numpy array or scalar needs to be rebuilt; numpy 1.x and 2.x spellings.
_ALLOWED_GLOBALS = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy._core.numeric", "_frombuffer"),
    ("collections", "OrderedDict"),
    ("builtins", "dict"),
    ("builtins", "list"),
    ("builtins", "tuple"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "bytearray"),
    ("builtins", "complex"),
    ("builtins", "slice"),
    ("_codecs", "encode"),  # how protocol-2 pickles from Python 3 store bytes
}
_NUMPY_DTYPE_MODULES = {"numpy", "numpy.dtypes"}


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle asked for a global outside the allow-list (it could execute code)."""


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file, source: str):
        super().__init__(file)
        self._source = source

    def find_class(self, module: str, name: str):
        # numpy 2 pickles dtypes as numpy.dtypes.Float32DType etc.
        if (module, name) in _ALLOWED_GLOBALS or (module == "numpy.dtypes" and name.endswith("DType")):
            return super().find_class(module, name)
        raise UnsafePickleError(
            f"{self._source}: refusing to unpickle global '{module}.{name}'; annotation pickles may "
            "only hold dicts, lists, tuples, numbers, strings and numpy arrays"
        )


class CorruptPickleError(pickle.UnpicklingError):
    """A pickle file that is truncated or not a pickle; the message names the file."""


def safe_load(path: str | Path):
    """Load a pickle file through the restricted unpickler; a truncated or garbled file raises
    :class:`CorruptPickleError` naming it (a bare ``EOFError`` would not say which file)."""
    path = Path(path)
    with path.open("rb") as f:
        try:
            return _RestrictedUnpickler(f, str(path)).load()
        except UnsafePickleError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError,
                AttributeError, OverflowError, MemoryError) as err:
            raise CorruptPickleError(f"{path}: corrupt or truncated pickle ({type(err).__name__}: {err})") from None


def safe_loads(data: bytes, source: str = "<bytes>"):
    """Load pickle bytes through the restricted unpickler; ``source`` names them in errors."""
    return _RestrictedUnpickler(io.BytesIO(data), source).load()
