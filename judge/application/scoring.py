"""Score (video, caption) pairs with a VC-Inspector judge: batched, resumable, every failure reported.

The output is JSONL, one row per pair: ``key``, ``video``, ``caption`` (and the clip range when
the pair has one), ``score`` (1-5 or null), ``explanation``, ``parsed`` (whether the answer had a
readable score line) and ``error`` (null when the pair was scored; else ``video: ...`` for a
missing or undecodable clip, ``answer: ...`` for an answer without a readable score line,
``endpoint: ...`` for a failed request, ``text: ...`` for a caption over the token bound) and
``scored_with`` (the judge, video folder and settings that made the row).

While a run goes, the output file is only appended to, batch by batch: a kill at any moment loses
at most the batch in flight (a line cut short by the kill is dropped by the next run, which reads
past it, and its pair is scored again). A rerun with the same output resumes a pair only when its
whole input is the same (video, clip range and caption, and ``scored_with``: the judge, the video
folder, the frame count and answer length), never by its key, so an output reused with another
pairs file or another judge never passes old scores off as new ones; a resumed pair with a new key
gets its row under that key. Only rows that succeeded (a score, no error) are resumed: every
failed pair is scored again. When the run completes, the file is replaced (atomically) by its
final form, one row per pair (a pair: its input and how it was scored): the rows of other pairs
that earlier runs left (another pairs file, another judge) in their order, then this run's pairs
in the order given, so a run that was killed and resumed leaves the file an uninterrupted run writes.
Also here: FOIL accuracy over scored pairs and the judge's share of an evaluation report.
"""
from __future__ import annotations

from core.bounded_text import over_limit
from core.output_files import atomic_write

import json
import math
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from torch.utils.data import DataLoader

from judge.application.hallucination import pairwise_accuracy
from judge.data.pairs import CLIP_RANGES, PairFrames, collate_pairs, foil_rows

OUTPUT_FIELDS = ("key", "video", "caption", "score", "explanation", "parsed", "error", "scored_with")
RANGE_FIELDS = tuple(name for pair in CLIP_RANGES for name in pair)
# Caption tokens given to the judge (captions of the datasets here are under 200 tokens; a caption of a
# million characters would otherwise allocate tens of GB and lose the whole run).
MAX_CAPTION_TOKENS = 1024
# Characters per token assumed for judges whose tokenizer is not local (an endpoint).
_CHARS_PER_TOKEN = 4


def pair_identity(row: Mapping[str, Any], scored_with: Mapping[str, Any] | None = None) -> str:
    """What a pair's score depends on, for resuming: its video, clip range and caption (never its
    key) and how it is scored (``scored_with``: the judge and the settings; a row's own when None)."""
    setting = row.get("scored_with") if scored_with is None else scored_with
    return json.dumps([row["video"], row["caption"], *(row.get(name) for name in RANGE_FIELDS), setting],
                      sort_keys=True)


def scoring_setup(judge: Any, judge_id: str | None, video_root: str, num_frames: int,
                  max_new_tokens: int) -> dict[str, Any]:
    """The ``scored_with`` of a run: which judge (``judge_id``, else the judge's class), where the
    videos are read from and the settings that change a score."""
    return {"judge": judge_id or f"{type(judge).__module__}.{type(judge).__qualname__}",
            "video_root": str(Path(video_root).expanduser().resolve()), "num_frames": int(num_frames),
            "max_new_tokens": int(max_new_tokens)}


