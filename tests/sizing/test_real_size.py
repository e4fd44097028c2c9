"""The real-size GROVE without a GPU: forward and backward on meta storage, parameter counts, memory estimator.

The model of configs/official/grove.yaml is built on the meta device (no weights, no memory) and
run under ``FakeTensorMode``: every operation computes shapes and dtypes only. The prompt's token
ids stay real values inside the fake tensors, so the model's own token bookkeeping (video
placeholders, [DET] positions, answer positions) runs as in training.
"""
import json
import math

import pytest
import torch
import torch._subclasses.fake_tensor as fake_tensor_module
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from models.grove.configuration import read_stacked_yaml
from sizing.memory_estimator import ParameterSummary, Workload, activation_values, build_meta_module
from tests.fixtures.paths import ROOT

OFFICIAL = ROOT / "configs" / "official" / "grove.yaml"
KEYS_REAL = ROOT / "tests" / "fixtures" / "official_grove" / "keys_real.json"
FRAMES, CLIP_PX, SAM_PX = 8, 336, 512
# Parts of the released checkpoint GROVE's grounded captioning does not use, so not built here:
# GLaMM's region encoder, SAM's mask up-scaling, hyper-network MLPs and IoU head, and the prompt
# encoder's point and mask embeddings.
UNUSED_PREFIXES = ("model.region_encoder.",
                   "model.grounding_encoder.mask_decoder.output_upscaling.",
                   "model.grounding_encoder.mask_decoder.output_hypernetworks_mlps.",
                   "model.grounding_encoder.mask_decoder.iou_prediction_head.",
                   "model.grounding_encoder.prompt_encoder.point_embeddings.",
                   "model.grounding_encoder.prompt_encoder.not_a_point_embed.",
                   "model.grounding_encoder.prompt_encoder.mask_downscaling.")


@pytest.fixture(scope="module")
def official():
    config = read_stacked_yaml([OFFICIAL])
    # recomputation changes no shape, and the LLM's bf16 checkpoint wrapper re-enters with
    # parameters FakeTensorMode has not converted: shapes are checked without it
    config["model"]["init_args"]["language_model"]["gradient_checkpointing"] = False
    return build_meta_module(config)


@pytest.fixture
def constant_tokens(monkeypatch):
    # Fake tensors keep the values of small constant tensors (here: up to a few thousand token ids)
    # so that data-dependent steps (masks, counts, gathers) on them run on real values.
    monkeypatch.setattr(fake_tensor_module, "CONSTANT_NUMEL_LIMIT", 1 << 16)


def fake_state(model: torch.nn.Module, mode: FakeTensorMode) -> dict[str, torch.Tensor]:
    """Fake CPU tensors for a meta model's parameters and buffers (``requires_grad`` kept)."""
    state = {}
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        fake = FakeTensor(mode, tensor, torch.device("cpu"))
        state[name] = fake.requires_grad_(True) if tensor.requires_grad else fake
    return state


def official_prompt(model, phrases: int = 3, text_before: int = 40, caption: int = 30):
    """Token ids, attention mask and labels of a grounded-caption prompt: 576 video placeholders, then
    a caption whose phrases end in [DET]."""
    lm = model.language_model
    video = model.num_video_tokens
    ordinary = lm.get_input_embeddings().num_embeddings - 16  # ids below GROVE's added tokens
    text = lambda start, n: [3 + (start + i) % ordinary for i in range(n)]  # noqa: E731
    ids = [1] + text(100, text_before) + [lm.video_token_id] * video + text(200, 10)
    answer_start = len(ids)
    words = text(300, caption)
    for k in range(phrases):  # "... <p> phrase </p> [DET] ..."
        words[4 + 8 * k] = lm.det_token_id
    ids = torch.tensor([ids + words + [2]])
    labels = ids.clone()
    labels[:, :answer_start] = -100
    return ids, torch.ones_like(ids), labels, answer_start


def saved_bytes_counter(exclude: dict[str, torch.Tensor]):
    """A saved-tensor hook pair that records the bytes of every distinct storage autograd keeps."""
    parameter_storages = {t.untyped_storage()._cdata for t in exclude.values()}
    seen: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage._cdata not in parameter_storages:
            seen[storage._cdata] = storage.nbytes()
        return tensor

    return seen, pack


def run_fake(model, frames: int, ids, mask, labels, phrases: int, count_saved: bool = False):
    mode = FakeTensorMode()
    state = fake_state(model, mode)
    constant = [mode.fake_tensor_converter.from_real_tensor(mode, x, make_constant=True)
                for x in (ids, mask, labels, torch.ones(1, phrases, dtype=torch.bool))]
    seen, pack = saved_bytes_counter(state)
    with mode, torch.autograd.graph.saved_tensors_hooks(pack if count_saved else (lambda t: t), lambda t: t):
        global_frames = torch.empty(1, frames, 3, CLIP_PX, CLIP_PX)
        grounding_frames = torch.empty(1, frames, 3, SAM_PX, SAM_PX)
        out = torch.func.functional_call(model, state, (global_frames, grounding_frames, *constant[:2]),
                                         {"labels": constant[2], "phrase_mask": constant[3]})
    return out, state, mode, sum(seen.values())


