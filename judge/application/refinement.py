"""Caption refinement guided by the judge's explanations (VC-Inspector paper, section 4.7, prompt D.8).

A captioner writes a caption of each clip (or it comes from a predictions file, e.g. GROVE's),
the judge scores and explains it, and the captioner rewrites it from its previous caption and
the explanation with prompt D.8, for up to K rounds or, by default, until the score stops
improving (a round that scores no higher than the best so far, or gives no readable score,
ends that clip). Every round is kept: caption, score, explanation.
"""
from __future__ import annotations

from core.output_files import write_text_atomic

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

if TYPE_CHECKING:
    from judge.model.vc_inspector import VCInspectorJudge

REFINE_PROMPT = (
    "Previous Caption: {caption}\nEvaluation: {explanation}\n\n"
    "Based on the previous caption and evaluation, refine the caption to make it more accurate and detailed.\n\n"
    "Use the evaluation to find out the missing details and use the video frames to fix the missing details.\n\n"
    "Just output the refined caption, without any other text."
)
CAPTION_PROMPT = "Describe the video in detail."


class VisionLanguageCaptioner:
    """A Qwen2-VL / Qwen2.5-VL-class ``transformers`` model from a local folder, prompted with instructions.

    Greedy decoding; the same frame sampling and chat template as the judge. ``model`` may be
    given directly (an already built :class:`~judge.model.vc_inspector.VCInspectorJudge`-style wrapper).
    """

    def __init__(self, model_path: str | None = None, model: VCInspectorJudge | None = None,
                 max_new_tokens: int = 128, caption_prompt: str = CAPTION_PROMPT, **model_kwargs: Any):
        if model is None:
            if model_path is None:
                raise ValueError("VisionLanguageCaptioner needs model_path (a local Qwen2.5-VL folder) or model")
            from judge.model.vc_inspector import VCInspectorJudge

            model = VCInspectorJudge(model_path=model_path, lora=None, **model_kwargs)
        self.model = model.requires_grad_(False).eval()
        self.max_new_tokens = int(max_new_tokens)
        self.caption_prompt = caption_prompt

    def generate(self, frames: Sequence[np.ndarray], instructions: Sequence[str],
                 sampled_fps: Sequence[float | None]) -> list[str]:
        prompter = self.model.prompter
        samples = [prompter.encode(f, "", sampled_fps=s, instruction=i)
                   for f, i, s in zip(frames, instructions, sampled_fps)]
        texts = self.model.generate(prompter.collate(samples), max_new_tokens=self.max_new_tokens)
        return [" ".join(t.split()) for t in texts]

    def caption(self, frames: Sequence[np.ndarray], sampled_fps: Sequence[float | None]) -> list[str]:
        return self.generate(frames, [self.caption_prompt] * len(frames), sampled_fps)

    def refine(self, frames: Sequence[np.ndarray], captions: Sequence[str], explanations: Sequence[str],
               sampled_fps: Sequence[float | None]) -> list[str]:
        prompts = [REFINE_PROMPT.format(caption=c, explanation=e) for c, e in zip(captions, explanations)]
        return self.generate(frames, prompts, sampled_fps)


def refine_captions(judge: Any, captioner: Any, clips: Sequence[dict[str, Any]], rounds: int,
                    initial: dict[str, str] | None = None, stop_when_no_gain: bool = True,
                    max_new_tokens: int = 64, out: str | Path | None = None) -> list[dict[str, Any]]:
    """Refine the caption of every clip (``key``, ``video``, ``frames``, ``fps``) for up to ``rounds`` rewrites.

    ``initial`` gives first captions by key (a predictions file); the captioner writes the others.
    Returns one row per clip and round (0 = the first caption): ``key``, ``video``, ``round``,
    ``caption``, ``score``, ``explanation``, ``error``, ``best`` (the round kept for the clip).
    """
    if rounds < 0:
        raise ValueError(f"rounds must be >= 0, got {rounds}")
    initial = initial or {}
    frames = [c["frames"] for c in clips]
    fps = [c.get("fps") for c in clips]
    need = [i for i, c in enumerate(clips) if c["key"] not in initial]
    written = captioner.caption([frames[i] for i in need], [fps[i] for i in need]) if need else []
    captions = [initial.get(c["key"]) for c in clips]
    for i, text in zip(need, written):
        captions[i] = text
    history: list[list[dict[str, Any]]] = [[] for _ in clips]
    active = list(range(len(clips)))
    for round_ in range(rounds + 1):
        if round_ > 0:
            last = [history[i][-1] for i in active]
            rewritten = captioner.refine([frames[i] for i in active], [r["caption"] for r in last],
                                         [r["explanation"] for r in last], [fps[i] for i in active])
            for i, text in zip(active, rewritten):
                captions[i] = text
        answers = judge.score([frames[i] for i in active], [captions[i] for i in active],
                              max_new_tokens=max_new_tokens, sampled_fps=[fps[i] for i in active])
        still = []
        for i, answer in zip(active, answers):
            best = max((r["score"] for r in history[i] if r["score"] is not None), default=None)
            history[i].append({"key": clips[i]["key"], "video": clips[i]["video"], "round": round_,
                               "caption": captions[i], "score": answer.score, "explanation": answer.explanation,
                               "error": answer.error})
            improved = answer.score is not None and (best is None or answer.score > best)
            if round_ == 0 or improved or not stop_when_no_gain:
                still.append(i)
        active = still
        if not active:
            break
    rows = []
    for clip_rounds in history:
        scored = [r for r in clip_rounds if r["score"] is not None]
        best = max(scored, key=lambda r: (r["score"], -r["round"]))["round"] if scored else 0
        rows += [{**r, "best": r["round"] == best} for r in clip_rounds]
    if out is not None:
        write_text_atomic(out, "".join(json.dumps(r) + "\n" for r in rows))
    return rows
