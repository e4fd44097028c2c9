"""Old module paths of the annotation pipeline's modules (user scripts name them) still lead to the
modules, with a warning naming the new path."""
from core import moved_modules

import importlib
import importlib.util

import pytest

from tests.fixtures.paths import ROOT

MOVES = sorted((old, new) for old, new in moved_modules.MOVED.items() if old.startswith("annotation."))


@pytest.mark.parametrize("old, new", MOVES, ids=[old for old, _ in MOVES])
def test_an_old_path_gives_the_new_module(old, new):
    assert not (ROOT / f"{old.replace('.', '/')}.py").exists()  # else the old file, not the new module, loads
    module = importlib.import_module(new)
    spec = moved_modules._FINDER.find_spec(old, None)  # what an import of the old name finds
    with pytest.warns(FutureWarning, match=f"module {old} moved to {new}"):
        assert importlib.util.module_from_spec(spec) is module