def read_scored(path: str | Path) -> list[dict[str, Any]]:
    """The complete rows of an output file, in order; lines cut short by an interrupted run are skipped."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    with path.open() as handle:
        for line in handle:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and {"key", "video", "caption"} <= set(row):
                rows.append(row)
    return rows


def caption_tokens(judge: Any):
    """How ``judge`` counts a caption's tokens: its tokenizer when local, else characters / 4."""
    tokenizer = getattr(getattr(judge, "prompter", None), "tokenizer", None)
    if tokenizer is not None:
        return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
    return lambda text: -(-len(text) // _CHARS_PER_TOKEN)


def _out_row(row: Mapping[str, Any], score=None, explanation: str = "", error: str | None = None,
             scored_with: Mapping[str, Any] | None = None) -> dict[str, Any]:
    out = {"key": row["key"], "video": row["video"], "caption": row["caption"]}
    out.update({name: row[name] for name in RANGE_FIELDS if row.get(name) is not None})
    out.update({"score": score, "explanation": explanation, "parsed": score is not None, "error": error})
    if scored_with is not None:
        out["scored_with"] = dict(scored_with)
    return out


def _answer_row(row: Mapping[str, Any], answer, scored_with: Mapping[str, Any] | None) -> dict[str, Any]:
    error = None if answer.score is not None else answer.error
    if error is not None and not error.startswith("endpoint:"):
        error = f"answer: {error}"
    return _out_row(row, answer.score, answer.explanation, error, scored_with)


def _open_for_append(path: Path):
    """``path`` opened for appending; a last line cut short by a kill is ended first, so the next
    row starts on a line of its own (the cut line stays, and is skipped when read)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("ab")
    if handle.tell() > 0:
        with path.open("rb") as reader:
            reader.seek(-1, 2)
            if reader.read(1) != b"\n":
                handle.write(b"\n")
    return handle


def score_pairs(judge: Any, rows: Sequence[dict[str, Any]], out: str | Path | None = None, video_root: str = ".",
                num_frames: int = 32, batch_size: int = 8, max_new_tokens: int = 64, num_workers: int = 0,
                progress: bool = True, max_caption_tokens: int = MAX_CAPTION_TOKENS, judge_id: str | None = None,
                ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score ``rows`` (``key``, ``video``, ``caption``, optional clip range) with ``judge`` (anything with
    :meth:`~judge.model.vc_inspector.VCInspectorJudge.score`); returns one output row per pair of ``rows`` (resumed
    ones included) and a summary. With ``out``, pairs already scored there are not scored again (see
    the module docstring; ``judge_id`` names the judge in each row's ``scored_with``); a caption over
    ``max_caption_tokens`` fails that pair only."""
    setup = scoring_setup(judge, judge_id, video_root, num_frames, max_new_tokens)
    previous: dict[str, dict[str, Any]] = {}
    for scored in read_scored(out) if out is not None else []:
        previous[pair_identity(scored)] = scored  # the last row of a pair wins
    done, todo = [], []
    for row in rows:
        old = previous.get(pair_identity(row, setup))
        if old is not None and old.get("error") is None and old.get("score") is not None:
            done.append({**old, "key": row["key"]})
        else:
            todo.append(row)
    count = caption_tokens(judge)
    too_long = over_limit({n: r["caption"] for n, r in enumerate(todo)}, max_caption_tokens, count)
    refused = [_out_row(todo[n], error=f"text: the caption has {length} tokens, over the limit of "
                                       f"{max_caption_tokens}; not scored", scored_with=setup)
               for n, length in too_long.items()]
    todo = [r for n, r in enumerate(todo) if n not in too_long]
    loader = DataLoader(PairFrames(todo, video_root, num_frames), batch_size=batch_size, num_workers=num_workers,
                        collate_fn=collate_pairs)
    handle = bar = None
    if out is not None:
        handle = _open_for_append(Path(out))
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="pair", desc="judging")
    new, start = [], time.perf_counter()
    try:
        if handle is not None:
            renamed = [r for r in done if previous[pair_identity(r, setup)]["key"] != r["key"]]
            handle.write("".join(json.dumps(r) + "\n" for r in renamed + refused).encode("utf-8"))
            handle.flush()
        for items in loader:
            readable = [i for i in items if i["frames"] is not None]
            answers = judge.score([i["frames"] for i in readable], [i["row"]["caption"] for i in readable],
                                  max_new_tokens=max_new_tokens, sampled_fps=[i["fps"] for i in readable]) \
                if readable else []
            by_key = {i["row"]["key"]: _answer_row(i["row"], a, setup) for i, a in zip(readable, answers)}
            for item in items:
                row = item["row"]
                result = by_key.get(row["key"]) or _out_row(row, error=item["error"], scored_with=setup)
                new.append(result)
                if handle is not None:
                    handle.write((json.dumps(result) + "\n").encode("utf-8"))
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
    every = sorted(done + refused + new, key=lambda r: order.get(r["key"], len(order)))
    if out is not None:  # the appended rows of this and earlier runs -> one row per pair
        mine = {pair_identity(r) for r in every}
        others: dict[str, dict[str, Any]] = {}
        for scored in read_scored(out):
            if pair_identity(scored) not in mine:
                others[pair_identity(scored)] = scored  # the last row of a pair wins
        with atomic_write(out) as final:
            final.write("".join(json.dumps(r) + "\n" for r in [*others.values(), *every]))
    scores = [r["score"] for r in every if r["score"] is not None]
    summary = {
        "pairs": len(every), "scored": len(scores), "resumed": len(done),
        "video_errors": sum(1 for r in every if (r["error"] or "").startswith("video:")),
        "unparsable": sum(1 for r in every if (r["error"] or "").startswith("answer:")),
        "endpoint_errors": sum(1 for r in every if (r["error"] or "").startswith("endpoint:")),
        "text_errors": sum(1 for r in every if (r["error"] or "").startswith("text:")),
        "mean_score": sum(scores) / len(scores) if scores else math.nan,
        "seconds": round(seconds, 3), "pairs_per_second": round(len(new) / seconds, 4) if new and seconds > 0 else None,
    }
    return every, summary


def foil_accuracy(scored: Sequence[dict[str, Any]], pairs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Pairwise FOIL accuracy (:func:`judge.application.hallucination.pairwise_accuracy`) of rows scored from
    :func:`judge.data.pairs.foil_rows`; a pair missing from ``scored`` is an error."""
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

    ``records`` are the ground-truth :class:`~formats.records.GroundedRecord` objects by key (only
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
