"""The phrases of a run, each embedded once: recall compares every (GT, predicted) pair of boxes
by the cosine similarity of their phrases, and the same few thousand phrases recur across clips,
batches and evaluations, so embeddings are looked up by phrase id instead of recomputed.

One vocabulary lives per text encoder for the life of the encoder (:func:`vocabulary_of`), and is
emptied when it holds more than ``max_phrases`` phrases so memory stays bounded on a
million-clip set. Phrase ids are only meaningful between two clears: callers turn labels into ids
and look up embeddings within one update.
"""
from __future__ import annotations

import weakref
from typing import Iterable

import numpy as np
import torch
import torch.nn.functional as F

MAX_PHRASES = 65536  # about 100 MB of float32 embeddings at MiniLM's 384 dimensions

_VOCABULARIES: "weakref.WeakKeyDictionary[object, PhraseVocabulary]" = weakref.WeakKeyDictionary()


class PhraseVocabulary:
    """Phrase -> id, and the unit-norm float32 embedding of every id encoded so far."""

    def __init__(self, max_phrases: int = MAX_PHRASES) -> None:
        self.max_phrases = int(max_phrases)
        self.clear()

    def clear(self) -> None:
        self.index: dict[str, int] = {}
        self.phrases: list[str] = []
        self.embeddings = np.zeros((0, 1), dtype=np.float32)
        self.encoded = np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return len(self.phrases)

    def make_room(self) -> None:
        """Empty the vocabulary when it is over its size bound (call between updates, never inside one)."""
        if len(self.phrases) > self.max_phrases:
            self.clear()

    def ids(self, phrases: Iterable[str], count: int = -1) -> np.ndarray:
        """The id of each phrase (``int64``); new phrases are added."""
        phrases = list(phrases)
        index = self.index
        new = list(set(phrases).difference(index))
        if new:
            index.update(zip(new, range(len(self.phrases), len(self.phrases) + len(new))))
            self.phrases.extend(new)
        return np.fromiter(map(index.__getitem__, phrases), dtype=np.int64, count=len(phrases))

    def embed(self, encoder, ids: np.ndarray) -> np.ndarray:
        """Embeddings ``(len(vocabulary), D)`` with at least ``ids`` encoded.

        The phrases still missing are encoded in one call, in sorted order (a fresh vocabulary
        hands the encoder exactly the list :func:`metrics.text_encoder.encode_unique` would).
        """
        if len(self.encoded) < len(self.phrases):
            self.encoded = np.concatenate([self.encoded, np.zeros(len(self.phrases) - len(self.encoded), bool)])
        ids = np.unique(ids)
        missing = ids[~self.encoded[ids]]
        if len(missing):
            texts = [self.phrases[i] for i in missing]
            order = np.argsort(np.asarray(texts, dtype=str), kind="stable")
            texts, missing = [texts[i] for i in order], missing[order]
            emb = encoder.encode(texts)
            if not isinstance(emb, torch.Tensor) or emb.ndim != 2 or emb.shape[0] != len(texts):
                raise ValueError(f"text encoder {type(encoder).__name__}.encode returned "
                                 f"{getattr(emb, 'shape', type(emb))} for {len(texts)} phrases; "
                                 "expected a (N, D) tensor")
            # Cosine similarity is the dot product only for unit vectors; guard against an encoder that forgets.
            emb = F.normalize(emb.detach().float().cpu(), dim=-1).numpy()
            self._store(missing, emb)
            self.encoded[missing] = True
        if len(self.embeddings) < len(self.phrases):
            self._store(np.zeros(0, np.int64), np.zeros((0, self.embeddings.shape[1]), np.float32))
        return self.embeddings

    def _store(self, rows: np.ndarray, emb: np.ndarray) -> None:
        width = max(self.embeddings.shape[1], emb.shape[1])  # an exact-match encoder grows its width
        table = np.zeros((max(len(self.phrases), 1), width), dtype=np.float32)
        table[:len(self.embeddings), :self.embeddings.shape[1]] = self.embeddings[:len(table)]
        table[rows, :emb.shape[1]] = emb
        self.embeddings = table


def vocabulary_of(encoder) -> PhraseVocabulary:
    """The run's vocabulary of ``encoder`` (a fresh one for an encoder that cannot be weakly referenced)."""
    try:
        vocabulary = _VOCABULARIES.get(encoder)
        if vocabulary is None:
            vocabulary = _VOCABULARIES[encoder] = PhraseVocabulary()
    except TypeError:
        return PhraseVocabulary()
    vocabulary.make_room()
    return vocabulary
