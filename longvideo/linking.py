"""Video-level entities from per-clip phrase tubes: one Hungarian assignment per clip.

GROVE grounds each short clip on its own, so "a knife" in one clip and "the knife" three clips
later are unrelated phrases. The GROVE paper's annotation pipeline links frame-level phrases to
video-level ones ("track by language", Stages 2-3); here the same idea works one level up: the
phrases of each clip, taken in order, are assigned to the entities seen so far, scoring every
(phrase, entity) pair by up to three cues:

- box continuity: the IoU of the boxes on grid frames both share (overlapping clips), or of the
  entity's last box with the phrase's first box when they lie on adjacent grid frames;
- phrase meaning: cosine similarity of the phrase's sentence embedding with the entity's mean;
- appearance: cosine similarity of the grounding features pooled inside the boxes.

A pair's score is the weighted mean of the cues it has (a cue is missing, not zero, when the
frames are not adjacent or no embedding was given). Pairs scoring below ``min_score`` are not
linked; unassigned phrases start new entities. The assignment is one-to-one, so two phrases of
one clip never become one entity, and two look-alike objects side by side are told apart by
their boxes while an object that left and came back is recognised by meaning and appearance.
"""
from __future__ import annotations

from core.box_ops import numpy_box_iou_pairwise as box_iou

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment


@dataclass
class ClipTubes:
    """The phrases of one clip and their box tubes on the clip's grid frames.

    Attributes:
        frames: ``(F,)`` sorted source-frame indices of the clip's grid frames.
        phrases: the clip's ``P`` phrases.
        boxes: ``(P, F, 4)`` xyxy boxes (any units, the same for all clips).
        present: ``(P, F)`` whether phrase ``p`` has a box on frame ``f``.
        scores: ``(P, F)`` box confidences (optional; 1 where missing).
        text: ``(P, D)`` L2-normalised phrase embeddings (optional).
        appearance: ``(P, D')`` appearance features (optional; normalised here).
        masks: ``(P, F)`` object array of each box's COCO RLE mask, None where a box has none
            (optional; carried into the entities' tubes, not used for linking).
    """

    frames: np.ndarray
    phrases: list[str]
    boxes: np.ndarray
    present: np.ndarray
    scores: np.ndarray | None = None
    text: np.ndarray | None = None
    appearance: np.ndarray | None = None
    masks: np.ndarray | None = None

    def __post_init__(self):
        self.frames = np.asarray(self.frames, dtype=np.int64)
        P, F = len(self.phrases), len(self.frames)
        self.boxes = np.asarray(self.boxes, dtype=np.float64).reshape(P, F, 4)
        self.present = np.asarray(self.present, dtype=bool).reshape(P, F)
        self.scores = (np.ones((P, F)) if self.scores is None
                       else np.asarray(self.scores, dtype=np.float64).reshape(P, F))
        if self.masks is not None and np.shape(self.masks) != (P, F):
            raise ValueError(f"ClipTubes: masks are shaped {np.shape(self.masks)}, the tubes ({P}, {F})")


@dataclass
class LinkingWeights:
    """How the cues combine: weights of the weighted mean, and the score a link needs.

    The defaults are the best of a small sweep (box weight 0.5-4, full IoU 0.3-1, threshold 0.2-0.8)
    of the linking step alone on a 10-minute long synthetic video of seed 1 (docs/long_video.md
    reports seed 0).

    ``full_box_iou``: the IoU at which box continuity counts in full (the box cue is
    ``min(1, IoU / full_box_iou)``): a small object moving fast overlaps its last box only partly.
    ``min_box_iou``: a pair whose box cue is below it is never linked, whatever the other cues say
    (an object does not jump away within one grid step); None turns the veto off.
    ``adjacent_frames``: the largest distance in source frames between an entity's last box and a
    phrase's first box for the box cue to apply (default: set from the grid step by the caller;
    0 means shared frames only).
    """

    box: float = 2.0
    text: float = 1.0
    appearance: float = 1.0
    min_score: float = 0.6
    adjacent_frames: int = 6
    min_box_iou: float | None = 0.01
    full_box_iou: float = 0.5


