"""``grove referring synthetic-set | predict | score | benchmark | score-ref-youtube-vos``.

The referring set with known answers made from the synthetic dataset (:mod:`referring.synthetic_set`),
grounded by a checkpoint and scored (:mod:`referring.synthetic_scoring`; ``score --oracle`` and
``--first-phrase`` give its ceiling and its query-blind floor); MeViS and Ref-YouTube-VOS grounded from
their files into their submission layout (:mod:`referring.benchmarks`; MeViS is scored by
``grove evaluate``'s sibling ``grove mevis``, Ref-YouTube-VOS by ``score-ref-youtube-vos``)."""
from __future__ import annotations

from core.cli_args import existing_file, existing_folder, existing_path, non_negative_int, positive_int, unit_float
from core.command_parser import CommandParser

import argparse
import json
import sys
from pathlib import Path


def _records(annotations: str):
    from formats.records import read_records

    return {r.key: r for r in read_records(annotations)}


def synthetic_set(args) -> None:
    from referring.synthetic_set import build_referring_set, write_referring_set

    records = list(_records(args.annotations).values())[: args.limit]
    queries = build_referring_set(records, args.distractors, args.seed)
    write_referring_set(args.out, queries, args.annotations)
    print(f"wrote {args.out}: {len(queries)} queries on {len(records)} clips")


def predict(args, overrides) -> None:
    from command_line.ground import processor_of
    from command_line.model_export import build_module
    from referring.predict import ground_all
    from referring.synthetic_set import read_referring_set

    queries, annotations = read_referring_set(args.set)
    records = _records(args.annotations or annotations)
    by_clip: dict[str, list[str]] = {}
    for q in queries:
        by_clip.setdefault(q.clip, []).append(q.query)
    module, datamodule = build_module(args.config, args.ckpt_path, overrides)
    processor = processor_of(module, datamodule)
    if args.objectness_threshold is not None:
        processor.inference["objectness_threshold"] = args.objectness_threshold
    total = len(by_clip)
    entries = ground_all(module.model, processor, ((records[k], qs) for k, qs in by_clip.items()), args.video_root,
                         progress=lambda n: print(f"\r{n}/{total} clips", end="", file=sys.stderr))
    print(file=sys.stderr)
    Path(args.out).write_text(json.dumps(entries), encoding="utf-8")
    print(f"wrote {args.out}: {len(entries)} queries")


def score(args) -> dict[str, float]:
    from models.grove.query_grounding import query_key, referent_tube
    from referring.synthetic_scoring import first_phrase_tubes, oracle_tubes, score_referring_set
    from referring.synthetic_set import read_referring_set

    queries, annotations = read_referring_set(args.set)
    records = _records(args.annotations or annotations)
    records = {k: records[k] for k in dict.fromkeys(q.clip for q in queries)}
    if args.oracle:
        tubes = oracle_tubes(records, queries)
    elif args.first_phrase:
        tubes = first_phrase_tubes(records, queries)
    else:
        entries = json.loads(Path(args.pred).read_text(encoding="utf-8"))
        tubes, seen = {}, {}
        for i, q in enumerate(queries):
            j = seen[q.clip] = seen.get(q.clip, -1) + 1
            entry = entries.get(query_key(q.clip, j))
            if entry is None or entry.get("query") != q.query:
                raise SystemExit(f"error: {args.pred}: no answer to query {j} {q.query!r} of clip {q.clip}")
            tubes[i] = {f: item["box"] for f, item in referent_tube(entry).items()}
    result = score_referring_set(records, queries, tubes)
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def benchmark(args, overrides) -> dict[str, int]:
    from command_line.ground import processor_of
    from command_line.model_export import build_module
    from referring.benchmarks import model_check, model_grounder, predict_benchmark

    module, datamodule = build_module(args.config, args.ckpt_path, overrides)
    processor = processor_of(module, datamodule)
    if args.objectness_threshold is not None:
        processor.inference["objectness_threshold"] = args.objectness_threshold
    counts = predict_benchmark(model_grounder(module.model, processor), model_check(module.model), args.meta,
                               args.frames, args.out, args.benchmark, args.limit,
                               progress=lambda n, t: print(f"\r{n}/{t} videos", end="", file=sys.stderr))
    print(file=sys.stderr)
    print(f"wrote {args.out}: {counts['expressions']} expressions of {counts['videos']} videos "
          f"({counts['refused']} refused: refused.json)")
    return counts


