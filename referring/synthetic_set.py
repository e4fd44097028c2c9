"""A referring set with known answers, made from the synthetic dataset's clips.

Every object of a clip is asked for by its own phrase (``a red circle``: its answer is that object's
tube); each clip also gets distractor queries that name a colour and a shape no object of the clip has
(``a yellow cross``), whose answer is "absent on every frame". The queries are plain phrases, so the
set measures what grounding a query adds over grounding a caption: picking the named object, and
rejecting a name the clip does not hold.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from datamodules.synthetic_scenes import COLOURS, SHAPES
from formats.records import GroundedRecord

SET_FORMAT = "grove-referring-set/1"


@dataclass(frozen=True)
class ReferringQuery:
    """One query of a clip: its text and the phrase of the object it names (None: a distractor)."""

    clip: str
    query: str
    target: str | None


def _article(colour: str) -> str:
    return "an" if colour[0] in "aeiou" else "a"


def distractor_phrases(record: GroundedRecord, count: int, rng: np.random.Generator) -> list[str]:
    """``count`` phrases naming a colour and a shape that no object of the clip has (fewer if none is left)."""
    words = [p.split() for p in record.phrases]
    colours_in = {w[-2] for w in words if len(w) >= 2}
    shapes_in = {w[-1] for w in words if w}
    colours = [c for c in COLOURS if c not in colours_in]
    shapes = [s for s in SHAPES if s not in shapes_in]
    pairs = [(c, s) for c in colours for s in shapes]
    picked = rng.permutation(len(pairs))[:count]
    return [f"{_article(pairs[i][0])} {pairs[i][0]} {pairs[i][1]}" for i in sorted(picked.tolist())]


def build_referring_set(records: Sequence[GroundedRecord], distractors: int = 2, seed: int = 0) -> list[ReferringQuery]:
    """Each record's objects by their phrases, then ``distractors`` absent names per record."""
    rng = np.random.default_rng(seed)
    out: list[ReferringQuery] = []
    for record in records:
        out.extend(ReferringQuery(record.key, phrase, phrase) for phrase in dict.fromkeys(record.phrases))
        out.extend(ReferringQuery(record.key, phrase, None) for phrase in distractor_phrases(record, distractors, rng))
    return out


def write_referring_set(path: str | Path, queries: Sequence[ReferringQuery], annotations: str) -> Path:
    """The set as JSON: ``{"format", "annotations", "clips": {clip: [{"query", "target"}]}}``."""
    clips: dict[str, list[dict]] = {}
    for q in queries:
        clips.setdefault(q.clip, []).append({"query": q.query, "target": q.target})
    path = Path(path)
    path.write_text(json.dumps({"format": SET_FORMAT, "annotations": str(annotations), "clips": clips}, indent=1),
                    encoding="utf-8")
    return path


def read_referring_set(path: str | Path) -> tuple[list[ReferringQuery], str]:
    """The queries of a set file and the annotations file it was made from."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != SET_FORMAT:
        raise ValueError(f"{path}: not a referring set (format {SET_FORMAT!r}); write one with "
                         "`grove referring synthetic-set`")
    return ([ReferringQuery(clip, q["query"], q["target"]) for clip, qs in data["clips"].items() for q in qs],
            data["annotations"])


__all__ = ["ReferringQuery", "build_referring_set", "distractor_phrases", "read_referring_set",
           "write_referring_set"]
