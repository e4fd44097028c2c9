"""The released GROVE checkpoints: conversion, and parity of each official convention.

Checkpoints are built here in the released format from the released key lists (trainable
tensors as views of one flat fp32 storage, frozen ones bf16), at the tiny sizes for weights and
at the real sizes as meta tensors for the key/shape check.
"""
from __future__ import annotations

from core.weights import read_weights

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from models.grove import Grove
from models.grove.configuration import model_configs_from_yaml
from models.grove.convert_official import check_official, convert_official
from models.grove.global_video_encoder import GlobalVideoEncoder
from models.grove.grounding_video_encoder import GroundingVideoEncoder, resize_position_tables, resize_rel_pos
from models.grove.prompting import OFFICIAL_ADDED_TOKENS, OFFICIAL_VIDEO_INDEX, format_target
from models.grove.windows import official_windows
from tests.fixtures.official_grove_state import official_state_dict, save_official

ROOT = Path(__file__).resolve().parents[2]
TINY = [ROOT / "configs" / "official" / "tiny.yaml"]
REAL = [ROOT / "configs" / "official" / "grove.yaml"]


def _convert_main(*argv: str) -> int:
    from command_line.convert_official_grove import main

    return main(list(argv))


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory) -> Path:
    return save_official(tmp_path_factory.mktemp("official") / "grove_tiny.bin")


@pytest.fixture(scope="module")
def tiny_grove() -> Grove:
    return Grove(**model_configs_from_yaml(TINY)).eval()


def _load_converted(model: Grove, path: Path) -> Grove:
    converted, report = convert_official(read_weights(path), model.state_dict())
    assert report.ok, report.table()
    model.load_state_dict(converted, strict=True)
    return model


def test_tiny_checkpoint_converts_with_every_key_accounted(tiny_file, capsys):
    official = read_weights(tiny_file)
    flat = {official[k].untyped_storage().data_ptr() for k, kind in
            json.loads((ROOT / "tests/fixtures/official_grove/keys_tiny.json").read_text())["kinds"].items()
            if kind == "trainable"}
    assert len(flat) == 1  # the fixture really shares one flat storage, as zero_to_fp32 writes it
    assert any(v.dtype == torch.bfloat16 for v in official.values())
    report, _ = check_official(tiny_file, TINY)
    assert report.ok and not report.unaccounted and not report.missing and not report.mismatched
    mapped = sum(len(v) for v in report.mapped.values())
    dropped = sum(len(v) for v in report.dropped.values())
    assert mapped + dropped == len(official)  # every official key is mapped or dropped
    assert _convert_main(str(tiny_file), "--config", str(TINY[0]), "--check") == 0
    assert "OK: every official key" in capsys.readouterr().out


def test_converted_values_land_where_the_official_model_uses_them(tiny_file, tiny_grove):
    official = read_weights(tiny_file)
    model = _load_converted(tiny_grove, tiny_file)
    clip = "model.vision_tower.vision_tower.vision_model.encoder."
    q, k, v = (official[f"{clip}layers.2.self_attn.{p}_proj.weight"].float() for p in "qkv")
    torch.testing.assert_close(model.global_encoder.backbone.transformer.resblocks[2].attn.in_proj_weight,
                               torch.cat([q, k, v]))
    torch.testing.assert_close(model.global_encoder.adapters[1].conv.weight,
                               official[f"{clip}adapters.1.conv3d.weight"])
    assert model.global_encoder.adapters[1].alpha.shape == () and \
        float(model.global_encoder.adapters[1].alpha.detach()) == float(official[f"{clip}adapters.1.alpha"])
    dec = "model.grounding_encoder.mask_decoder."
    torch.testing.assert_close(model.box_decoder.output_tokens,
                               torch.cat([official[f"{dec}iou_token.weight"], official[f"{dec}mask_tokens.weight"]]))
    torch.testing.assert_close(model.objectness_head.linear.weight, official[f"{dec}temporal_objectness_head.weight"])
    torch.testing.assert_close(model.query_projector[2].weight, official["model.text_hidden_fcs.0.2.weight"])
    torch.testing.assert_close(model.language_model.get_output_embeddings().weight, official["lm_head.weight"])
    torch.testing.assert_close(model.grounding_encoder.pos_embed,
                               official["model.grounding_encoder.image_encoder.pos_embed"])


