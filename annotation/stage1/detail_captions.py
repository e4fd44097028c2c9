"""Detail captions by divide and conquer (Dong et al., "Benchmarking and Improving Detail Image
Caption", the CAPTURE paper, sec. 4.1), in five stages:

I.   an overall caption of the image from a vision-language model (the skeleton);
II.  salient regions: SAM's automatic masks, those of extreme size dropped, overlaps reduced with a
     maximal-rectangle step (each mask, largest first, gives the largest axis-aligned rectangle
     inside the part of it no earlier region took), the rectangles are the crops;
III. a local caption of each crop (at most ``local_max_words`` words: 20 in the paper);
IV.  phrase-level hallucination filtering: the visual element phrases of every caption (FACTUAL
     parser objects) scored on the whole image by OWLv2; a phrase scored below
     ``score_threshold`` (0.01 in the paper) is removed from the caption;
V.   an LLM merges the local captions into the overall caption.

The paper prints no prompt wording; the prompts are options (``configs/annotation/detail_captions.yaml``).
Each stage's model is a component with a small interface, built from a local folder by
:mod:`annotation.stage1.detail_caption_models`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np


class VisionLanguageModel(Protocol):
    def caption(self, images: list[np.ndarray], prompt: str) -> list[str]: ...


class Segmenter(Protocol):
    def masks(self, image: np.ndarray) -> np.ndarray: ...  # (M, H, W) bool


class PhraseScorer(Protocol):
    def score(self, image: np.ndarray, phrases: Sequence[str]) -> np.ndarray: ...  # (len(phrases),)


class PhraseExtractor(Protocol):
    def phrases(self, captions: Sequence[str]) -> list[list[str]]: ...


def maximal_rectangle(mask: np.ndarray) -> tuple[tuple[int, int, int, int], int]:
    """The largest axis-aligned all-True rectangle of a 2-D mask: ``((x1, y1, x2, y2), area)``,
    pixel edges (x2, y2 exclusive); area 0 and a zero box for an empty mask.

    Row by row, the run of True above each column is a histogram; its largest rectangle is found
    with a stack of increasing heights (each column pushed and popped once per row).
    """
    mask = np.asarray(mask, dtype=bool)
    h, w = mask.shape
    heights = np.zeros(w + 1, dtype=np.int64)  # a zero sentinel column closes every run
    best, box = 0, (0, 0, 0, 0)
    for y in range(h):
        heights[:w] = np.where(mask[y], heights[:w] + 1, 0)
        stack: list[int] = []
        for x in range(w + 1):
            while stack and heights[stack[-1]] >= heights[x]:
                top = stack.pop()
                left = stack[-1] + 1 if stack else 0
                area = int(heights[top]) * (x - left)
                if area > best:
                    best, box = area, (left, y + 1 - int(heights[top]), x, y + 1)
            stack.append(x)
    return box, best


def salient_regions(masks: np.ndarray, min_area: float = 0.01, max_area: float = 0.8, min_region: float = 0.005,
                    max_regions: int = 10, search_size: int = 128) -> list[tuple[int, int, int, int]]:
    """Stage II: crops (x1, y1, x2, y2) from masks (M, H, W), as fractions of the image area:
    masks outside [``min_area``, ``max_area``] are dropped; the rest, largest first, each give the
    maximal rectangle of their pixels no earlier crop covers, kept if at least ``min_region``.

    The rectangle search runs on masks sampled down to at most ``search_size`` pixels a side (SAM
    masks come at image resolution; the search is per pixel); crops are scaled back to pixels."""
    masks = np.asarray(masks, dtype=bool).reshape(-1, *np.shape(masks)[-2:])
    if not len(masks):
        return []
    full_h, full_w = masks.shape[1:]
    step = max(1, -(-max(full_h, full_w) // int(search_size)))
    masks = masks[:, step // 2::step, step // 2::step] if step > 1 else masks
    total = masks.shape[1] * masks.shape[2]
    share = masks.reshape(len(masks), -1).sum(1) / total
    order = [i for i in np.argsort(-share, kind="stable") if min_area <= share[i] <= max_area]
    taken = np.zeros(masks.shape[1:], dtype=bool)
    regions = []
    for i in order:
        (x1, y1, x2, y2), area = maximal_rectangle(masks[i] & ~taken)
        if area == 0 or area / total < min_region:
            continue
        taken[y1:y2, x1:x2] = True
        regions.append((x1 * step, y1 * step, min(x2 * step, full_w), min(y2 * step, full_h)))
        if len(regions) >= max_regions:
            break
    return regions


def limit_words(text: str, max_words: int) -> str:
    words = text.split()
    return text.strip() if len(words) <= max_words else " ".join(words[:max_words])


def remove_phrases(caption: str, phrases: Sequence[str]) -> str:
    """The caption with every whole-word occurrence of ``phrases`` removed (grammar is left to Stage V)."""
    for phrase in sorted(phrases, key=len, reverse=True):
        caption = re.sub(rf"(?i)\b{re.escape(phrase)}\b", "", caption)
    return re.sub(r"\s+([.,;:!?])", r"\1", re.sub(r"\s{2,}", " ", caption)).strip()


def filter_hallucinations(image: np.ndarray, captions: Sequence[str], phrases: Sequence[Sequence[str]],
                          scorer: PhraseScorer, threshold: float = 0.01) -> tuple[list[str], dict[str, float]]:
    """Stage IV: the captions without their phrases scored below ``threshold`` on the image, and every
    distinct phrase's score (each is scored once)."""
    distinct = list(dict.fromkeys(p for ps in phrases for p in ps))
    scores = dict(zip(distinct, np.asarray(scorer.score(image, distinct), dtype=np.float64).tolist())) \
        if distinct else {}
    dropped = {p for p, s in scores.items() if s < threshold}
    return [remove_phrases(c, [p for p in ps if p in dropped]) for c, ps in zip(captions, phrases)], scores


