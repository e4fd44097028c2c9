"""What every benchmark reader returns: captions to score, where their visual input is, and the
ratings (or FOIL pairs) the scores are compared with, plus the statistics its paper reports."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


class BenchmarkFormatError(ValueError):
    """A benchmark file is malformed; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class Visual:
    """A clip (``video`` relative to the benchmark's media root, optionally ``start_s``/``end_s`` or
    ``start_frame``/``end_frame``) or an image (``image`` path, or encoded ``image_bytes``)."""

    video: str | None = None
    image: str | None = None
    image_bytes: bytes | None = field(default=None, repr=False)
    start_s: float | None = None
    end_s: float | None = None
    start_frame: int | None = None
    end_frame: int | None = None

    @property
    def cache_key(self) -> tuple:
        if self.image_bytes is not None:
            return ("bytes", hash(self.image_bytes))
        return (self.video, self.image, self.start_s, self.end_s, self.start_frame, self.end_frame)


@dataclass
class CaptionItem:
    """One candidate caption of a visual input, with the references a reference-based metric may use
    and the group (image or video) whose candidates the per-sample statistics compare."""

    key: str
    caption: str
    visual: Visual
    references: list[str] = field(default_factory=list)
    group: str = ""


@dataclass
class Benchmark:
    """Captions with ratings ``(items, annotators)`` (NaN: not rated), or FOIL pairs of item indices.

    ``protocol`` says how ratings meet the statistics: ``"per_annotator"`` (each annotator's
    column correlated alone, then averaged: EMScore's VATEX-Eval protocol) or ``"mean"`` (the mean
    rating per item). ``statistics`` are the names the benchmark's paper reports
    (:data:`agreement.statistics.STATISTICS`).
    """

    name: str
    items: list[CaptionItem]
    statistics: tuple[str, ...]
    ratings: np.ndarray | None = None
    protocol: str = "mean"
    foil_pairs: list[tuple[int, int]] | None = None
    media_root: str = "."
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.ratings is None) == (self.foil_pairs is None):
            raise ValueError(f"benchmark {self.name}: give either ratings or foil_pairs")
        if self.ratings is not None:
            self.ratings = np.asarray(self.ratings, dtype=np.float64).reshape(len(self.items), -1)
        if self.protocol not in ("mean", "per_annotator"):
            raise ValueError(f"benchmark {self.name}: protocol must be 'mean' or 'per_annotator', "
                             f"got {self.protocol!r}")

    @property
    def is_foil(self) -> bool:
        return self.foil_pairs is not None

    def mean_rating(self) -> np.ndarray:
        rated = ~np.isnan(self.ratings)
        return np.where(rated.any(1), np.nansum(self.ratings, 1) / np.maximum(rated.sum(1), 1), np.nan)

    def subset(self, limit: int | None) -> "Benchmark":
        """The first ``limit`` items (or FOIL pairs), for a quick look at a large benchmark."""
        if limit is None:
            return self
        if self.is_foil:
            pairs = self.foil_pairs[:limit]
            used = sorted({i for p in pairs for i in p})
            new = {old: n for n, old in enumerate(used)}
            return Benchmark(self.name, [self.items[i] for i in used], self.statistics, None, self.protocol,
                             [(new[a], new[b]) for a, b in pairs], self.media_root, self.info)
        return Benchmark(self.name, self.items[:limit], self.statistics, self.ratings[:limit], self.protocol,
                         None, self.media_root, self.info)
