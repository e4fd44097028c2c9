"""Moved modules: the old dotted path returns the new module itself and warns naming the new path."""
import core  # noqa: F401  (installs the finder)
from core import moved_modules

import importlib
import sys
import warnings

import pytest


@pytest.fixture
def moved(monkeypatch):
    monkeypatch.setitem(moved_modules.MOVED, "gone_pkg_for_test.old_mod", "core.box_ops")
    monkeypatch.setitem(moved_modules.MOVED, "core.old_name_for_test", "core.safe_names")
    yield
    for name in ("gone_pkg_for_test.old_mod", "gone_pkg_for_test", "core.old_name_for_test"):
        sys.modules.pop(name, None)


def test_old_path_is_the_new_module_with_a_warning(moved):
    with pytest.warns(FutureWarning, match="moved to core.box_ops"):
        old = importlib.import_module("gone_pkg_for_test.old_mod")
    assert old is importlib.import_module("core.box_ops")
    with pytest.warns(FutureWarning, match="core.safe_names"):
        from core import old_name_for_test  # noqa: F401
    assert moved_modules.new_name("gone_pkg_for_test.old_mod.box_iou") == "core.box_ops.box_iou"
    assert moved_modules.new_name("core.box_ops") is None


def test_an_existing_module_is_never_shadowed(monkeypatch):
    monkeypatch.setitem(moved_modules.MOVED, "core.paths", "core.box_ops")
    sys.modules.pop("core.paths", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod = importlib.import_module("core.paths")
    assert mod.__name__ == "core.paths"


def test_unknown_modules_still_fail():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("gone_pkg_for_test_never_listed.x")