@pytest.mark.parametrize("fault", ["extra", "shape", "missing"])
def test_check_fails_naming_the_faulty_key(tmp_path, capsys, fault):
    state = official_state_dict("tiny")
    if fault == "extra":
        name = "model.vision_tower.vision_tower.vision_model.encoder.adapters.7.alpha"
        state[name] = torch.zeros(1)
    elif fault == "shape":
        name = "model.mm_projector.2.weight"
        state[name] = torch.zeros(64, 65)
    else:
        name = "global_encoder.projector.0.bias"  # the project key left unfilled
        del state["model.mm_projector.0.bias"]
    path = tmp_path / "bad.bin"
    torch.save(state, path)
    assert _convert_main(str(path), "--config", str(TINY[0]), "--check") == 1
    out = capsys.readouterr().out
    assert name in out and "FAILED" in out
    assert _convert_main(str(path), "--config", str(TINY[0]), "--out", str(tmp_path / "x.ckpt")) == 1
    assert not (tmp_path / "x.ckpt").exists()  # nothing written for a checkpoint that does not fit


def test_real_size_meta_checkpoint_checks_without_weights(tmp_path):
    path = save_official(tmp_path / "grove_real_meta.bin", "real", device="meta")
    assert path.stat().st_size < 1_000_000  # shapes only: 8.4 B elements, no data
    report, notes = check_official(path, REAL)
    assert report.ok, report.table()
    spec = json.loads((ROOT / "tests/fixtures/official_grove/keys_real.json").read_text())
    mapped, dropped = sum(len(v) for v in report.mapped.values()), sum(len(v) for v in report.dropped.values())
    assert mapped + dropped == spec["num_keys"]
    assert any("tokenizer_path" in n for n in notes)


def tiny_grove_state() -> dict:
    return Grove(**model_configs_from_yaml(TINY)).state_dict()


def test_hugging_face_folder_reads_like_the_bin(tmp_path, tiny_file):
    from safetensors.torch import save_file

    state = {k: v.clone().contiguous() for k, v in read_weights(tiny_file).items()}
    keys = list(state)
    (tmp_path / "hf").mkdir()
    save_file({k: state[k] for k in keys[:200]}, str(tmp_path / "hf" / "model-00001-of-00002.safetensors"))
    save_file({k: state[k] for k in keys[200:]}, str(tmp_path / "hf" / "model-00002-of-00002.safetensors"))
    report, _ = check_official(tmp_path / "hf", TINY)
    assert report.ok
    headers = read_weights(tmp_path / "hf", shapes_only=True)  # the check reads headers, no data
    assert all(t.is_meta for t in headers.values())
    assert {k: (t.shape, t.dtype) for k, t in headers.items()} == {k: (t.shape, t.dtype) for k, t in state.items()}
    converted, report = convert_official(read_weights(tmp_path / "hf"), tiny_grove_state())
    assert report.ok and torch.equal(converted["query_projector.0.weight"], state["model.text_hidden_fcs.0.0.weight"])


def test_clip_tower_equals_transformers_clip_vision_model(tiny_file, tiny_grove):
    """Converted CLIP tower, adapters inert, vs transformers' CLIPVisionModel on the same weights."""
    from transformers import CLIPVisionConfig, CLIPVisionModel

    spec = json.loads((ROOT / "tests/fixtures/official_grove/keys_tiny.json").read_text())["config"]["clip"]
    hf = CLIPVisionModel(CLIPVisionConfig(**{k: spec[k] for k in (
        "hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "image_size", "patch_size",
        "num_channels", "projection_dim", "hidden_act", "layer_norm_eps")})).eval()
    official = read_weights(tiny_file)
    prefix = "model.vision_tower.vision_tower."
    weights = {k[len(prefix):]: v.float() for k, v in official.items()
               if k.startswith(prefix) and ".adapters." not in k}
    if not any(k.startswith("vision_model.") for k in hf.state_dict()):  # transformers >= 5 drops the prefix
        weights = {k[len("vision_model."):]: v for k, v in weights.items()}
    missing, unexpected = hf.load_state_dict(weights, strict=False)
    assert not unexpected and all("position_ids" in k for k in missing)
    model = _load_converted(tiny_grove, tiny_file)
    with torch.no_grad():
        for adapter in model.global_encoder.adapters:
            adapter.alpha.zero_()
        frames = torch.randn(2, 8, 3, 56, 56, generator=torch.Generator().manual_seed(0))
        ours = model.global_encoder.encode_frames(frames)  # (B, T, h, w, C)
        ref = hf(pixel_values=frames.flatten(0, 1), output_hidden_states=True).hidden_states[-2][:, 1:]
    torch.testing.assert_close(ours.reshape(16, -1, 64), ref, atol=1e-5, rtol=1e-4)