@dataclass
class DetailCaption:
    """The final caption and what each stage produced (for inspection and the report)."""

    caption: str
    overall: str
    regions: list[tuple[int, int, int, int]] = field(default_factory=list)
    local: list[str] = field(default_factory=list)
    phrase_scores: dict[str, float] = field(default_factory=dict)
    filtered_overall: str = ""
    filtered_local: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"caption": self.caption, "overall": self.overall, "regions": [list(r) for r in self.regions],
                "local": self.local, "phrase_scores": self.phrase_scores, "filtered_overall": self.filtered_overall,
                "filtered_local": self.filtered_local}


DEFAULT_PROMPTS = {
    "overall": "Describe this image in detail.",
    "local": "Describe the main object in this image region in no more than 20 words.",
    "merge_system": "You merge image descriptions into one fluent, faithful detail caption.",
    "merge": ("Here is an overall description of an image:\n{overall}\n\nHere are descriptions of regions of the "
              "same image:\n{local}\n\nMerge the region descriptions into the overall description smoothly, "
              "without simply concatenating them, keeping only what they say and fixing any grammar errors. "
              "Answer with the merged description only."),
}


class DetailCaptioner:
    """The five stages over a batch of images (RGB uint8 arrays)."""

    def __init__(self, lvlm: VisionLanguageModel, segmenter: Segmenter, scorer: PhraseScorer,
                 extractor: PhraseExtractor, chat, prompts: dict | None = None, local_max_words: int = 20,
                 min_mask_area: float = 0.01, max_mask_area: float = 0.8, min_region: float = 0.005,
                 max_regions: int = 10, score_threshold: float = 0.01, search_size: int = 128):
        self.lvlm, self.segmenter, self.scorer, self.extractor, self.chat = lvlm, segmenter, scorer, extractor, chat
        self.prompts = {**DEFAULT_PROMPTS, **(prompts or {})}
        unknown = sorted(set(self.prompts) - set(DEFAULT_PROMPTS))
        if unknown:
            raise ValueError(f"detail captions: unknown prompt '{unknown[0]}' (prompts: {', '.join(DEFAULT_PROMPTS)})")
        self.local_max_words, self.score_threshold = int(local_max_words), float(score_threshold)
        self.region_options = dict(min_area=float(min_mask_area), max_area=float(max_mask_area),
                                   min_region=float(min_region), max_regions=int(max_regions),
                                   search_size=int(search_size))

    def run(self, images: list[np.ndarray]) -> list[DetailCaption]:
        overall = self.lvlm.caption(images, self.prompts["overall"])  # I
        regions = [salient_regions(self.segmenter.masks(im), **self.region_options) for im in images]  # II
        crops = [im[y1:y2, x1:x2] for im, rs in zip(images, regions) for (x1, y1, x2, y2) in rs]
        local_flat = [limit_words(c, self.local_max_words)
                      for c in (self.lvlm.caption(crops, self.prompts["local"]) if crops else [])]  # III
        out, k = [], 0
        for image, caption, rs in zip(images, overall, regions):
            local = local_flat[k:k + len(rs)]
            k += len(rs)
            texts = [caption, *local]
            filtered, scores = filter_hallucinations(image, texts, self.extractor.phrases(texts), self.scorer,
                                                     self.score_threshold)  # IV
            out.append(DetailCaption("", caption, rs, local, scores, filtered[0], filtered[1:]))
        conversations = [[{"role": "system", "content": self.prompts["merge_system"]},
                          {"role": "user", "content": self.prompts["merge"].format(
                              overall=d.filtered_overall, local="\n".join(f"- {t}" for t in d.filtered_local if t)
                              or "(none)")}] for d in out]
        merged = self.chat.complete(conversations) if conversations else []  # V
        for d, text in zip(out, merged):
            d.caption = text.strip() or d.filtered_overall
        return out