@dataclass
class Entity:
    """One object over the whole video: its phrases (clip index, phrase), its tube and the tube's masks
    (on the frames whose kept box came with one)."""

    id: int
    mentions: list[tuple[int, str]] = field(default_factory=list)
    tube: dict[int, tuple[np.ndarray, float]] = field(default_factory=dict)  # frame -> (box, score)
    masks: dict[int, dict] = field(default_factory=dict)  # frame -> COCO RLE of the tube's box there
    text_sum: np.ndarray | None = None
    appearance_sum: np.ndarray | None = None

    @property
    def name(self) -> str:
        """Its most informative phrase: the one with the most words, then the most frequent, then the first."""
        phrases = [p for _, p in self.mentions]
        count = {p: phrases.count(p) for p in phrases}
        return max(dict.fromkeys(phrases), key=lambda p: (len(p.split()), count[p]))

    @property
    def last_frame(self) -> int:
        return max(self.tube)

    def add(self, clip: int, tubes: ClipTubes, p: int) -> None:
        self.mentions.append((clip, tubes.phrases[p]))
        for f in np.flatnonzero(tubes.present[p]):
            frame = int(tubes.frames[f])
            score = float(tubes.scores[p, f])
            if frame not in self.tube or score > self.tube[frame][1]:
                self.tube[frame] = (tubes.boxes[p, f].copy(), score)
                mask = tubes.masks[p, f] if tubes.masks is not None else None
                if mask is None:
                    self.masks.pop(frame, None)
                else:
                    self.masks[frame] = mask
        if tubes.text is not None:
            self.text_sum = _accumulate(self.text_sum, tubes.text[p])
        if tubes.appearance is not None:
            self.appearance_sum = _accumulate(self.appearance_sum, tubes.appearance[p])


def _accumulate(total: np.ndarray | None, vector: np.ndarray) -> np.ndarray:
    v = _unit(np.asarray(vector, dtype=np.float64))
    return v if total is None else total + v


def _unit(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norm, 1e-12)


def box_continuity(entities: Sequence[Entity], tubes: ClipTubes, adjacent_frames: int) -> np.ndarray:
    """``(P, E)`` box cue: mean IoU on the frames both have boxes on, else the IoU of the entity's
    latest box before the phrase's first box when at most ``adjacent_frames`` apart; NaN otherwise.

    Only entities seen within ``adjacent_frames`` of the clip's start can have one, so only those
    are looked at (the cost does not grow with the video's length)."""
    P, E = len(tubes.phrases), len(entities)
    out = np.full((P, E), np.nan)
    if P == 0 or E == 0 or len(tubes.frames) == 0:
        return out
    recent = [e for e, ent in enumerate(entities) if ent.tube and ent.last_frame >= tubes.frames[0] - adjacent_frames]
    if not recent:
        return out
    has_any = tubes.present.any(1)
    first = np.argmax(tubes.present, axis=1)
    first_frame = tubes.frames[first]
    first_box = tubes.boxes[np.arange(P), first]
    for e in recent:
        frames = np.fromiter(sorted(entities[e].tube), dtype=np.int64)
        boxes = np.stack([entities[e].tube[int(f)][0] for f in frames])
        # shared frames: the entity's boxes on the clip's frames
        pos = np.clip(np.searchsorted(frames, tubes.frames), 0, len(frames) - 1)
        on_clip = frames[pos] == tubes.frames  # (F,)
        shared = tubes.present & on_clip[None, :]  # (P, F)
        iou = box_iou(tubes.boxes, boxes[pos][None])  # (P, F)
        n_shared = shared.sum(1)
        mean_shared = (iou * shared).sum(1) / np.maximum(n_shared, 1)
        # otherwise: the entity's latest box strictly before the phrase's first box
        before = np.searchsorted(frames, first_frame, side="left") - 1
        gap = first_frame - frames[np.maximum(before, 0)]
        adjacent = has_any & (before >= 0) & (gap <= adjacent_frames)
        touch = box_iou(first_box, boxes[np.maximum(before, 0)])
        out[:, e] = np.where(n_shared > 0, mean_shared, np.where(adjacent, touch, np.nan))
    return out


