"""The VC-Inspector judge: answer parsing, rank correlations (vs scipy), the prompter's masks,
LoRA adapter save/load, the learning-rate schedule, the score callback, and fit -> test."""
import json
import math

import numpy as np
import pytest
import scipy.stats

pytestmark = pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
import torch

from metrics.correlation import JudgeCorrelation, average_ranks, kendall_tau_b, mean_human_score, spearman_rho
from models.judge import (IGNORE_INDEX, VCInspectorJudge, format_judge_answer, parse_judge_answer)

TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64,
        "vision_hidden_size": 32, "vision_depth": 1, "vision_heads": 2}
EXPLANATION = ("The caption does not accurately capture the video content. For example, the objects "
               "(blue circle) are incorrect.")


# ----------------------------------------------------------------------------- answer parsing

@pytest.mark.parametrize("text, score, explanation", [
    ("4\n\nThe caption is fine.", 4, "The caption is fine."),
    ("  2 \nwrong objects", 2, "wrong objects"),
    ("Score: 3\n\nok", 3, "ok"),
    ("5/5\n", 5, ""),
    ("1.\nbad", 1, "bad"),
])
def test_parse_reads_the_score_line(text, score, explanation):
    assert parse_judge_answer(text) == (score, explanation, None)


@pytest.mark.parametrize("text, reason", [
    ("", "empty answer"),
    ("   \n  ", "empty answer"),
    ("The caption is helpful.\n4", "no score line"),
    ("I would give it a 4 out of 5.", "prose containing a digit"),
    ("4 because the caption is accurate", "prose containing a digit"),
    ("0\n\nterrible", "outside 1..5"),
    ("6\nexcellent", "outside 1..5"),
    ("10", "outside 1..5"),
    ("-3\nx", "outside 1..5"),
])
def test_parse_reports_malformed_answers_without_a_score(text, reason):
    score, _, error = parse_judge_answer(text)
    assert score is None and reason in error


def test_answer_format_round_trips():
    for s in range(1, 6):
        assert parse_judge_answer(format_judge_answer(s, EXPLANATION)) == (s, EXPLANATION, None)


# ----------------------------------------------------------------------------- correlations

def _random_pairs(rng, n, kind):
    if kind == "discrete":  # judge scores vs generated scores: many ties
        return rng.integers(1, 6, n), rng.integers(1, 6, n)
    if kind == "averaged":  # human scores averaged over 3 annotators
        x = rng.integers(1, 6, n)
        return x, np.clip(x[:, None] + rng.integers(-2, 3, (n, 3)), 1, 5).mean(1)
    x = rng.normal(size=n)
    return x, x + rng.normal(size=n)


@pytest.mark.parametrize("kind", ["discrete", "averaged", "continuous"])
def test_correlations_match_scipy_on_random_data(kind):
    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 50, 400):
        for _ in range(5):
            x, y = _random_pairs(rng, n, kind)
            tau = scipy.stats.kendalltau(x, y, variant="b").statistic
            rho = scipy.stats.spearmanr(x, y).statistic
            assert kendall_tau_b(x, y) == pytest.approx(tau, abs=1e-12, nan_ok=True)
            assert spearman_rho(x, y) == pytest.approx(rho, abs=1e-12, nan_ok=True)


def test_kendall_pairwise_path_matches_scipy(monkeypatch):
    # with many distinct values the joint count table is too large and pairs are compared in
    # blocks; force that path (and blocks smaller than n) on data with and without ties
    import metrics.correlation as corr

    monkeypatch.setattr(corr, "_TABLE_LIMIT", 0)
    monkeypatch.setattr(corr, "_BLOCK", 64)
    rng = np.random.default_rng(1)
    for kind in ("discrete", "averaged", "continuous"):
        x, y = _random_pairs(rng, 300, kind)
        assert kendall_tau_b(x, y) == pytest.approx(scipy.stats.kendalltau(x, y).statistic, abs=1e-12)


