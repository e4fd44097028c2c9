"""GROVE's modules: adapters, encoders (parity with open_clip / SAM / HF CLIP, checkpoint loading),
box decoder, language model, the composed model on the tiny configuration, and real sizes on meta."""
from dataclasses import replace
from functools import partial

import pytest
import torch
from torch import nn

from models.grove import PAPER_TRAINABLE, PARAMETER_GROUPS, Grove, build_on_meta, gather_det_hidden
from models.grove.adapters import SpatioTemporalAdapter
from models.grove.box_decoder import BoxDecoder
from models.grove.configuration import (
    DecoderConfig,
    GlobalEncoderConfig,
    GroundingEncoderConfig,
    paper_configs,
    tiny_configs,
)
from models.grove.global_video_encoder import GlobalVideoEncoder
from models.grove.grounding_video_encoder import GroundingVideoEncoder, interpolate_pos_embed, sincos_pos_embed
from models.grove.language_model import GroveLanguageModel
from models.tiny_tokenizer import build_tiny_tokenizer

TINY_SAM = {"embed_dim": 32, "depth": 4, "num_heads": 2, "global_attn_indexes": [1, 3], "patch_size": 16,
            "out_chans": 16, "window_size": 4}
TINY_CLIP = {"width": 32, "layers": 4, "head_width": 16, "patch_size": 16}


@pytest.fixture(scope="module")
def tiny_tokenizer(tmp_path_factory):
    return build_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tiny")