def _official_conv_adapter(x: torch.Tensor, conv: torch.nn.Conv3d, alpha: torch.Tensor, t: int, rows: int):
    """The released SpatioTemporalConvAdapter on (b t, 1 + h w, c) tokens, re-derived step by step."""
    cls, seq = x[:, :1], x[:, 1:]
    bt, n, c = seq.shape
    grid = seq.reshape(bt // t, t, rows, n // rows, c).permute(0, 4, 1, 2, 3)  # b c t h w
    grid = torch.tanh(alpha) * F.relu(F.conv3d(grid, conv.weight, conv.bias, padding="same")) + grid
    seq = grid.permute(0, 2, 3, 4, 1).reshape(bt, n, c)
    return torch.cat((cls, seq), dim=1)


@pytest.mark.parametrize("rows", [16, None])
def test_clip_adapters_follow_the_official_formula_and_layout(rows):
    cfg = model_configs_from_yaml(REAL)["global_encoder"]
    cfg = replace(cfg, vision_config={"image_size": 96, "layers": 5, "width": 32, "head_width": 16, "patch_size": 4},
                  image_size=96, adapter_blocks=[0, 3], adapter_grid_rows=rows, model_name="")
    enc = GlobalVideoEncoder(cfg, llm_dim=16).eval()  # 24 x 24 = 576 patches, as ViT-L/14 at 336 px
    assert enc.adapter_positions == {0: 0, 3: 1}
    assert enc.adapter_grid_hw == ((16, 36) if rows else (24, 24))
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2 * 8, 577, 32, generator=gen)
    adapter = enc.adapters[0]
    with torch.no_grad():
        adapter.alpha.fill_(0.7)
        adapter.conv.weight.normal_(generator=gen)
        ours = adapter(x, 8, num_prefix_tokens=1, grid_hw=enc.adapter_grid_hw)
    ref = _official_conv_adapter(x, adapter.conv, adapter.alpha.detach(), 8, rows or 24)
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)


def test_official_vocabulary_prompt_and_query_position(tiny_grove):
    tok = tiny_grove.tokenizer
    n = len(tok)
    assert n == 128 and tok.convert_tokens_to_ids(list(OFFICIAL_ADDED_TOKENS)) == list(range(118, 128))
    prompter = tiny_grove.make_prompter(template="llava_v1", sample_question=False)
    assert tiny_grove.num_video_tokens == 576
    ids = prompter.prompt_ids(prompter.questions[0])
    # The released tokenizer_image_token: chunks around "<video>", BOS once, one -200 per chunk gap.
    question = ("Could you please give me a description of the video? Please respond with interleaved bounding "
                "boxes for the corresponding parts of the answer.")
    text = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, "
            "detailed, and polite answers to the human's questions. USER: The <vid_start><video><vid_end> provides "
            f"an overview of the video.\n{question} ASSISTANT:")
    before, after = text.split("<video>")
    official = [tok.bos_token_id, *tok(before, add_special_tokens=False)["input_ids"], OFFICIAL_VIDEO_INDEX,
                *tok(after, add_special_tokens=False)["input_ids"]]
    expanded = [i for t in official for i in ([t] * 576 if t == OFFICIAL_VIDEO_INDEX else [t])]
    assert ids == expanded
    assert ids[ids.index(OFFICIAL_VIDEO_INDEX) - 1] == tok.convert_tokens_to_ids("<vid_start>")
    # [DET] queries: the hidden state of the token before each [DET] (the released mask is
    # input_ids[:, 1:] == det, read one position earlier).
    enc = prompter.encode_training(["a <p>red circle</p> moves past <p>a blue square</p>"])
    input_ids = enc["input_ids"]
    det = tok.convert_tokens_to_ids("[DET]")
    official_mask = torch.cat([input_ids[:, 1:] == det, torch.zeros(1, 1, dtype=torch.bool)], dim=1)
    ours = tiny_grove.language_model.query_mask(input_ids)
    assert torch.equal(ours, official_mask) and int(ours.sum()) == 2
    assert (input_ids[:, 1:][ours[:, :-1]] == det).all()


