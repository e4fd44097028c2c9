"""Identity measures (HOTA, DetA, AssA, IDF1, MOTA, ID switches; TrackEval) of long-video entity linking.

    # the linking step alone: the true clip boxes, identities hidden per clip
    python scripts/score_long_video.py --truth data/long/long.json --linking-alone
    # a long-video predict run's timeline.json
    python scripts/score_long_video.py --truth data/long/long.json --timeline runs/.../timeline.json

The ground truth is what ``python -m longvideo.synthetic_long`` writes next to its video. Prints a
Markdown table (docs/long_video.md has the figures and their commands).
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility: must precede transformers)
from core.command_parser import CommandParser

import argparse
import json
from pathlib import Path

from longvideo.linking import LinkingWeights
from longvideo.scoring import METRIC_NAMES, clips_from_truth, entity_tracks, identity_scores, per_clip_tracks
from longvideo.timeline import build_timeline, read_timeline


def text_vectors(predictions: dict, encoder: str) -> dict:
    from metrics.text_encoder import build_text_encoder, encode_unique

    phrases = sorted({p for pred in predictions.values() for p in pred["phrases"]})
    unique, embeddings, _ = encode_unique(build_text_encoder(encoder), phrases)
    return {p: e for p, e in zip(unique, embeddings.float().numpy())}


def linking_alone(truth: dict, clip_seconds: float, paraphrase: float, seed: int, encoder: str) -> list[tuple]:
    """Rows ``(name, scores)``: no linking, box only, meaning only, box + meaning."""
    clips, predictions = clips_from_truth(truth, clip_seconds, paraphrase, seed)
    text = text_vectors(predictions, encoder)
    step = max(1, int(round(float(truth["fps"]) / 5.0)))
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


def main(argv: list[str] | None = None) -> list[tuple]:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--truth", role="input", required=True,
                        help="ground truth JSON of python -m longvideo.synthetic_long")
    parser.add_argument("--timeline", role="input", help="timeline.json of a long-video predict run on that video")
    parser.add_argument("--linking-alone", action="store_true", help="score linking the true clip boxes")
    parser.add_argument("--clip-seconds", type=float, default=8.0)
    parser.add_argument("--paraphrase", type=float, default=0.5, help="share of clip phrases paraphrased")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--text-encoder", default="minilm")
    args = parser.parse_args(argv)
    truth = json.loads(Path(args.truth).read_text())
    if truth.get("format") != "grove-long-synthetic":
        raise SystemExit(f"--truth {args.truth}: not a long synthetic ground truth (format "
                         f"{truth.get('format')!r}, expected 'grove-long-synthetic')")
    rows = []
    if args.linking_alone:
        rows += linking_alone(truth, args.clip_seconds, args.paraphrase, args.seed, args.text_encoder)
    if args.timeline:
        document = read_timeline(args.timeline)
        matches = [v for v in document["videos"] if Path(v.get("path", "")).name == truth["video"]]
        if not matches:
            raise SystemExit(f"--timeline {args.timeline}: no video named {truth['video']!r} in it")
        timeline = matches[0]
        predictions_path = Path(args.timeline).with_name("predictions_predict.json")
        if predictions_path.is_file():  # the same run's clips, unlinked: the floor
            predictions = json.loads(predictions_path.read_text())
            rows.append(("model clips, no linking", identity_scores(
                truth["frames"], per_clip_tracks(timeline["segments"], predictions))))
        rows.append((f"model timeline: {len(timeline['entities'])} entities",
                     identity_scores(truth["frames"], entity_tracks(timeline))))
    if not rows:
        raise SystemExit("give --linking-alone and/or --timeline")
    print(table(rows))
    return rows


if __name__ == "__main__":
    main()