def expected_official_parameters() -> int:
    """The released file's tensors - the parts not used - its one buffer + the output projection
    open_clip's ViT has and Hugging Face's CLIPVisionModel has not."""
    keys = json.loads(KEYS_REAL.read_text())
    shapes, kinds = keys["keys"], keys["kinds"]
    released = sum(math.prod(s) for s in shapes.values())
    assert released == keys["total_numel"] == 8_420_595_521
    unused = sum(math.prod(s) for k, s in shapes.items() if k.startswith(UNUSED_PREFIXES))
    buffers = sum(math.prod(s) for k, s in shapes.items() if kinds[k] == "buffer")
    clip_output_projection = 1024 * 768  # ViT-L/14's width x CLIP's joint embedding size
    return released - unused - buffers + clip_output_projection


def test_official_parameter_count_reconciles_with_released_checkpoint(official):
    keys = json.loads(KEYS_REAL.read_text())
    shapes, kinds = keys["keys"], keys["kinds"]
    params = ParameterSummary.of(official.model)
    assert params.total == expected_official_parameters() == sum(p.numel() for p in official.model.parameters())
    # the trained parameters: the released run's, less the unused decoder parts, plus SAM's
    # no-mask embedding (added to the features here; frozen in the released run)
    released_trainable = sum(math.prod(s) for k, s in shapes.items() if kinds[k] == "trainable")
    unused_trainable = sum(math.prod(s) for k, s in shapes.items()
                           if kinds[k] == "trainable" and k.startswith(UNUSED_PREFIXES))
    no_mask_embed = math.prod(shapes["model.grounding_encoder.prompt_encoder.no_mask_embed.weight"])
    assert params.trainable == released_trainable - unused_trainable + no_mask_embed
    assert official.model.language_model.get_input_embeddings().weight.shape == (keys["vocab_size"], 4096)


