"""Dense phrase-word pretext for randomly initialised vision towers (the tiny configs only).

The real GROVE starts from pre-trained CLIP and SAM towers; the tiny demo towers start random, and
trained from scratch through the caption and box losses alone they learn too slowly for a 15-minute
budget (README, "The demo"). This pretext stands in for their pre-training: every patch of every
frame predicts the words of the phrase whose box covers the patch centre (multi-label, e.g.
``{red, circle}``; an uncovered patch predicts no word). Targets come from the grounded
annotations themselves, so the pretext needs no extra data and works for any vocabulary.

For the grounding tower a second, geometric target stands in for what SAM's features carry: each
covered patch also regresses the box (absolute, frame-normalised ``cxcywh``) of the smallest visible
object over it. Word targets alone leave the features without absolute position, and the box
decoder, which reads positions from the features it attends to, then cannot learn boxes from them.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

STOPWORDS = frozenset({"a", "an", "the", "of", "some", "this", "that", "his", "her", "its", "their"})


def phrase_words(phrase: str) -> list[str]:
    """Lower-cased content words of a phrase (articles and determiners dropped)."""
    return [w for w in re.findall(r"[a-z0-9]+", phrase.lower()) if w not in STOPWORDS]


def build_word_vocabulary(phrases: Iterable[str], min_count: int = 1) -> list[str]:
    """Sorted content words occurring at least ``min_count`` times over ``phrases``."""
    counts: dict[str, int] = {}
    for phrase in phrases:
        for word in set(phrase_words(phrase)):
            counts[word] = counts.get(word, 0) + 1
    return sorted(w for w, c in counts.items() if c >= min_count)


def phrase_word_matrix(phrases: Sequence[Sequence[str]], vocabulary: Sequence[str], num_slots: int) -> Tensor:
    """``(B, num_slots, V)`` multi-hot words of each clip's phrases (padded slots and unknown words: 0)."""
    index = {w: i for i, w in enumerate(vocabulary)}
    out = torch.zeros(len(phrases), num_slots, len(vocabulary))
    for b, clip in enumerate(phrases):
        for p, phrase in enumerate(list(clip)[:num_slots]):
            ids = [index[w] for w in phrase_words(phrase) if w in index]
            out[b, p, ids] = 1.0
    return out


def _frame_share(boxes: Tensor, frame_fraction: Tensor | None) -> Tensor:
    """``(B, 2)`` (height, width) share of the input the frame covers; all ones when None."""
    if frame_fraction is None:
        return boxes.new_ones(boxes.shape[0], 2)
    return frame_fraction.to(boxes.device, boxes.dtype)


def _patch_centres(boxes: Tensor, grid_hw: tuple[int, int], frame_fraction: Tensor | None) -> tuple[Tensor, Tensor]:
    """Patch centres in source-frame coordinates: ys ``(B, 1, 1, h)``, xs ``(B, 1, 1, w)``."""
    b = boxes.shape[0]
    h, w = grid_hw
    frame_fraction = _frame_share(boxes, frame_fraction)
    ys = ((torch.arange(h, device=boxes.device, dtype=boxes.dtype) + 0.5) / h).view(1, h) / frame_fraction[:, :1]
    xs = ((torch.arange(w, device=boxes.device, dtype=boxes.dtype) + 0.5) / w).view(1, w) / frame_fraction[:, 1:]
    return ys.view(b, 1, 1, h), xs.view(b, 1, 1, w)


def _covering(boxes: Tensor, present: Tensor, grid_hw, frame_fraction) -> tuple[Tensor, Tensor, Tensor]:
    """``inside (B, T, P, h, w)``: visible box p holds the patch centre; also the centres."""
    ys, xs = _patch_centres(boxes, grid_hw, frame_fraction)
    cx, cy, bw, bh = boxes.unbind(-1)  # (B, T, P)
    x1, x2, y1, y2 = cx - bw / 2, cx + bw / 2, cy - bh / 2, cy + bh / 2
    inside_y = (ys >= y1.unsqueeze(-1)) & (ys < y2.unsqueeze(-1))  # (B, T, P, h)
    inside_x = (xs >= x1.unsqueeze(-1)) & (xs < x2.unsqueeze(-1))  # (B, T, P, w)
    inside = inside_y.unsqueeze(-1) & inside_x.unsqueeze(-2) & present.bool().unsqueeze(-1).unsqueeze(-1)
    return inside, ys, xs


