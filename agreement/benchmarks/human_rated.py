"""Readers of the human-rated caption benchmarks of the VC-Inspector paper (section 4.4).

* VATEX-Eval (EMScore release, a folder): ``candidates_list.pkl`` (N candidate captions),
  ``gts_list.pkl`` (N lists of reference captions), ``human_scores.pkl`` (the three annotators'
  1-5 ratings stacked annotator-major, 3 x N) and ``video_ids.pkl`` (N video ids; clips
  ``{video_id}.mp4``). Statistics: Kendall tau-b and Spearman rho per annotator, averaged (the
  authors' script); ``n_refs`` references per candidate (0: reference-free, 1 or 9 in Table 2).
* YouCook2-Eval (VC-Inspector paper, section 4.4: 100 clip-caption pairs, three annotators, 1-5,
  "following VATEX-Eval"): the same folder layout, or a JSON list of ``{video_id, caption,
  human_scores, references?, start_s?, end_s?}``.
* Flickr8K-Expert and Flickr8K-CF (the CLIPScore / PAC-S releases ``flickr8k.json`` and
  ``crowdflower_flickr8k.json``): ``{id: {image_path, ground_truth: [refs], human_judgement:
  [{caption, rating, image_path?}]}}``, one item per judgement (NaN ratings dropped, as the
  authors' scripts do). Expert: tau-c (CLIPScore, PAC-S) and tau-b (VC-Inspector Table 4);
  CF: tau-b.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from agreement.benchmarks.items import Benchmark, BenchmarkFormatError, CaptionItem, Visual
from formats.vatex_eval import VatexEvalFormatError, read_rated_captions

CORRELATION = ("kendall_tau_b", "spearman_rho")


def _load_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise BenchmarkFormatError(f"{path}: cannot read {what} JSON ({err})") from None


def _references(refs, n_refs: int | None, where: str) -> list[str]:
    if refs is None:
        refs = []
    refs = [str(r) for r in (refs.tolist() if isinstance(refs, np.ndarray) else refs)]
    if n_refs is not None:
        if n_refs > len(refs):
            raise BenchmarkFormatError(f"{where}: n_refs={n_refs} but only {len(refs)} references")
        refs = refs[:n_refs]
    return refs


def read_vatex_eval(path: str | Path, n_refs: int | None = 1, video_template: str = "{video_id}.mp4",
                    name: str = "VATEX-Eval") -> Benchmark:
    """VATEX-Eval (or a benchmark in its layout, :mod:`formats.vatex_eval`); ``n_refs`` references per
    candidate (None: all)."""
    path = Path(path)
    try:
        entries = read_rated_captions(path, need_references=bool(n_refs), name=name)
    except VatexEvalFormatError as err:
        raise BenchmarkFormatError(str(err)) from None
    refs_where = f"{path / 'gts_list.pkl'}, entry" if path.is_dir() else f"{path}, entry"
    items = []
    for k, entry in enumerate(entries):
        # a JSON entry without references is reference-free whatever n_refs asks
        wanted = n_refs if (path.is_dir() or entry.references) else None
        items.append(CaptionItem(f"{entry.video_id}#{k}", entry.caption,
                                 Visual(video=video_template.format(video_id=entry.video_id),
                                        start_s=entry.start_s, end_s=entry.end_s),
                                 _references(entry.references, wanted, f"{refs_where} {k}"), entry.video_id))
    width = max(len(e.human_scores) for e in entries)
    ratings = np.full((len(entries), width), np.nan)
    for row, entry in zip(ratings, entries):
        row[: len(entry.human_scores)] = entry.human_scores
    return Benchmark(name, items, CORRELATION, ratings=ratings, protocol="per_annotator", info={"n_refs": n_refs})


def read_youcook2_eval(path: str | Path, n_refs: int | None = None, video_template: str = "{video_id}.mp4"
                       ) -> Benchmark:
    """YouCook2-Eval in the VATEX-Eval folder layout or as a JSON list (module docstring)."""
    return read_vatex_eval(path, n_refs=n_refs, video_template=video_template, name="YouCook2-Eval")


def read_flickr8k(path: str | Path, name: str | None = None, crowdflower: bool | None = None) -> Benchmark:
    """Flickr8K-Expert (``flickr8k.json``) or Flickr8K-CF (``crowdflower_flickr8k.json``; ``crowdflower``
    says which when the file name does not)."""
    path = Path(path)
    data = _load_json(path, "Flickr8K")
    if not isinstance(data, dict):
        raise BenchmarkFormatError(f"{path}: expected an object keyed by image id")
    crowd = crowdflower if crowdflower is not None else "crowdflower" in path.name.lower()
    name = name or ("Flickr8K-CF" if crowd else "Flickr8K-Expert")
    items, ratings = [], []
    for image_id, entry in data.items():
        where = f"{path}, image '{image_id}'"
        if not isinstance(entry, dict) or not isinstance(entry.get("human_judgement"), list):
            raise BenchmarkFormatError(f"{where}: expected {{image_path, ground_truth, human_judgement: [...]}}")
        refs = [" ".join(str(r).split()) for r in entry.get("ground_truth") or []]
        for j, judgement in enumerate(entry["human_judgement"]):
            if not isinstance(judgement, dict) or "caption" not in judgement or "rating" not in judgement:
                raise BenchmarkFormatError(f"{where}, judgement {j}: needs 'caption' and 'rating'")
            rating = float(judgement["rating"])
            if math.isnan(rating):
                continue
            image = judgement.get("image_path") or entry.get("image_path")
            if not image:
                raise BenchmarkFormatError(f"{where}: no 'image_path'")
            items.append(CaptionItem(f"{image_id}#{j}", " ".join(str(judgement["caption"]).split()),
                                     Visual(image=str(image)), refs, str(image_id)))
            ratings.append([rating])
    if not items:
        raise BenchmarkFormatError(f"{path}: no rated captions")
    statistics = ("kendall_tau_b",) if crowd else ("kendall_tau_c", "kendall_tau_b")
    return Benchmark(name, items, statistics, ratings=np.asarray(ratings), protocol="mean")
