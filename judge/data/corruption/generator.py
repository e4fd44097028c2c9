"""Build a judge training set: captions with controlled factual errors, scored and explained.

VC-Inspector paper, section 3.2: from a (video, reference caption) pair, extract the caption's
objects O and actions A, sample K ~ U{0..|O|} objects and L ~ U{0..|A|} actions, replace each
sampled object with another member of its category and each sampled action with a different
action the subject could perform, and rewrite the caption. The score is
``1 - (K + L) / (|O| + |A|)`` on the 1-5 scale (:mod:`judge.data.targets`). Ten corruptions
per caption, then balanced sampling to equal counts per score.

``corrupt`` restricts the errors to one kind (section 4.6, Table 6: objects only, actions only,
both): the other kind is left as it is and does not count among the caption's elements, so the
score is ``1 - K / |O|`` (objects only) or ``1 - L / |A|`` (actions only); a caption without an
element of the kind is skipped.

The backends do the extraction and substitution: :class:`~judge.data.corruption.rule_backend.RuleBackend`
(offline: spaCy, WordNet, curated actions; ``closed_domain`` for closed-vocabulary data such as the
synthetic clips) and :class:`~judge.data.corruption.llm_backend.LLMBackend` (a local causal LM with the
paper's prompts D.1-D.5). A malformed LLM answer or an implausible corruption is dropped and
counted in the printed statistics.

    grove judge corrupt --records data/synthetic/annotations/train.json --out train.jsonl
    grove judge corrupt --activitynet train.json --out anet_train.jsonl
    grove judge corrupt --youcook2 youcookii_annotations_trainval.json --out yc2_val.jsonl
    grove judge corrupt --activitynet train.json --corrupt objects --out anet_train_objects.jsonl
"""
from __future__ import annotations

from core.bounded_text import CAPTURE_MAX_CHARS, describe_over_limit, over_limit
from core.cli_args import non_negative_int, positive_int, unit_float
from core.command_parser import CommandParser
from core.output_files import atomic_write

import argparse
import json
import logging
import zlib
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from formats.records import read_records
from judge.data.corruption.data_types import (
    CaptionSource,
    GenerationStats,
    ImplausibleCorruption,
    MalformedLLMOutput,
    sources_from_records,
)
from judge.data.corruption.lexicon import IN_DOMAIN_MODES
from judge.data.corruption.llm_backend import LLMBackend
from judge.data.corruption.rule_backend import RuleBackend
from judge.data.readers import read_activitynet_captions, read_youcook2_captions
from judge.data.targets import SCORES, explain, factual_score, likert_score

log = logging.getLogger(__name__)


