"""Bounds on text read from users' files, checked before a scorer sees it.

One absurd input (a caption of a million characters) must not cost a whole run: scorers with a
cost that grows with length (a judge's token sequence, METEOR's Java process, which dies on very
long lines) check each text against a bound first. A text over the bound fails for that item
only; the caller names it and scores the rest.
"""
from __future__ import annotations

from typing import Hashable, Iterable, Mapping

# Characters per caption METEOR is given (captions of the datasets here are under 1,000 characters).
METEOR_MAX_CHARS = 10_000
# Characters per caption CAPTURE parses (spaCy refuses texts over its max_length with E088, and its
# memory grows with the text: one absurd caption would end the evaluation of every other).
CAPTURE_MAX_CHARS = 10_000


def over_limit(texts: Mapping[Hashable, str | Iterable[str]], max_len: int,
               length=len) -> dict[Hashable, int]:
    """``{key: length}`` of the items whose text (or any of its texts) is longer than ``max_len``.

    ``length`` measures one text (characters by default; pass a tokenizer's count for tokens).
    """
    out: dict[Hashable, int] = {}
    for key, value in texts.items():
        longest = max((length(t) for t in ([value] if isinstance(value, str) else value)), default=0)
        if longest > max_len:
            out[key] = longest
    return out


def describe_over_limit(over: Mapping[Hashable, int], max_len: int, what: str, unit: str = "characters",
                        shown: int = 5) -> str:
    """One line naming the items over the bound (the first ``shown``) for a warning or a report."""
    items = ", ".join(f"{k!s} ({n} {unit})" for k, n in list(over.items())[:shown])
    more = f" and {len(over) - shown} more" if len(over) > shown else ""
    return f"{len(over)} {what} over the limit of {max_len} {unit}, not scored: {items}{more}"
