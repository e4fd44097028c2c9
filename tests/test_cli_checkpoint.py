"""--ckpt_path: the config wins over the checkpoint's hyper-parameters, another model class or a
file that is not a checkpoint is a clear error."""
from __future__ import annotations

import core  # noqa: F401

import warnings

import pytest
import torch
from lightning.pytorch.cli import LightningCLI

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


def test_the_hyphenated_checkpoint_flag_is_lightnings(tmp_path):
    ckpt = _checkpoint(tmp_path / "a.ckpt", ce_weight=2.0)
    hyphen = _final_config("test", "--config", DEMO, f"--ckpt-path={ckpt}")
    lightning = _final_config("test", "--config", DEMO, "--ckpt_path", str(ckpt))
    assert hyphen.ckpt_path == lightning.ckpt_path == str(ckpt)


class _DumpOnly(GroveCLI):
    """Stops once the config is final, with the project's dump of it and LightningCLI's."""

    def before_instantiate_classes(self) -> None:
        self._dump_config()
        ours = self.config_dump
        del self.config_dump
        LightningCLI._dump_config(self)
        raise _Parsed((ours, self.config_dump))


def test_the_model_hyper_parameters_dump_is_lightnings(tmp_path):
    """The dump the model's hyper-parameters come from skips jsonargparse's second validation, and is
    the dump LightningCLI makes, with a checkpoint's hyper-parameters merged in and without."""
    ckpt = _checkpoint(tmp_path / "grove.ckpt", ce_weight=3.0)
    for extra in ([], [f"--ckpt_path={ckpt}"]):
        with pytest.raises(_Parsed) as parsed:
            _DumpOnly(subclass_mode_model=True, subclass_mode_data=True, parser_kwargs={"parser_mode": "omegaconf"},
                      args=["test", "--config", DEMO, *extra], run=True)
        ours, lightnings = parsed.value.args[0]
        assert ours == lightnings and ours["model"]["class_path"].endswith("GroveModule")
    assert ours["model"]["init_args"]["ce_weight"] == 3.0
