"""Identity measures (HOTA, DetA, AssA, IDF1, MOTA, ID switches; TrackEval) of long-video entity linking,
and the per-clip grounding and caption metrics of a long-video predict run.

    # the linking step alone: the true clip boxes, identities hidden per clip
    grove score-long-video --truth data/long/long.json --linking-alone
    # a long-video predict run's timeline.json (and the predictions_predict.json beside it)
    grove score-long-video --truth data/long/long.json --timeline runs/.../timeline.json

The ground truth is what ``grove synthetic-long`` writes next to its video. Prints
Markdown tables: the identity measures, and with ``--timeline`` the project's per-clip metrics
(AP50, mIoU, recall at video and frame level, BLEU-4, METEOR, ROUGE-L, CIDEr, CAPTURE) of the
run's clips against the clip records made from the ground truth (:mod:`longvideo.clip_records`).
docs/long_video.md has the figures and their commands.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility: must precede transformers)
from core.cli_args import json_file, positive_float, unit_float
from core.command_parser import CommandParser

import argparse
import json
from pathlib import Path

from formats.frame_grids import annotation_step
from longvideo.clip_scoring import CAPTION_METRICS, score_run_clips
from longvideo.linking import LinkingWeights
from longvideo.scoring import (
    METRIC_NAMES,
    TruthMismatchError,
    check_truth_matches_video,
    clips_from_truth,
    entity_tracks,
    identity_scores,
    per_clip_tracks,
)
from longvideo.timeline import build_timeline, read_timeline, text_vectors


def linking_alone(truth: dict, clip_seconds: float, paraphrase: float, seed: int, encoder: str) -> list[tuple]:
    """Rows ``(name, scores)``: no linking, box only, meaning only, box + meaning."""
    clips, predictions = clips_from_truth(truth, clip_seconds, paraphrase, seed)
    text = text_vectors(predictions, encoder)
    step = annotation_step(truth["fps"])
    video = {k: truth[k] for k in ("fps", "num_frames", "width", "height")} | {"video_id": truth["video"]}
    floor = identity_scores(truth["frames"], per_clip_tracks(clips, predictions))
    rows = [("no linking (each clip's phrases new)", floor)]
    for name, weights, vectors in (("box continuity only", LinkingWeights(adjacent_frames=step), None),
                                   ("phrase meaning only", LinkingWeights(box=0.0, adjacent_frames=step), text),
                                   ("box + meaning (default)", LinkingWeights(adjacent_frames=step), text)):
        timeline = build_timeline(video, clips, predictions, text_vectors=vectors, weights=weights)
        rows.append((f"{name}: {len(timeline['entities'])} entities", identity_scores(truth["frames"],
                                                                                     entity_tracks(timeline))))
    return rows


def table(rows: list[tuple]) -> str:
    lines = ["| linking | " + " | ".join(METRIC_NAMES) + " |", "|---" * (len(METRIC_NAMES) + 1) + "|"]
    for name, scores in rows:
        cells = [f"{scores[m]:.3f}" if isinstance(scores[m], float) else str(scores[m]) for m in METRIC_NAMES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


CLIP_METRICS = ("AP50", "mIoU", "recall", "AP50_frame", "mIoU_frame", "recall_frame", *CAPTION_METRICS, "CAPTURE")
TRUE_BOXES_NOTE = ("Per-clip metrics of the true clip boxes (--linking-alone) are not computed: their grounding is "
                   "exact by construction (AP50 = mIoU = recall = 1).")


def clip_table(rows: list[tuple]) -> str:
    """``(name, report)`` rows: the metrics every report has, in :data:`CLIP_METRICS` order, and the clip count."""
    names = [m for m in CLIP_METRICS if all(m in report["metrics"] for _, report in rows)]
    lines = ["| clips | n | " + " | ".join(names) + " |", "|---" * (len(names) + 2) + "|"]
    for name, report in rows:
        cells = [f"{report['metrics'][m]:.3f}" for m in names]
        lines.append(f"| {name} | {report['num_clips']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def clip_notes(report: dict) -> list[str]:
    """What the per-clip table does not show: clips scored as empty, clips without a visible object."""
    notes = []
    if report["missing_predictions"]:
        notes.append(f"clips not predicted, scored as empty: {len(report['missing_predictions'])}: "
                     + ", ".join(report["missing_predictions"][:20]))
    excluded = int(report["metrics"].get("num_videos_excluded", 0))
    if excluded:
        notes.append(f"clips with no visible object (left out of the grounding means): {excluded}")
    if report.get("over_long_captions"):
        notes.append(f"captions left out of METEOR and CAPTURE (too long): {len(report['over_long_captions'])}")
    return notes


def main(argv: list[str] | None = None) -> dict[str, list[tuple]]:
    """Prints the tables; returns ``{"identity": [(name, scores)], "clips": [(name, evaluator report)]}``."""
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--truth", role="input", required=True, type=json_file,
                        help="ground truth JSON of grove synthetic-long")
    parser.add_argument("--timeline", role="input", type=json_file,
                        help="timeline.json of a long-video predict run on that video")
    parser.add_argument("--linking-alone", action="store_true", help="score linking the true clip boxes")
    parser.add_argument("--clip-seconds", type=positive_float, default=8.0, help="the run's data.video_clip_seconds")
    parser.add_argument("--paraphrase", type=unit_float, default=0.5, help="share of clip phrases paraphrased")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--text-encoder", default="minilm",
                        help="phrase encoder of the linking's meaning cue and of the per-clip recall")
    parser.add_argument("--caption-metrics", default=",".join(CAPTION_METRICS),
                        help="per-clip caption metrics, comma-separated; empty to skip (they need Java)")
    parser.add_argument("--no-capture", action="store_true", help="leave CAPTURE out of the per-clip metrics")
    args = parser.parse_args(argv)
    truth = json.loads(Path(args.truth).read_text())
    if truth.get("format") != "grove-long-synthetic":
        raise SystemExit(f"--truth {args.truth}: not a long synthetic ground truth (format "
                         f"{truth.get('format')!r}, expected 'grove-long-synthetic')")
    rows, clip_rows, notes = [], [], []
    if args.linking_alone:
        rows += linking_alone(truth, args.clip_seconds, args.paraphrase, args.seed, args.text_encoder)
        notes.append(TRUE_BOXES_NOTE)
    if args.timeline:
        document = read_timeline(args.timeline)
        matches = [v for v in document["videos"] if Path(v.get("path", "")).name == truth["video"]]
        if not matches:
            raise SystemExit(f"--timeline {args.timeline}: no video named {truth['video']!r} in it")
        timeline = matches[0]
        try:
            check_truth_matches_video(truth, timeline, f"--truth {args.truth}", f"--timeline {args.timeline}")
        except TruthMismatchError as err:
            raise SystemExit(f"error: {err}") from None
        predictions_path = Path(args.timeline).with_name("predictions_predict.json")
        if predictions_path.is_file():  # the same run's clips, unlinked: the floor
            predictions = json.loads(predictions_path.read_text())
            rows.append(("model clips, no linking", identity_scores(
                truth["frames"], per_clip_tracks(timeline["segments"], predictions))))
        rows.append((f"model timeline: {len(timeline['entities'])} entities",
                     identity_scores(truth["frames"], entity_tracks(timeline))))
        if predictions_path.is_file():
            try:
                report = score_run_clips(truth, timeline, predictions_path, args.clip_seconds, args.text_encoder,
                                         [m for m in args.caption_metrics.split(",") if m], not args.no_capture,
                                         timeline_source=args.timeline)
            except ValueError as err:
                raise SystemExit(f"error: {err}") from None
            clip_rows.append(("model clips", report))
            notes += clip_notes(report)
        else:
            notes.append(f"no {predictions_path}: the run's per-clip metrics are not computed")
    if not rows:
        raise SystemExit("give --linking-alone and/or --timeline")
    print(table(rows))
    if clip_rows:
        print("\n" + clip_table(clip_rows))
    if notes:
        print("\n" + "\n".join(notes))
    return {"identity": rows, "clips": clip_rows}