def score_ref_youtube_vos(args) -> dict[str, float]:
    from referring.ref_youtube_vos import evaluate_ref_youtube_vos

    report = evaluate_ref_youtube_vos(args.meta, args.annotations, args.pred)
    print(json.dumps(report["metrics"], indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return report["metrics"]


def parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="grove referring", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("synthetic-set", help="the referring set of a synthetic annotations file")
    s.add_argument("--annotations", required=True, type=existing_file,
                   help="a synthetic split's annotations (data/synthetic/...)")
    s.add_argument("--out", required=True, role="output", help="the set's JSON file")
    s.add_argument("--distractors", type=non_negative_int, default=2, help="absent names asked per clip")
    s.add_argument("--seed", type=non_negative_int, default=0)
    s.add_argument("--limit", type=positive_int, default=None, help="the first N clips only")
    s = sub.add_parser("predict", help="ground every query of a set with a checkpoint")
    s.add_argument("--set", required=True, type=existing_file)
    s.add_argument("--annotations", default=None, help="default: the file the set was made from")
    s.add_argument("--video-root", required=True, type=existing_folder, help="the folder of the clips' videos")
    s.add_argument("--config", action="append", required=True, type=existing_file)
    s.add_argument("--ckpt-path", required=True, type=existing_path)
    s.add_argument("--objectness-threshold", type=unit_float, default=None)
    s.add_argument("--out", required=True, role="output", help="the predictions JSON (one entry per query)")
    s = sub.add_parser("score", help="accuracy, mIoU and absent-query rejection of predictions")
    s.add_argument("--set", required=True, type=existing_file)
    s.add_argument("--annotations", default=None)
    how = s.add_mutually_exclusive_group(required=True)
    how.add_argument("--pred", help="the predictions of `grove referring predict`")
    how.add_argument("--oracle", action="store_true", help="score the true answers (the ceiling)")
    how.add_argument("--first-phrase", action="store_true",
                     help="score the query-blind floor: every query answered with the caption's first phrase")
    s.add_argument("--out", default=None, role="output", help="write the scores as JSON here")
    s = sub.add_parser("benchmark", help="ground every expression of MeViS or Ref-YouTube-VOS into its submission")
    s.add_argument("--benchmark", choices=("mevis", "ref-youtube-vos"), required=True)
    s.add_argument("--meta", required=True, type=existing_file, help="meta_expressions.json as distributed")
    s.add_argument("--frames", required=True, type=existing_folder, help="the JPEGImages folder (<video>/<frame>.jpg)")
    s.add_argument("--config", action="append", required=True, type=existing_file)
    s.add_argument("--ckpt-path", required=True, type=existing_path)
    s.add_argument("--objectness-threshold", type=unit_float, default=None)
    s.add_argument("--limit", type=positive_int, default=None, help="the first N videos only")
    s.add_argument("--out", required=True, role="output", help="the submission folder")
    s = sub.add_parser("score-ref-youtube-vos", help="J&F of a Ref-YouTube-VOS (or Ref-DAVIS17) submission")
    s.add_argument("--meta", required=True, type=existing_file,
                   help="meta_expressions.json with each expression's obj_id")
    s.add_argument("--annotations", required=True, type=existing_folder,
                   help="the true Annotations folder (<video>/<frame>.png)")
    s.add_argument("--pred", required=True, help="the submission folder (holding Annotations/)")
    s.add_argument("--out", default=None, role="output", help="write the report as JSON here")
    return p


def main(argv: list[str] | None = None):
    args, overrides = parser().parse_known_args(argv)
    takes_overrides = args.command in ("predict", "benchmark")
    bad = [o for o in overrides if not takes_overrides or not o.startswith(("--model.", "--data.", "--trainer."))]
    if bad:
        parser().error(f"unrecognised arguments: {' '.join(bad)}")
    if args.command == "synthetic-set":
        return synthetic_set(args)
    if args.command == "predict":
        return predict(args, overrides)
    if args.command == "benchmark":
        return benchmark(args, overrides)
    if args.command == "score-ref-youtube-vos":
        return score_ref_youtube_vos(args)
    return score(args)


__all__ = ["main", "parser"]