def test_correlation_edge_cases():
    assert math.isnan(kendall_tau_b([3, 3, 3], [1, 2, 3])) and math.isnan(spearman_rho([1, 2, 3], [2, 2, 2]))
    assert math.isnan(kendall_tau_b([1], [1]))
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0 and spearman_rho([1, 2, 3], [10, 20, 30]) == 1.0
    assert average_ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]
    assert mean_human_score([[1, 2, 3], [4, np.nan, 5]]).tolist() == [2.0, 4.5]
    with pytest.raises(ValueError, match="finite"):
        kendall_tau_b([1, np.nan], [1, 2])


def test_judge_correlation_metric_skips_unparsable_and_unrated():
    metric = JudgeCorrelation()
    metric.update(torch.tensor([1.0, float("nan"), 3.0, 5.0]), torch.tensor([1.0, 2.0, 4.0, 5.0]))
    metric.update(torch.tensor([2.0, 4.0]), torch.tensor([float("nan"), 3.0]))  # first row has no reference
    out = metric.compute()
    parsed, ref = [1.0, 3.0, 5.0, 4.0], [1.0, 4.0, 5.0, 3.0]
    assert out["count"] == 5 and out["unparsable"].item() == pytest.approx(1 / 5)
    assert out["kendall_tau_b"].item() == pytest.approx(scipy.stats.kendalltau(parsed, ref).statistic)
    assert out["spearman_rho"].item() == pytest.approx(scipy.stats.spearmanr(parsed, ref).statistic)
    assert out["mean_score"].item() == pytest.approx(np.mean(parsed))


# ----------------------------------------------------------------------------- model and prompter

@pytest.fixture(scope="module")
def judge():
    return VCInspectorJudge(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                            min_pixels=28 * 28, seed=3)


def _frames(seed, t=4, size=64):
    return np.random.default_rng(seed).integers(0, 256, (t, size, size, 3), dtype=np.uint8)


def test_only_language_model_lora_trains(judge):
    trainable = [n for n, p in judge.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n and "language_model" in n for n in trainable)
    assert judge.parameter_summary()["trainable_vision"] == 0
    assert not any("lora_" in n for n, _ in judge.vision_tower().named_parameters())


def test_whole_language_model_trains_without_an_adapter():
    """The toy demo's setting: no LoRA (it would only re-parametrise weights that train anyway)."""
    judge = VCInspectorJudge(tiny=TINY, lora=None, max_pixels=56 * 56, min_pixels=28 * 28, seed=3,
                             train_embeddings=True, train_language_model=True)
    trainable = {n for n, p in judge.named_parameters() if p.requires_grad}
    language = {n for n, _ in judge.base_model.model.language_model.named_parameters(prefix="x")}
    assert not any("lora_" in n for n, _ in judge.named_parameters())
    assert len(trainable) == len(language) + 1  # + the output layer (the input embeddings are the LM's)
    assert not any(p.requires_grad for p in judge.vision_tower().parameters())
    p = judge.prompter
    batch = p.collate([p.encode(_frames(0), "a red circle.", format_judge_answer(4, "fine"))])
    judge.losses(batch)["answer"].backward()
    for name, param in judge.named_parameters():
        if param.requires_grad and "layers.0.self_attn.q_proj.weight" in name:
            assert param.grad is not None and param.grad.abs().sum() > 0


def test_prompter_masks_prompt_and_counts_video_tokens(judge):
    p = judge.prompter
    samples = [p.encode(_frames(0), "a red circle moves left.", format_judge_answer(3, EXPLANATION), sampled_fps=1.0),
               p.encode(_frames(1, size=48), "a cross.", format_judge_answer(5, "ok"))]
    batch = p.collate(samples)
    for i, s in enumerate(samples):
        n_prompt, n_answer = len(s["prompt_ids"]), len(s["answer_ids"])
        grid = s["video_grid_thw"]
        assert int((s["prompt_ids"] == p.video_token_id).sum()) == int(grid.prod()) // 4
        labels = batch["labels"][i]
        assert (labels[:n_prompt] == IGNORE_INDEX).all()  # no loss on the prompt or the video
        assert labels[n_prompt:n_prompt + n_answer].tolist() == s["answer_ids"].tolist()
        assert (labels[n_prompt + n_answer:] == IGNORE_INDEX).all()  # nor on padding
        assert s["answer_ids"][-1].item() == p.end_token_id
        width = batch["prompt_ids"].shape[1]  # prompts are left-padded for generation
        assert batch["prompt_ids"][i, width - n_prompt:].tolist() == s["prompt_ids"].tolist()
        assert batch["prompt_attention_mask"][i].sum() == n_prompt
    assert (batch["mm_token_type_ids"] == 2 * (batch["input_ids"] == p.video_token_id)).all()
    assert batch["pixel_values_videos"].shape[0] == int(batch["video_grid_thw"].prod(-1).sum())
    assert p.decode(samples[0]["answer_ids"]).startswith("3\n\nThe caption does not")
    assert samples[0]["second_per_grid_ts"] == 2.0 and samples[1]["second_per_grid_ts"] == 1.0


