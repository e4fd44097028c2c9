"""Reference-free (and reference-augmented) caption scores from CLIP-style embeddings, as formulas
on embeddings: the towers that produce them live with the caller.

* CLIPScore (Hessel et al., 2021, Eq. 1): ``w * max(cos(image, caption), 0)``, ``w = 2.5``;
  RefCLIPScore (Eq. 2): the harmonic mean of CLIPScore and ``max(max_r cos(caption, r), 0)``.
  PAC-S (Sarto et al., 2023) is the same formula on its fine-tuned towers with ``w = 2.0``;
  ViCLIPScore (VC-Inspector paper, section 4.2) the same on a video tower's clip embedding.
* EMScore (Shi et al., 2021, section 3): coarse-grained ``cos(video, caption)`` with the video
  embedding the normalised mean of the unit frame embeddings and the caption embedding its EOS
  token; fine-grained greedy matching of caption tokens (SOS..EOS, optionally idf-weighted)
  against frames (precision: weighted mean over tokens of the best frame; recall: mean over frames
  of the best token; F1). EMScore(X, V) = (F1 + coarse) / 2. With references the same matching is
  done token to token (both sides weighted), keeping per candidate the best reference (P, R, F1 and
  coarse each maximised over references, as the authors' scorer does), and EMScore(X, V, X*) is the
  mean of the video and the reference scores.

Inputs are float tensors; every embedding is L2-normalised here, so callers may pass raw tower
outputs.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Sequence

import torch
import torch.nn.functional as F

CLIP_SCORE_W = 2.5  # Hessel et al., 2021
PACS_W = 2.0  # Sarto et al., 2023


def clip_score(visual: torch.Tensor, text: torch.Tensor, w: float = CLIP_SCORE_W) -> torch.Tensor:
    """``w * max(cos(v, c), 0)`` per row of ``(N, D)`` visual and caption embeddings."""
    if visual.shape != text.shape or visual.ndim != 2:
        raise ValueError(f"clip_score needs two (N, D) tensors of one shape, got {tuple(visual.shape)} "
                         f"and {tuple(text.shape)}")
    cos = (F.normalize(visual.float(), dim=-1) * F.normalize(text.float(), dim=-1)).sum(-1)
    return w * cos.clamp(min=0)


def best_reference_cosine(text: torch.Tensor, references: Sequence[torch.Tensor]) -> torch.Tensor:
    """``max(max_r cos(c, r), 0)`` per caption; ``references[i]`` is ``(R_i, D)``, ``R_i >= 1``."""
    if len(references) != text.shape[0]:
        raise ValueError(f"{text.shape[0]} captions but {len(references)} reference sets")
    if any(r.ndim != 2 or r.shape[0] == 0 for r in references):
        raise ValueError("every caption needs at least one reference embedding (R_i, D)")
    sizes = torch.tensor([r.shape[0] for r in references])
    refs = F.normalize(torch.cat(list(references)).float(), dim=-1)
    owner = torch.repeat_interleave(torch.arange(len(references)), sizes)
    cos = (F.normalize(text.float(), dim=-1)[owner] * refs).sum(-1)
    best = torch.full((len(references),), -math.inf).scatter_reduce(0, owner, cos, reduce="amax")
    return best.clamp(min=0)


def harmonic_mean(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``2ab / (a + b)``, 0 where both are 0."""
    total = a + b
    return torch.where(total > 0, 2 * a * b / total.clamp(min=1e-12), torch.zeros_like(total))


def ref_clip_score(visual: torch.Tensor, text: torch.Tensor, references: Sequence[torch.Tensor],
                   w: float = CLIP_SCORE_W) -> torch.Tensor:
    """RefCLIPScore: harmonic mean of CLIPScore and the best reference cosine (clipped at 0)."""
    return harmonic_mean(clip_score(visual, text, w), best_reference_cosine(text, references))


