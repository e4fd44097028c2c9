"""Readers of the hallucination benchmarks (VC-Inspector paper, section 4.5, Table 5): each pair is
a correct caption and its FOIL, the same caption with one object replaced, of one visual input.

* FOIL-COCO (``foilv1.0_test_2017.json``): COCO-style ``{images: [{id, file_name}],
  annotations: [{id, image_id, caption, foil: bool, ...}]}``; a FOIL annotation and its original
  share ``id``. With ``coco_captions`` (``captions_val2014.json``) each pair gets the image's other
  COCO captions as references (``n_refs`` of them: 1 or 4 in PAC-S's protocol).
* ActivityNet-FOIL (EMScore release): read by :func:`judge.data.pairs.read_activitynet_foil`.
* Synthetic FOIL: the project's corruption generator's rows that changed exactly one object or
  action, against their reference caption (:func:`judge.data.pairs.foil_pairs_from_corruptions`).
"""
from __future__ import annotations

from core.json_file import read_json

import json
from pathlib import Path
from typing import Any, Sequence

from agreement.benchmarks.items import Benchmark, BenchmarkFormatError, CaptionItem, Visual
from judge.data.pairs import foil_pairs_from_corruptions, read_activitynet_foil
from judge.data.readers import iter_jsonl

FOIL_STATISTICS = ("foil_accuracy", "foil_accuracy_half_ties")


def benchmark_from_pairs(name: str, pairs: Sequence[dict[str, Any]], references: Sequence[list[str]] | None = None
                         ) -> Benchmark:
    """Pairs ``{key, video|image, original, foil[, start_s, end_s | start_frame, end_frame]}`` as a FOIL benchmark."""
    items, index = [], []
    for n, pair in enumerate(pairs):
        visual = Visual(video=pair.get("video"), image=pair.get("image"), start_s=pair.get("start_s"),
                        end_s=pair.get("end_s"), start_frame=pair.get("start_frame"), end_frame=pair.get("end_frame"))
        refs = list(references[n]) if references is not None else []
        items.append(CaptionItem(f"{pair['key']}#original", pair["original"], visual, refs, str(pair["key"])))
        items.append(CaptionItem(f"{pair['key']}#foil", pair["foil"], visual, refs, str(pair["key"])))
        index.append((2 * n, 2 * n + 1))
    if not items:
        raise BenchmarkFormatError(f"{name}: no FOIL pairs")
    return Benchmark(name, items, FOIL_STATISTICS, foil_pairs=index)


def read_foil_coco(path: str | Path, coco_captions: str | Path | None = None, n_refs: int = 4) -> Benchmark:
    """FOIL-COCO test pairs; references from ``captions_val2014.json`` when given."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise BenchmarkFormatError(f"{path}: cannot read FOIL-COCO JSON ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
        raise BenchmarkFormatError(f"{path}: expected {{'images': [...], 'annotations': [...]}}")
    files = {img["id"]: img["file_name"] for img in data.get("images") or [] if "id" in img and "file_name" in img}
    by_id: dict[Any, dict[str, list]] = {}
    for k, ann in enumerate(data["annotations"]):
        missing = [f for f in ("id", "image_id", "caption", "foil") if f not in ann]
        if missing:
            raise BenchmarkFormatError(f"{path}, annotation {k}: missing field(s) {', '.join(missing)}")
        by_id.setdefault(ann["id"], {"foil": [], "orig": []})["foil" if ann["foil"] else "orig"].append(ann)
    coco: dict[Any, list[str]] = {}
    if coco_captions is not None:
        captions = read_json(Path(coco_captions))
        for ann in captions.get("annotations", []):
            coco.setdefault(ann["image_id"], []).append(ann["caption"])
    pairs, refs = [], []
    for ann_id, group in by_id.items():
        if len(group["orig"]) != 1:
            raise BenchmarkFormatError(f"{path}: annotation id {ann_id} has {len(group['orig'])} original captions")
        orig = group["orig"][0]
        if orig["image_id"] not in files:
            raise BenchmarkFormatError(f"{path}: image {orig['image_id']} of annotation {ann_id} is not in 'images'")
        for j, foil in enumerate(group["foil"]):
            pairs.append({"key": f"{ann_id}_{j}", "image": files[orig["image_id"]], "original": orig["caption"].strip(),
                          "foil": foil["caption"].strip()})
            if coco_captions is not None:
                others = [c for c in coco.get(orig["image_id"], []) if c != orig["caption"]][:n_refs]
                refs.append(others)
    return benchmark_from_pairs("FOIL-COCO", pairs, refs if coco_captions is not None else None)


def read_activitynet_foil_benchmark(folder: str | Path, video_template: str = "{video_id}.mp4") -> Benchmark:
    return benchmark_from_pairs("ActivityNet-FOIL", read_activitynet_foil(folder, video_template))


def read_synthetic_foil(path: str | Path, name: str = "Synthetic-FOIL") -> Benchmark:
    """One-substitution corruptions of a corruption-generator JSONL, with the reference caption as reference."""
    path = Path(path)
    rows = [row for _, row in iter_jsonl(path)]
    pairs = foil_pairs_from_corruptions(rows)
    if not pairs:
        raise BenchmarkFormatError(f"{path}: no row changed exactly one object or action (no FOIL pairs)")
    return benchmark_from_pairs(name, pairs, [[p["original"]] for p in pairs])