def test_prompter_describe_task_answers_with_the_caption_and_hides_it_from_the_prompt(judge):
    p = judge.prompter
    caption = "a red circle moves left."
    describe = p.encode(_frames(0), caption, answer=caption, task="describe")
    judged = p.encode(_frames(0), caption, answer=format_judge_answer(5, "ok"))
    prompt = p.decode(describe["prompt_ids"])
    assert "Describe the video in one sentence." in prompt and caption not in prompt
    assert caption in p.decode(judged["prompt_ids"]) and "Describe" not in p.decode(judged["prompt_ids"])
    assert p.decode(describe["answer_ids"]) == caption  # the end token is special, dropped by decode
    batch = p.collate([describe, judged])
    n = len(describe["prompt_ids"])
    assert batch["labels"][0, n:n + len(describe["answer_ids"])].tolist() == describe["answer_ids"].tolist()
    assert (batch["labels"][0, :n] == IGNORE_INDEX).all()
    with pytest.raises(ValueError, match="task must be one of"):
        p.encode(_frames(0), caption, task="caption")


def test_prompter_error_labels_mark_the_wrong_caption_tokens(judge):
    p = judge.prompter
    caption = "a white square stays still, then a red circle moves up."
    wrong = [(2, 14), (46, 54)]  # "white square", "moves up"
    sample = p.encode(_frames(0), caption, format_judge_answer(3, EXPLANATION), error_spans=wrong)
    labels, ids = sample["error_labels"], sample["prompt_ids"]
    assert labels.shape == ids.shape
    labelled = ids[labels != IGNORE_INDEX]
    assert p.decode(labelled).strip().startswith(caption)  # the caption's tokens, nothing before it
    flagged = p.decode(ids[labels == 1])
    assert flagged.replace(" ", "") == "whitesquaremovesup"
    # each flagged run of tokens decodes to one span (with the token's leading space)
    runs, current = [], []
    for token, label in zip(ids.tolist(), labels.tolist()):
        if label == 1:
            current.append(token)
        elif current:
            runs.append(p.decode(torch.tensor(current)).strip())
            current = []
    assert runs == ["white square", "moves up"]
    correct = p.encode(_frames(0), caption, error_spans=[])["error_labels"]
    assert set(correct.tolist()) == {IGNORE_INDEX, 0} and (correct != IGNORE_INDEX).sum() == len(labelled)
    with pytest.raises(ValueError, match="do not lie inside the caption"):
        p.encode(_frames(0), caption, error_spans=[(40, 90)])
    # collate: aligned with input_ids; the answer, padding and unlabelled samples are -100
    other = p.encode(_frames(1), "a cross.", format_judge_answer(5, "ok"))
    batch = p.collate([sample, other])
    n = len(ids)
    assert batch["error_labels"][0, :n].tolist() == labels.tolist()
    assert (batch["error_labels"][0, n:] == IGNORE_INDEX).all() and (batch["error_labels"][1] == IGNORE_INDEX).all()
    assert batch["input_ids"][0, :n].tolist() == ids.tolist()


