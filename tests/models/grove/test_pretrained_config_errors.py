"""``Grove.from_pretrained`` on a folder whose config.json is not JSON, or whose sizes do not split into
their attention heads or contradict one another, raises an error naming the folder's config.json and
the keys, never the bare exception of the library that would build the part."""
from __future__ import annotations

import core  # noqa: F401
from core.weights.pretrained_folder import PretrainedFolderError

import json
import shutil

import pytest
import torch

from models.grove import Grove
from models.grove.configuration import tiny_configs


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("grove_cfg") / "grove"
    Grove(**tiny_configs()).save_pretrained(folder)
    return folder


def _copy_with(exported, tmp_path, edit):
    folder = tmp_path / "broken"
    shutil.copytree(exported, folder)
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_config_json_that_is_not_json_is_named(exported, tmp_path):
    folder = tmp_path / "broken"
    shutil.copytree(exported, folder)
    text = (folder / "config.json").read_text()
    (folder / "config.json").write_text(text[: len(text) // 2])
    with pytest.raises(PretrainedFolderError, match=r"broken/config\.json: .*not valid JSON \(.* at line \d+"):
        Grove.from_pretrained(folder)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("part,sub,size,count", [
    ("decoder", None, "dim", "num_heads"),
    ("grounding_encoder", "encoder_config", "embed_dim", "num_heads"),
    ("language_model", "llama_config", "hidden_size", "num_attention_heads"),
    ("language_model", "llama_config", "num_attention_heads", "num_key_value_heads"),
])
def test_sizes_that_do_not_split_into_heads_name_the_keys(exported, tmp_path, seed, part, sub, size, count):
    rng = torch.Generator().manual_seed(seed)

    def edit(config):
        values = config[part][sub] if sub else config[part]
        # a head count that does not divide the size (any odd count above 1 for these even sizes)
        values[count] = 2 * int(torch.randint(1, 6, (1,), generator=rng)) + 1
    folder = _copy_with(exported, tmp_path, edit)
    where = ".".join(k for k in (part, sub) if k)
    with pytest.raises(PretrainedFolderError, match=rf"broken/config\.json: {where}\.{size} = \d+ is not "
                                                    rf"divisible by {where}\.{count} = \d+"):
        Grove.from_pretrained(folder)


@pytest.mark.parametrize("part,sub,key", [("decoder", None, "dim"), ("grounding_encoder", "encoder_config",
                                                                     "out_chans")])
def test_part_configs_that_contradict_name_the_folder_and_the_keys(exported, tmp_path, part, sub, key):
    def edit(config):
        values = config[part][sub] if sub else config[part]
        values[key] = values[key] // 2
    folder = _copy_with(exported, tmp_path, edit)
    with pytest.raises(PretrainedFolderError, match=r"broken/config\.json: its sizes do not build a GROVE: .*"
                                                    r"out_chans \(\d+\) must equal model\.decoder\.dim"):
        Grove.from_pretrained(folder)
