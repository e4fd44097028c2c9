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
from formats.safe_pickle import safe_load

VATEX_FILES = ("candidates_list", "gts_list", "human_scores", "video_ids")
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
    """VATEX-Eval (or a benchmark in its layout); ``n_refs`` references per candidate (None: all)."""
    path = Path(path)
    if path.is_file() and path.suffix == ".json":
        return _read_rated_json(path, n_refs, video_template, name)
    files = {n: path / f"{n}.pkl" for n in VATEX_FILES}
    missing = [str(p) for n, p in files.items() if not p.exists() and (n != "gts_list" or n_refs)]
    if missing:
        raise FileNotFoundError(f"{name} folder {path} lacks {', '.join(missing)}")
    captions = [str(c) for c in np.asarray(safe_load(files["candidates_list"]), dtype=object).reshape(-1)]
    video_ids = [str(v) for v in np.asarray(safe_load(files["video_ids"]), dtype=object).reshape(-1)]
    scores = np.asarray(safe_load(files["human_scores"]), dtype=np.float64).reshape(-1)
    n = len(captions)
    if len(video_ids) != n or n == 0 or scores.size % n:
        raise BenchmarkFormatError(f"{path}: {n} candidates, {len(video_ids)} video ids and {scores.size} human "
                                   "scores do not line up (human_scores.pkl holds annotators x candidates)")
    ratings = scores.reshape(-1, n).T
    gts = list(safe_load(files["gts_list"])) if files["gts_list"].exists() else [[] for _ in captions]
    if len(gts) != n:
        raise BenchmarkFormatError(f"{files['gts_list']}: {len(gts)} reference lists for {n} candidates")
    items = [CaptionItem(key=f"{v}#{k}", caption=c, visual=Visual(video=video_template.format(video_id=v)),
                         references=_references(g, n_refs, f"{files['gts_list']}, entry {k}"), group=v)
             for k, (v, c, g) in enumerate(zip(video_ids, captions, gts))]
    return Benchmark(name, items, CORRELATION, ratings=ratings, protocol="per_annotator", info={"n_refs": n_refs})


def _read_rated_json(path: Path, n_refs: int | None, video_template: str, name: str) -> Benchmark:
    entries = _load_json(path, name)
    if not isinstance(entries, list) or not entries:
        raise BenchmarkFormatError(f"{path}: expected a non-empty list of {{video_id, caption, human_scores}} objects")
    items, ratings = [], []
    for k, entry in enumerate(entries):
        where = f"{path}, entry {k}"
        if not isinstance(entry, dict):
            raise BenchmarkFormatError(f"{where}: expected an object")
        for field in ("video_id", "caption", "human_scores"):
            if field not in entry:
                raise BenchmarkFormatError(f"{where}: missing field '{field}'")
        human = entry["human_scores"]
        if not isinstance(human, list) or not human or not all(isinstance(h, (int, float)) for h in human):
            raise BenchmarkFormatError(f"{where}: field 'human_scores' must be a non-empty list of numbers")
        ratings.append(human)
        visual = Visual(video=video_template.format(video_id=entry["video_id"]),
                        start_s=entry.get("start_s"), end_s=entry.get("end_s"))
        items.append(CaptionItem(f"{entry['video_id']}#{k}", str(entry["caption"]), visual,
                                 _references(entry.get("references"), n_refs if entry.get("references") else None,
                                             where), str(entry["video_id"])))
    width = max(len(r) for r in ratings)
    matrix = np.full((len(ratings), width), np.nan)
    for row, r in zip(matrix, ratings):
        row[: len(r)] = r
    return Benchmark(name, items, CORRELATION, ratings=matrix, protocol="per_annotator", info={"n_refs": n_refs})


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