def test_error_head_loss_is_binary_cross_entropy_over_labelled_caption_tokens():
    judge = VCInspectorJudge(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                             min_pixels=28 * 28, seed=3, error_head=True)
    p = judge.prompter
    samples = [p.encode(_frames(0), "a white square moves up.", format_judge_answer(3, EXPLANATION),
                        error_spans=[(2, 14)]),
               p.encode(_frames(1), "a red circle stays still.", format_judge_answer(5, "ok"), error_spans=[])]
    batch = p.collate(samples)
    losses = judge.losses(batch)
    assert losses["answer"].item() == pytest.approx(judge(batch).item(), abs=1e-6)
    with torch.no_grad():  # independent: per token, -log sigmoid(+-logit) from the last layer's states
        out = judge.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                          pixel_values_videos=batch["pixel_values_videos"], video_grid_thw=batch["video_grid_thw"],
                          second_per_grid_ts=batch["second_per_grid_ts"],
                          mm_token_type_ids=batch["mm_token_type_ids"], output_hidden_states=True)
        terms, right = [], []
        for i in range(2):
            for j, label in enumerate(batch["error_labels"][i].tolist()):
                if label == IGNORE_INDEX:
                    continue
                logit = float(out.hidden_states[-1][i, j] @ judge.error_head.weight[0] + judge.error_head.bias[0])
                terms.append(math.log1p(math.exp(-logit)) if label == 1 else math.log1p(math.exp(logit)))
                right.append((logit > 0) == (label == 1))
    assert losses["error"].item() == pytest.approx(sum(terms) / len(terms), rel=1e-5)
    assert losses["error_accuracy"].item() == pytest.approx(sum(right) / len(right))
    losses["error"].backward()
    assert judge.error_head.weight.grad is not None and judge.error_head.weight.grad.abs().sum() > 0
    lora_grads = [q.grad for n, q in judge.named_parameters() if "lora_B" in n]
    assert lora_grads and all(g is not None for g in lora_grads)  # it trains the language model's adapter
    plain = VCInspectorJudge(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                             min_pixels=28 * 28, seed=3)
    assert set(plain.losses(batch)) == {"answer"}  # no head: the paper's answer loss only



def test_score_token_weight_reweights_only_the_first_answer_token_and_error_layer_picks_the_states():
    tiny = {**TINY, "num_layers": 2}
    judge = VCInspectorJudge(tiny=tiny, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                             min_pixels=28 * 28, seed=4, error_head=True, error_layer=-2)
    p = judge.prompter
    batch = p.collate([p.encode(_frames(0), "a white square moves up.", format_judge_answer(3, EXPLANATION),
                                error_spans=[(2, 14)]),
                       p.encode(_frames(1), "a red circle.", format_judge_answer(5, "fine"), error_spans=[])])
    with torch.no_grad():
        plain, weighted = judge.losses(batch), judge.losses(batch, score_weight=4.0)
        out = judge.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                          pixel_values_videos=batch["pixel_values_videos"], video_grid_thw=batch["video_grid_thw"],
                          second_per_grid_ts=batch["second_per_grid_ts"],
                          mm_token_type_ids=batch["mm_token_type_ids"], output_hidden_states=True)
    # independent: token by token, -log softmax at the previous position; the score digit is the
    # first labelled token of each row and weighs 4, every other answer token 1
    total, weight, errors, plain_total, count = 0.0, 0.0, [], 0.0, 0
    for i in range(2):
        first = True
        for j in range(1, batch["labels"].shape[1]):
            target = int(batch["labels"][i, j])
            if target == IGNORE_INDEX:
                continue
            nll = float(-torch.log_softmax(out.logits[i, j - 1].double(), -1)[target])
            w = 4.0 if first else 1.0
            if first:
                assert p.decode(torch.tensor([target])) in "12345"  # the score line comes first
            first = False
            total, weight = total + w * nll, weight + w
            plain_total, count = plain_total + nll, count + 1
        for j, label in enumerate(batch["error_labels"][i].tolist()):
            if label != IGNORE_INDEX:  # the head reads the second-to-last entry of hidden_states
                logit = float(out.hidden_states[-2][i, j] @ judge.error_head.weight[0] + judge.error_head.bias[0])
                errors.append(math.log1p(math.exp(-logit)) if label == 1 else math.log1p(math.exp(logit)))
    # (losses() keeps only the answers' logits and drops the right padding's mask: same values)
    assert weighted["answer"].item() == pytest.approx(total / weight, rel=1e-5)
    assert plain["answer"].item() == pytest.approx(plain_total / count, rel=1e-5)
    assert plain["answer"].item() != pytest.approx(weighted["answer"].item(), rel=1e-4)
    holed = dict(batch, attention_mask=batch["attention_mask"].clone())
    holed["attention_mask"][0, 3] = 0  # not right padding: this mask must be honoured
    with torch.no_grad():
        assert judge.losses(holed)["answer"].item() != pytest.approx(plain["answer"].item(), rel=1e-6)
    assert plain["error"].item() == pytest.approx(sum(errors) / len(errors), rel=1e-5)
    with pytest.raises(ValueError, match="error_layer 3 is not an entry of hidden_states"):
        VCInspectorJudge(tiny=tiny, max_pixels=56 * 56, min_pixels=28 * 28, error_head=True, error_layer=3)

