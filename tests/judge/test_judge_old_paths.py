"""Old module paths of the judge's modules (configs, checkpoints and scripts name them) still lead to
the modules, with a warning naming the new path."""
from core import moved_modules

import importlib
import importlib.util

import pytest

from tests.fixtures.paths import ROOT

JUDGE_MOVES = sorted((old, new) for old, new in moved_modules.MOVED.items() if old.startswith("judge."))


def test_every_module_of_the_judge_that_moved_is_listed():
    assert len(JUDGE_MOVES) == 27 and ("judge.module", "judge.training.module") in JUDGE_MOVES


@pytest.mark.parametrize("old, new", JUDGE_MOVES, ids=[old for old, _ in JUDGE_MOVES])
def test_an_old_path_gives_the_new_module(old, new):
    assert not (ROOT / f"{old.replace('.', '/')}.py").exists()  # else the old file, not the new module, loads
    module = importlib.import_module(new)
    spec = moved_modules._FINDER.find_spec(old, None)  # what an import of the old name finds
    with pytest.warns(FutureWarning, match=f"module {old} moved to {new}"):
        assert importlib.util.module_from_spec(spec) is module


def test_class_paths_of_the_one_module_judge_model_still_resolve():
    from judge.model.vc_inspector import VCInspectorJudge

    judge_model = importlib.import_module("judge.model")
    judge_model.__dict__.pop("VCInspectorJudge", None)
    with pytest.warns(FutureWarning, match="judge.model.VCInspectorJudge moved to judge.model.vc_inspector"):
        assert judge_model.VCInspectorJudge is VCInspectorJudge
    assert importlib.import_module("judge.model.tokenizer").__name__ == "judge.model.tokenizer"
    with pytest.raises(AttributeError):
        judge_model.no_such_name
