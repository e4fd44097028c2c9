"""GROVE started from GLaMM as the official pre-training does: values land where glamm_to_grove.json
says, the vocabulary and SAM's position tables are resized by their rules, CLIP, adapters and heads
are not GLaMM's."""
from __future__ import annotations

from core.weights import read_weights

import json
from pathlib import Path

import pytest
import torch

from models.grove import Grove
from models.grove.configuration import model_configs_from_yaml
from models.grove.convert_official import init_grove_from_glamm, init_table
from models.grove.grounding_video_encoder import interpolate_pos_embed, resize_rel_pos
from tests.fixtures.official_glamm_state import FIXTURES, save_glamm_folder

ROOT = Path(__file__).resolve().parents[2]
GROVE_TINY = [ROOT / "configs" / "official" / "tiny.yaml"]


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    folder = save_glamm_folder(tmp_path_factory.mktemp("glamm") / "tiny")
    torch.manual_seed(0)
    model = Grove(**model_configs_from_yaml(GROVE_TINY))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    report = init_grove_from_glamm(model, folder)
    return model, before, read_weights(folder), report


def test_glamm_values_land_where_the_key_map_says(started):
    model, _, glamm, report = started
    spec = json.loads((FIXTURES / "glamm_to_grove.json").read_text())["tiny"]
    resized = spec["same_name_resized"]
    state = model.state_dict()
    same_shape = 0
    for key, sources in report.mapped.items():
        if len(sources) == 1 and sources[0] not in resized:
            assert torch.equal(state[key], glamm[sources[0]].to(state[key].dtype).reshape(state[key].shape)), key
            same_shape += 1
    dropped = sum(len(v) for v in report.dropped.values())
    # every GLaMM key is used under its GROVE name or is one GROVE never reads (region encoder, mask path)
    assert same_shape + 2 + len(resized) + dropped == spec["glamm_keys"]
    dec = "model.grounding_encoder.mask_decoder."
    assert torch.equal(model.box_decoder.output_tokens.detach(),
                       torch.cat([glamm[f"{dec}iou_token.weight"], glamm[f"{dec}mask_tokens.weight"]]))
    assert {sources[0] for key, sources in report.mapped.items()
            if key in {k for k, _, _ in report.resized}} == set(resized)


def test_vocabulary_grows_by_mean_rows(started):
    model, _, glamm, _ = started
    for official, table in (("model.embed_tokens.weight", model.language_model.get_input_embeddings().weight),
                            ("lm_head.weight", model.language_model.get_output_embeddings().weight)):
        old = glamm[official].float()
        assert table.shape[0] == 128 and torch.equal(table[:125].detach(), old)
        mean = old.mean(dim=0).to(torch.bfloat16).float()  # the mean, in the saved (bf16) dtype
        assert torch.equal(table[125:].detach(), mean.expand(3, -1))


def test_sam_position_tables_follow_the_resize_rule(started):
    model, _, glamm, _ = started
    enc = "model.grounding_encoder.image_encoder."
    pos = glamm[f"{enc}pos_embed"]
    assert torch.equal(model.grounding_encoder.pos_embed.detach(), interpolate_pos_embed(pos, (4, 4)))
    for block in (1, 3):
        attn = model.grounding_encoder.backbone.blocks[block].attn
        for axis in "hw":
            table = glamm[f"{enc}blocks.{block}.attn.rel_pos_{axis}"]
            assert table.shape == (15, 16)
            assert torch.equal(getattr(attn, f"rel_pos_{axis}").detach(), resize_rel_pos(table, 7))
    # a windowed block's tables have GLaMM's size already and are copied
    assert torch.equal(model.grounding_encoder.backbone.blocks[0].attn.rel_pos_h.detach(),
                       glamm[f"{enc}blocks.0.attn.rel_pos_h"])


def test_clip_adapters_and_heads_are_not_glamms(started):
    model, before, _, report = started
    state = model.state_dict()
    fresh = ("global_encoder.backbone.", "global_encoder.adapters.", "grounding_encoder.adapters.", "box_head.",
             "objectness_head.")
    new_or_clip = [k for k in state if k.startswith(fresh)]
    assert new_or_clip and all(torch.equal(state[k], before[k]) for k in new_or_clip)
    adapters = (*model.global_encoder.adapters, *model.grounding_encoder.adapters)
    assert all(float(a.alpha.detach()) == 0.0 for a in adapters)
    table = init_table(report, None)
    clip = sum(1 for k in state if k.startswith("global_encoder.backbone."))
    assert f"from CLIP     {clip} tensors" in table
    assert "new           18 tensors" in table  # 6 + 6 adapter tensors, 4 box-head, 2 objectness


def test_grove_module_starts_from_glamm(started, tmp_path):
    from lightning_modules.grove_module import GroveModule

    folder = save_glamm_folder(tmp_path / "g", seed=3)
    module = GroveModule(**model_configs_from_yaml(GROVE_TINY), init_from_glamm=str(folder))
    assert "from GLaMM" in module.init_table
    glamm = read_weights(folder)
    assert torch.equal(module.model.query_projector[0].weight.detach(), glamm["model.text_hidden_fcs.0.0.weight"])
    with pytest.raises(FileNotFoundError, match="model.init_from_glamm"):
        GroveModule(**model_configs_from_yaml(GROVE_TINY), init_from_glamm=str(tmp_path / "absent"))
