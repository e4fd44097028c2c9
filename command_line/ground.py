"""``grove ground VIDEO --query TEXT [--query TEXT ...] --config CFG --ckpt-path CKPT --out DIR``.

Grounds each query (a phrase, or a sentence with its phrases marked ``<p>...</p>``) on the clip
``--start-frame .. --end-frame`` of the video (default: all of it) with a trained checkpoint, as
:meth:`models.grove.processing.GroveProcessor.ground` does: teacher-forced, every 5-fps grid frame
boxed or absent by the objectness. Writes ``DIR/predictions.json`` (the predictions format, one entry
per query, plus ``query``, ``referent`` and every frame's ``objectness``) and ``DIR/ground.mp4`` (the
video with each query's referent drawn in its own colour). With ``--config configs/masks.yaml``
stacked, every kept box has a mask too. ``--clip-seconds`` grounds a long video clip by clip, each
query's tube joined across the clips (:mod:`longvideo.query_tubes`).
"""
from __future__ import annotations

from core.cli_args import existing_file, existing_path, non_negative_int, positive_float, unit_float
from core.command_parser import CommandParser

import argparse
import json
from pathlib import Path


def parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="grove ground", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("video", type=existing_file, help="the video file")
    p.add_argument("--query", action="append", required=True,
                   help="a phrase or a tagged sentence to ground (repeat for several)")
    p.add_argument("--config", action="append", required=True, type=existing_file,
                   help="the model's config (repeat to stack)")
    p.add_argument("--ckpt-path", required=True, type=existing_path,
                   help="a checkpoint of `grove fit` or an exported folder")
    p.add_argument("--out", required=True, role="output", help="the folder for predictions.json and ground.mp4")
    p.add_argument("--start-frame", type=non_negative_int, default=None, help="first source frame (default 0)")
    p.add_argument("--end-frame", type=non_negative_int, default=None, help="last source frame (default the last)")
    p.add_argument("--objectness-threshold", type=unit_float, default=None,
                   help="keep a box when its objectness reaches this (default the model's)")
    p.add_argument("--clip-seconds", type=positive_float, default=None,
                   help="long-video mode: cut the video into clips of this length, each query's tube joined across "
                        "them (default: the clip --start-frame..--end-frame as one clip)")
    p.add_argument("--stride-seconds", type=positive_float, default=None, help="with --clip-seconds: the clips' stride")
    p.add_argument("--no-video", action="store_true", help="write predictions.json only")
    return p


def processor_of(module, datamodule):
    """The processor a trained GroveModule predicts with (:func:`models.grove.query_grounding.module_processor`)."""
    from models.grove.processing import module_processor

    return module_processor(module, getattr(datamodule, "hparams", None))


def main(argv: list[str] | None = None) -> Path:
    args, overrides = parser().parse_known_args(argv)
    bad = [o for o in overrides if not o.startswith(("--model.", "--data.", "--trainer."))]
    if bad:
        parser().error(f"unrecognised arguments: {' '.join(bad)}")
    from models.grove.query_grounding import parse_queries, parse_query, queries_as_prediction

    if args.clip_seconds is not None and (args.start_frame is not None or args.end_frame is not None):
        parser().error("--clip-seconds grounds the whole video: leave out --start-frame and --end-frame")
    for query in args.query:  # malformed queries are refused before the model is built
        parse_query(query)
    from command_line.model_export import build_module

    module, datamodule = build_module(args.config, args.ckpt_path, overrides)
    model = module.model
    parse_queries(model, args.query)  # refuse a bad query before the video is read
    processor = processor_of(module, datamodule)
    video = str(Path(args.video).resolve())
    if args.clip_seconds is None:
        entries = processor.ground(model, video, args.query, args.start_frame, args.end_frame,
                                   args.objectness_threshold)
    else:
        from longvideo.query_tubes import ground_video_queries

        if args.objectness_threshold is not None:
            processor.inference["objectness_threshold"] = args.objectness_threshold
        entries = ground_video_queries(model, processor, video, args.query, args.clip_seconds, args.stride_seconds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "predictions.json").write_text(json.dumps(entries, indent=1), encoding="utf-8")
    for entry in entries.values():
        kept = len(entry["frames"])
        print(f"{entry['query']!r}: {entry['referent']!r} on {kept} of {len(entry['objectness']['frames'])} frames")
    if not args.no_video:
        from callbacks.annotated_video import ClipPrediction, render_annotated_video
        from formats.unannotated_records import video_clip_record
        from formats.video_files import open_video

        record = video_clip_record(video, args.start_frame, args.end_frame)
        with open_video(Path("/"), record.video_fname) as source:
            path = render_annotated_video(source, out / "ground.mp4",
                                          [ClipPrediction(record, queries_as_prediction(entries))],
                                          record.clip_start_frame, record.clip_end_frame, record.fps)
        print(f"wrote {out / 'predictions.json'} and {path}")
    return out


__all__ = ["main", "parser", "processor_of"]
