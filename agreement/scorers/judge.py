"""The VC-Inspector judge as an agreement scorer: its 1-5 score per caption (reference-free), NaN
where its answer has no readable score line. Frames come from the suite's loader, so image
benchmarks reach the judge as one-frame videos (VC-Inspector paper, section 4.1)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from agreement.scorers.base import CaptionScorer, progress_bar


class JudgeScorer(CaptionScorer):
    """``judge`` is anything with ``score(frames, captions, max_new_tokens=...) -> answers``
    (answers with ``.score``), e.g. :class:`judge.model.vc_inspector.VCInspectorJudge`."""

    def __init__(self, judge: Any, batch_size: int = 8, max_new_tokens: int = 64, name: str = "VC-Inspector"):
        self.judge, self.batch_size, self.max_new_tokens, self.name = judge, int(batch_size), int(max_new_tokens), name

    def score(self, items, frames, progress=False):
        out = np.full(len(items), np.nan)
        starts = range(0, len(items), self.batch_size)
        for start in progress_bar(starts, len(starts), f"{self.name}: judging", progress):
            chunk = items[start:start + self.batch_size]
            answers = self.judge.score([frames.frames(i.visual) for i in chunk], [i.caption for i in chunk],
                                       max_new_tokens=self.max_new_tokens)
            for n, answer in enumerate(answers):
                if answer.score is not None:
                    out[start + n] = float(answer.score)
        return out


def load_judge_scorer(config: Sequence[str] | str | None = None, ckpt_path: str | None = None,
                      judge_path: str | None = None, base_model: str | None = None,
                      overrides: Sequence[str] = (), **kwargs: Any) -> JudgeScorer:
    """A judge from a config (+ checkpoint) or released weights (``judge_path``), as ``grove judge`` takes it."""
    from judge.application.loading import load_judge

    spec = judge_path if judge_path is not None else config
    loaded = load_judge(spec, ckpt_path=ckpt_path, overrides=list(overrides), base_model=base_model)
    kwargs.setdefault("max_new_tokens", loaded.max_new_tokens)
    return JudgeScorer(loaded.judge, **kwargs)
