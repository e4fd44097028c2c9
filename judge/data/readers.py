"""Readers of the judge's data files: judge JSONL rows, ActivityNet Captions, YouCook2, VATEX-Eval ratings.

Row format (one JSON object per line; what :func:`judge.data.corruption.generator.write_jsonl` writes):
``key``, ``video`` (relative to ``video_root``), ``caption``; optional ``score`` (1..5) and
``explanation`` (training targets), ``human_scores`` (list of ratings), and the clip as
``start_frame``/``end_frame`` (source frames, inclusive) or ``start_s``/``end_s`` (seconds);
without either the whole video is used. Every error names the file, the row and the field.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from formats.vatex_eval import VatexEvalFormatError, read_rated_captions
from judge.data.corruption.data_types import CaptionSource


class JudgeDataError(ValueError):
    """A judge data file is malformed; the message names the file, the row and the field."""


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line; a line that is not JSON is an error naming it."""
    with path.open() as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as err:
                raise JudgeDataError(f"{path}, line {number}: not valid JSON ({err})") from None


def read_judge_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a judge JSONL file, validated (errors name file, line and field)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"judge data file {path} does not exist")
    return [validate_row(row, f"{path}, line {number}") for number, row in iter_jsonl(path)]


def validate_row(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise JudgeDataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for name in ("key", "video", "caption"):
        if not isinstance(row.get(name), str) or not row[name]:
            raise JudgeDataError(f"{where}: field '{name}' must be a non-empty string, got {row.get(name)!r}")
    score = row.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5):
        raise JudgeDataError(f"{where} ('{row['key']}'): field 'score' must be an integer 1..5, got {score!r}")
    if score is not None and not isinstance(row.get("explanation"), str):
        raise JudgeDataError(f"{where} ('{row['key']}'): a row with a 'score' needs a string 'explanation'")
    human = row.get("human_scores")
    if human is not None and (not isinstance(human, list) or not human
                              or not all(isinstance(h, (int, float)) and not isinstance(h, bool) for h in human)):
        raise JudgeDataError(f"{where} ('{row['key']}'): field 'human_scores' must be a non-empty list of numbers")
    for a, b in (("start_frame", "end_frame"), ("start_s", "end_s")):
        lo, hi = row.get(a), row.get(b)
        if (lo is None) != (hi is None):
            raise JudgeDataError(f"{where} ('{row['key']}'): fields '{a}' and '{b}' must be given together")
        if lo is not None and not (0 <= lo <= hi):
            raise JudgeDataError(f"{where} ('{row['key']}'): clip {a}={lo}, {b}={hi} is not a valid range")
    return row


