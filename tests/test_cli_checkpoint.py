"""--ckpt_path: the config wins over the checkpoint's hyper-parameters, another model class or a
file that is not a checkpoint is a clear error."""
from __future__ import annotations

import core  # noqa: F401

import warnings

import pytest
import torch

from command_line.grove_cli import GroveCLI
from tests.fixtures.paths import ROOT

DEMO = str(ROOT / "configs" / "demo.yaml")


class _Parsed(Exception):
    pass


class _ParseOnly(GroveCLI):
    """Stops once the config is final, before any model is built."""

    def before_instantiate_classes(self) -> None:
        raise _Parsed(self.config[self.config.subcommand])


def _final_config(*args):
    with pytest.raises(_Parsed) as parsed:
        _ParseOnly(subclass_mode_model=True, subclass_mode_data=True, parser_kwargs={"parser_mode": "omegaconf"},
                   args=list(args), run=True)
    return parsed.value.args[0]


def _checkpoint(path, class_path="lightning_modules.grove_module.GroveModule", **hparams):
    torch.save({"state_dict": {"w": torch.zeros(1)}, "epoch": 0,
                "hyper_parameters": {"_class_path": class_path, **hparams}}, path)
    return path


def test_the_command_line_wins_and_the_checkpoint_fills_the_rest(tmp_path):
    ckpt = _checkpoint(tmp_path / "grove.ckpt", teacher_forced=False, ce_weight=3.0,
                       decoder={"dim": 64, "depth": 2, "num_heads": 4, "mlp_dim": 128})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = _final_config("test", "--config", DEMO, "--model.init_args.teacher_forced=true",
                               "--model.init_args.decoder.depth=3", f"--ckpt_path={ckpt}")
    model = config.model.init_args
    assert model.teacher_forced is True and model.decoder.depth == 3  # given: the config's values
    assert model.ce_weight == 3.0  # left at the class default: the checkpoint's
    assert model.decoder.mlp_dim == 128 and model.chat_template == "plain"
    message = "\n".join(str(w.message) for w in caught)
    assert "model.init_args.teacher_forced: checkpoint False, config True" in message
    assert "model.init_args.decoder.depth: checkpoint 2, config 3" in message


def test_a_checkpoint_of_another_model_class_names_both(tmp_path):
    ckpt = _checkpoint(tmp_path / "judge.ckpt", class_path="judge.training.module.JudgeModule", seed=0)
    expected = (r"judge\.ckpt is a checkpoint of judge\.training\.module\.JudgeModule, "
                r"but the config's model is lightning_modules\.grove_module\.GroveModule")
    with pytest.raises(ValueError, match=expected):
        _final_config("test", "--config", DEMO, f"--ckpt_path={ckpt}")


def test_a_checkpoint_saved_under_a_moved_class_path_is_its_class_today(tmp_path):
    """Judge checkpoints written before the judge became a package name lightning_modules.judge_module."""
    ckpt = _checkpoint(tmp_path / "judge.ckpt", class_path="lightning_modules.judge_module.JudgeModule", seed=0)
    expected = (r"judge\.ckpt is a checkpoint of judge\.training\.module\.JudgeModule, "
                r"but the config's model is lightning_modules\.grove_module\.GroveModule")
    with pytest.raises(ValueError, match=expected):
        _final_config("test", "--config", DEMO, f"--ckpt_path={ckpt}")
    judge_config = str(ROOT / "configs" / "judge_demo.yaml")
    config = _final_config("test", "--config", judge_config, f"--ckpt_path={ckpt}")
    assert config.model.class_path == "judge.training.module.JudgeModule"


def test_a_saved_config_naming_a_moved_class_says_where_it_lives_now(tmp_path):
    old = tmp_path / "config.yaml"
    old.write_text((ROOT / "configs" / "judge_demo.yaml").read_text()
                   .replace("judge.training.module.JudgeModule", "lightning_modules.judge_module.JudgeModule"))
    with pytest.raises(ValueError, match=r"config\.yaml: lightning_modules\.judge_module\.JudgeModule -> "
                                         r"judge\.training\.module\.JudgeModule"):
        _final_config("test", "--config", str(old))


def test_a_class_of_a_moved_module_is_named_with_its_new_module(tmp_path):
    """Modules that moved whole (datamodules.video -> formats.video_reader, ...): a config or an argument naming
    a class through the old module is an error giving the new path."""
    old = tmp_path / "config.yaml"
    old.write_text((ROOT / "configs" / "demo.yaml").read_text()
                   + "# reader: datamodules.video.PyAVVideoSource\n")
    expected = r"config\.yaml: datamodules\.video\.PyAVVideoSource -> formats\.video_reader\.PyAVVideoSource"
    with pytest.raises(ValueError, match=expected):
        _final_config("test", "--config", str(old))
    with pytest.raises(ValueError, match=r"the command line: models\.glamm\.GLaMM -> glamm\.model\.GLaMM"):
        _final_config("test", "--config", DEMO, "--trainer.callbacks+=models.glamm.GLaMM")


def test_moved_paths_map_to_where_the_classes_live():
    from core.config_loader import MOVED_MODULES, current_class_path

    import importlib

    assert current_class_path("datamodules.records.GroundedRecord") == "formats.records.GroundedRecord"
    assert current_class_path("datamodules.video_folder.VideoFolderDataset") == \
        "datamodules.video_folder.VideoFolderDataset"  # a module whose name only starts like a moved one
    assert current_class_path("lightning_modules.judge_module.JudgeModule") == "judge.training.module.JudgeModule"
    assert current_class_path("judge.module.JudgeModule") == "judge.training.module.JudgeModule"
    for old, new in MOVED_MODULES.items():  # every new home exists and the old module is gone
        importlib.import_module(new)
        assert not (ROOT / f"{old.replace('.', '/')}.py").exists()


def test_files_that_are_not_checkpoints_are_named(tmp_path):
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match=r"--ckpt_path .*notes\.txt: not a checkpoint torch can read"):
        _final_config("test", "--config", DEMO, f"--ckpt_path={tmp_path / 'notes.txt'}")
    torch.save({"w": torch.zeros(1)}, tmp_path / "weights.pth")
    with pytest.raises(ValueError, match=r"weights\.pth: not a Lightning checkpoint .*InitFromCheckpoint"):
        _final_config("test", "--config", DEMO, f"--ckpt_path={tmp_path / 'weights.pth'}")
    with pytest.raises(ValueError, match=r"a folder, not a checkpoint file"):
        _final_config("test", "--config", DEMO, f"--ckpt_path={tmp_path}")
    with pytest.raises(FileNotFoundError, match=r"--ckpt_path .*absent\.ckpt: no such file"):
        _final_config("test", "--config", DEMO, f"--ckpt_path={tmp_path / 'absent.ckpt'}")
