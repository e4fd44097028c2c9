"""The interface every metric in the agreement suite implements, so a user's own metric plugs in.

A scorer turns benchmark items into one number per item (NaN where it has no score, e.g. an
unreadable judge answer). It reads visual inputs through the :class:`~agreement.media.FrameLoader`
it is given and, when ``uses_references`` is true, each item's ``references``.

    class LengthScorer(CaptionScorer):
        name = "length"
        def score(self, items, frames, progress=False):
            return np.array([len(i.caption.split()) for i in items], dtype=float)

In a config: ``metrics: {length: {class_path: mypackage.LengthScorer, init_args: {}}}``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from agreement.benchmarks.items import CaptionItem
from agreement.media import FrameLoader


class MissingWeights(RuntimeError):
    """A metric's weights are not configured or not on disk; ``key`` is the config key to set."""

    def __init__(self, key: str, what: str):
        super().__init__(f"set {key} ({what})")
        self.key = key


class CaptionScorer(ABC):
    """One score per caption; higher means a better caption."""

    name: str = "scorer"
    uses_references: bool = False
    uses_visual: bool = True

    @abstractmethod
    def score(self, items: Sequence[CaptionItem], frames: FrameLoader, progress: bool = False) -> np.ndarray:
        """``(len(items),)`` float scores, NaN where the metric gives none."""


def require_references(scorer: CaptionScorer, items: Sequence[CaptionItem]) -> None:
    missing = [i.key for i in items if not i.references]
    if missing:
        raise ValueError(f"{scorer.name} needs reference captions but {len(missing)} item(s) have none "
                         f"(e.g. {missing[:3]}); the benchmark gives no references for them")


def progress_bar(iterable, total: int, desc: str, enabled: bool):
    if not enabled:
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="item", leave=False)
