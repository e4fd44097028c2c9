"""Score (video, caption) pairs with a VC-Inspector judge: batched, resumable, every failure reported.

The output is JSONL, one row per pair: ``key``, ``video``, ``caption``, ``score`` (1-5 or null),
``explanation``, ``parsed`` (whether the answer had a readable score line) and ``error`` (null
when the pair was scored; else ``video: ...`` for a missing or undecodable clip, ``answer: ...``
for an answer without a readable score line, ``endpoint: ...`` for a failed request). Rows are
flushed batch by batch; a rerun with the same output skips the pairs already in it (by key).
Also here: FOIL accuracy over scored pairs and the judge's share of an evaluation report.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from torch.utils.data import DataLoader

from judge.hallucination import pairwise_accuracy
from judge.pairs import PairFrames, collate_pairs, foil_rows

OUTPUT_FIELDS = ("key", "video", "caption", "score", "explanation", "parsed", "error")


def read_scored(path: str | Path) -> list[dict[str, Any]]:
    """The complete rows of an output file; a line cut short by an interrupted run is dropped."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "key" in row:
            rows.append(row)
    return rows


def _answer_row(row: Mapping[str, Any], answer) -> dict[str, Any]:
    error = None if answer.score is not None else answer.error
    if error is not None and not error.startswith("endpoint:"):
        error = f"answer: {error}"
    return {"key": row["key"], "video": row["video"], "caption": row["caption"], "score": answer.score,
            "explanation": answer.explanation, "parsed": answer.score is not None, "error": error}


def score_pairs(judge: Any, rows: Sequence[dict[str, Any]], out: str | Path | None = None, video_root: str = ".",
                num_frames: int = 32, batch_size: int = 8, max_new_tokens: int = 64, num_workers: int = 0,
                progress: bool = True) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score ``rows`` (``key``, ``video``, ``caption``, optional clip range) with ``judge`` (anything with
    :meth:`~judge.model.VCInspectorJudge.score`); returns every output row (resumed ones included)
    and a summary. With ``out``, rows already there are kept and not scored again."""
    done = read_scored(out) if out is not None else []
    done_keys = {r["key"] for r in done}
    todo = [r for r in rows if r["key"] not in done_keys]
    handle = None
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text("".join(json.dumps(r) + "\n" for r in done))  # drops a cut-short last line
        handle = Path(out).open("a")
    loader = DataLoader(PairFrames(todo, video_root, num_frames), batch_size=batch_size, num_workers=num_workers,
                        collate_fn=collate_pairs)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="pair", desc="judging")
    new, start = [], time.perf_counter()
    try:
        for items in loader:
            readable = [i for i in items if i["frames"] is not None]
            answers = judge.score([i["frames"] for i in readable], [i["row"]["caption"] for i in readable],
                                  max_new_tokens=max_new_tokens, sampled_fps=[i["fps"] for i in readable]) \
                if readable else []
            by_key = {i["row"]["key"]: _answer_row(i["row"], a) for i, a in zip(readable, answers)}
            for item in items:
                row = item["row"]
                result = by_key.get(row["key"]) or {
                    "key": row["key"], "video": row["video"], "caption": row["caption"], "score": None,
                    "explanation": "", "parsed": False, "error": item["error"]}
                new.append(result)
                if handle is not None:
                    handle.write(json.dumps(result) + "\n")
            if handle is not None:
                handle.flush()
            if bar is not None:
                bar.update(len(items))
    finally:
        if handle is not None:
            handle.close()
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start
    order = {r["key"]: n for n, r in enumerate(rows)}
    every = sorted(done + new, key=lambda r: order.get(r["key"], len(order)))
    scores = [r["score"] for r in every if r["score"] is not None]
    summary = {
        "pairs": len(every), "scored": len(scores), "resumed": len(done),
        "video_errors": sum(1 for r in every if (r["error"] or "").startswith("video:")),
        "unparsable": sum(1 for r in every if (r["error"] or "").startswith("answer:")),
        "endpoint_errors": sum(1 for r in every if (r["error"] or "").startswith("endpoint:")),
        "mean_score": sum(scores) / len(scores) if scores else math.nan,
        "seconds": round(seconds, 3), "pairs_per_second": round(len(new) / seconds, 4) if new and seconds > 0 else None,
    }
    return every, summary


def foil_accuracy(scored: Sequence[dict[str, Any]], pairs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Pairwise FOIL accuracy (:func:`judge.hallucination.pairwise_accuracy`) of rows scored from
    :func:`judge.pairs.foil_rows`; a pair missing from ``scored`` is an error."""
    score = {r["key"]: r["score"] for r in scored}
    missing = [p["key"] for p in pairs if f"{p['key']}#original" not in score or f"{p['key']}#foil" not in score]
    if missing:
        raise ValueError(f"{len(missing)} FOIL pair(s) were not scored, e.g. {missing[:3]}")
    return pairwise_accuracy([score[f"{p['key']}#original"] for p in pairs], [score[f"{p['key']}#foil"] for p in pairs])


def score_foil_pairs(judge: Any, pairs: Sequence[dict[str, Any]], out: str | Path | None = None,
                     **kwargs: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score both captions of every FOIL pair; the summary gains the pairwise accuracy under ``foil``."""
    rows, summary = score_pairs(judge, foil_rows(pairs), out, **kwargs)
    summary["foil"] = foil_accuracy(rows, pairs)
    return rows, summary


def judge_report(records: Mapping[str, Any], predictions: Mapping[str, Mapping[str, Any]], judge: Any,
                 video_root: str, num_frames: int = 32, batch_size: int = 8, max_new_tokens: int = 64,
                 progress: bool = False) -> dict[str, Any]:
    """The judge's reference-free score of predicted captions, for an evaluation report.

    ``records`` are the ground-truth :class:`~datamodules.records.GroundedRecord` objects by key (only
    their clip is used: video file and frame range), ``predictions`` the predictions by key with a
    ``caption``. Returns ``vc_inspector`` (mean parsed score), ``vc_inspector_unparsable`` (share of
    answers without a score line), and counts of the scored clips and of those whose video failed.
    """
    rows = [{"key": key, "video": records[key].video_fname, "caption": str(pred.get("caption") or ""),
             "start_frame": int(records[key].clip_start_frame), "end_frame": int(records[key].clip_end_frame)}
            for key, pred in predictions.items() if key in records and str(pred.get("caption") or "").strip()]
    _, summary = score_pairs(judge, rows, None, video_root=video_root, num_frames=num_frames, batch_size=batch_size,
                             max_new_tokens=max_new_tokens, progress=progress)
    answered = summary["scored"] + summary["unparsable"]
    return {"vc_inspector": summary["mean_score"],
            "vc_inspector_unparsable": summary["unparsable"] / answered if answered else math.nan,
            "vc_inspector_clips": summary["scored"], "vc_inspector_video_errors": summary["video_errors"],
            "vc_inspector_without_caption": sum(1 for k, p in predictions.items()
                                                if k in records and not str(p.get("caption") or "").strip())}
