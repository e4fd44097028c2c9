"""Checkpoints and scripts written before GROVE became a model family still load: their module paths
(``models.configs``, ``models.prompting``, ``tools.grove_processor``, ...) import as the new modules."""
import core  # noqa: F401
from core.moved_modules import MOVED

import importlib
import io
import pickle
import sys
import warnings
import zipfile

import pytest
import torch

from lightning_modules.grove_module import GroveModule
from models.grove import configuration

FAMILY_MOVES = {old: new for old, new in MOVED.items()
                if new.startswith(("models.grove.", "models.cotracker3.")) or old.startswith("tools.")}
PART_CONFIGS = (configuration.GlobalEncoderConfig, configuration.GroundingEncoderConfig,
                configuration.LanguageModelConfig, configuration.DecoderConfig)


def _forget(*names):
    for name in names:
        sys.modules.pop(name, None)


def test_the_family_moves_are_listed():
    assert FAMILY_MOVES["models.configs"] == "models.grove.configuration"
    assert FAMILY_MOVES["tools.grove_processor"] == "models.grove.processing"
    assert FAMILY_MOVES["models.cotracker3_checkpoint"] == "models.cotracker3.convert_official"
    assert len(FAMILY_MOVES) >= 18


@pytest.mark.parametrize("old", sorted(FAMILY_MOVES))
def test_each_old_module_path_is_the_new_module(old):
    _forget(old)
    with pytest.warns(FutureWarning, match=f"moved to {FAMILY_MOVES[old]}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(FAMILY_MOVES[old])
    _forget(old)


def test_class_paths_of_the_old_layout_name_todays_classes():
    from models.grove import Grove, GroveProcessor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert importlib.import_module("tools.grove_processor").GroveProcessor is GroveProcessor
        assert importlib.import_module("models.grove").Grove is Grove  # the old module's name is the family's
        assert importlib.import_module("models.cotracker3").CoTracker3Offline is \
            importlib.import_module("models.cotracker3.modeling").CoTracker3Offline


@pytest.fixture
def old_checkpoint(tmp_path, monkeypatch):
    """A checkpoint whose pickled hyper-parameters name the part configs by their old module, ``models.configs``."""
    module = GroveModule(**configuration.tiny_configs())
    for cls in PART_CONFIGS:
        monkeypatch.setattr(cls, "__module__", "models.configs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        buffer = io.BytesIO()
        torch.save({"state_dict": module.state_dict(), "hyper_parameters": dict(module.hparams),
                    "pytorch-lightning_version": "2.4.0", "epoch": 0, "global_step": 0}, buffer)
    for cls in PART_CONFIGS:
        monkeypatch.setattr(cls, "__module__", "models.grove.configuration")
    _forget("models.configs")
    path = tmp_path / "old.ckpt"
    path.write_bytes(buffer.getvalue())
    return path, module


def test_a_checkpoint_naming_the_old_config_module_loads_as_todays_module(old_checkpoint):
    path, saved = old_checkpoint
    with zipfile.ZipFile(path) as archive:
        pickled = archive.read(next(n for n in archive.namelist() if n.endswith("data.pkl")))
    assert b"models.configs" in pickled and b"models.grove.configuration" not in pickled
    with pytest.warns(FutureWarning, match="models.configs moved to models.grove.configuration"):
        loaded = GroveModule.load_from_checkpoint(path, weights_only=False)
    assert isinstance(loaded.hparams.global_encoder, configuration.GlobalEncoderConfig)
    assert loaded.hparams.decoder == saved.hparams.decoder
    state, expected = loaded.state_dict(), saved.state_dict()
    assert state.keys() == expected.keys() and all(torch.equal(state[k], expected[k]) for k in expected)
    assert pickle.loads(pickle.dumps(loaded.hparams.decoder)) == saved.hparams.decoder
