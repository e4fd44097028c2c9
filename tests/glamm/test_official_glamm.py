"""GLaMM's released checkpoint: reading the folder, the key/shape check, and GLaMM's tokenization.

Folders are built here in the released layout from the released key lists (two shards, an index,
SAM and text_hidden_fcs fp32 and the rest bf16, no CLIP keys): tiny ones with weights, a real-size
one of meta tensors for the check.
"""
from __future__ import annotations

from core.weights import read_weights

from pathlib import Path

import pytest
import torch

from glamm.check import check_glamm, glamm_target
from glamm.checkpoint import GLAMM_LAYOUT
from models.grove.convert_official import convert_official
from tests.fixtures.official_glamm_state import glamm_key_list, glamm_state_dict, save_glamm_folder

ROOT = Path(__file__).resolve().parents[2]
TINY = [ROOT / "configs" / "official" / "glamm_tiny.yaml"]
TOKENIZER = ROOT.parent / "shared" / "llama_tokenizer" / "glamm"


def _script_main(*argv: str) -> int:
    from glamm.commands import main

    return main(list(argv))


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    return save_glamm_folder(tmp_path_factory.mktemp("glamm") / "tiny")


def test_tiny_folder_loads_with_every_key_accounted(tiny_folder, capsys):
    spec = glamm_key_list("tiny")
    official = read_weights(tiny_folder)
    assert len(list(tiny_folder.glob("pytorch_model-*.bin"))) == 2
    assert {v.dtype for v in official.values()} == {torch.float32, torch.bfloat16}  # mixed, as released
    assert not any("vision_tower" in k for k in official)
    target, _ = glamm_target(TINY)
    converted, report = convert_official(official, target, layout=GLAMM_LAYOUT)
    assert report.ok, report.table()
    mapped = sum(len(v) for v in report.mapped.values())
    dropped = sum(len(v) for v in report.dropped.values())
    assert mapped + dropped == spec["num_keys"] == len(official)
    # only CLIP is left for the CLIP weights, and nothing else of the model
    assert set(target) - set(converted) == set(report.external[next(iter(report.external))])
    assert all(k.startswith("global_encoder.backbone.") for k in set(target) - set(converted))
    torch.testing.assert_close(converted["mask_decoder.iou_token.weight"],
                               official["model.grounding_encoder.mask_decoder.iou_token.weight"])
    torch.testing.assert_close(converted["query_projector.2.weight"], official["model.text_hidden_fcs.0.2.weight"])
    assert _script_main("check", str(tiny_folder), "--config", str(TINY[0])) == 0
    assert "OK: every official key" in capsys.readouterr().out


def test_real_size_meta_folder_checks_without_weights(tmp_path, capsys):
    folder = save_glamm_folder(tmp_path / "real", "real", device="meta")
    assert sum(f.stat().st_size for f in folder.iterdir()) < 2_000_000  # 7.7 B elements, no data
    report, notes = check_glamm(folder)
    assert report.ok, report.table()
    assert sum(len(v) for v in report.mapped.values()) + sum(len(v) for v in report.dropped.values()) == 936
    assert not notes  # config.json agrees with configs/official/glamm.yaml
    assert _script_main("check", str(folder)) == 0
    assert "OK" in capsys.readouterr().out


def test_rotary_buffers_are_reported_not_fatal(tmp_path, capsys):
    state = glamm_state_dict("tiny")
    extra = glamm_key_list("tiny")["extra_keys_probably_in_file"]["keys"]
    for key, shape in extra.items():
        state[key] = torch.ones(shape)
    folder = save_glamm_folder(tmp_path / "g", state=state, tokenizer=False)
    assert _script_main("check", str(folder), "--config", str(TINY[0])) == 0
    out = capsys.readouterr().out
    assert f"ignored ({len(extra)})" in out and "inv_freq" in out


@pytest.mark.parametrize("fault", ["extra", "shape", "missing"])
def test_check_fails_naming_the_faulty_key(tmp_path, capsys, fault):
    state = glamm_state_dict("tiny")
    if fault == "extra":
        name = "model.grounding_encoder.mask_decoder.extra_head.weight"
        state[name] = torch.zeros(3)
    elif fault == "shape":
        name = "model.text_hidden_fcs.0.2.weight"
        state[name] = torch.zeros(33, 64)
    else:
        name = "prompt_encoder.no_mask_embed.weight"  # the model tensor left unfilled
        del state["model.grounding_encoder.prompt_encoder.no_mask_embed.weight"]
    folder = save_glamm_folder(tmp_path / "bad", state=state, tokenizer=False)
    assert _script_main("check", str(folder), "--config", str(TINY[0])) == 1
    out = capsys.readouterr().out
    assert name in out and "FAILED" in out


def test_index_naming_an_absent_shard_is_an_error(tmp_path):
    folder = save_glamm_folder(tmp_path / "g", tokenizer=False)
    (folder / "pytorch_model-00002-of-00002.bin").unlink()
    with pytest.raises(FileNotFoundError, match="pytorch_model-00002-of-00002.bin"):
        read_weights(folder, shapes_only=True)


def test_safetensors_folder_checks_from_headers(tmp_path):
    from safetensors.torch import save_file

    state = glamm_state_dict("tiny")
    keys = list(state)
    folder = tmp_path / "st"
    folder.mkdir()
    save_file({k: state[k] for k in keys[:100]}, str(folder / "model-00001-of-00002.safetensors"))
    save_file({k: state[k] for k in keys[100:]}, str(folder / "model-00002-of-00002.safetensors"))
    headers = read_weights(folder, shapes_only=True)
    assert all(t.is_meta for t in headers.values())
    report, _ = check_glamm(folder, TINY)
    assert report.ok, report.table()
