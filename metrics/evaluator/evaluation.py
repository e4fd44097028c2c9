"""The offline evaluation of a predictions file against ground-truth records, in memory or from files
(the command is :mod:`metrics.commands.evaluate`). Two protocols (``docs/evaluation_protocols.md``):

* ``project`` (default): :mod:`metrics.functional.grounding`; clips missing from the predictions count as
  empty predictions and are listed; predicted clips absent from the GT are listed and ignored.
* ``official``: the GROVE release's ``eval_iground.py`` (:mod:`metrics.protocols.official_iground`), for
  comparison with published figures; it needs the local ``bert-base-uncased`` folder.

Predicted boxes that cannot be right are rejected (:mod:`metrics.evaluator.prediction_validation`) unless
``invalid="skip"`` drops and counts them; a corrupt file in a GT folder is skipped and counted
(``on_corrupt="raise"`` stops instead). Predicted frames off the annotation grid are refused (or
mapped under ``off_grid="nearest"``; :func:`metrics.evaluator.prediction_validation.place_on_grid`).

The project protocol's memory does not grow with the number of clips: a predictions file of a
million clips (HowToGround1M's ``model_preds``) does not fit in memory as Python objects (about 8x
the file's size), so the file is read one clip at a time
(:func:`formats.predictions.iter_prediction_file`) and every metric is reduced as clips stream by,
in batches of ``batch_clips`` clips that keep the vectorised grounding code
(:func:`metrics.functional.grounding.grounding_update` per batch, added into one state):

* video level (AP50, mIoU, recall): each clip's value is added to a running sum as its batch ends;
* frame level: mIoU and recall are sums too; AP50 pools all frames, so each counted detection
  keeps a compact record (score, matched, clip position, frame, rank in its frame) and the
  precision/recall curve is computed once at the end, exactly as COCOeval ranks them;
* captions (BLEU, METEOR, ROUGE-L, CIDEr, CAPTURE are corpus-level) are kept as strings.

The results equal :func:`metrics.functional.grounding.evaluate_grounding` on the whole set (a test
checks it on random cases). The ground truth is read whole (its readers are not streaming).

When the ground truth carries masks and the predictions do too, the same metrics are computed a second
time with mask IoU (``iou_kind="mask"``) and reported as ``mask_AP50``, ``mask_mIoU``, ``mask_recall``
(and ``_frame``); a predicted box without a mask counts as an empty mask. Beside them come GLaMM's GCG
mask figures ``gcg_mask_mIoU`` and ``gcg_mask_recall`` (:mod:`metrics.functional.gcg_masks`), each
annotated frame with a true mask being one GCG image, phrases compared with the run's text encoder. A
predictions file without masks gives exactly the box figures it gave before, and nothing else.
"""
from __future__ import annotations

import core  # noqa: F401
from core.bounded_text import CAPTURE_MAX_CHARS, METEOR_MAX_CHARS, over_limit

import os
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from formats.predictions import iter_prediction_file, load_predictions
from formats.records import RecordError, read_ground_truth
from metrics.evaluator.prediction_validation import (
    INVALID_POLICIES,
    MAX_EXAMPLES,
    OFF_GRID_POLICIES,
    OffGridReport,
    ValidationReport,
    carries_masks,
    names_masks,
    place_on_grid,
    validate_predictions,
)
from metrics.functional.frame_boxes import frames_from_prediction, frames_from_record
from metrics.functional.gcg_masks import GCGImage, gcg_mask_sums
from metrics.functional.grounding import GroundingAccumulator
from metrics.protocols.center_frame import centre_frame, centre_records, centre_view
from metrics.text_encoder import vocabulary_of

# "center": the GROVE paper's Center set-up (metrics.protocols.center_frame), scored at video level
LEVEL_CHOICES = {"video": ("video",), "frame": ("frame",), "both": ("video", "frame"), "center": ("video",)}
PROTOCOLS = ("project", "official")
BATCH_CLIPS = 256  # clips reduced together: keeps the grounding code vectorised, memory flat