def test_meta_forward_and_backward_at_official_shapes(official, constant_tokens):
    model = official.model
    phrases = 3
    ids, mask, labels, _ = official_prompt(model, phrases)
    assert ids.shape[1] == 1 + 40 + 576 + 10 + 30 + 1
    out, state, mode, _ = run_fake(model, FRAMES, ids, mask, labels, phrases)
    assert out.lm_loss.shape == ()
    assert out.boxes.shape == (1, FRAMES, phrases, 4)
    assert out.objectness_logits.shape == (1, FRAMES, phrases)
    assert int(out.num_det[0]) == phrases  # the [DET]s were found among the real token ids
    with mode:
        frames = torch.empty(1, FRAMES, 3, CLIP_PX, CLIP_PX)
        sub = {k[len("global_encoder."):]: v for k, v in state.items() if k.startswith("global_encoder.")}
        video = torch.func.functional_call(model.global_encoder, sub, (frames,))
        sub = {k[len("grounding_encoder."):]: v for k, v in state.items() if k.startswith("grounding_encoder.")}
        features = torch.func.functional_call(model.grounding_encoder, sub,
                                              (torch.empty(1, FRAMES, 3, SAM_PX, SAM_PX),))
        (out.lm_loss + out.boxes.sum() + out.objectness_logits.sum()).backward()
    assert video.shape == (1, 576, 4096)
    assert features.shape == (1, FRAMES, 256, SAM_PX // 16, SAM_PX // 16)
    # gradients reach exactly the parameters the paper trains, each in its own shape
    for name, tensor in state.items():
        if tensor.requires_grad:
            assert tensor.grad is not None and tensor.grad.shape == tensor.shape, name
        else:
            assert tensor.grad is None, name


@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_formula_matches_saved_tensors(constant_tokens, checkpointing):
    """The memory estimator's per-block formulas against the bytes autograd actually keeps (fp32, real
    encoder sizes, 2 frames, a 2-layer LLM at hidden 4096). With checkpointing, only the block inputs
    are kept; the recomputed block's activations exist during backward only, not counted here."""
    config = read_stacked_yaml([OFFICIAL])
    for part in ("global_encoder", "grounding_encoder", "language_model"):
        config["model"]["init_args"][part]["gradient_checkpointing"] = checkpointing
    config["model"]["init_args"]["language_model"]["torch_dtype"] = "float32"
    module = build_meta_module(config, layers=2)
    model = module.model
    model.train()
    phrases, frames = 3, 2
    ids, mask, labels, answer_start = official_prompt(model, phrases)
    _, _, _, saved = run_fake(model, frames, ids, mask, labels, phrases, count_saved=True)
    workload = Workload(frames=frames, text_tokens=ids.shape[1] - model.num_video_tokens,
                        answer_tokens=int((labels[:, 1:] != -100).sum()), phrases=phrases)
    parts = activation_values(model, workload, checkpointing)
    predicted = 4 * (sum(parts.values()) - parts["recompute"])
    assert predicted == pytest.approx(saved, rel=0.03)  # measured: within 1 %


def test_memory_estimator_script_prints_the_table(capsys):
    from command_line.estimate_memory import main

    main(["--config", str(OFFICIAL), "--gpus", "8", "--max-micro-batch", "2"])
    text = capsys.readouterr().out
    assert f"parameters: {expected_official_parameters():,} " in text
    rows = [line.split() for line in text.splitlines() if line.startswith(("ddp ", "zero2 ", "fsdp "))]
    assert len(rows) == 3 * 2 * 2
    by_key = {(r[0], r[1], int(r[2])): float(r[7]) for r in rows}
    # sharding never costs memory; checkpointing never costs memory; a larger batch never saves any
    for ckpt in ("off", "on"):
        for mb in (1, 2):
            assert by_key[("fsdp", ckpt, mb)] < by_key[("zero2", ckpt, mb)] < by_key[("ddp", ckpt, mb)]
        for strategy in ("ddp", "zero2", "fsdp"):
            assert by_key[(strategy, ckpt, 1)] < by_key[(strategy, ckpt, 2)]
    for strategy in ("ddp", "zero2", "fsdp"):
        assert by_key[(strategy, "on", 2)] < by_key[(strategy, "off", 2)]


# -- the options real-size training uses: attention implementation and gradient checkpointing -----
def _tiny_language_model(seed: int = 0, **overrides):
    from dataclasses import replace

    from models.grove.configuration import tiny_configs
    from models.grove.language_model import GroveLanguageModel

    torch.manual_seed(seed)
    return GroveLanguageModel(replace(tiny_configs()["language_model"], **overrides))


def test_sdpa_attention_matches_eager():
    eager = _tiny_language_model(attn_implementation="eager")
    sdpa = _tiny_language_model(attn_implementation="sdpa")
    assert sdpa.model.config._attn_implementation == "sdpa"
    embeds = torch.randn(2, 9, eager.hidden_size)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0  # right padding, as the training batches
    ref = eager.model.get_decoder()(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
    out = sdpa.model.get_decoder()(inputs_embeds=embeds, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(out[0], ref[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out[1, :6], ref[1, :6], rtol=1e-4, atol=1e-5)


def test_attention_implementation_errors_name_the_key():
    import importlib.util

    with pytest.raises(ValueError, match="model.language_model.attn_implementation"):
        _tiny_language_model(attn_implementation="flash")
    if importlib.util.find_spec("flash_attn") is None:
        with pytest.raises(ImportError, match="model.language_model.attn_implementation.*flash-attn"):
            _tiny_language_model(attn_implementation="flash_attention_2")


def test_gradient_checkpointing_gives_the_same_step():
    """Checkpointing in CLIP, SAM and the LLM recomputes activations: same loss, same gradients."""
    results = []
    for checkpointing in (False, True):
        config = read_stacked_yaml([ROOT / "configs" / "official" / "tiny.yaml"])
        for part in ("global_encoder", "grounding_encoder", "language_model"):
            config["model"]["init_args"][part]["gradient_checkpointing"] = checkpointing
        torch.manual_seed(0)
        model = build_meta_module(config, device="cpu").model.train()
        ids, mask, labels, _ = official_prompt(model, phrases=2, text_before=5, caption=20)
        g = torch.Generator().manual_seed(1)
        size = (model.global_encoder.config.image_size, model.grounding_encoder.config.image_size)
        global_frames = torch.randn(1, 4, 3, size[0], size[0], generator=g)
        grounding_frames = torch.randn(1, 4, 3, size[1], size[1], generator=g)
        seen, pack = saved_bytes_counter(dict(model.named_parameters()))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(global_frames, grounding_frames, ids, mask, labels=labels,
                        phrase_mask=torch.ones(1, 2, dtype=torch.bool))
        loss = out.lm_loss + out.boxes.square().sum() + out.objectness_logits.sum()
        loss.backward()
        grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
        results.append((loss.detach(), grads, sum(seen.values())))
    (loss_off, grads_off, saved_off), (loss_on, grads_on, saved_on) = results
    assert saved_on < saved_off / 2  # the blocks kept only their inputs
    torch.testing.assert_close(loss_on, loss_off)
    assert grads_off.keys() == grads_on.keys() and any(n.startswith("grounding_encoder.adapters") for n in grads_on)
    for name in grads_off:
        torch.testing.assert_close(grads_on[name], grads_off[name], rtol=1e-4, atol=1e-6, msg=name)
