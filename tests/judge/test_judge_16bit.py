"""The judge in true bf16 (``.to(torch.bfloat16)``, what Lightning's ``bf16-true`` does): every weight
bf16, its rotary tables fp32, and it scores and computes the loss the fp32 judge computes, within bf16's
rounding."""
import copy

import torch

from judge.model.prompt_format import format_judge_answer
from judge.model.vc_inspector import VCInspectorJudge
from tests.judge.judge_fixtures import TINY
from tests.judge.judge_fixtures import random_frames as _frames


def test_the_judge_runs_in_bf16_with_fp32_rotary_tables():
    judge = VCInspectorJudge(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                             min_pixels=28 * 28, seed=3).eval()
    half = copy.deepcopy(judge).to(torch.bfloat16)
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}
    rotary = {n: b.dtype for n, b in half.named_buffers() if n.endswith(("inv_freq", "original_inv_freq"))}
    assert len(rotary) == 4 and set(rotary.values()) == {torch.float32}  # the vision and the language tables
    p = judge.prompter
    batch = p.collate([p.encode(_frames(0), "a red circle.", format_judge_answer(4, "fine"))])
    with torch.no_grad():
        full_loss = float(judge.losses(batch)["answer"])
        half_loss = float(half.losses(batch)["answer"])
    # the loss is a mean of log-probabilities over a vocabulary of ~1000: bf16 moves it by a few hundredths
    assert abs(half_loss - full_loss) <= 0.05 * abs(full_loss)
    (answer,) = half.score([_frames(0)], ["a red circle."], max_new_tokens=4)
    assert answer.explanation is not None or answer.error is not None  # decoded and parsed, right or wrong