def read_activitynet_captions(path: str | Path, video_template: str = "{video_id}.mp4") -> list[CaptionSource]:
    """ActivityNet Captions (``{video_id: {duration, timestamps: [[s, e], ...], sentences: [...]}}``).

    One source per (video, sentence), keyed ``{video_id}_{k}``; timestamps are clipped to the
    video's duration (the public files overshoot it slightly at times).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise JudgeDataError(f"{path}: cannot read ActivityNet Captions JSON ({err})") from None
    if not isinstance(data, dict):
        raise JudgeDataError(f"{path}: expected an object keyed by video id, got {type(data).__name__}")
    sources = []
    for video_id, entry in data.items():
        where = f"{path}, video '{video_id}'"
        if not isinstance(entry, dict):
            raise JudgeDataError(f"{where}: expected an object, got {type(entry).__name__}")
        missing = [k for k in ("duration", "timestamps", "sentences") if k not in entry]
        if missing:
            raise JudgeDataError(f"{where}: missing field(s) {', '.join(missing)}")
        duration, stamps, sentences = entry["duration"], entry["timestamps"], entry["sentences"]
        if not isinstance(duration, (int, float)) or duration <= 0:
            raise JudgeDataError(f"{where}: field 'duration' must be a positive number, got {duration!r}")
        if not isinstance(stamps, list) or not isinstance(sentences, list) or len(stamps) != len(sentences):
            raise JudgeDataError(f"{where}: 'timestamps' and 'sentences' must be lists of equal length")
        for k, (stamp, sentence) in enumerate(zip(stamps, sentences)):
            if not (isinstance(stamp, (list, tuple)) and len(stamp) == 2
                    and all(isinstance(t, (int, float)) for t in stamp)):
                raise JudgeDataError(f"{where}: timestamps[{k}] must be [start, end] in seconds, got {stamp!r}")
            start, end = max(0.0, float(stamp[0])), min(float(duration), float(stamp[1]))
            if end <= start:
                raise JudgeDataError(f"{where}: timestamps[{k}] = {stamp} is empty within duration {duration}")
            if not isinstance(sentence, str) or not sentence.strip():
                raise JudgeDataError(f"{where}: sentences[{k}] must be a non-empty string")
            sources.append(CaptionSource(key=f"{video_id}_{k}", video=video_template.format(video_id=video_id),
                                         caption=sentence.strip(), start_s=start, end_s=end))
    return sources


def read_youcook2_captions(path: str | Path, subset: str | None = "validation",
                           video_template: str = "{video_id}.mp4") -> list[CaptionSource]:
    """YouCook2 segment captions (``youcookii_annotations_trainval.json``: ``{"database": {video_id:
    {"subset", "duration", "annotations": [{"id", "segment": [s, e], "sentence"}]}}}``) as generator
    sources keyed ``{video_id}_{segment id}``, of one ``subset`` (None: all)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise JudgeDataError(f"{path}: cannot read YouCook2 annotations JSON ({err})") from None
    database = data.get("database") if isinstance(data, dict) else None
    if not isinstance(database, dict):
        raise JudgeDataError(f"{path}: expected {{'database': {{video_id: {{...}}}}}}")
    sources = []
    for video_id, entry in database.items():
        where = f"{path}, video '{video_id}'"
        if subset is not None and entry.get("subset") != subset:
            continue
        if not isinstance(entry.get("annotations"), list):
            raise JudgeDataError(f"{where}: missing list 'annotations'")
        for k, ann in enumerate(entry["annotations"]):
            segment, sentence = ann.get("segment"), ann.get("sentence")
            if not (isinstance(segment, list) and len(segment) == 2 and segment[0] < segment[1]):
                raise JudgeDataError(f"{where}, annotation {k}: 'segment' must be [start, end] seconds")
            if not isinstance(sentence, str) or not sentence.strip():
                raise JudgeDataError(f"{where}, annotation {k}: 'sentence' must be a non-empty string")
            sources.append(CaptionSource(key=f"{video_id}_{ann.get('id', k)}",
                                         video=video_template.format(video_id=video_id), caption=sentence.strip(),
                                         start_s=float(segment[0]), end_s=float(segment[1])))
    if not sources:
        raise JudgeDataError(f"{path}: no captions in subset {subset!r}")
    return sources


def read_vatex_eval(path: str | Path, video_template: str = "{video_id}.mp4") -> list[dict[str, Any]]:
    """Human-rated candidate captions as judge rows (``human_scores`` = every annotator's rating).

    The VATEX-Eval layout (:mod:`formats.vatex_eval`): the public folder of pickles or the project's
    JSON list ``[{"video_id", "caption", "human_scores": [...], "start_s"?, "end_s"?}, ...]``.
    """
    try:
        entries = read_rated_captions(path)
    except VatexEvalFormatError as err:
        raise JudgeDataError(str(err)) from None
    rows = []
    for i, entry in enumerate(entries):
        row = {"key": f"{entry.video_id}#{i}", "video": video_template.format(video_id=entry.video_id),
               "caption": entry.caption, "human_scores": list(entry.human_scores)}
        if entry.start_s is not None or entry.end_s is not None:
            row.update(start_s=entry.start_s, end_s=entry.end_s)
        rows.append(validate_row(row, f"{path}, entry {i}"))
    return rows
