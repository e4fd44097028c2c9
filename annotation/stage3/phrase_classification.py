"""Stage 3, temporally consistent boxes (GROVE paper, sec. 3 and supp. D): each frame-level phrase is
classified into one of the video-level phrases of Stage 2, or into None.

* :class:`LLMPhraseClassifier` asks an LLM with the Figure 12 prompt, one question per distinct
  frame-level phrase of a clip; answers naming no known class are retried, then the clip is
  rejected with the reason.
* :class:`EmbeddingPhraseClassifier`, the offline backend: cosine similarity of sentence
  embeddings (the project's text encoders), the most similar class wins if it reaches
  ``threshold``, else None. As the prompt demands, a human is never put in an object class nor
  the reverse (``keep_humans_apart``). Embeddings are memoised per phrase: across clips the same
  phrases come back all the time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from annotation.llm.chat import ChatBackend, ChatBackendError, ask_with_retries
from annotation.llm.prompts import parse_category_answer, stage3_messages
from annotation.outcomes import Rejection

HUMAN_WORDS = {
    "person", "people", "man", "men", "woman", "women", "boy", "boys", "girl", "girls", "child", "children",
    "kid", "kids", "baby", "lady", "guy", "human", "someone", "chef", "cook", "worker", "player", "hand",
    "hands", "finger", "fingers", "arm", "arms", "he", "she", "individual", "adult", "teenager", "user",
}
_PHRASE_BREAKS = {"in", "on", "with", "of", "at", "near", "holding", "who", "that", "is", "are", "wearing", "and"}


def is_human(phrase: str) -> bool:
    """Does the phrase's head (its words before the first preposition or clause) name a person?"""
    for word in phrase.lower().replace(",", " ").split():
        if word in _PHRASE_BREAKS:
            break
        if word.strip("'s") in HUMAN_WORDS:
            return True
    return False


@dataclass(frozen=True)
class ClassificationTask:
    """Distinct frame-level ``phrases`` of a clip to put into its video-level ``categories``."""

    key: str
    phrases: tuple[str, ...]
    categories: tuple[str, ...]


class EmbeddingPhraseClassifier:
    """Offline Stage 3: nearest video-level phrase by embedding cosine, None below ``threshold``.

    ``encoder``: ``minilm`` (the packaged all-MiniLM-L6-v2), ``exact`` or a local Hugging Face
    encoder folder (:func:`metrics.text_encoder.build_text_encoder`).
    """

    name = "embedding"

    def __init__(self, encoder: str = "minilm", threshold: float = 0.5, keep_humans_apart: bool = True,
                 memo_size: int = 200_000, text_encoder=None):
        self.encoder_spec, self.threshold = encoder, float(threshold)
        self.keep_humans_apart = bool(keep_humans_apart)
        self._encoder = text_encoder
        _ = self.encoder  # load now, not inside the first timed batch
        self.memo: dict[str, np.ndarray] = {}
        self.memo_size = int(memo_size)

    @property
    def encoder(self):
        if self._encoder is None:
            from metrics.text_encoder import build_text_encoder

            self._encoder = build_text_encoder(self.encoder_spec)
        return self._encoder

    def _embed(self, texts: list[str]) -> None:
        new = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if not new:
            return
        if self.encoder_spec == "exact" or len(self.memo) + len(new) > self.memo_size:
            self.memo.clear()  # exact-match embeddings are only comparable within one call
            new = list(dict.fromkeys(texts))
        import torch.nn.functional as F

        emb = F.normalize(self.encoder.encode(new).float(), dim=-1).numpy()
        self.memo.update(zip(new, emb))

    def classify(self, tasks: list[ClassificationTask]) -> list[dict[str, str | None] | Rejection]:
        self._embed([p for t in tasks for p in (*t.phrases, *t.categories)])
        out = []
        for task in tasks:
            if not task.phrases:
                out.append({})
                continue
            if not task.categories:
                out.append({p: None for p in task.phrases})
                continue
            p = np.stack([self.memo[x] for x in task.phrases])
            c = np.stack([self.memo[x] for x in task.categories])
            sim = p @ c.T
            if self.keep_humans_apart:
                human_p = np.array([is_human(x) for x in task.phrases])
                human_c = np.array([is_human(x) for x in task.categories])
                sim = np.where(human_p[:, None] == human_c[None, :], sim, -np.inf)
            best = sim.argmax(1)
            keep = sim[np.arange(len(best)), best] >= self.threshold
            out.append({x: (task.categories[b] if k else None) for x, b, k in zip(task.phrases, best, keep)})
        return out


class LLMPhraseClassifier:
    """Stage 3 with an LLM and the Figure 12 prompt (one question per distinct frame-level phrase)."""

    name = "llm"

    def __init__(self, chat: ChatBackend, max_retries: int = 2):
        self.chat, self.max_retries = chat, int(max_retries)

    def classify(self, tasks: list[ClassificationTask]) -> list[dict[str, str | None] | Rejection]:
        questions = [(i, phrase) for i, t in enumerate(tasks) for phrase in t.phrases]
        conversations = [stage3_messages(phrase, tasks[i].categories) for i, phrase in questions]

        def parse(q: int, text: str) -> str | None:
            return parse_category_answer(text, tasks[questions[q][0]].categories)

        try:
            answers = ask_with_retries(self.chat, conversations, parse, self.max_retries) if questions else []
        except ChatBackendError as err:
            return [Rejection(t.key, "stage3", f"LLM backend failed: {err}", retryable=True) for t in tasks]
        out: list[dict | Rejection] = [{} for _ in tasks]
        for (i, phrase), (value, reason) in zip(questions, answers):
            if isinstance(out[i], Rejection):
                continue
            if reason is not None:
                out[i] = Rejection(tasks[i].key, "stage3", f"LLM class of {phrase!r}: {reason}")
            else:
                out[i][phrase] = value
        return out