def filter_by_objectness(pred: Mapping[str, Any], threshold: float, strict: bool = False) -> dict:
    """Drop boxes whose objectness score is below ``threshold`` (``strict``: not above it);
    boxes without scores are kept."""
    frames = []
    for frame in pred.get("frames", []):
        scores = frame.get("scores")
        if scores is None:
            frames.append(frame)
            continue
        keep = [i for i, s in enumerate(scores) if (s > threshold if strict else s >= threshold)]
        kept = {**frame, "boxes": [frame["boxes"][i] for i in keep],
                "labels": [frame["labels"][i] for i in keep], "scores": [scores[i] for i in keep]}
        if frame.get("masks") is not None:
            kept["masks"] = [frame["masks"][i] for i in keep]
        frames.append(kept)
    return {**pred, "frames": frames}


def evaluate_files(gt_path: str | Path, pred_path: str | Path, level: str = "both",
                   score_source: str = "constant", text_encoder: Any = "minilm",
                   caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                   capture: bool = True, objectness_threshold: float | None = None,
                   protocol: str = "project", invalid: str = "error", on_corrupt: str = "skip",
                   capture_conventions: str = "default", capture_stop_words: str = "authors",
                   off_grid: str = "error") -> dict[str, Any]:
    """The evaluation of a predictions file; the project protocol reads it clip by clip."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    records, corrupt = read_ground_truth(gt_path, on_corrupt)
    if not records:
        raise RecordError(f"{gt_path}: the ground truth holds no clip; give the annotation file (or folder) of "
                          "the split the predictions are for")
    if protocol == "official":
        preds = load_predictions(pred_path)
        if level == "center":
            records, preds = centre_view(records, preds)
        report = evaluate_official(records, preds, text_encoder, caption_metrics, objectness_threshold,
                                   invalid=invalid, pred_source=str(pred_path))
        report["settings"]["level"] = "center" if level == "center" else "video"
    else:
        report = evaluate_prediction_stream(records, iter_prediction_file(pred_path), level, score_source,
                                            text_encoder, caption_metrics, capture, objectness_threshold,
                                            pred_source=str(pred_path), invalid=invalid,
                                            capture_conventions=capture_conventions,
                                            capture_stop_words=capture_stop_words, off_grid=off_grid)
    report["corrupt_ground_truth"] = corrupt
    return report


def _validated(records: Mapping[str, Any], preds: Mapping[str, dict], invalid: str, source: str):
    known = {k: v for k, v in preds.items() if k in records}
    sizes = {k: (records[k].width, records[k].height) for k in known}
    return validate_predictions(known, sizes, policy=invalid, source=source)


def evaluate_official(records: Mapping[str, Any], preds: Mapping[str, dict], text_encoder: Any,
                      caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                      objectness_threshold: float | None = None, invalid: str = "error",
                      pred_source: str = "<memory>") -> dict[str, Any]:
    """The official GROVE protocol (:mod:`metrics.protocols.official_iground`) on in-memory records and predictions.

    ``text_encoder``: an encoder instance, or the local ``bert-base-uncased`` folder (loaded with
    the script's 512-token truncation); ``"exact"``/``"minilm"`` are accepted but are not the
    official encoder. ``objectness_threshold`` keeps boxes scored strictly above it, as the
    official inference does.
    """
    from metrics.protocols.official_iground import evaluate_official_iground

    if text_encoder is None:
        raise ValueError("the official protocol's recall embeds phrases with bert-base-uncased: give its local "
                         "folder (--text-encoder PATH)")
    if isinstance(text_encoder, (str, os.PathLike)):
        from metrics.text_encoder import HFMeanPoolEncoder, build_text_encoder

        text_encoder = (HFMeanPoolEncoder(text_encoder, max_length=512) if Path(text_encoder).is_dir()
                        else build_text_encoder(text_encoder))
    extra = sorted(k for k in preds if k not in records)
    checked, validation = _validated(records, preds, invalid, pred_source)
    if objectness_threshold is not None:
        checked = {k: filter_by_objectness(p, objectness_threshold, strict=True) for k, p in checked.items()}
    out = evaluate_official_iground(records, checked, text_encoder, caption_metrics, source=pred_source)
    return {"metrics": {k: float(v) for k, v in out["metrics"].items()}, "num_clips": len(out["scored_clips"]),
            "missing_predictions": out["unscored_clips"], "ignored_predictions": extra,
            "invalid_predictions": validation.as_dict(),
            "settings": {"protocol": "official", "objectness_threshold": objectness_threshold,
                         "text_encoder": type(text_encoder).__name__, "invalid": invalid}}


def distinct_share(captions: Sequence[str]) -> float:
    """Distinct captions / captions (whitespace- and case-normalised); 0 for no caption."""
    if not captions:
        return 0.0
    return len({" ".join(c.lower().split()) for c in captions}) / len(captions)


def evaluate_predictions(records: Mapping[str, Any], preds: Mapping[str, dict], level: str = "both",
                         score_source: str = "constant", text_encoder: Any = "minilm",
                         caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                         capture: bool = True, objectness_threshold: float | None = None,
                         pred_source: str = "<memory>", invalid: str = "error",
                         capture_conventions: Any = "default", capture_stop_words: Any = "authors",
                         off_grid: str = "error", batch_clips: int = BATCH_CLIPS) -> dict[str, Any]:
    """The evaluator on in-memory GT records (key -> record) and predictions (the JSON format predict writes).

    ``invalid``: ``error`` rejects a predicted box that cannot be right (naming clip, frame and
    field), ``skip`` drops it and counts it in the report's ``invalid_predictions``.
    ``off_grid``: see :func:`metrics.evaluator.prediction_validation.place_on_grid`.
    """
    return evaluate_prediction_stream(records, preds.items(), level, score_source, text_encoder, caption_metrics,
                                      capture, objectness_threshold, pred_source, invalid, capture_conventions,
                                      capture_stop_words, off_grid, batch_clips)


def evaluate_prediction_stream(records: Mapping[str, Any], items: Iterable[tuple[str, Any]], level: str = "both",
                               score_source: str = "constant", text_encoder: Any = "minilm",
                               caption_metrics: Sequence[str] = ("BLEU-4", "METEOR", "ROUGE-L", "CIDEr"),
                               capture: bool = True, objectness_threshold: float | None = None,
                               pred_source: str = "<memory>", invalid: str = "error",
                               capture_conventions: Any = "default", capture_stop_words: Any = "authors",
                               off_grid: str = "error", batch_clips: int = BATCH_CLIPS) -> dict[str, Any]:
    """:func:`evaluate_predictions` on ``(clip key, prediction)`` pairs that stream by (a file read
    clip by clip): grounding metrics are reduced per batch of ``batch_clips`` clips, so memory
    holds the GT, the captions and a compact record per counted detection, not the predictions."""
    if level not in LEVEL_CHOICES:
        raise ValueError(f"level must be one of {sorted(LEVEL_CHOICES)}, got {level!r}")
    if off_grid not in OFF_GRID_POLICIES:
        raise ValueError(f"off_grid must be one of {OFF_GRID_POLICIES}, got {off_grid!r}")
    if invalid not in INVALID_POLICIES:
        raise ValueError(f"invalid-prediction policy must be one of {INVALID_POLICIES}, got {invalid!r}")
    full = records  # the Center set-up grids predictions on the whole clip, then keeps its centre frame
    if level == "center":
        records = centre_records(full)
    keys = sorted(records)
    position = {k: i for i, k in enumerate(keys)}
    if text_encoder is None or isinstance(text_encoder, (str, os.PathLike)):
        from metrics.text_encoder import build_text_encoder

        text_encoder = build_text_encoder(text_encoder)
    grounding = GroundingAccumulator(text_encoder, levels=LEVEL_CHOICES[level], score_source=score_source)
    # Mask figures need masks on both sides; the GT decides whether they are computed at all.
    masks = (GroundingAccumulator(text_encoder, levels=LEVEL_CHOICES[level], score_source=score_source,
                                  iou_kind="mask")
             if any(getattr(records[k], "masks", None) is not None for k in keys) else None)
    predicted_masks = named_masks = False
    gcg = {"miou_sum": 0.0, "images": 0.0, "matches": 0.0, "true_phrases": 0.0}

    def add_gcg(gt_frames: Mapping[str, list], predicted: Mapping[str, list]) -> None:
        images = []
        for key, frames in gt_frames.items():
            by_frame = {f.frame: f for f in predicted.get(key, [])}
            for f in frames:
                truth = [(m, l) for m, l in zip(f.masks or [], f.labels) if m is not None]
                if not truth:
                    continue
                p = by_frame.get(f.frame)
                pred = [(m, l) for m, l in zip(p.masks or [], p.labels) if m is not None] if p is not None else []
                images.append(GCGImage([m for m, _ in truth], [l for _, l in truth], [m for m, _ in pred],
                                       [l for _, l in pred]))
        for name, value in gcg_mask_sums(images, text_encoder, vocabulary=vocabulary_of(text_encoder)).items():
            gcg[name] += value
    seen = np.zeros(len(keys), dtype=bool)
    extra: list[str] = []
    captions: dict[str, str] = {}
    validation, off_grid_report = ValidationReport(), OffGridReport()

    def in_gt() -> Iterator[tuple[str, Any]]:
        for key, pred in items:
            if key in position:
                seen[position[key]] = True
                yield key, pred
            else:
                extra.append(key)

    for batch in batched(in_gt(), batch_clips):
        known = dict(batch)
        checked, report = validate_predictions(known, {k: (records[k].width, records[k].height) for k in known},
                                               policy=invalid, source=pred_source)
        validation.skipped_boxes += report.skipped_boxes
        validation.by_field.update(report.by_field)
        validation.examples.extend(report.examples[:max(0, MAX_EXAMPLES - len(validation.examples))])
        if masks is not None:
            predicted_masks |= any(carries_masks(p) for p in checked.values())
            named_masks |= any(names_masks(p) for p in known.values())
        if objectness_threshold is not None:
            checked = {k: filter_by_objectness(p, objectness_threshold) for k, p in checked.items()}
        pred_frames = {k: place_on_grid(k, frames_from_prediction(p, key=k, source=pred_source),
                                        full[k].frame_indices, off_grid, pred_source, off_grid_report)
                       for k, p in checked.items()}
        if level == "center":
            pred_frames = {k: [f for f in frames if f.frame == centre_frame(full[k])]
                           for k, frames in pred_frames.items()}
        captions.update({k: p.get("caption", "") for k, p in checked.items()})
        gt_frames = {k: frames_from_record(records[k]) for k in known}
        for accumulator in (grounding, masks):
            if accumulator is not None:
                accumulator.add(gt_frames, pred_frames, np.asarray([position[k] for k in known]))
        if masks is not None:
            add_gcg(gt_frames, pred_frames)
    missing = [k for k in keys if not seen[position[k]]]
    for batch in batched(missing, batch_clips):  # GT clips without a prediction: no predicted box
        gt_frames = {k: frames_from_record(records[k]) for k in batch}
        for accumulator in (grounding, masks):
            if accumulator is not None:
                accumulator.add(gt_frames, {}, np.asarray([position[k] for k in batch]))
        if masks is not None:
            add_gcg(gt_frames, {})
    results: dict[str, float] = dict(grounding.result(ignored_clips=len(extra)))
    if masks is not None and predicted_masks:
        results.update({f"mask_{name}": value for name, value in masks.result().items()
                        if not name.startswith("num_")})
        results["gcg_mask_mIoU"] = gcg["miou_sum"] / gcg["images"] if gcg["images"] else 0.0
        results["gcg_mask_recall"] = gcg["matches"] / gcg["true_phrases"] if gcg["true_phrases"] else 0.0
    masks_unavailable = None
    if masks is not None and named_masks and not predicted_masks:
        # A file whose every mask is null would score mask_AP50 = 0: say so and leave the figures out.
        masks_unavailable = (f"{pred_source}: the predictions have a 'masks' field but every mask is null, so "
                             "the mask figures (mask_*, gcg_mask_*) are not available; predict with a masker "
                             "(configs/masks.yaml) to score masks")
        warnings.warn(masks_unavailable, stacklevel=2)
    candidates = {k: captions.get(k, "") for k in keys}
    over_long: list[str] = []
    if caption_metrics:
        from metrics.functional.captioning import evaluate_captions

        over_long = sorted(over_limit(candidates, METEOR_MAX_CHARS))
        results.update(evaluate_captions({k: [records[k].caption] for k in keys}, candidates,
                                         metrics=caption_metrics))
    if capture:
        over_long = sorted({*over_long, *over_limit({k: [candidates[k], records[k].caption] for k in keys},
                                                    CAPTURE_MAX_CHARS)})
    if caption_metrics or capture:
        # A model that ignores the video writes one caption for every clip and can still beat a
        # worse constant caption on METEOR/CIDEr: report how many captions are distinct.
        results["distinct_captions"] = distinct_share(list(candidates.values()))
    if capture:
        from metrics.capture import CaptureScorer

        scored = CaptureScorer(text_encoder=text_encoder, conventions=capture_conventions,
                               stop_words=capture_stop_words).score(
            list(candidates.values()), [[records[k].caption] for k in keys], keys=keys)
        results["CAPTURE"] = float(scored["CAPTURE"])
    return {"metrics": {k: float(v) for k, v in results.items()}, "num_clips": len(keys),
            "missing_predictions": missing, "ignored_predictions": sorted(extra),
            "invalid_predictions": validation.as_dict(), "over_long_captions": over_long,
            "off_grid_frames": off_grid_report.as_dict(), "masks_unavailable": masks_unavailable,
            "settings": {"protocol": "project", "level": level, "score_source": score_source,
                         "objectness_threshold": objectness_threshold, "invalid": invalid, "off_grid": off_grid,
                         "capture_conventions": str(capture_conventions) if capture else None,
                         "capture_stop_words": str(capture_stop_words) if capture else None}}


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Lists of ``size`` items (the last one shorter) from any iterable."""
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def format_table(report: Mapping[str, Any]) -> str:
    rows = [(name, value) for name, value in report["metrics"].items()]
    width = max(len(n) for n, _ in rows) if rows else 10
    lines = [f"{'metric':<{width}}  value", f"{'-' * width}  ---------"]
    for name, value in rows:
        shown = f"{value:.0f}" if name.startswith("num_") else f"{value:.4f}"
        lines.append(f"{name:<{width}}  {shown}")
    lines.append(f"clips evaluated: {report['num_clips']}")
    if report.get("settings", {}).get("level") == "center":
        lines.append("set-up: Center (boxes of each clip's centre annotated frame only)")
    official = report.get("settings", {}).get("protocol") == "official"
    if report["missing_predictions"]:
        how = "left out, as the official protocol does" if official else "scored as empty"
        lines.append(f"missing from predictions ({how}): {len(report['missing_predictions'])}: "
                     + ", ".join(report["missing_predictions"][:20]))
    invalid = report.get("invalid_predictions") or {}
    if invalid.get("skipped_boxes"):
        fields = ", ".join(f"{f}: {n}" for f, n in invalid["by_field"].items() if n)
        lines.append(f"invalid predicted boxes skipped: {invalid['skipped_boxes']} ({fields}); first: "
                     + invalid["examples"][0])
    if report.get("corrupt_ground_truth"):
        lines.append(f"unreadable ground-truth files skipped: {len(report['corrupt_ground_truth'])}: "
                     + "; ".join(report["corrupt_ground_truth"][:5]))
    if report.get("over_long_captions"):
        lines.append(f"captions over {METEOR_MAX_CHARS} characters, left out of METEOR and CAPTURE: "
                     f"{len(report['over_long_captions'])}: " + ", ".join(report["over_long_captions"][:20]))
    if report.get("masks_unavailable"):
        lines.append(f"mask figures not available: {report['masks_unavailable']}")
    moved = report.get("off_grid_frames") or {}
    if moved.get("mapped_frames"):
        lines.append(f"off-grid predicted frames mapped to the nearest annotated frame: {moved['mapped_frames']} "
                     f"in {moved['clips']} clip(s); first: " + moved["examples"][0])
    if report["ignored_predictions"]:
        lines.append(f"predicted clips not in the GT (ignored): {len(report['ignored_predictions'])}: "
                     + ", ".join(report["ignored_predictions"][:20]))
    return "\n".join(lines)