def _overlapping(boxes: Tensor, present: Tensor, grid_hw, frame_fraction, min_overlap: float) -> Tensor:
    """``(B, T, P, h, w)``: visible box p and the patch share at least ``min_overlap`` of the smaller one's area."""
    h, w = grid_hw
    frame_fraction = _frame_share(boxes, frame_fraction)
    edges_y = (torch.arange(h + 1, device=boxes.device, dtype=boxes.dtype) / h).view(1, -1) / frame_fraction[:, :1]
    edges_x = (torch.arange(w + 1, device=boxes.device, dtype=boxes.dtype) / w).view(1, -1) / frame_fraction[:, 1:]
    cx, cy, bw, bh = (v.unsqueeze(-1) for v in boxes.unbind(-1))  # (B, T, P, 1)

    def overlap(centre, size, edges):  # -> (B, T, P, n): 1-D intersection of box and patch
        lo, hi = edges[:, None, None, :-1], edges[:, None, None, 1:]
        return ((centre + size / 2).minimum(hi) - (centre - size / 2).maximum(lo)).clamp(min=0), hi - lo

    over_y, cell_h = overlap(cy, bh, edges_y)
    over_x, cell_w = overlap(cx, bw, edges_x)
    shared = over_y.unsqueeze(-1) * over_x.unsqueeze(-2)  # (B, T, P, h, w)
    smaller = (bw * bh).unsqueeze(-1).minimum(cell_h.unsqueeze(-1) * cell_w.unsqueeze(-2))
    return (shared >= min_overlap * smaller) & (shared > 0) & present.bool().unsqueeze(-1).unsqueeze(-1)


def patch_word_targets(boxes: Tensor, present: Tensor, words: Tensor, grid_hw: tuple[int, int],
                       frame_fraction: Tensor | None = None, min_overlap: float | None = None) -> Tensor:
    """Multi-hot words per patch: ``(B, T, h, w, V)``.

    ``boxes (B, T, P, 4)`` normalised ``cxcywh`` on the source frame, ``present (B, T, P)``,
    ``words (B, P, V)``. A patch takes the words of every visible phrase whose box holds the patch
    centre; with ``min_overlap``, of every visible phrase whose box and the patch share at least
    that fraction of the smaller one's area instead (an object smaller than a patch then always
    names one, wherever it lies). ``frame_fraction (B, 2)`` is the ``(height, width)`` share of the
    square input that the frame covers when it is padded bottom-right (SAM's preprocessing);
    ``None`` = the whole input.
    """
    if min_overlap is None:
        inside, _, _ = _covering(boxes, present, grid_hw, frame_fraction)
    else:
        inside = _overlapping(boxes, present, grid_hw, frame_fraction, float(min_overlap))
    # (B,T,P,h,w) x (B,P,V) -> (B,T,h,w,V): a word is on if any covering phrase has it
    covered = torch.einsum("btphw,bpv->bthwv", inside.to(words.dtype), words.to(boxes.device, words.dtype))
    return (covered > 0).to(boxes.dtype)