def _reference_sliding_segments(num_frames: int, num_segments: int = 8):
    """The released sliding_segment_with_mask, transcribed loop for loop."""
    size, rem = num_frames // num_segments, num_frames % num_segments
    windows, masks, seen = [], [], set()
    for offset in range(size):
        idx = [i * size + offset for i in range(num_segments)]
        windows.append(idx)
        masks.append([1 if j not in seen else 0 for j in idx])
        seen.update(idx)
    for offset in range(rem):
        idx = [j for j in (i * size + size + offset for i in range(num_segments)) if j < num_frames]
        if idx:
            windows.append(idx)
            masks.append([1 if j not in seen else 0 for j in idx])
            seen.update(idx)
    last = max(i for i, m in enumerate(masks) if all(m))
    return windows, masks, last // 2


@pytest.mark.parametrize("seed", range(3))
def test_official_windows_match_the_released_schedule(seed):
    rng = np.random.default_rng(seed)
    for n in [*range(1, 21), 40, 41, 47, *rng.integers(8, 200, size=20).tolist()]:
        windows, masks, centre = _reference_sliding_segments(int(n))
        positions, keep, caption = official_windows(int(n), 8)
        assert positions.tolist() == windows and caption == centre
        if n >= 8:
            assert keep.int().tolist() == masks
        else:  # the released masks keep all 8 copies of a window's frame; one prediction per frame here
            assert all(all(m) for m in masks) and keep.int().tolist() == [[1] + [0] * 7] * n
        assert sorted(positions[keep].tolist()) == list(range(int(n)))  # every frame kept exactly once


def test_short_clips_caption_from_the_middle_frame():
    positions, keep, caption = official_windows(5, 8)
    assert positions.tolist() == [[k] * 8 for k in range(5)] and caption == 2  # frame (5 - 1) // 2
    positions, _, caption = official_windows(1, 8)
    assert positions.tolist() == [[0] * 8] and caption == 0


