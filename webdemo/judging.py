"""The VC-Inspector judge's score and explanation of each clip's predicted caption.

The judge is loaded once with :func:`judge.application.loading.load_judge` (a judge config with its checkpoint,
a judge ``.ckpt``, a released Hugging Face folder or a LoRA adapter folder) and scores through
:func:`judge.application.scoring.score_pairs`, so a clip is read and rated exactly as ``grove judge score``
rates a (video, caption) pair with the same clip range.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from judge.application.loading import LoadedJudge, load_judge
from judge.application.scoring import score_pairs

# rows of {key, video, caption, start_frame, end_frame} -> one {score, explanation, error} per row
ClipJudge = Callable[[Sequence[dict[str, Any]]], list[dict[str, Any]]]


def clip_judge(loaded: LoadedJudge, batch_size: int = 4) -> ClipJudge:
    """A :data:`ClipJudge` over a loaded judge (videos given by absolute path)."""

    def judge(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        scored, _ = score_pairs(loaded.judge, list(rows), None, video_root="/", num_frames=loaded.num_frames,
                                batch_size=batch_size, max_new_tokens=loaded.max_new_tokens, progress=False)
        by_key = {row["key"]: row for row in scored}
        return [{"score": by_key[r["key"]]["score"], "explanation": by_key[r["key"]]["explanation"],
                 "error": by_key[r["key"]]["error"]} for r in rows]

    return judge


def load_clip_judge(spec: str | Sequence[str], ckpt_path: str | None = None,
                    overrides: Sequence[str] = ()) -> ClipJudge:
    return clip_judge(load_judge(spec, ckpt_path=ckpt_path, overrides=overrides))
