"""Human-rated candidate captions in the VATEX-Eval layout: one reader for the judge and the agreement study.

VATEX-Eval (the EMScore release, used by the VC-Inspector paper, section 4.4) is a folder of
pickles: ``candidates_list.pkl`` (N candidate captions), ``video_ids.pkl`` (N video ids),
``human_scores.pkl`` (every annotator's 1-5 rating, stacked annotator-major: A x N, or flat A * N)
and, optional, ``gts_list.pkl`` (N lists of reference captions). Benchmarks "following
VATEX-Eval" (YouCook2-Eval) come in the same folder layout or as a JSON list of ``{video_id,
caption, human_scores, references?, start_s?, end_s?}``. Pickles are read through the restricted
unpickler (:func:`formats.safe_pickle.safe_load`). Every error names the file, the entry and the field.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from formats.safe_pickle import safe_load

VATEX_FILES = ("candidates_list", "video_ids", "human_scores", "gts_list")


class VatexEvalFormatError(ValueError):
    """A VATEX-Eval-layout file is malformed; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class RatedCaption:
    """One candidate caption of a video with every annotator's rating (``references`` None: the
    release has no reference captions; ``start_s`` / ``end_s`` None: the whole video)."""

    video_id: str
    caption: str
    human_scores: tuple[float, ...]
    references: tuple[str, ...] | None = None
    start_s: float | None = None
    end_s: float | None = None


def read_rated_captions(path: str | Path, need_references: bool = False, name: str = "VATEX-Eval"
                        ) -> list[RatedCaption]:
    """The entries of a VATEX-Eval folder or JSON list, in file order.

    ``need_references``: the folder must hold ``gts_list.pkl`` (else it is optional). An empty
    benchmark is an error.
    """
    path = Path(path)
    if path.is_dir():
        return _read_folder(path, need_references, name)
    if not path.is_file():
        raise FileNotFoundError(f"{name}: {path} is neither a folder of the release's pickles nor a JSON file")
    try:
        entries = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise VatexEvalFormatError(f"{path}: cannot read {name} JSON ({err})") from None
    if not isinstance(entries, list) or not entries:
        raise VatexEvalFormatError(f"{path}: expected a non-empty list of {{video_id, caption, human_scores}} "
                                   "objects")
    out = []
    for k, entry in enumerate(entries):
        where = f"{path}, entry {k}"
        if not isinstance(entry, dict):
            raise VatexEvalFormatError(f"{where}: expected an object with 'video_id', 'caption', 'human_scores'")
        for field in ("video_id", "caption", "human_scores"):
            if field not in entry:
                raise VatexEvalFormatError(f"{where}: missing field '{field}'")
        if not isinstance(entry["caption"], str):
            raise VatexEvalFormatError(f"{where}: field 'caption' must be a string, got "
                                       f"{type(entry['caption']).__name__}")
        human = entry["human_scores"]
        if not isinstance(human, list) or not human or \
                not all(isinstance(h, (int, float)) and not isinstance(h, bool) for h in human):
            raise VatexEvalFormatError(f"{where}: field 'human_scores' must be a non-empty list of numbers")
        references = entry.get("references")
        if references is not None and (not isinstance(references, list)
                                       or not all(isinstance(r, str) for r in references)):
            raise VatexEvalFormatError(f"{where}: field 'references' must be a list of strings")
        span = []
        for field in ("start_s", "end_s"):
            value = entry.get(field)
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise VatexEvalFormatError(f"{where}: field '{field}' must be a number of seconds")
            span.append(None if value is None else float(value))
        out.append(RatedCaption(str(entry["video_id"]), entry["caption"], tuple(human),
                                None if references is None else tuple(references), *span))
    return out


def _read_folder(path: Path, need_references: bool, name: str) -> list[RatedCaption]:
    files = {n: path / f"{n}.pkl" for n in VATEX_FILES}
    missing = [str(p) for n, p in files.items() if not p.exists() and (n != "gts_list" or need_references)]
    if missing:
        raise FileNotFoundError(f"{name} folder {path} lacks {', '.join(missing)}")
    captions = [str(c) for c in np.asarray(safe_load(files["candidates_list"]), dtype=object).reshape(-1)]
    video_ids = [str(v) for v in np.asarray(safe_load(files["video_ids"]), dtype=object).reshape(-1)]
    scores = np.asarray(safe_load(files["human_scores"]), dtype=np.float64).reshape(-1)
    n = len(captions)
    if len(video_ids) != n or n == 0 or scores.size % n:
        raise VatexEvalFormatError(f"{path}: {n} candidates, {len(video_ids)} video ids and {scores.size} human "
                                   "scores do not line up (human_scores.pkl holds annotators x candidates)")
    ratings = scores.reshape(-1, n).T  # annotators are stacked: (A, N) -> (N, A)
    if files["gts_list"].exists():
        gts = list(safe_load(files["gts_list"]))
        if len(gts) != n:
            raise VatexEvalFormatError(f"{files['gts_list']}: {len(gts)} reference lists for {n} candidates")
        references = [tuple(str(r) for r in (g.tolist() if isinstance(g, np.ndarray) else (g or []))) for g in gts]
    else:
        references = [None] * n
    return [RatedCaption(v, c, tuple(r.tolist()), refs)
            for v, c, r, refs in zip(video_ids, captions, ratings, references)]
