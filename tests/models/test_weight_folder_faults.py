"""Checkpoint folders that are damaged in ways a plain reader does not notice: a tensor stored in two
shards or safetensors files, a config.json or tokenizer file that is not what it says."""
from __future__ import annotations

from core.json_file import JSONFileError, read_json
from core.weights import DuplicateWeightError, merge_weight_files
from core.weights import read_weights as read_official

import importlib.util
from pathlib import Path

import pytest
import torch

from glamm.check import check_glamm
from tests.fixtures.official_glamm_state import glamm_state_dict, save_glamm_folder

ROOT = Path(__file__).resolve().parents[2]
TINY = [ROOT / "configs" / "official" / "glamm_tiny.yaml"]
SHARD_1, SHARD_2 = "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"
EMBED = "model.embed_tokens.weight"


def test_merge_names_the_key_and_both_files():
    a, b = {"x": torch.zeros(1), "y": torch.zeros(1)}, {"z": torch.ones(1), "y": torch.ones(1)}
    with pytest.raises(DuplicateWeightError, match=r"'y' is stored twice: in a.bin and in b.bin"):
        merge_weight_files([("a.bin", a), ("b.bin", b)])
    merged = merge_weight_files([("a.bin", a), ("b.bin", {"z": torch.ones(1)})])
    assert sorted(merged) == ["x", "y", "z"]


def test_a_key_in_both_indexed_shards_fails_check_and_load(tmp_path):
    folder = save_glamm_folder(tmp_path / "g", tokenizer=False)
    shard_1 = torch.load(folder / SHARD_1, weights_only=True)
    shard_2 = torch.load(folder / SHARD_2, weights_only=True)
    assert EMBED in shard_1 and EMBED not in shard_2  # the index names shard 1
    shard_2[EMBED] = torch.zeros_like(shard_1[EMBED])  # a stray copy the index does not list
    torch.save(shard_2, folder / SHARD_2)
    for shapes_only in (True, False):
        with pytest.raises(DuplicateWeightError,
                           match=rf"'{EMBED}' is stored twice: in .*{SHARD_1} and in .*{SHARD_2}"):
            read_official(folder, shapes_only=shapes_only)
    with pytest.raises(DuplicateWeightError, match=EMBED):
        check_glamm(folder, TINY)


def test_a_key_in_two_safetensors_files_is_an_error(tmp_path):
    from safetensors.torch import save_file

    state = glamm_state_dict("tiny")
    keys = list(state)
    folder = tmp_path / "st"
    folder.mkdir()
    save_file({k: state[k] for k in keys[:100]}, str(folder / "a.safetensors"))
    save_file({k: state[k] for k in keys[99:]}, str(folder / "b.safetensors"))
    with pytest.raises(DuplicateWeightError, match=rf"'{keys[99]}' is stored twice: in .*a.safetensors and in .*b"):
        read_official(folder, shapes_only=True)


def test_config_json_that_is_not_json_is_named(tmp_path):
    folder = save_glamm_folder(tmp_path / "g", tokenizer=False)
    (folder / "config.json").write_text('{"vocab_size": 32004,,}')
    with pytest.raises(JSONFileError, match=r"config.json: not valid JSON \(Expecting property name .* line 1"):
        check_glamm(folder, TINY)
    (folder / "x.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(JSONFileError, match=r"x.json: not JSON text \(not UTF-8"):
        read_json(folder / "x.json")


@pytest.mark.skipif(importlib.util.find_spec("sentencepiece") is None, reason="needs sentencepiece")
def test_a_corrupt_tokenizer_model_is_named_not_blamed_on_tiktoken(tmp_path):
    from models.grove.language_model import load_tokenizer_folder

    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.model").write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ValueError, match=r"tokenizer.model is not a SentencePiece model") as err:
        load_tokenizer_folder(folder, "GLaMM folder")
    assert "tiktoken" not in str(err.value)
