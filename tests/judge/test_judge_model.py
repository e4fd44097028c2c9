"""VCInspectorJudge and its prompter: what trains, the prompt's masks and labels, losses, adapters, generation."""
import math

import pytest
import torch

from judge.model.prompt_format import IGNORE_INDEX, format_judge_answer
from judge.model.vc_inspector import VCInspectorJudge
from tests.judge.judge_fixtures import EXPLANATION, TINY
from tests.judge.judge_fixtures import random_frames as _frames


@pytest.fixture(scope="module")
def judge():
    return VCInspectorJudge(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                            min_pixels=28 * 28, seed=3)



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