def test_lora_adapter_save_load_round_trip(tmp_path, judge):
    batch = judge.prompter.collate([judge.prompter.encode(_frames(2), "a blue square stays still.",
                                                          format_judge_answer(2, EXPLANATION))])
    with torch.no_grad():
        for name, param in judge.named_parameters():
            if "lora_" in name:
                param.copy_(torch.randn_like(param) * 0.5)
        trained = judge(batch).item()
    folder = judge.save_adapter(tmp_path / "adapter")
    from safetensors.torch import load_file

    saved = load_file(str(folder / "adapter_model.safetensors"))
    assert saved and all("lora_" in k for k in saved)  # only the adapter, not the base model
    fresh = VCInspectorJudge(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                             min_pixels=28 * 28, seed=3)
    with torch.no_grad():
        assert fresh(batch).item() != pytest.approx(trained)  # zero-initialised adapter: the base model
        fresh.load_adapter(folder)
        assert fresh(batch).item() == pytest.approx(trained, abs=1e-6)
        from_folder = VCInspectorJudge(tiny=TINY, adapter_path=str(folder), max_pixels=56 * 56,
                                       min_pixels=28 * 28, seed=3)
        assert from_folder(batch).item() == pytest.approx(trained, abs=1e-6)


def test_generation_is_greedy_and_every_answer_is_parsed_or_reported(judge):
    frames = [_frames(i) for i in range(3)]
    captions = ["a red circle moves up.", "a green square.", "a white cross stays still."]
    first = judge.score(frames, captions, max_new_tokens=6)
    assert judge.score(frames, captions, max_new_tokens=6) == first  # temperature 0
    assert all((a.score is None) != (a.error is None) for a in first)


