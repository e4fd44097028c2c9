"""Hallucination accuracy on FOIL-style pairs (VC-Inspector paper, section 4.5 and Table 5).

Each pair is a correct caption and its FOIL, the same caption with one object (or action)
replaced, for the same video. A judge is right on a pair when it scores the correct caption
higher; a tie counts as half, the expected accuracy of breaking it at random. A pair with an
unreadable score on either side is a tie for :func:`pairwise_accuracy` (the judge did not tell
the two apart) and is counted in ``unparsable_pairs``; ``accuracy_parsed`` leaves such pairs out.
"""
from __future__ import annotations

import math
from typing import Sequence


def pairwise_accuracy(original_scores: Sequence[float | None], foil_scores: Sequence[float | None]) -> dict[str, float]:
    """``accuracy`` (ties and unreadable pairs half), ``accuracy_parsed``, ``ties``, ``pairs``, ``unparsable_pairs``."""
    if len(original_scores) != len(foil_scores):
        raise ValueError(f"{len(original_scores)} original scores but {len(foil_scores)} FOIL scores")

    def missing(value) -> bool:
        return value is None or (isinstance(value, float) and math.isnan(value))

    wins = ties = unparsable = 0
    for original, foil in zip(original_scores, foil_scores):
        if missing(original) or missing(foil):
            unparsable += 1
        elif original > foil:
            wins += 1
        elif original == foil:
            ties += 1
    pairs = len(original_scores)
    parsed = pairs - unparsable
    return {
        "accuracy": (wins + 0.5 * (ties + unparsable)) / pairs if pairs else math.nan,
        "accuracy_parsed": (wins + 0.5 * ties) / parsed if parsed else math.nan,
        "ties": float(ties), "pairs": float(pairs), "unparsable_pairs": float(unparsable),
    }
