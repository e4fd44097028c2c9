"""CLIPScore / RefCLIPScore / PAC-S / RefPAC-S, EMScore and ViCLIPScore on CLIP-style towers
(formulas in :mod:`metrics.functional.embedding_scores`).

A clip's visual embedding for CLIPScore and PAC-S is EMScore's: the normalised mean of its unit
frame embeddings (an image is a one-frame clip, so this is the image embedding). CLIPScore and
PAC-S prepend ``prefix`` to each candidate as their authors do ("A photo depicts"); set it to ""
for captions that do not describe photos.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from agreement.benchmarks.items import CaptionItem
from agreement.media import FrameLoader
from agreement.scorers.base import CaptionScorer, progress_bar, require_references
from metrics.functional.embedding_scores import (
    CLIP_SCORE_W,
    clip_score,
    emscore_combined,
    emscore_references,
    emscore_video,
    idf_table,
    ref_clip_score,
    video_embedding,
)


def _frame_embeddings(towers, items: Sequence[CaptionItem], frames: FrameLoader, progress: bool, name: str
                      ) -> list[torch.Tensor]:
    """``(T, D)`` frame embeddings per item, each distinct visual encoded once."""
    cache: dict[tuple, torch.Tensor] = {}
    out = []
    for item in progress_bar(items, len(items), f"{name}: frames", progress):
        key = item.visual.cache_key
        if key not in cache:
            cache[key] = towers.encode_frames(frames.frames(item.visual))
        out.append(cache[key])
    return out


def _text_embeddings(towers, captions: Sequence[str], batch_size: int = 256) -> dict[str, torch.Tensor]:
    unique = list(dict.fromkeys(captions))
    rows = [towers.encode_text(unique[i:i + batch_size]) for i in range(0, len(unique), batch_size)]
    return dict(zip(unique, torch.cat(rows))) if rows else {}


class ClipScoreScorer(CaptionScorer):
    """CLIPScore (``w = 2.5``) or, with ``references``, RefCLIPScore; PAC-S with ``w = 2.0`` on its towers."""

    def __init__(self, towers, w: float = CLIP_SCORE_W, references: bool = False, prefix: str = "A photo depicts",
                 name: str = "CLIPScore"):
        self.towers, self.w, self.uses_references, self.name = towers, float(w), bool(references), name
        self.prefix = prefix.strip() + " " if prefix and prefix.strip() else ""

    def score(self, items, frames, progress=False):
        if self.uses_references:
            require_references(self, items)
        visual = torch.stack([video_embedding(f) for f in _frame_embeddings(self.towers, items, frames, progress,
                                                                            self.name)])
        captions = [self.prefix + i.caption for i in items]
        text = _text_embeddings(self.towers, captions)
        cand = torch.stack([text[c] for c in captions])
        if not self.uses_references:
            return clip_score(visual, cand, self.w).numpy().astype(np.float64)
        refs_text = _text_embeddings(self.towers, [r for i in items for r in i.references])
        refs = [torch.stack([refs_text[r] for r in i.references]) for i in items]
        return ref_clip_score(visual, cand, refs, self.w).numpy().astype(np.float64)


class EMScoreScorer(CaptionScorer):
    """EMScore(X, V) full F1, or EMScore(X, V, X*) with ``references``; ``component`` picks another
    output (``coarse``, ``fine_F``, ...). ``idf`` weights tokens as the authors' VATEX-Eval script does
    (document frequencies over the references when used, else over the candidates)."""

    def __init__(self, towers, references: bool = False, idf: bool = True, component: str = "full_F",
                 name: str = "EMScore"):
        self.towers, self.uses_references, self.idf, self.component, self.name = \
            towers, bool(references), bool(idf), component, name

    def _tokens(self, captions: Sequence[str], table: dict[int, float] | None, unseen: float):
        unique = list(dict.fromkeys(captions))
        out = {}
        for start in range(0, len(unique), 256):
            chunk = unique[start:start + 256]
            emb, ids, mask = self.towers.encode_tokens(chunk)
            for caption, e, i, m in zip(chunk, emb, ids, mask):
                n = int(m.sum())
                weights = torch.ones(n) if table is None else torch.tensor(
                    [table.get(int(t), unseen) for t in i[:n]], dtype=torch.float32)
                out[caption] = (e[:n], weights, e[n - 1])
        return out

    def score(self, items, frames, progress=False):
        if self.uses_references:
            require_references(self, items)
        table, unseen = None, 0.0
        if self.idf:
            corpus = [r for i in items for r in i.references] if self.uses_references else [i.caption for i in items]
            corpus = list(dict.fromkeys(corpus))
            table, unseen = idf_table(self.towers.tokenize(corpus).tolist(), self.towers.eos_id)
        texts = self._tokens([i.caption for i in items] + [r for i in items for r in i.references], table, unseen)
        frame_emb = _frame_embeddings(self.towers, items, frames, progress, self.name)
        out = np.empty(len(items))
        for n, (item, f) in enumerate(zip(items, frame_emb)):
            tokens, weights, caption = texts[item.caption]
            result = emscore_video(tokens, weights, caption, f)
            if self.uses_references:
                result = emscore_combined(result, emscore_references(tokens, weights, caption,
                                                                     [texts[r] for r in item.references]))
            out[n] = result[self.component]
        return out


class ViClipScoreScorer(CaptionScorer):
    """ViCLIPScore (VC-Inspector paper, section 4.2): CLIPScore's formula on a video tower's clip
    embedding. ``towers`` needs ``encode_clip((T, H, W, 3) uint8) -> (D,)`` and ``encode_text``."""

    def __init__(self, towers: Any, w: float = CLIP_SCORE_W, name: str = "ViCLIPScore"):
        self.towers, self.w, self.name = towers, float(w), name

    def score(self, items, frames, progress=False):
        cache: dict[tuple, torch.Tensor] = {}
        visual = []
        for item in progress_bar(items, len(items), f"{self.name}: clips", progress):
            key = item.visual.cache_key
            if key not in cache:
                cache[key] = self.towers.encode_clip(frames.frames(item.visual))
            visual.append(cache[key])
        text = _text_embeddings(self.towers, [i.caption for i in items])
        return clip_score(torch.stack(visual), torch.stack([text[i.caption] for i in items]), self.w).numpy()
