"""The judge's training targets for a corrupted caption: score, explanation, changed spans.

VC-Inspector paper, section 3.2 and appendix D: with ``|O|`` objects and ``|A|`` actions in the
reference caption and ``|R|`` of them replaced, the quality is ``1 - |R| / (|O| + |A|)``, put on
the 1-5 scale; the explanation names the wrong words in the paper's template.
:func:`substituted_spans` locates those words in the caption (per-token supervision).
"""
from __future__ import annotations

import itertools
import math
import re
from typing import Any, Iterable, Sequence

SCORES = (1, 2, 3, 4, 5)
EXPLANATION_CORRECT = "The caption is helpful, relevant, accurate, and informative to the video content."
EXPLANATION_WRONG = "The caption does not accurately capture the video content. For example, {what} are incorrect."


def factual_score(num_changed: int, num_elements: int) -> float:
    """``1 - |R| / (|O| + |A|)`` in [0, 1]."""
    _check_counts(num_changed, num_elements)
    return 1.0 - num_changed / num_elements


def likert_score(num_changed: int, num_elements: int) -> int:
    """``round(4 * score + 1)`` on 1..5 with halves rounded up, in exact integer arithmetic.

    The paper means ordinary rounding; Python's ``round`` rounds halves to even and would give
    2 for 0.375 -> 2.5, where the scale intends 3. With N elements and R changed,
    ``4 * score + 1 + 1/2 = (11N - 8R) / 2N``, so the half-up rounding is its floor.
    """
    _check_counts(num_changed, num_elements)
    return (11 * num_elements - 8 * num_changed) // (2 * num_elements)


def _check_counts(num_changed: int, num_elements: int) -> None:
    if num_elements < 1 or not 0 <= num_changed <= num_elements:
        raise ValueError(f"need 0 <= changed <= elements and elements >= 1, got {num_changed} of {num_elements}")


def explain(wrong_objects: Sequence[str], wrong_actions: Sequence[str]) -> str:
    """The seed's explanation template (appendix D); items are the wrong words as written."""
    objects, actions = unique_items(wrong_objects), unique_items(wrong_actions)
    if objects and actions:
        what = f"the objects ({', '.join(objects)}) and actions ({', '.join(actions)})"
    elif objects:
        what = f"the objects ({', '.join(objects)})"
    elif actions:
        what = f"the actions ({', '.join(actions)})"
    else:
        return EXPLANATION_CORRECT
    return EXPLANATION_WRONG.format(what=what)


def unique_items(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _without_an(text: str) -> tuple[str, list[int]]:
    """``text`` with the article "an" written "a", and each kept character's index in ``text`` (+ the end)."""
    dropped = {m.start() + 1 for m in re.finditer(r"\b[Aa]n\b", text)}
    keep = [i for i in range(len(text)) if i not in dropped]
    return "".join(text[i] for i in keep), keep + [len(text)]


def substituted_spans(row: dict[str, Any], max_assignments: int = 256) -> list[tuple[int, int]] | None:
    """Character spans of ``row["caption"]`` that the generator substituted, in caption order.

    The caption is rebuilt from ``original_caption`` by putting each substitution's new text in
    place of an occurrence of its old text (articles a/an aside, which the generator re-agrees);
    the occurrences that reproduce the caption give the spans, so a phrase that also occurs
    unchanged elsewhere is not marked. ``[]`` for an unchanged caption; None when the row has no
    substitution record (human ratings) or the caption cannot be rebuilt from it (an LLM rewrite).
    """
    caption, original = row.get("caption"), row.get("original_caption")
    subs = row.get("substitutions")
    if not isinstance(caption, str) or not isinstance(original, str) or not isinstance(subs, list):
        return None
    if not subs:
        return [] if caption == original else None
    target, index = _without_an(caption)
    source = _without_an(original)[0]
    olds, news = [], []
    for sub in subs:
        if not isinstance(sub, dict) or not sub.get("old") or not sub.get("new"):
            return None
        olds.append(_without_an(sub["old"])[0])
        news.append(_without_an(sub["new"])[0])
    places = [[m.start() for m in re.finditer(re.escape(old), source)] for old in olds]
    if not all(places) or math.prod(len(p) for p in places) > max_assignments:
        return None
    for starts in itertools.product(*places):
        order = sorted(range(len(subs)), key=lambda k: starts[k])
        ends = [starts[k] + len(olds[k]) for k in order]
        if any(starts[order[i + 1]] < ends[i] for i in range(len(order) - 1)):
            continue  # overlapping occurrences
        pieces, spans, cursor, out = [], [], 0, 0
        for k in order:
            pieces.append(source[cursor:starts[k]])
            out += starts[k] - cursor
            spans.append((out, out + len(news[k])))
            pieces.append(news[k])
            out += len(news[k])
            cursor = starts[k] + len(olds[k])
        pieces.append(source[cursor:])
        if "".join(pieces) == target:
            return [(index[a], index[b - 1] + 1) for a, b in spans]
    return None