def _randomise(module: nn.Module, seed: int = 0) -> nn.Module:
    """Random values everywhere (SAM zero-initialises positional tables, which would hide bugs)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    return module


def _set_alphas(module: nn.Module, value: float) -> None:
    with torch.no_grad():
        for adapter in module.adapters:
            adapter.alpha.fill_(value)


# -- adapters ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2 * 4, 1 + 9, 8), (2 * 4, 3, 3, 8), (2, 4, 3, 3, 8)])
def test_adapter_is_exactly_identity_at_init(shape):
    adapter = SpatioTemporalAdapter(8)
    x = torch.randn(shape)
    out = adapter(x, 4, num_prefix_tokens=1) if len(shape) == 3 else adapter(x, 4)
    assert adapter.alpha.item() == 0.0
    assert torch.equal(out, x)


def test_adapter_gradients_at_and_after_zero_alpha():
    adapter = SpatioTemporalAdapter(8)
    x = torch.randn(2, 4, 3, 3, 8)
    (adapter(x, 4) * torch.randn(2, 4, 3, 3, 8)).sum().backward()
    assert adapter.alpha.grad.abs().item() > 0                 # the gate learns from the start ...
    assert torch.count_nonzero(adapter.conv.weight.grad) == 0  # ... the conv only once the gate opens
    adapter.zero_grad()
    with torch.no_grad():
        adapter.alpha.fill_(0.5)
    (adapter(x, 4) * torch.randn(2, 4, 3, 3, 8)).sum().backward()
    assert adapter.alpha.grad.abs().item() > 0 and adapter.conv.weight.grad.abs().sum() > 0


def test_adapter_receptive_field_is_neighbouring_frames_of_the_same_clip():
    torch.manual_seed(0)
    adapter = SpatioTemporalAdapter(4)
    with torch.no_grad():
        adapter.alpha.fill_(1.0)
        adapter.conv.bias.fill_(1.0)  # keeps the ReLU active so changes propagate
    b, t, h, w, c = 2, 6, 3, 3, 4
    tokens = torch.randn(b * t, 1 + h * w, c)
    base = adapter(tokens, t, num_prefix_tokens=1)
    changed = tokens.clone()
    changed[1 * t + 2, 1:] += 10.0                           # clip 1, frame 2, all patches
    diff = (adapter(changed, t, num_prefix_tokens=1) - base).abs().sum(dim=(1, 2)).view(b, t)
    assert torch.all(diff[0] == 0)                             # the other clip is untouched
    assert diff[1, 1] > 0 and diff[1, 3] > 0                   # neighbouring frames see it (kernel 3)
    assert diff[1, 0] == 0 and diff[1, 4] == 0 and diff[1, 5] == 0
    assert torch.equal(adapter(changed, t, num_prefix_tokens=1)[:, 0], changed[:, 0])  # class token passes


# -- global video encoder ----------------------------------------------------------------------------

def _global_config(**kw):
    return GlobalEncoderConfig(vision_config=dict(TINY_CLIP), image_size=48, pool_grid=(2, 2, 2),
                               quick_gelu=False, **kw)


@pytest.mark.parametrize("feature_layer", [-2, -1, 2])
def test_global_encoder_matches_open_clip_intermediates(feature_layer):
    torch.manual_seed(feature_layer + 5)
    enc = GlobalVideoEncoder(_global_config(feature_layer=feature_layer, adapters=False), llm_dim=16).eval()
    _randomise(enc.backbone, seed=feature_layer + 5)
    frames = torch.randn(2, 3, 3, 48, 48)
    block = 4 + feature_layer if feature_layer < 0 else feature_layer - 1   # open_clip's 0-based block index
    ref = enc.backbone.forward_intermediates(frames.flatten(0, 1), indices=[block], intermediates_only=True,
                                             output_fmt="NLC")["image_intermediates"][0]
    ours = enc.encode_frames(frames)
    assert ours.shape == (2, 3, 3, 3, 32)
    torch.testing.assert_close(ours.reshape(6, 9, 32), ref, rtol=1e-5, atol=1e-5)


def test_global_encoder_adapters_identity_at_init_and_pooling():
    torch.manual_seed(0)
    with_adapters = GlobalVideoEncoder(_global_config(), llm_dim=16)
    without = GlobalVideoEncoder(_global_config(adapters=False), llm_dim=16)
    without.load_state_dict(with_adapters.state_dict(), strict=False)
    assert len(with_adapters.adapters) == 1                   # after block 3; block 4 is not used (-2)
    frames = torch.randn(2, 4, 3, 48, 48)
    assert torch.equal(with_adapters(frames), without(frames))
    assert with_adapters.num_video_tokens == 8 and with_adapters(frames).shape == (2, 8, 16)
    feats = with_adapters.encode_frames(frames)               # (2, 4, 3, 3, C) -> 2x2x2 grid by averaging
    pooled = with_adapters.pool(feats)
    expected_first = feats[:, 0:2, 0:2, 0:2].mean(dim=(1, 2, 3))
    torch.testing.assert_close(pooled[:, 0], expected_first)
    _set_alphas(with_adapters, 0.3)
    assert not torch.allclose(with_adapters(frames), without(frames))


def test_global_adapter_gradients_flow_through_frozen_blocks():
    torch.manual_seed(0)
    enc = GlobalVideoEncoder(_global_config(), llm_dim=16)
    enc.backbone.requires_grad_(False)
    _set_alphas(enc, 0.5)
    enc(torch.randn(1, 4, 3, 48, 48)).pow(2).sum().backward()
    adapter = enc.adapters[0]
    assert adapter.alpha.grad.abs() > 0 and adapter.conv.weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in enc.backbone.parameters())


def test_global_checkpoint_round_trip_open_clip_layout(tmp_path):
    torch.manual_seed(0)
    source = _randomise(GlobalVideoEncoder(_global_config(), llm_dim=16).backbone, seed=3)
    path = tmp_path / "open_clip.pt"
    torch.save({"state_dict": {f"module.visual.{k}": v for k, v in source.state_dict().items()}}, path)
    loaded = GlobalVideoEncoder(_global_config(checkpoint=str(path)), llm_dim=16)
    for key, value in source.state_dict().items():
        assert torch.equal(loaded.backbone.state_dict()[key], value), key


def test_global_checkpoint_hugging_face_clip_parity(tmp_path):
    from transformers import CLIPVisionConfig, CLIPVisionModel

    torch.manual_seed(0)
    hf = CLIPVisionModel(CLIPVisionConfig(hidden_size=32, intermediate_size=128, num_hidden_layers=4,
                                          num_attention_heads=2, image_size=48, patch_size=16,
                                          hidden_act="quick_gelu")).eval()
    hf.save_pretrained(tmp_path / "hf_clip")
    config = _global_config(checkpoint=str(tmp_path / "hf_clip"))
    enc = GlobalVideoEncoder(replace(config, quick_gelu=True), llm_dim=16).eval()
    frames = torch.randn(2, 2, 3, 48, 48)
    ref = hf(pixel_values=frames.flatten(0, 1), output_hidden_states=True).hidden_states[-2][:, 1:]
    torch.testing.assert_close(enc.encode_frames(frames).reshape(4, 9, 32), ref, rtol=1e-4, atol=1e-5)


def test_global_checkpoint_errors_name_the_config_key(tmp_path):
    with pytest.raises(FileNotFoundError, match="model.global_encoder.checkpoint"):
        GlobalVideoEncoder(_global_config(checkpoint=str(tmp_path / "missing.pt")), llm_dim=16)
    torch.save({"visual.conv1.weight": torch.zeros(1)}, tmp_path / "wrong.pt")
    with pytest.raises(ValueError, match="model.global_encoder.checkpoint"):
        GlobalVideoEncoder(_global_config(checkpoint=str(tmp_path / "wrong.pt")), llm_dim=16)


# -- grounding video encoder -------------------------------------------------------------------------

def test_interpolate_pos_embed_identity_shape_and_linear_ramp():
    pos = torch.randn(1, 8, 8, 5)
    assert torch.equal(interpolate_pos_embed(pos, (8, 8)), pos)
    assert interpolate_pos_embed(pos, (4, 6)).shape == (1, 4, 6, 5)
    ys, xs = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    slopes = torch.tensor([[0.3, -1.2], [2.0, 0.5], [0.0, 1.0]])             # (a, b) per channel
    ramp = (slopes[:, 0] * xs[..., None] + slopes[:, 1] * ys[..., None] + 0.7).unsqueeze(0)
    out = interpolate_pos_embed(ramp, (8, 8))
    y2, x2 = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    # Patch centres of the coarse grid sit at 2i + 0.5 on the fine grid.
    expected = (slopes[:, 0] * (2 * x2 + 0.5)[..., None] + slopes[:, 1] * (2 * y2 + 0.5)[..., None] + 0.7)
    torch.testing.assert_close(out[0], expected)


def _grounding_config(**kw):
    kw.setdefault("image_size", 64)
    kw.setdefault("pretrain_image_size", 64)
    return GroundingEncoderConfig(encoder_config=dict(TINY_SAM), **kw)


def test_grounding_encoder_matches_sam_and_adapters_start_as_identity():
    torch.manual_seed(0)
    enc = GroundingVideoEncoder(_grounding_config())
    _randomise(enc.backbone, seed=1)
    frames = torch.randn(2, 3, 3, 64, 64)
    reference = enc.backbone(frames.flatten(0, 1)).reshape(2, 3, 16, 4, 4)   # SAM's own forward
    ours = enc(frames)
    assert ours.shape == (2, 3, 16, 4, 4)
    torch.testing.assert_close(ours, reference)
    _set_alphas(enc, 0.5)
    assert not torch.allclose(enc(frames), reference)
    assert [n for n, _ in enc.named_parameters() if n.endswith("pos_embed")] == ["backbone.pos_embed"]


def test_random_grounding_encoder_starts_from_sincos_positions():
    pe = sincos_pos_embed((3, 5), 8)
    assert pe.shape == (1, 3, 5, 8)
    # hand-computed: channels [sin(r w0), sin(r w1), cos(r w0), cos(r w1), same for the column],
    # w_k = 1 / 10000^(k / 2)
    r, c = 2, 4
    w = torch.tensor([1.0, 0.01])
    expected = torch.cat((torch.sin(r * w), torch.cos(r * w), torch.sin(c * w), torch.cos(c * w)))
    torch.testing.assert_close(pe[0, r, c], expected)
    assert pe.flatten(1, 2).unique(dim=1).shape[1] == 15  # every position distinct
    enc = GroundingVideoEncoder(_grounding_config())
    torch.testing.assert_close(enc.pos_embed.data, sincos_pos_embed((4, 4), enc.pos_embed.shape[-1]))
    with pytest.raises(ValueError, match="multiple of 4"):
        sincos_pos_embed((2, 2), 6)


def test_grounding_checkpoint_round_trip_interpolates_pos_embed(tmp_path):
    from segment_anything.modeling import ImageEncoderViT

    torch.manual_seed(0)
    sam = _randomise(ImageEncoderViT(img_size=128, patch_size=16, embed_dim=32, depth=4, num_heads=2, out_chans=16,
                                     norm_layer=partial(nn.LayerNorm, eps=1e-6), use_rel_pos=True, window_size=4,
                                     global_attn_indexes=(1, 3)), seed=2)
    state = {f"image_encoder.{k}": v for k, v in sam.state_dict().items()}
    state["mask_decoder.iou_token.weight"] = torch.zeros(1, 16)
    torch.save(state, tmp_path / "sam.pth")
    enc = GroundingVideoEncoder(_grounding_config(checkpoint=str(tmp_path / "sam.pth"), pretrain_image_size=128))
    for key, value in sam.state_dict().items():
        if key != "pos_embed":
            assert torch.equal(enc.backbone.state_dict()[key], value), key
    assert enc.pos_embed.shape == (1, 4, 4, 32) and enc.pos_embed.requires_grad
    torch.testing.assert_close(enc.pos_embed.data, interpolate_pos_embed(sam.pos_embed.data, (4, 4)))
    assert enc(torch.randn(1, 2, 3, 64, 64)).shape == (1, 2, 16, 4, 4)
    with pytest.raises(FileNotFoundError, match="model.grounding_encoder.checkpoint"):
        GroundingVideoEncoder(_grounding_config(checkpoint=str(tmp_path / "nope.pth")))
    with pytest.raises(ValueError, match="encoder_config"):
        GroundingVideoEncoder(GroundingEncoderConfig(encoder_config={"width": 3}))


def test_grounding_adapter_gradients_flow_through_frozen_blocks():
    torch.manual_seed(0)
    enc = GroundingVideoEncoder(_grounding_config())
    enc.backbone.requires_grad_(False)
    enc.pos_embed.requires_grad_(True)
    _set_alphas(enc, 0.5)
    enc(torch.randn(1, 3, 3, 64, 64)).pow(2).sum().backward()
    for adapter in enc.adapters:
        assert adapter.alpha.grad.abs() > 0 and adapter.conv.weight.grad.abs().sum() > 0
    assert enc.pos_embed.grad.abs().sum() > 0
    assert enc.backbone.blocks[0].attn.qkv.weight.grad is None


# -- box decoder --------------------------------------------------------------------------------------

def _decoder(**kw):
    return BoxDecoder(DecoderConfig(dim=16, depth=2, num_heads=2, mlp_dim=32, **kw))


def test_box_decoder_padding_does_not_change_valid_queries():
    torch.manual_seed(0)
    dec = _decoder()
    feats, queries = torch.randn(2, 3, 16, 4, 4), torch.randn(2, 3, 16)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    out = dec(feats, queries, mask)
    assert out.shape == (2, 3, 3, 16)
    other = queries.clone()
    other[~mask] = torch.randn(int((~mask).sum()), 16) * 100
    out_other = dec(feats, other, mask)
    assert torch.equal(out.permute(0, 2, 1, 3)[mask], out_other.permute(0, 2, 1, 3)[mask])
    assert torch.count_nonzero(out.permute(0, 2, 1, 3)[~mask]) == 0
    # A valid query decodes the same whatever the other valid queries are.
    alone = dec(feats[:1], queries[:1, :1], None)
    torch.testing.assert_close(alone[0, :, 0], out[0, :, 0])


def test_box_decoder_matches_per_frame_reference_loop():
    torch.manual_seed(1)
    dec = _decoder()
    feats, queries = torch.randn(2, 3, 16, 4, 5), torch.randn(2, 2, 16)
    out = dec(feats, queries)
    pe = dec.pe_layer((4, 5)).unsqueeze(0)
    for b in range(2):
        for t in range(3):
            for p in range(2):
                tokens = torch.cat((dec.output_tokens, queries[b, p:p + 1]), 0).unsqueeze(0)
                src = feats[b, t:t + 1] + dec.no_mask_embed.view(1, 16, 1, 1)
                hs, _ = dec.transformer(src, pe, tokens)
                torch.testing.assert_close(out[b, t, p], hs[0, -1])


def test_box_decoder_loads_sam_decoder_weights(tmp_path):
    torch.manual_seed(0)
    source = _randomise(_decoder(), seed=4)
    state = {f"mask_decoder.transformer.{k}": v for k, v in source.transformer.state_dict().items()}
    state["mask_decoder.iou_token.weight"] = source.output_tokens.data[:1]
    state["mask_decoder.mask_tokens.weight"] = source.output_tokens.data[1:]
    state["prompt_encoder.no_mask_embed.weight"] = source.no_mask_embed.data.view(1, -1)
    state["prompt_encoder.pe_layer.positional_encoding_gaussian_matrix"] = torch.randn(2, 8)
    torch.save(state, tmp_path / "sam.pth")
    loaded = _decoder(checkpoint=str(tmp_path / "sam.pth"))
    for key, value in source.transformer.state_dict().items():
        assert torch.equal(loaded.transformer.state_dict()[key], value)
    assert torch.equal(loaded.output_tokens, source.output_tokens)
    assert torch.equal(loaded.pe_layer.positional_encoding_gaussian_matrix,
                       state["prompt_encoder.pe_layer.positional_encoding_gaussian_matrix"])
    with pytest.raises(FileNotFoundError, match="model.decoder.checkpoint"):
        _decoder(checkpoint=str(tmp_path / "none.pth"))
    with pytest.raises(ValueError, match="model.decoder"):
        BoxDecoder(DecoderConfig(dim=32, depth=2, num_heads=2, mlp_dim=32, checkpoint=str(tmp_path / "sam.pth")))


# -- language model -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_lm(tiny_tokenizer):
    torch.manual_seed(0)
    return GroveLanguageModel(tiny_configs()["language_model"], tokenizer=tiny_tokenizer).eval()


def _prompter(lm, n=4):
    from models.grove.prompting import GroundedCaptionPrompter

    return GroundedCaptionPrompter(lm.tokenizer, n)


def test_language_model_video_tokens_and_loss_match_hugging_face(tiny_lm):
    prompter = _prompter(tiny_lm)
    enc = prompter.encode_training(["<p>a red circle</p> moves", "a <p>blue square</p> stays still"])
    video = torch.randn(2, 4, tiny_lm.hidden_size)
    embeds = tiny_lm.build_inputs_embeds(enc["input_ids"], video)
    placeholder = enc["input_ids"] == tiny_lm.video_token_id
    torch.testing.assert_close(embeds[placeholder], video.reshape(-1, tiny_lm.hidden_size))
    torch.testing.assert_close(embeds[~placeholder], tiny_lm.embed_tokens(enc["input_ids"])[~placeholder])
    loss, hidden = tiny_lm(enc["input_ids"], enc["attention_mask"], video, enc["labels"])
    ref = tiny_lm.model(inputs_embeds=embeds, attention_mask=enc["attention_mask"], labels=enc["labels"])
    torch.testing.assert_close(loss, ref.loss)
    assert hidden.shape == (*enc["input_ids"].shape, tiny_lm.hidden_size)
    with pytest.raises(ValueError, match="video placeholder"):
        tiny_lm(enc["input_ids"], enc["attention_mask"], torch.randn(2, 5, tiny_lm.hidden_size))


def test_generate_matches_greedy_loop_on_left_padded_batch(tiny_lm):
    prompter = _prompter(tiny_lm)
    prompts = [prompter.prompt_ids(prompter.questions[0]), prompter.prompt_ids(prompter.questions[4])]
    assert len(prompts[0]) != len(prompts[1])
    batch = prompter.left_pad(prompts, tiny_lm.tokenizer.pad_token_id)
    video = torch.randn(2, 4, tiny_lm.hidden_size)
    generated = tiny_lm.generate(video, batch["input_ids"], batch["attention_mask"], max_new_tokens=6)

    def greedy(ids, v):  # no cache, no padding, full recomputation each step
        ids, out = torch.tensor([ids]), []
        for _ in range(6):
            _, hidden = tiny_lm(ids, torch.ones_like(ids), v[None])
            token = int(tiny_lm.get_output_embeddings()(hidden[0, -1]).argmax())
            if token == tiny_lm.tokenizer.eos_token_id:
                break
            out.append(token)
            ids = torch.cat((ids, torch.tensor([[token]])), 1)
        return out

    assert generated == [greedy(prompts[0], video[0]), greedy(prompts[1], video[1])]


def test_lora_injection_keeps_names_and_starts_as_identity(tiny_tokenizer, tiny_lm):
    torch.manual_seed(0)
    lora = GroveLanguageModel(replace(tiny_configs()["language_model"], lora_r=4), tokenizer=tiny_tokenizer).eval()
    names = [n for n, _ in lora.named_parameters() if ".lora_" in n]
    assert names and all("q_proj" in n or "v_proj" in n for n in names)
    assert all(p.requires_grad for p in lora.parameters())
    base = {n.replace(".base_layer", ""): p for n, p in lora.named_parameters() if ".lora_" not in n}
    with torch.no_grad():
        for name, param in tiny_lm.named_parameters():
            base[name].copy_(param)
    prompter = _prompter(tiny_lm)
    enc = prompter.encode_training(["<p>a star</p> spins"])
    video = torch.randn(1, 4, tiny_lm.hidden_size)
    torch.testing.assert_close(lora(enc["input_ids"], enc["attention_mask"], video)[1],
                               tiny_lm(enc["input_ids"], enc["attention_mask"], video)[1])   # lora_B starts at 0


# -- composed model -----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
def test_gather_det_hidden_matches_loop(seed):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, 10, 4, generator=g)
    det = torch.rand(3, 10, generator=g) > 0.6
    slots, counts = gather_det_hidden(hidden, det, num_slots=2)
    for b in range(3):
        positions = det[b].nonzero().flatten().tolist()
        assert counts[b] == len(positions)
        for k in range(2):
            expected = hidden[b, positions[k]] if k < len(positions) else torch.zeros(4)
            assert torch.equal(slots[b, k], expected)


@pytest.fixture(scope="module")
def tiny_grove(tiny_tokenizer):
    torch.manual_seed(0)
    return Grove(**tiny_configs(), tokenizer=tiny_tokenizer)


def _tiny_batch(model, captions):
    enc = model.prompter.encode_training(captions)
    b = len(captions)
    return dict(global_frames=torch.randn(b, 8, 3, 64, 64), grounding_frames=torch.randn(b, 8, 3, 128, 128), **enc)


def test_grove_forward_backward_reaches_every_trainable_part(tiny_grove):
    model = tiny_grove
    counts = model.configure_trainable(PAPER_TRAINABLE)
    assert counts["global_backbone"] == counts["grounding_backbone"] == counts["llm_blocks"] == 0
    _set_alphas(model.global_encoder, 0.5)
    _set_alphas(model.grounding_encoder, 0.5)
    model.zero_grad(set_to_none=True)
    captions = ["<p>a red circle</p> moves left past <p>a blue square</p>", "<p>a green star</p> spins"]
    batch = _tiny_batch(model, captions)
    phrase_mask = torch.tensor([[True, True], [True, False]])
    out = model(**batch, phrase_mask=phrase_mask)
    assert out.boxes.shape == (2, 8, 2, 4) and out.objectness_logits.shape == (2, 8, 2)
    assert out.num_det.tolist() == [2, 1]
    assert ((out.boxes >= 0) & (out.boxes <= 1)).all()
    assert torch.count_nonzero(out.boxes[1, :, 1]) == 4 * 8 and torch.count_nonzero(out.objectness_logits[1, :, 1]) > 0
    loss = out.lm_loss + out.boxes[:, :, 0].sum() + out.boxes[0, :, 1].sum() + out.objectness_logits.sum()
    loss.backward()

    def grad_norm(module):
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        return sum(float(g.abs().sum()) for g in grads) if grads else 0.0

    for adapters in (model.global_encoder.adapters, model.grounding_encoder.adapters):
        for adapter in adapters:
            assert adapter.alpha.grad.abs() > 0 and adapter.conv.weight.grad.abs().sum() > 0
    for part in (model.global_encoder.projector, model.query_projector, model.box_decoder.transformer,
                 model.box_head, model.objectness_head):
        assert grad_norm(part) > 0, part.__class__.__name__
    assert model.grounding_encoder.pos_embed.grad.abs().sum() > 0
    embed_grad = model.language_model.get_input_embeddings().weight.grad
    assert embed_grad[model.language_model.det_token_id].abs().sum() > 0
    assert model.language_model.get_output_embeddings().weight.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.global_encoder.backbone.parameters())
    assert all(p.grad is None for p in model.grounding_encoder.backbone.blocks.parameters())
    assert all(p.grad is None for p in model.language_model.model.model.layers.parameters())
    model.configure_trainable(PARAMETER_GROUPS)
    _set_alphas(model.global_encoder, 0.0)
    _set_alphas(model.grounding_encoder, 0.0)


def test_grove_without_phrase_mask_uses_det_count_and_split_api_agrees(tiny_grove):
    model = tiny_grove.eval()
    batch = _tiny_batch(model, ["<p>a red circle</p> moves and <p>a star</p> spins", "<p>a box</p> falls"])
    with torch.no_grad():
        out = model(**batch)
        video = model.encode_video(batch["global_frames"])
        _, queries, num_det = model.det_queries(batch["input_ids"], batch["attention_mask"], video, num_slots=2)
        mask = torch.tensor([[True, True], [True, False]])
        features = model.encode_grounding(batch["grounding_frames"])
        halves = [model.decode_boxes(features[:, s], queries, mask)[0] for s in (slice(0, 4), slice(4, 8))]
    assert out.boxes.shape == (2, 8, 2, 4) and num_det.tolist() == [2, 1]
    torch.testing.assert_close(torch.cat(halves, 1), out.boxes)   # windows decode independently
    model.train()


def test_generate_captions_returns_parseable_strings(tiny_grove):
    model = tiny_grove.eval()
    captions = model.generate_captions(torch.randn(2, 8, 3, 64, 64), max_new_tokens=5)
    assert len(captions) == 2 and all(isinstance(c, str) for c in captions)
    for caption in captions:
        tagged, plain, phrases = model.prompter.parse_generated(caption)
        assert isinstance(tagged, str) and isinstance(phrases, list)
    model.train()


def test_parameter_groups_partition_the_model(tiny_grove):
    groups = tiny_grove.parameter_groups()
    names = [n for members in groups.values() for n, _ in members]
    assert sorted(names) == sorted(n for n, _ in tiny_grove.named_parameters())
    assert [n for n, _ in groups["grounding_pos_embed"]] == ["grounding_encoder.backbone.pos_embed"]
    assert {n for n, _ in groups["llm_embeddings"]} == {"language_model.model.model.embed_tokens.weight",
                                                        "language_model.model.lm_head.weight"}
    with pytest.raises(ValueError, match="unknown parameter groups"):
        tiny_grove.configure_trainable(["adapters"])


def test_paper_sizes_instantiate_on_meta_with_published_parameter_counts(tiny_tokenizer):
    model = build_on_meta(**paper_configs(), tokenizer=tiny_tokenizer)

    def count(module):
        return sum(p.numel() for p in module.parameters())

    assert all(p.device.type == "meta" for p in model.parameters())
    assert count(model.global_encoder.backbone) == pytest.approx(0.304e9, rel=0.03)     # CLIP ViT-L/14-336
    assert count(model.grounding_encoder.backbone) == pytest.approx(0.637e9, rel=0.03)  # SAM ViT-H encoder
    assert count(model.language_model.model) == pytest.approx(6.74e9, rel=0.03)         # LLaMA-7B
    assert model.num_video_tokens == 576 and len(model.global_encoder.adapters) == 7
    assert len(model.grounding_encoder.adapters) == 4
    assert model.grounding_encoder.pos_embed.shape == (1, 32, 32, 1280)
    assert [m.in_features for m in model.query_projector if isinstance(m, nn.Linear)] == [4096, 4096]
    assert model.query_projector[-1].out_features == 256
    assert model.box_decoder.transformer.layers[0].mlp.lin1.out_features == 2048
