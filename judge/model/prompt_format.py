"""VC-Inspector's prompt and answer format (VC-Inspector paper, prompt D.6).

The prompt asks for a 1-5 score line, then an explanation. :func:`parse_judge_answer` reads the
score line back and reports every answer it cannot read instead of turning it into a number.
Shared by the in-process judge, the endpoint client and the refinement loop.
"""
from __future__ import annotations

import re
from typing import NamedTuple

IGNORE_INDEX = -100
JUDGE_INSTRUCTION = (
    "<caption>{caption}</caption> You are given a video and a caption describing the video content. Please rate "
    "the helpfulness, relevance, accuracy, level of detail of the caption. The overall score should be on a scale "
    "of 1 to 5, where a higher score indicates better overall performance. Please first output a single line "
    "containing only one integer indicating the score. In the subsequent line, please provide a comprehensive "
    "explanation of your evaluation, avoiding any potential bias. STRICTLY FOLLOW THE FORMAT."
)
SYSTEM_PROMPT = "You are a helpful assistant."
VIDEO_TOKEN = "<|video_pad|>"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|video_pad|>", "<|image_pad|>")
TEMPLATES = ("qwen", "plain")
_SCORE_LINE = re.compile(r"^(?:score\s*[:=]?\s*)?([+-]?\d+)\s*(?:/\s*5)?\s*\.?$", re.IGNORECASE)


def format_judge_answer(score: int, explanation: str | None) -> str:
    """Prompt D.6's answer: the score line, a blank line, the explanation; the score line alone when
    ``explanation`` is None (training without explanations, VC-Inspector paper Table 7)."""
    return f"{int(score)}" if explanation is None else f"{int(score)}\n\n{explanation}"


class JudgeAnswer(NamedTuple):
    score: int | None
    explanation: str
    error: str | None


def parse_judge_answer(text: str) -> JudgeAnswer:
    """``(score, explanation, error)`` from a generated answer; score is None when unreadable.

    The first non-empty line must be the score line: an integer (optionally ``Score:`` before or
    ``/5`` after it) and nothing else, in 1..5. A digit inside prose, a missing or out-of-range
    score is reported in ``error``; the explanation is whatever follows the first line.
    """
    lines = text.strip().splitlines()
    if not lines:
        return JudgeAnswer(None, "", "empty answer")
    first, rest = lines[0].strip(), "\n".join(lines[1:]).strip()
    match = _SCORE_LINE.match(first)
    if match is None:
        reason = "first line is prose containing a digit, not a score line" if re.search(r"\d", first) \
            else "no score line (the first line holds no integer)"
        return JudgeAnswer(None, text.strip(), reason)
    score = int(match.group(1))
    if not 1 <= score <= 5:
        return JudgeAnswer(None, rest, f"score {score} is outside 1..5")
    return JudgeAnswer(score, rest, None)