def cosine(a: np.ndarray | None, sums: Sequence[np.ndarray | None]) -> np.ndarray | None:
    """``(P, E)`` cosine similarity of the phrases' vectors with the entities' mean vectors (NaN where
    an entity has none); None when the clip has no vectors."""
    if a is None or len(sums) == 0:
        return None
    a = _unit(np.asarray(a, dtype=np.float64))
    out = np.full((len(a), len(sums)), np.nan)
    have = [e for e, s in enumerate(sums) if s is not None]
    if have:
        out[:, have] = a @ _unit(np.stack([sums[e] for e in have])).T
    return out


def pair_scores(entities: Sequence[Entity], tubes: ClipTubes, weights: LinkingWeights) -> np.ndarray:
    """``(P, E)`` weighted mean of the available cues (NaN where a pair has none, or is vetoed by its boxes)."""
    P, E = len(tubes.phrases), len(entities)
    iou = box_continuity(entities, tubes, weights.adjacent_frames)
    cues = [(weights.box, np.minimum(1.0, iou / max(weights.full_box_iou, 1e-6))),
            (weights.text, cosine(tubes.text, [e.text_sum for e in entities])),
            (weights.appearance, cosine(tubes.appearance, [e.appearance_sum for e in entities]))]
    total, weight = np.zeros((P, E)), np.zeros((P, E))
    veto = (~np.isnan(iou)) & (iou < weights.min_box_iou) if weights.min_box_iou is not None else np.zeros((P, E), bool)
    for w, cue in cues:
        if cue is None or w <= 0:
            continue
        ok = ~np.isnan(cue)
        total += np.where(ok, w * cue, 0.0)
        weight += np.where(ok, w, 0.0)
    return np.where((weight > 0) & ~veto, total / np.maximum(weight, 1e-12), np.nan)


class OnlineLinker:
    """Links clips one at a time, in time order, as they are predicted: an entity's id, once given,
    never changes (a later clip can only join an entity or start a new one).

    :func:`link_clips` is this linker run over a whole video, so a live run and an offline one on
    the same clips give the same ids."""

    def __init__(self, weights: LinkingWeights | None = None):
        self.weights = weights or LinkingWeights()
        self.entities: list[Entity] = []
        self.clips = 0

    def add(self, tubes: ClipTubes) -> list[int]:
        """The entity id of each phrase of the next clip."""
        P = len(tubes.phrases)
        assigned = [-1] * P
        if self.entities and P:
            scores = pair_scores(self.entities, tubes, self.weights)
            cost = np.where(np.isnan(scores), 1e6, -scores)
            rows, cols = linear_sum_assignment(cost)
            for p, e in zip(rows, cols):
                if not np.isnan(scores[p, e]) and scores[p, e] >= self.weights.min_score:
                    assigned[p] = int(e)
        for p in range(P):
            if assigned[p] < 0:
                self.entities.append(Entity(id=len(self.entities)))
                assigned[p] = len(self.entities) - 1
        for p in range(P):
            self.entities[assigned[p]].add(self.clips, tubes, p)
        self.clips += 1
        return [self.entities[e].id for e in assigned]


def link_clips(clips: Sequence[ClipTubes],
               weights: LinkingWeights | None = None) -> tuple[list[list[int]], list[Entity]]:
    """Entity ids for every phrase of every clip (``ids[c][p]``), and the entities, clips taken in order."""
    linker = OnlineLinker(weights)
    ids = [linker.add(tubes) for tubes in clips]
    return ids, linker.entities


def link_by_names(clip_phrases: Sequence[Sequence[str]], names: Sequence[Sequence[str | None]]) -> list[list[int]]:
    """Entity ids from a language step that maps each clip phrase to a video-level name (None: its own
    entity): phrases given the same name are one entity, in order of first appearance."""
    ids: list[list[int]] = []
    by_name: dict[str, int] = {}
    count = 0
    for phrases, mapped in zip(clip_phrases, names):
        row = []
        for phrase, name in zip(phrases, mapped):
            if name is None:
                row.append(count)
                count += 1
                continue
            if name not in by_name:
                by_name[name] = count
                count += 1
            row.append(by_name[name])
        ids.append(row)
    return ids