def test_clip_preprocessing_matches_clip_image_processor():
    from transformers import CLIPImageProcessorPil

    from models.grove.image_processing import preprocess_global

    processor = CLIPImageProcessorPil(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
    rng = np.random.default_rng(0)
    for h, w in [(360, 640), (480, 360), (336, 500), (241, 333)]:
        noise = rng.normal(size=(1, h, w, 3))
        frames = np.clip(np.cumsum(np.cumsum(noise, 1), 2) * 2 + 128, 0, 255).astype(np.uint8)  # smooth images
        ref = processor.preprocess(list(frames), return_tensors="pt")["pixel_values"]
        ours = preprocess_global(frames, 336, "clip")
        assert ours.shape == ref.shape == (1, 3, 336, 336)
        # PIL's bicubic on 8-bit frames, as CLIPImageProcessor: equal up to float rounding
        assert float((ours - ref).abs().max()) < 1e-4


def test_sam_position_tables_resize_to_the_build_size_as_sam_reads_them():
    from segment_anything.modeling.image_encoder import get_rel_pos

    gen = torch.Generator().manual_seed(0)
    table = torch.randn(127, 16, generator=gen)  # a 1024-px global block (64 x 64 grid)
    # SAM interpolates at run time; resizing once at load time must give what SAM would read
    torch.testing.assert_close(get_rel_pos(32, 32, resize_rel_pos(table, 63)), get_rel_pos(32, 32, table))
    configs = model_configs_from_yaml(TINY)
    built_small = GroundingVideoEncoder(configs["grounding_encoder"]).backbone  # at 64 px: 4 x 4 grid
    big = replace(configs["grounding_encoder"], image_size=128, pretrain_image_size=128)
    state = GroundingVideoEncoder(big).backbone.state_dict()
    resized = resize_position_tables(state, built_small)
    assert resized["pos_embed"].shape == (1, 4, 4, 64) and resized["blocks.1.attn.rel_pos_h"].shape == (7, 16)
    assert resized["blocks.0.attn.rel_pos_h"].shape == (5, 16)  # windowed blocks keep their window's table
    built_small.load_state_dict(resized)


def test_grove_predict_grounds_every_frame_with_official_windows(tiny_file, tiny_grove):
    model = _load_converted(tiny_grove, tiny_file)
    gen = torch.Generator().manual_seed(0)
    n = 13  # one full window and five tail windows (S = 1)
    frame_mask = torch.ones(2, n, dtype=torch.bool)
    frame_mask[1, 11:] = False  # the second clip has 11 frames
    out = model.predict(torch.randn(2, n, 3, 56, 56, generator=gen), torch.randn(2, n, 3, 64, 64, generator=gen),
                        frame_mask, window=8, window_mode="official",
                        captions=["<p>a red circle</p> moves", "<p>a square</p> and <p>a star</p>"])
    assert out.phrases == [["a red circle"], ["a square", "a star"]]
    assert out.boxes.shape == (2, n, 2, 4) and out.scores.shape == (2, n, 2)
    filled = out.boxes.abs().sum(-1) > 0
    assert filled[0, :, 0].all() and filled[1, :11].all() and not filled[1, 11:].any()
    assert not filled[0, :, 1].any()  # no second phrase in clip 0
    assert ((out.scores[filled] > 0) & (out.scores[filled] < 1)).all() and (out.scores[~filled] == 0).all()
    assert format_target(out.tagged_captions[0]).endswith("[DET] moves")


def test_official_text_protocol_grounds_generated_ids_then_the_released_decode(tiny_grove, monkeypatch):
    """Caption window: the generated ids themselves; other windows: the released decode re-tokenised;
    the scored caption is the released string (space kept before punctuation)."""
    model = tiny_grove
    prompter = model.make_prompter(template="llava_v1", sample_question=False)
    monkeypatch.setattr(model, "_prompter", prompter)
    tok = model.tokenizer
    answer = "a man wipes <p> the floor </p> [DET]; he <p> a cloth </p> [DET]"
    generated = tok(" " + answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    monkeypatch.setattr(model.language_model, "generate", lambda video, ids, mask, max_new_tokens, keep_eos: (
        [list(generated) for _ in range(video.shape[0])]))
    seen = []
    original = model.det_queries

    def spy(input_ids, attention_mask, video_embeds, labels=None, num_slots=None):
        seen.append([row[m.bool()].tolist() for row, m in zip(input_ids, attention_mask)])
        return original(input_ids, attention_mask, video_embeds, labels, num_slots)

    monkeypatch.setattr(model, "det_queries", spy)
    gen = torch.Generator().manual_seed(0)
    n = 17  # S = 2 windows of 8 plus one tail window; caption window (2 - 1) // 2 = 0
    out = model.predict(torch.randn(1, n, 3, 56, 56, generator=gen), torch.randn(1, n, 3, 64, 64, generator=gen),
                        torch.ones(1, n, dtype=torch.bool), window=8, window_mode="official", text_protocol="official")
    prompt = prompter.prompt_ids(prompter.questions[0])
    text = prompter.official_answer(prompt, generated)
    assert seen[0] == [prompt + generated]  # window 0, the caption window
    retokenised = prompter.encode_training([text], formatted=True)["input_ids"][0].tolist()
    assert seen[1] == seen[2] == [retokenised] and len(seen) == 3
    assert out.phrases == [["the floor", "a cloth"]]
    assert out.captions == [" ".join(text.replace("</s>", "").replace("[DET]", "").replace("<p>", "")
                                      .replace("</p>", "").split())]
    assert out.boxes.shape == (1, n, 2, 4)
    with pytest.raises(ValueError, match="window_mode='official'"):
        model.predict(torch.zeros(1, 8, 3, 56, 56), torch.zeros(1, 8, 3, 64, 64), torch.ones(1, 8, dtype=torch.bool),
                      window_mode="interleaved", caption_positions=torch.zeros(1, 8, dtype=torch.long),
                      text_protocol="official")


@pytest.mark.slow
def test_converted_tiny_checkpoint_runs_cli_predict_and_test(tmp_path, tiny_file):
    from cli import cli_main as main

    ckpt = tmp_path / "grove_tiny.ckpt"
    assert _convert_main(str(tiny_file), "--config", str(TINY[0]), "--out", str(ckpt)) == 0
    loaded = torch.load(ckpt, map_location="cpu", weights_only=True)  # safe to read: tensors and numbers
    assert all(k.startswith("model.") for k in loaded["state_dict"])
    common = ["--config", str(TINY[0]), f"--data.init_args.root={tmp_path / 'synthetic'}",
              "--data.init_args.num_test=2", "--data.init_args.generation_workers=1",
              f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}", "--trainer.enable_progress_bar=false",
              "--model.init_args.teacher_forced=true", f"--ckpt_path={ckpt}"]
    main(["predict", *common])
    pred_file = next((tmp_path / "runs").rglob("predictions_predict.json"))
    predictions = json.loads(pred_file.read_text())
    assert len(predictions) == 2
    for clip in predictions.values():
        assert clip["phrases"] and clip["frames"]
        for frame in clip["frames"]:
            assert set(frame["labels"]) <= set(clip["phrases"]) and all(s > 0.5 for s in frame["scores"])
    main(["test", *common])


def test_converted_checkpoint_initialises_fine_tuning(tmp_path, tiny_file):
    """configs/official/finetune.yaml names a converted checkpoint; InitFromCheckpoint loads it strictly."""
    from callbacks.init_from_checkpoint import InitFromCheckpoint
    from lightning_modules.grove_module import GroveModule

    ckpt = tmp_path / "grove_tiny.ckpt"
    assert _convert_main(str(tiny_file), "--config", str(TINY[0]), "--out", str(ckpt)) == 0
    module = GroveModule(**model_configs_from_yaml(TINY), chat_template="llava_v1")
    InitFromCheckpoint(str(ckpt), strict=True).setup(None, module, "fit")
    official = read_weights(tiny_file)
    torch.testing.assert_close(module.model.box_head.mlp[0].weight,
                               official["model.grounding_encoder.mask_decoder.bbox_prediction_head.0.weight"])
    finetune = __import__("yaml").safe_load((ROOT / "configs/official/finetune.yaml").read_text())
    callbacks = finetune["trainer"]["callbacks"]
    assert callbacks[0]["class_path"].endswith("InitFromCheckpoint")


def test_bad_weight_files_are_refused_by_name(tmp_path, capsys):
    """A truncated safetensors file, integer (quantised) tensors and NaN weights are refused,
    naming the file, the key and the dtype; nothing is written."""
    from safetensors.torch import save_file

    state = {k: v.clone().contiguous() for k, v in official_state_dict("tiny").items()}
    whole = tmp_path / "model.safetensors"
    save_file(state, str(whole))
    (tmp_path / "cut").mkdir()
    cut = tmp_path / "cut" / "model.safetensors"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    for mode in (["--check"], ["--out", str(tmp_path / "x.ckpt")]):
        assert _convert_main(str(cut), "--config", str(TINY[0]), *mode) == 1
        assert f"error: checkpoint: {cut}: not a readable safetensors file" in capsys.readouterr().err
    key = "model.mm_projector.2.weight"
    quantised = dict(state, **{key: torch.randint(-128, 127, state[key].shape, dtype=torch.int8)})
    save_file(quantised, str(tmp_path / "int8.safetensors"))
    for mode in (["--check"], ["--out", str(tmp_path / "x.ckpt")]):
        assert _convert_main(str(tmp_path / "int8.safetensors"), "--config", str(TINY[0]), *mode) == 1
        out = capsys.readouterr().out
        assert f"{key} -> global_encoder.projector.2.weight: checkpoint holds int8, model needs float32" in out
        assert "WRONG DTYPE" in out and "1 wrong dtypes" in out
    nan = dict(state, **{key: torch.full_like(state[key], float("nan"))})
    torch.save(nan, tmp_path / "nan.bin")
    assert _convert_main(str(tmp_path / "nan.bin"), "--config", str(TINY[0]), "--out", str(tmp_path / "x.ckpt")) == 1
    assert f"nan.bin: 1 tensor(s) hold NaN values, e.g. '{key}'" in capsys.readouterr().err
    assert not (tmp_path / "x.ckpt").exists()


def test_converter_refuses_to_write_over_its_input(tmp_path, tiny_file, capsys):
    import shutil

    copy = shutil.copy(tiny_file, tmp_path / "grove.bin")
    before = Path(copy).read_bytes()
    with pytest.raises(SystemExit, match="is checkpoint"):
        _convert_main(str(copy), "--config", str(TINY[0]), "--out", str(tmp_path / "." / "grove.bin"))
    assert Path(copy).read_bytes() == before
    assert _convert_main(str(copy), "--config", str(TINY[0]), "--out", str(tmp_path / "grove.ckpt")) == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_the_release_converts_straight_to_an_exported_folder(tmp_path, tiny_file):
    from lightning_modules.grove_module import GroveModule  # noqa: F401  (the module class the folder names)

    folder = tmp_path / "exported"
    assert _convert_main(str(tiny_file), "--config", str(TINY[0]), "--export", str(folder)) == 0
    assert {"config.json", "model.safetensors", "README.md"} <= {p.name for p in folder.iterdir()}
    assert not list(tmp_path.glob("*/converted.ckpt"))
    loaded = Grove.from_pretrained(folder)
    reference = _load_converted(Grove(**model_configs_from_yaml(TINY)).eval(), tiny_file)
    expected = reference.state_dict()
    assert all(torch.equal(v, expected[k]) for k, v in loaded.state_dict().items())
