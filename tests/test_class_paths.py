"""Configs and docs name each class one way: by the module that defines it (``module.Class``)."""
import core  # noqa: F401

import importlib
import re

import pytest

from tests.fixtures.paths import ROOT

PROJECT_PACKAGES = ("core", "formats", "models", "datamodules", "metrics", "lightning_modules", "callbacks",
                    "glamm", "annotation", "judge", "command_line")
CLASS_PATH = re.compile(r"class_path:\s*[\"']?([\w.]+)")


def _named_class_paths():
    files = sorted((ROOT / "configs").rglob("*.yaml")) + sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for found in CLASS_PATH.findall(line):
                if found.split(".")[0] in PROJECT_PACKAGES:
                    yield f"{path.relative_to(ROOT)}:{n}", found


NAMED = list(_named_class_paths())


def test_the_configs_name_project_classes():
    assert len(NAMED) > 20 and any(path.startswith("judge.") for _, path in NAMED)


@pytest.mark.parametrize("where,path", NAMED, ids=[w for w, _ in NAMED])
def test_each_class_is_named_by_its_defining_module(where, path):
    module, _, name = path.rpartition(".")
    cls = getattr(importlib.import_module(module), name, None)
    assert isinstance(cls, type), f"{where}: {path} is not a class"
    assert f"{cls.__module__}.{cls.__qualname__}" == path, \
        f"{where}: {path} is spelled {cls.__module__}.{cls.__qualname__} everywhere else"
