"""core.class_paths: a config's class_path is resolved and checked before anything is called."""
from core.class_paths import ClassPathError, instantiate_class_path, resolve_class_path

import sys

import pytest
import yaml

from agreement.scorers.base import CaptionScorer


class Base:
    pass


class Good(Base):
    def __init__(self, size=1):
        self.size = size


def _spy(**kwargs):
    raise AssertionError(f"the named function was called with {kwargs}")


def test_a_function_named_as_class_path_is_refused_without_being_called(monkeypatch):
    monkeypatch.setitem(sys.modules, "user_module", sys.modules[__name__])
    with pytest.raises(ClassPathError, match=r"metrics.x.class_path: user_module._spy is a function, not a class"):
        instantiate_class_path({"class_path": "user_module._spy", "init_args": {"command": "rm -rf /"}}, Base,
                               "metrics.x")
    with pytest.raises(ClassPathError, match=r"k.class_path: user_module.Base is not a subclass of .*CaptionScorer"):
        resolve_class_path("user_module.Base", CaptionScorer, "k.class_path")
    assert instantiate_class_path({"class_path": "user_module.Good", "init_args": {"size": 3}}, Base, "k").size == 3
    with pytest.raises(ClassPathError, match=r"k.init_args: Good does not take them"):
        instantiate_class_path({"class_path": "user_module.Good", "init_args": {"colour": 3}}, Base, "k")
    with pytest.raises(ClassPathError, match=r"k.class_path: .*CaptionScorer is abstract"):
        resolve_class_path("agreement.scorers.base.CaptionScorer", CaptionScorer, "k.class_path")


def test_agreement_never_calls_os_system_and_names_a_missing_module(tmp_path, monkeypatch):
    import os

    from agreement.__main__ import main

    calls = []
    monkeypatch.setattr(os, "system", lambda *a, **k: calls.append((a, k)) or 0)
    marker = tmp_path / "ran"
    for class_path, message in (("os.system", r"metrics.evil.class_path: os.system is a function, not a class"),
                                ("no_such_package.Scorer",
                                 r"metrics.evil.class_path: cannot import module 'no_such_package'")):
        config = {"benchmarks": {}, "metrics": {"evil": {"class_path": class_path,
                                                         "init_args": {"command": f"touch {marker}"}}}}
        (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(config))
        with pytest.raises(SystemExit, match=message):
            main(["run", "--config", str(tmp_path / "cfg.yaml"), "--out", str(tmp_path / "out"), "--no-progress"])
    assert calls == [] and not marker.exists()