def video_embedding(frames: torch.Tensor) -> torch.Tensor:
    """EMScore's clip embedding: the normalised mean of the unit frame embeddings ``(T, D) -> (D,)``."""
    return F.normalize(F.normalize(frames.float(), dim=-1).mean(0), dim=-1)


def _weighted_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return (values * weights).sum(-1) / weights.sum(-1)


def fine_grained_video(tokens: torch.Tensor, token_weights: torch.Tensor, frames: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """EMScore's fine-grained (P, R, F1) of caption tokens ``(L, D)`` against frames ``(T, D)``."""
    sim = F.normalize(tokens.float(), dim=-1) @ F.normalize(frames.float(), dim=-1).T
    precision = _weighted_mean(sim.max(1).values, token_weights.float())
    recall = sim.max(0).values.mean()
    return precision, recall, 2 * precision * recall / (precision + recall)


def fine_grained_text(tokens: torch.Tensor, token_weights: torch.Tensor, ref_tokens: torch.Tensor,
                      ref_weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """EMScore's fine-grained (P, R, F1) of caption tokens against one reference's tokens."""
    sim = F.normalize(tokens.float(), dim=-1) @ F.normalize(ref_tokens.float(), dim=-1).T
    precision = _weighted_mean(sim.max(1).values, token_weights.float())
    recall = _weighted_mean(sim.max(0).values, ref_weights.float())
    return precision, recall, 2 * precision * recall / (precision + recall)


def emscore_video(tokens: torch.Tensor, token_weights: torch.Tensor, caption: torch.Tensor,
                  frames: torch.Tensor) -> dict[str, float]:
    """EMScore(X, V): ``coarse``, ``fine_P``/``fine_R``/``fine_F`` and ``full_F`` = (fine_F + coarse) / 2."""
    coarse = (F.normalize(caption.float(), dim=-1) * video_embedding(frames)).sum()
    p, r, f = fine_grained_video(tokens, token_weights, frames)
    return {"coarse": float(coarse), "fine_P": float(p), "fine_R": float(r), "fine_F": float(f),
            "full_F": float((f + coarse) / 2)}


def emscore_references(tokens: torch.Tensor, token_weights: torch.Tensor, caption: torch.Tensor,
                       references: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> dict[str, float]:
    """EMScore(X, X*): each of ``(ref_tokens, ref_weights, ref_caption)`` matched, the best kept."""
    if not references:
        raise ValueError("emscore_references needs at least one reference")
    prf = torch.stack([torch.stack(fine_grained_text(tokens, token_weights, rt, rw)) for rt, rw, _ in references])
    refs = F.normalize(torch.stack([rc.float() for _, _, rc in references]), dim=-1)
    coarse = (refs @ F.normalize(caption.float(), dim=-1)).max()
    p, r, f = prf.max(0).values
    return {"coarse": float(coarse), "fine_P": float(p), "fine_R": float(r), "fine_F": float(f),
            "full_F": float((f + coarse) / 2)}


def emscore_combined(video: dict[str, float], references: dict[str, float]) -> dict[str, float]:
    """EMScore(X, V, X*): every component the mean of the video and the reference one."""
    return {k: (video[k] + references[k]) / 2 for k in video}


def idf_table(documents: Sequence[Sequence[int]], eos_id: int) -> tuple[dict[int, float], float]:
    """EMScore's idf weights from tokenised documents (each a sequence of token ids, padding
    included as the authors' tokeniser returns it): ``log((N + 1) / (df + 1))``; an unseen token gets
    ``log(N + 1)``; the EOS token gets the mean of the table. Returns (table, unseen weight)."""
    n = len(documents)
    counts = Counter(t for doc in documents for t in set(int(i) for i in doc))
    table = {t: math.log((n + 1) / (c + 1)) for t, c in counts.items()}
    table[int(eos_id)] = sum(table.values()) / len(table) if table else 0.0
    return table, math.log(n + 1)
