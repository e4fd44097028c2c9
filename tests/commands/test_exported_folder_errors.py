"""An exported model folder whose config.json is broken is named with the file, the place and the key,
whichever command reads it (cli.py's --ckpt_path, from_pretrained)."""
from __future__ import annotations

from core.user_errors import run_command
from core.weights.checkpoints import read_checkpoint
from core.weights.pretrained_folder import PretrainedFolderError, read_config

import json

import pytest

from tests.fixtures.paths import ROOT


def test_a_folder_whose_config_is_not_json_is_called_broken_not_a_folder_to_pick_from(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "grove",\n  "decoder": {,}}')
    with pytest.raises(PretrainedFolderError) as err:
        read_checkpoint(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'config.json'}: the exported folder's config is not valid JSON "
                              "(Expecting property name enclosed in double quotes at line 2, column 15)")
    assert "pick a .ckpt" not in message
    with pytest.raises(PretrainedFolderError, match=r"config.json: the exported folder's config is not valid JSON"):
        read_config(tmp_path, "grove")


def test_cli_predict_on_such_a_folder_ends_in_one_line_naming_the_file(tmp_path):
    from command_line.grove_cli import cli_main

    (tmp_path / "config.json").write_text("[1, 2")
    with pytest.raises(SystemExit) as exit_info:
        run_command(cli_main, ["predict", "--config", str(ROOT / "configs" / "demo.yaml"), f"--ckpt_path={tmp_path}"])
    assert exit_info.value.code.startswith(f"error: {tmp_path / 'config.json'}: the exported folder's config is "
                                           "not valid JSON (Expecting ',' delimiter at line 1, column 6)")


@pytest.mark.parametrize("value,shown", [(-1, "-1"), (0, "0"), ("64", "'64'"), (2.5, "2.5"), (True, "True")])
def test_sizes_that_are_not_positive_integers_are_named_by_key(tmp_path, value, shown):
    config = {"model_type": "grove", "decoder": {"dim": 64, "depth": 2, "mlp_ratio": 4.0},
              "language_model": {"llama_config": {"hidden_size": value, "num_hidden_layers": 2}}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(PretrainedFolderError) as err:
        read_config(tmp_path, "grove")
    assert str(err.value).startswith(f"{tmp_path / 'config.json'}: language_model.llama_config.hidden_size is {shown}: "
                                     "sizes must be positive integers")
    config["language_model"]["llama_config"]["hidden_size"] = 128
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert read_config(tmp_path, "grove") == config  # a ratio (mlp_ratio) is no size