def _stable_hash(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


ELEMENT_KINDS = ("object", "action")
CORRUPT_CHOICES = {"objects": ("object",), "actions": ("action",), "both": ELEMENT_KINDS}


def resolve_kinds(corrupt: str | Sequence[str]) -> tuple[str, ...]:
    """``"objects"``, ``"actions"``, ``"both"`` or a list of ``object`` / ``action`` -> the element kinds."""
    if isinstance(corrupt, str):
        if corrupt not in CORRUPT_CHOICES:
            raise ValueError(f"corrupt must be one of {', '.join(CORRUPT_CHOICES)} (or a list of object/action), "
                             f"got {corrupt!r}")
        return CORRUPT_CHOICES[corrupt]
    kinds = tuple(dict.fromkeys(str(k) for k in corrupt))
    if not kinds or set(kinds) - set(ELEMENT_KINDS):
        raise ValueError(f"corrupt: element kinds must be a non-empty list of {ELEMENT_KINDS}, got {list(corrupt)}")
    return kinds


def generate_corruptions(sources: Sequence[CaptionSource], backend: Any, per_caption: int = 10, seed: int = 0,
                         dedupe: bool = True, stats: GenerationStats | None = None,
                         corrupt: str | Sequence[str] = "both") -> tuple[list[dict], GenerationStats]:
    """``per_caption`` corruptions of every source caption, as JSONL rows (unbalanced); ``corrupt``
    picks the kinds of element changed (module docstring).

    Each corruption draws from its own generator seeded by (seed, source key, index), so the
    output does not depend on the order or number of the other sources.
    """
    if len(sources) == 0:
        raise ValueError("generate_corruptions: no source captions (an empty record list): nothing to corrupt")
    stats = stats or GenerationStats()
    kinds = resolve_kinds(corrupt)
    # one absurd caption must not end the run in the parser (spaCy's E088): it is left out by name
    too_long = over_limit({s.key: s.caption for s in sources}, CAPTURE_MAX_CHARS)
    if too_long:
        log.warning("corruptions: %s", describe_over_limit(too_long, CAPTURE_MAX_CHARS, "caption(s)"))
        for key, length in too_long.items():
            stats.failures[f"caption over {CAPTURE_MAX_CHARS} characters ({length}): {key}"] += 1
        sources = [s for s in sources if s.key not in too_long]
    extractions = backend.prepare([s.caption for s in sources]) if sources else []
    rows = []
    for source, extraction in zip(sources, extractions):
        stats.captions += 1
        if isinstance(extraction, MalformedLLMOutput):
            stats.failures[f"{extraction.prompt}: {extraction.reason}"] += 1
            continue
        objects, actions = backend.usable(extraction)
        objects = objects if "object" in kinds else []
        actions = actions if "action" in kinds else []
        stats.elements_found.update({"object": len(extraction.objects), "action": len(extraction.actions)})
        stats.elements_without_alternative.update({"object": len(extraction.objects) - len(objects),
                                                   "action": len(extraction.actions) - len(actions)})
        total = len(objects) + len(actions)
        if total == 0:
            stats.no_elements += 1
            continue
        stats.captions_used += 1
        seen = set()
        for index in range(per_caption):
            rng = np.random.default_rng([seed, _stable_hash(source.key), index])
            k = int(rng.integers(0, len(objects) + 1))
            l = int(rng.integers(0, len(actions) + 1))
            chosen = [objects[i] for i in sorted(rng.choice(len(objects), k, replace=False))]
            chosen += [actions[i] for i in sorted(rng.choice(len(actions), l, replace=False))]
            try:
                caption, substitutions = backend.substitute(extraction, chosen, rng) if chosen else (source.caption, [])
            except MalformedLLMOutput as err:
                stats.failures[f"{err.prompt}: {err.reason}"] += 1
                continue
            except ImplausibleCorruption as err:
                stats.failures[f"{backend.name}: {err.reason}"] += 1
                continue
            if dedupe and caption in seen:
                stats.duplicates_dropped += 1
                continue
            seen.add(caption)
            score = likert_score(len(chosen), total)
            rows.append({
                "key": f"{source.key}#{index}", "source_key": source.key, "video": source.video,
                "fps": source.fps, "start_frame": source.start_frame, "end_frame": source.end_frame,
                "start_s": source.start_s, "end_s": source.end_s,
                "caption": caption, "score": score, "score_fraction": round(factual_score(len(chosen), total), 6),
                "explanation": explain([s.new for s in substitutions if s.kind == "object"],
                                       [s.new for s in substitutions if s.kind == "action"]),
                "original_caption": source.caption,
                "substitutions": [asdict(s) for s in substitutions],
                "num_objects": len(objects), "num_actions": len(actions), "backend": backend.name,
            })
            stats.scores[score] += 1
            stats.corruptions += 1
    return rows, stats


def balance_by_score(rows: Sequence[dict], seed: int = 0, per_score: int | None = None,
                     stats: GenerationStats | None = None, by_size: bool = False) -> list[dict]:
    """Equal numbers of rows for each score 1..5 (the smallest class, or ``per_score`` if smaller).

    ``by_size`` also makes the scores of every caption size (``num_objects + num_actions``)
    symmetric about 3: as many 1s as 5s and 2s as 4s among the captions of each size. A caption
    with two elements can only score 1, 3 or 5, and duplicates drop more of some scores than of
    others, so plain balancing leaves the size a text-only cue; with symmetric scores per size,
    no function of the size ranks them (its Kendall tau with the score is zero). The number
    kept per score is then the smallest total of symmetric capacity, shared among the sizes in
    proportion to what each holds (largest remainders).

    Rows keep their original order; which rows survive depends only on ``seed``.
    """
    groups = {s: [i for i, r in enumerate(rows) if r["score"] == s] for s in SCORES}
    missing = [s for s in SCORES if not groups[s]]
    if missing:
        raise ValueError(f"cannot balance over scores 1-5: no corruption has score {missing} "
                         f"(counts {[len(groups[s]) for s in SCORES]}); use more captions or --no-balance")
    rng = np.random.default_rng([seed, 0xBA1A])
    if not by_size:
        count = min(len(g) for g in groups.values())
        if per_score is not None:
            count = min(count, int(per_score))
        keep = sorted(int(i) for s in SCORES for i in rng.choice(groups[s], count, replace=False))
    else:
        cells: dict[tuple[int, int], list[int]] = {}
        for i, r in enumerate(rows):
            cells.setdefault((r["num_objects"] + r["num_actions"], r["score"]), []).append(i)
        sizes = sorted({size for size, _ in cells})
        # symmetric capacity of each size for the score pairs (1, 5), (2, 4) and 3 alone
        capacity = {s: np.array([min(len(cells.get((n, s), ())), len(cells.get((n, 6 - s), ()))) for n in sizes])
                    for s in (1, 2, 3)}
        count = min(int(c.sum()) for c in capacity.values())
        if per_score is not None:
            count = min(count, int(per_score))
        if count == 0:
            raise ValueError("cannot balance by size: no caption size has both scores of a pair (1 and 5, or 2 and "
                             f"4); symmetric capacity per pair {[int(c.sum()) for c in capacity.values()]}")
        keep = []
        for s, cap in capacity.items():
            share = count * cap / cap.sum()
            take = np.floor(share).astype(np.int64)
            order = np.argsort(-(share - take), kind="stable")
            take[order[: count - int(take.sum())]] += 1
            for n, k in zip(sizes, take):
                for score in {s, 6 - s}:
                    keep += [int(i) for i in rng.choice(cells.get((n, score), []), int(k), replace=False)]
        keep.sort()
    out = [rows[i] for i in keep]
    if stats is not None:
        stats.balanced_scores = Counter(r["score"] for r in out)
    return out


def write_jsonl(rows: Iterable[dict], path: str | Path) -> Path:
    """One JSON object per line, written atomically."""
    path = Path(path)
    with atomic_write(path) as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def make_backend(name: str, **kwargs: Any):
    if name == "rule":
        return RuleBackend(**kwargs)
    if name == "llm":
        return LLMBackend(**kwargs)
    raise ValueError(f"unknown backend {name!r}; known: rule, llm")


def build_judge_split(sources: Sequence[CaptionSource], out: str | Path, backend: Any, per_caption: int = 10,
                      seed: int = 0, balance: bool = True, per_score: int | None = None, balance_by_size: bool = False,
                      verbose: bool = True, corrupt: str | Sequence[str] = "both") -> GenerationStats:
    """Generate, balance and write one split's JSONL; prints the score distribution."""
    rows, stats = generate_corruptions(sources, backend, per_caption=per_caption, seed=seed, corrupt=corrupt)
    if balance:
        rows = balance_by_score(rows, seed=seed, per_score=per_score, stats=stats, by_size=balance_by_size)
    write_jsonl(rows, out)
    if verbose:
        print(f"{out}:\n{stats.summary()}")
    return stats


def main(argv: list[str] | None = None) -> GenerationStats:
    parser = CommandParser(prog="grove judge corrupt", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--records", role="input", help="GroundedRecord annotations (project JSON, pickle or folder)")
    src.add_argument("--activitynet", role="input",
                     help="ActivityNet Captions JSON ({video_id: {duration, timestamps, sentences}})")
    src.add_argument("--youcook2", role="input",
                     help="YouCook2 annotations (youcookii_annotations_trainval.json); see --subset")
    parser.add_argument("--subset", default="validation", help="YouCook2 subset: training or validation")
    parser.add_argument("--corrupt", choices=tuple(CORRUPT_CHOICES), default="both",
                        help="kinds of element to change (VC-Inspector Table 6 ablation: objects, actions, both)")
    parser.add_argument("--video-template", default="{video_id}.mp4",
                        help="ActivityNet / YouCook2 video file name relative to the video root")
    parser.add_argument("--out", role="output", required=True, help="output JSONL")
    parser.add_argument("--backend", choices=("rule", "llm"), default="rule")
    parser.add_argument("--llm-path", help="local causal LM folder for --backend llm")
    parser.add_argument("--in-domain", choices=IN_DOMAIN_MODES, default="prefer",
                        help="rule backend: prefer/require substitutes seen in the dataset's captions")
    parser.add_argument("--max-climb", type=non_negative_int, default=2,
                        help="rule backend: hypernym steps to a shared category (4 for the synthetic shapes)")
    parser.add_argument("--climb-decay", type=unit_float, default=0.5,
                        help="rule backend: sampling weight factor per extra step (1.0 = uniform)")
    parser.add_argument("--closed-domain", action="store_true",
                        help="rule backend: the captions are a closed world (synthetic data): substitutes and "
                             "grammar from the captions only; needs --in-domain require")
    parser.add_argument("--per-caption", type=positive_int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-balance", action="store_true")
    parser.add_argument("--balance-by-size", action="store_true",
                        help="also make the scores of each caption size symmetric (no text-only size cue)")
    parser.add_argument("--per-score", type=positive_int, default=None, help="cap on rows per score after balancing")
    parser.add_argument("--limit", type=non_negative_int, default=None, help="use only the first N captions")
    args = parser.parse_args(argv)
    if args.records:
        sources = sources_from_records(read_records(args.records))
    elif args.youcook2:
        sources = read_youcook2_captions(args.youcook2, subset=args.subset, video_template=args.video_template)
    else:
        sources = read_activitynet_captions(args.activitynet, video_template=args.video_template)
    if args.limit is not None:
        sources = sources[: args.limit]
    if not sources:
        source = args.records or args.youcook2 or args.activitynet
        raise SystemExit(f"{source}: no captions to corrupt (the file holds no records"
                         f"{' within --limit' if args.limit is not None else ''})")
    if args.backend == "rule":
        backend = RuleBackend(in_domain=args.in_domain, max_climb=args.max_climb, climb_decay=args.climb_decay,
                              closed_domain=args.closed_domain)
    else:
        backend = LLMBackend(model_path=args.llm_path)
    return build_judge_split(sources, args.out, backend, per_caption=args.per_caption, seed=args.seed,
                             balance=not args.no_balance, per_score=args.per_score,
                             balance_by_size=args.balance_by_size, corrupt=args.corrupt)