def test_warmup_cosine_schedule():
    from lightning_modules.judge_module import WarmupCosineDecay

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-4)
    sched = WarmupCosineDecay(opt, total_steps=100, warmup_ratio=0.05, min_lr=1e-5)
    lrs = [sched.lr_at(1e-4, s) for s in range(101)]
    assert lrs[0] == pytest.approx(1e-4 / 6) and lrs[4] == pytest.approx(1e-4 * 5 / 6)
    assert lrs[5] == pytest.approx(1e-4)  # warm-up over 5 % of the steps
    assert lrs[5 + 95 // 2] == pytest.approx(1e-5 + 0.5 * 9e-5 * (1 + math.cos(math.pi * 47 / 95)))
    assert lrs[100] == pytest.approx(1e-5) and all(a >= b for a, b in zip(lrs[5:], lrs[6:]))


# ----------------------------------------------------------------------------- callback

def test_score_callback_reads_grove_outputs_and_denormalises_frames():
    from callbacks.judge_callback import CLIP_MEAN, CLIP_STD, VCInspectorScore

    cb = VCInspectorScore(judge={"tiny": TINY, "max_pixels": 56 * 56, "min_pixels": 28 * 28})
    pixels = np.random.default_rng(0).integers(0, 256, (2, 5, 32, 32, 3)).astype(np.uint8)
    mean, std = torch.tensor(CLIP_MEAN).view(1, 1, 3, 1, 1), torch.tensor(CLIP_STD).view(1, 1, 3, 1, 1)
    normalised = (torch.from_numpy(pixels).permute(0, 1, 4, 2, 3).float() / 255 - mean) / std
    batch = {"keys": ["k0", "k1"], "global_frames": normalised, "caption_positions": torch.tensor([[0, 2], [1, 4]])}
    outputs = {"predictions": {"k1": {"caption": "a dog"}, "k0": {"caption": "a cat"}}}
    keys, captions = cb.captions_of(outputs)
    assert keys == ["k1", "k0"] and captions == ["a dog", "a cat"]
    frames, _ = cb.frames_of(outputs, batch, keys)
    assert np.array_equal(frames[0], pixels[1, [1, 4]]) and np.array_equal(frames[1], pixels[0, [0, 2]])
    with pytest.raises(ValueError, match="'keys' and 'captions'"):
        cb.captions_of({"loss": 1.0})


def test_score_callback_logs_mean_score_and_unparsable_share_during_validation():
    import lightning as L

    from callbacks.judge_callback import VCInspectorScore

    class Captioner(L.LightningModule):  # stands in for GROVE: returns its captions per batch
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def validation_step(self, batch, batch_idx):
            return {"keys": batch["keys"], "captions": [f"a red circle number {k}" for k in batch["keys"]]}

    frames = torch.zeros(3, 4, 3, 32, 32)
    loader = [{"keys": ["a", "b", "c"], "global_frames": frames}, {"keys": ["d"], "global_frames": frames[:1]}]
    callback = VCInspectorScore(judge={"tiny": TINY, "max_pixels": 56 * 56, "min_pixels": 28 * 28}, max_new_tokens=4)
    trainer = L.Trainer(accelerator="cpu", logger=False, callbacks=[callback], enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.validate(Captioner(), dataloaders=torch.utils.data.DataLoader(loader, batch_size=None))
    answers = callback.judge.score([np.zeros((4, 32, 32, 3), np.uint8)] * 4,
                                   [f"a red circle number {k}" for k in "abcd"], max_new_tokens=4)
    parsed = [a.score for a in answers if a.score is not None]
    logged = trainer.callback_metrics
    assert logged["val/vc_inspector_unparsable"].item() == pytest.approx(1 - len(parsed) / 4)
    if parsed:
        assert logged["val/vc_inspector"].item() == pytest.approx(np.mean(parsed))
    else:
        assert math.isnan(logged["val/vc_inspector"].item())


# ----------------------------------------------------------------------------- fit -> test

def test_judge_fits_and_tests_through_the_cli(tmp_path):
    """Tiny synthetic data -> corruptions -> a few training steps -> test with correlations logged."""
    from cli import cli_main

    config = {
        "seed_everything": 0,
        "trainer": {"accelerator": "cpu", "devices": 1, "max_steps": 4, "limit_val_batches": 1,
                    "limit_test_batches": 2, "num_sanity_val_steps": 0, "logger": False,
                    "enable_progress_bar": False, "default_root_dir": str(tmp_path),
                    "callbacks": [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                                   "init_args": {"dirpath": str(tmp_path / "ckpt"), "save_last": True,
                                                 "save_top_k": 0}}]},
        "model": {"class_path": "lightning_modules.judge_module.JudgeModule",
                  "init_args": {"tiny": TINY, "lora": {"r": 4, "alpha": 8, "dropout": 0.05},
                                "max_pixels": 3136, "min_pixels": 784, "max_new_tokens": 4, "torch_threads": 1,
                                "error_detection_weight": 0.5, "video_feature_cache": 16,
                                "adapter_dir": str(tmp_path / "adapter"),
                                "answers_file": str(tmp_path / "answers.jsonl")}},
        "data": {"class_path": "datamodules.judge_datamodule.JudgeDataModule",
                 "init_args": {"synthetic": {"num_train": 6, "num_val": 2, "num_test": 3, "workers": 1},
                               "synthetic_root": str(tmp_path / "synthetic"),
                               **{f"{s}_file": str(tmp_path / f"{s}.jsonl") for s in ("train", "val", "test")},
                               "generate_from": {s: str(tmp_path / "synthetic" / "annotations" / f"{s}.json")
                                                 for s in ("train", "val", "test")},
                               "generator": {"in_domain": "require", "max_climb": 4, "balance": False},
                               "num_frames": 4, "batch_size": 2, "eval_batch_size": 4, "num_workers": 0}},
    }
    path = tmp_path / "judge_tiny.yaml"
    path.write_text(json.dumps(config))
    fit = cli_main(["fit", "--config", str(path)])
    assert fit.trainer.global_step == 4
    logged = fit.trainer.callback_metrics  # the auxiliary error loss is added with its weight
    assert logged["train/loss"].item() == pytest.approx(
        logged["train/answer_loss"].item() + 0.5 * logged["train/error_loss"].item(), rel=1e-5)
    assert 0.0 <= logged["train/error_accuracy"].item() <= 1.0
    cache = fit.model.judge.video_cache  # 8 training clips drawn from 6 videos: at least 2 come again
    assert cache.hits >= 2 and cache.misses >= 1
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    test = cli_main(["test", "--config", str(path), f"--ckpt_path={tmp_path / 'ckpt' / 'last.ckpt'}"])
    metrics = test.trainer.callback_metrics
    assert {"test/loss", "test/unparsable"} <= set(metrics)
    answers = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 8 and all((a["score"] is None) == (a["error"] is not None) for a in answers)
    assert metrics["test/unparsable"].item() == pytest.approx(sum(a["score"] is None for a in answers) / 8)


# ----------------------------------------------------------------------------- feature probe

def test_feature_verifier_is_causal_over_the_caption():
    from scripts.judge_feature_probe import FeatureVerifier

    torch.manual_seed(0)
    model = FeatureVerifier(feature_dim=8, vocab_size=20, dim=16, layers=2, heads=2).eval()
    video = torch.randn(2, 5, 8)
    ids = torch.randint(0, 20, (2, 6))
    padding = torch.zeros(2, 6, dtype=torch.bool)
    base = model(video, ids, padding)
    changed = ids.clone()
    changed[:, 4] = (changed[:, 4] + 1) % 20
    after = model(video, changed, padding)
    assert torch.allclose(base[:, :4], after[:, :4], atol=1e-6) and not torch.allclose(base[:, 4:], after[:, 4:])
    assert not torch.allclose(base, model(torch.randn(2, 5, 8), ids, padding))  # it reads the video
    with pytest.raises(ValueError, match="exceed the verifier's positions"):
        model(torch.randn(1, 300, 8), ids[:1], padding[:1])



def test_judge_lm_verifier_is_causal_reads_the_video_and_uses_3d_positions():
    from scripts.judge_feature_probe import JudgeLMVerifier

    judge = VCInspectorJudge(tiny={**TINY, "num_layers": 2}, max_pixels=56 * 56, min_pixels=28 * 28, seed=1)
    model = JudgeLMVerifier(judge, seed=0).eval()
    # its own fresh language model, not the judge's (training it leaves the judge untouched)
    assert not any(q is r for q in model.parameters() for r in judge.parameters())
    grid = torch.tensor([[2, 4, 4], [2, 4, 4]])  # 2 x 2 x 2 = 8 merged video tokens per clip
    layout = (grid, torch.tensor([2.0, 2.0]))
    torch.manual_seed(0)
    video = torch.randn(2, 8, 32)
    ids = torch.randint(5, 200, (2, 6))
    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[1, 4:] = True
    with torch.no_grad():
        base = model(video, ids, padding, layout)
        changed = ids.clone()
        changed[:, 3] += 1
        after = model(video, changed, padding, layout)
        assert torch.allclose(base[:, :3], after[:, :3], atol=1e-5) and not torch.allclose(base[:, 3:], after[:, 3:])
        assert not torch.allclose(base, model(torch.randn(2, 8, 32), ids, padding, layout))  # it reads the video
        # the video tokens' rotary positions follow the grid: a longer time step moves them apart
        assert not torch.allclose(base, model(video, ids, padding, (grid, torch.tensor([6.0, 6.0]))), atol=1e-5)
        # padding after a caption changes nothing before it
        shorter = model(video[1:], ids[1:, :4], padding[1:, :4], (grid[1:], layout[1][1:]))
        assert torch.allclose(base[1:, :4], shorter, atol=1e-5)

def test_feature_probe_token_labels_by_kind():
    from scripts.judge_feature_probe import token_labels

    tokenizer = VCInspectorJudge(tiny=TINY, max_pixels=56 * 56, min_pixels=28 * 28).prompter.tokenizer
    row = {"original_caption": "a red circle moves left, then a blue square stays still.",
           "caption": "a red circle moves up, then a white square stays still.",
           "substitutions": [{"kind": "action", "old": "moves left", "new": "moves up"},
                             {"kind": "object", "old": "blue square", "new": "white square"}]}
    ids, labels, kinds = token_labels(row, tokenizer)
    assert len(ids) == len(labels) == len(kinds)
    flagged = {k: tokenizer.decode([i for i, kind in zip(ids, kinds) if kind == k]).replace(" ", "") for k in (1, 2)}
    assert flagged == {1: "whitesquare", 2: "movesup"}
    assert labels == [int(k > 0) for k in kinds]
    assert token_labels({"caption": "a red circle."}, tokenizer) is None  # no substitution record


@pytest.mark.slow
@pytest.mark.parametrize("verifier", ["scratch", "judge"])
def test_feature_probe_runs_on_the_judge_config(tiny_synthetic_root, tmp_path, verifier):
    from scripts.judge_feature_probe import main
    from tests.conftest import ROOT

    overrides = ["--data.init_args.synthetic={num_train: 6, num_val: 2, num_test: 2, duration_s: 2.0, workers: 1}",
                 f"--data.init_args.synthetic_root={tiny_synthetic_root}", "--data.init_args.num_workers=0",
                 "--data.init_args.num_frames=4", "--model.init_args.vision_checkpoint=null",
                 "--data.init_args.generator={backend: rule, in_domain: require, max_climb: 4, balance: false}",
                 *[f"--data.init_args.{s}_file={tmp_path / f'{s}.jsonl'}" for s in ("train", "val", "test")],
                 "--data.init_args.generate_from={" + ", ".join(
                     f"{s}: {tiny_synthetic_root / 'annotations' / f'{s}.json'}" for s in ("train", "val", "test")) + "}"]
    report = main(["--config", str(ROOT / "configs" / "judge_demo.yaml"), "--steps", "3", "--eval-every", "2",
                   "--batch-size", "4", "--verifier", verifier, "--clip", "1.0", "--", *overrides])
    assert report["verifier"] == verifier and [h["step"] for h in report["history"]] == [2, 3]
    last = report["history"][-1]
    assert 0.0 <= last["token_accuracy"] <= 1.0 and 0.0 < last["base_rate_unchanged"] <= 1.0
    assert set(last) >= {"accuracy_unchanged", "accuracy_object", "accuracy_action", "kendall_tau_b", "train_loss"}


def test_error_head_warns_once_and_counts_batches_without_labels():
    from lightning_modules.judge_module import JudgeModule

    module = JudgeModule(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                         min_pixels=28 * 28, error_detection_weight=1.0)
    p = module.prompter
    unlabelled = p.collate([p.encode(_frames(0), "a red circle.", format_judge_answer(4, "fine"))])  # no spans
    unlabelled["keys"] = ["a"]
    with pytest.warns(UserWarning, match="no caption token to flag"):
        loss = module.training_step(unlabelled, 0)
    assert loss.item() == pytest.approx(module.judge(unlabelled).item(), rel=1e-5)  # the answer loss alone
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module.training_step(unlabelled, 1)
    assert not [w for w in caught if "no caption token to flag" in str(w.message)]  # once, then only counted
    assert module._unlabelled_batches == 2
    labelled = p.collate([p.encode(_frames(1), "a white square.", format_judge_answer(3, "x"), error_spans=[(2, 14)])])
    labelled["keys"] = ["b"]
    module.training_step(labelled, 2)
    assert module._unlabelled_batches == 2