def patch_box_targets(boxes: Tensor, present: Tensor, grid_hw: tuple[int, int],
                      frame_fraction: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Box to regress per patch: ``targets (B, T, h, w, 4)`` and ``covered (B, T, h, w)``.

    A patch whose centre lies in one or more visible boxes takes the smallest of them (its object is
    in front, or inside the larger box); its target is that box, normalised ``cxcywh`` on the source
    frame as GROVE predicts it. Uncovered patches have zero targets and ``covered`` False.
    """
    inside, _, _ = _covering(boxes, present, grid_hw, frame_fraction)  # (B, T, P, h, w)
    area = (boxes[..., 2] * boxes[..., 3])[..., None, None].expand_as(inside)
    smallest = area.masked_fill(~inside, float("inf")).argmin(dim=2)  # (B, T, h, w)
    covered = inside.any(dim=2)
    b, t = smallest.shape[:2]
    chosen = boxes.gather(2, smallest.flatten(2).unsqueeze(-1).expand(b, t, -1, 4))  # (B, T, h*w, 4)
    targets = chosen.view(*smallest.shape, 4) * covered.unsqueeze(-1).to(boxes.dtype)
    return targets, covered


class PatchBoxHead(nn.Module):
    """Linear patch box regressor and its loss: L1 summed over ``cxcywh``, averaged over covered patches."""

    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(dim, 4)

    def forward(self, features: Tensor) -> Tensor:
        """``(..., dim)`` -> boxes ``(..., 4)``."""
        return self.linear(features)

    def loss(self, boxes: Tensor, targets: Tensor, covered: Tensor, frame_mask: Tensor | None = None) -> Tensor:
        """``boxes``/``targets (B, T, h, w, 4)``, ``covered (B, T, h, w)``, ``frame_mask (B, T)``; 0 when
        no patch is covered."""
        keep = covered if frame_mask is None else covered & frame_mask.bool()[:, :, None, None]
        count = keep.sum().clamp(min=1).to(boxes.dtype)
        return ((boxes - targets.to(boxes.dtype)).abs().sum(-1) * keep.to(boxes.dtype)).sum() / count


class PatchWordHead(nn.Module):
    """Linear patch classifier and its loss: BCE per (patch, word), positives up-weighted.

    Objects cover few patches, so the positives of a word are rare; ``pos_weight`` keeps the head
    from settling on "no word anywhere".
    """

    def __init__(self, dim: int, vocabulary_size: int, pos_weight: float = 10.0):
        super().__init__()
        self.linear = nn.Linear(dim, vocabulary_size)
        self.pos_weight = float(pos_weight)

    def forward(self, features: Tensor) -> Tensor:
        """``(..., dim)`` -> word logits ``(..., V)``."""
        return self.linear(features)

    def loss(self, logits: Tensor, targets: Tensor, frame_mask: Tensor | None = None) -> tuple[Tensor, dict]:
        """BCE averaged over (patch, word) pairs of valid frames; also the micro F1 of the words predicted
        (logit > 0) against the targets."""
        weight = torch.ones_like(targets) if frame_mask is None else \
            frame_mask.to(targets.dtype).view(*frame_mask.shape, 1, 1, 1).expand_as(targets)
        pos_weight = torch.full((targets.shape[-1],), self.pos_weight, device=targets.device, dtype=logits.dtype)
        loss = F.binary_cross_entropy_with_logits(logits, targets, weight=weight, pos_weight=pos_weight,
                                                  reduction="sum") / weight.sum().clamp(min=1)
        with torch.no_grad():
            predicted, actual, valid = logits > 0, targets.bool(), weight > 0
            hits = (predicted & actual & valid).sum()
            f1 = 2 * hits / ((predicted & valid).sum() + (actual & valid).sum()).clamp(min=1)
        return loss, {"word_f1": f1.to(logits.dtype)}


def pretext_optimizer(params, lr: float, steps: int):
    """AdamW over ``params`` (made trainable) with 10 % linear warm-up, then linear decay to 0 at ``steps``."""
    params = list(params)
    for p in params:
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    warmup = max(1, steps // 10)

    def factor(step: int) -> float:
        return min(1.0, (step + 1) / warmup) * max(0.0, 1.0 - max(0, step - warmup) / max(1, steps - warmup))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


MOTION_WORDS = ("left", "right", "up", "down", "still", "appears", "disappears")


def slice_motion_words(boxes: Tensor, present: Tensor, temporal_patch: int, still: float = 0.02) -> Tensor:
    """What each object does within each temporal patch: ``(B, T // temporal_patch, P, len(MOTION_WORDS))``.

    A vision token of a video model sees ``temporal_patch`` consecutive frames, so it can tell how an
    object moves between them but not what the object does over the clip; these per-slice targets
    are what a clip-level action ("enters from the right", "hides behind the wall") is made of.
    From the first to the last frame of a slice, an object visible in both moves along the axis of
    its larger centre displacement (``left``/``right``/``up``/``down``, image axes: y grows
    downwards) or, when that displacement is below ``still`` (frame-normalised), is ``still``; one
    visible only at the end ``appears``, only at the start ``disappears``. ``boxes (B, T, P, 4)``
    are normalised ``cxcywh``, ``present (B, T, P)``.
    """
    b, num_frames, slots = present.shape
    if num_frames % temporal_patch:
        raise ValueError(f"{num_frames} frames do not make temporal patches of {temporal_patch}")
    t = num_frames // temporal_patch
    grouped_boxes = boxes.view(b, t, temporal_patch, slots, 4)
    grouped_present = present.bool().view(b, t, temporal_patch, slots)
    first, last = grouped_present[:, :, 0], grouped_present[:, :, -1]
    dx = grouped_boxes[:, :, -1, :, 0] - grouped_boxes[:, :, 0, :, 0]
    dy = grouped_boxes[:, :, -1, :, 1] - grouped_boxes[:, :, 0, :, 1]
    horizontal = dx.abs() >= dy.abs()
    moving = dx.abs().maximum(dy.abs()) >= still
    both = first & last
    words = torch.stack([
        both & moving & horizontal & (dx < 0),
        both & moving & horizontal & (dx > 0),
        both & moving & ~horizontal & (dy < 0),
        both & moving & ~horizontal & (dy > 0),
        both & ~moving,
        ~first & last,
        first & ~last,
    ], dim=-1)
    return words.to(boxes.dtype)


__all__ = ["STOPWORDS", "pretext_optimizer", "phrase_words", "build_word_vocabulary", "phrase_word_matrix",
           "patch_word_targets", "patch_box_targets", "PatchWordHead", "PatchBoxHead",
           "MOTION_WORDS", "slice_motion_words"]
