"""The commands that write synthetic benchmark data: ``grove synthetic`` (the built-in grounded
captioning dataset), ``grove synthetic-pointing`` (the pointing benchmarks' layout),
``grove synthetic-long`` (one long video and its ground truth) and ``grove clip-records`` (the
per-clip records of a long video's ground truth). The generators are library functions of
:mod:`datamodules.synthetic`, :mod:`datamodules.synthetic_pointing`, :mod:`longvideo.synthetic_long`
and :mod:`longvideo.clip_records`; this module only parses their options.
"""
from __future__ import annotations

from core.cli_args import non_negative_int, positive_float, positive_int
from core.command_parser import CommandParser
from core.json_file import read_json
from core.user_errors import UserInputError

import json
import logging
from pathlib import Path
from typing import Any


def synthetic_main(argv: list[str] | None = None) -> dict[str, Any]:
    """Print the summary of the dataset under ``--root``, generating it first if absent.

    Options left unset take the existing dataset's values (so inspecting the demo's data reuses it,
    whatever sizes the demo chose), else the generator's defaults; an option set to another value
    than the existing data's regenerates it.
    """
    from core.paths import DATA_DIR

    from datamodules.synthetic import finished_config, generate_synthetic_dataset, summarize_dataset
    from datamodules.synthetic_scenes import SyntheticConfig

    parser = CommandParser(prog="grove synthetic",
                           description="Generate (if absent) and summarise the built-in synthetic dataset.")
    parser.add_argument("--root", role="output", default=str(DATA_DIR / "synthetic"))
    defaults = SyntheticConfig()
    for name, kind in (("num_train", non_negative_int), ("num_val", non_negative_int), ("num_test", non_negative_int),
                       ("seed", int), ("frame_size", positive_int), ("fps", positive_float),
                       ("duration_s", positive_float)):
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None,
                            help=f"default: the existing dataset's, else {getattr(defaults, name)}")
    parser.add_argument("--workers", type=positive_int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    existing = finished_config(args.root)
    config = dict(existing) if existing is not None else SyntheticConfig().to_json()
    given = {k: v for k, v in vars(args).items() if k not in ("root", "workers") and v is not None}
    config.update(given)
    if existing is not None and config == existing:
        print(f"{args.root}: reusing the dataset there (its manifest's config)")
    generate_synthetic_dataset(args.root, workers=args.workers, **config)
    summary = summarize_dataset(args.root)
    print(json.dumps(summary, indent=2))
    return summary


def synthetic_pointing_main(argv: list[str] | None = None) -> Path:
    """Synthetic data in the YouCook-Interactions / GroundingYouTube layout, for the pointing benchmark."""
    from datamodules.synthetic_pointing import generate_pointing_dataset

    parser = CommandParser(prog="grove synthetic-pointing", description=synthetic_pointing_main.__doc__)
    parser.add_argument("--out", role="output", required=True)
    parser.add_argument("--dataset", default="youcook", choices=["youcook", "groundingyoutube"])
    parser.add_argument("--clips", type=positive_int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--duration", type=positive_float, default=3.0, help="seconds per segment")
    args = parser.parse_args(argv)
    path = generate_pointing_dataset(args.out, args.dataset, args.clips, args.seed, duration_s=args.duration)
    print(f"wrote {args.clips} segments: {path} (videos in {path.parent / 'videos'})")
    return path


def synthetic_long_main(argv: list[str] | None = None) -> dict[str, Any]:
    """One long synthetic video (``OUT.mp4``), its ground truth (``OUT.json``) and per-clip records."""
    from longvideo.clip_records import clip_records_path
    from longvideo.synthetic_long import LongVideoConfig, generate_long_video

    parser = CommandParser(prog="grove synthetic-long", description=synthetic_long_main.__doc__)
    parser.add_argument("out", role="output", help="the video to write (its folders are created)")
    parser.add_argument("--minutes", type=positive_float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=positive_int, default=640)
    parser.add_argument("--height", type=positive_int, default=360)
    parser.add_argument("--fps", type=positive_float, default=30.0)
    parser.add_argument("--objects", type=positive_int, default=6)
    parser.add_argument("--object-size", type=positive_int, nargs=2, default=[28, 56], metavar=("MIN", "MAX"))
    parser.add_argument("--clip-seconds", type=positive_float, default=8.0,
                        help="clip length of the per-clip records (long-video predict's data.video_clip_seconds)")
    parser.add_argument("--no-video", action="store_true", help="write the ground truth only")
    args = parser.parse_args(argv)
    if args.object_size[0] > args.object_size[1]:
        parser.error(f"argument --object-size: MIN {args.object_size[0]} is above MAX {args.object_size[1]}")
    config = LongVideoConfig(duration_s=60 * args.minutes, fps=args.fps, width=args.width, height=args.height,
                             num_objects=args.objects, seed=args.seed, object_size=tuple(args.object_size))
    try:
        truth = generate_long_video(args.out, config, video=not args.no_video, clip_seconds=args.clip_seconds)
    except ValueError as err:  # sizes that do not fit together (frame, objects, wall)
        parser.error(f"{err} (--width, --height, --object-size)")
    truth_path = Path(args.out).with_suffix(".json")
    print(f"{args.out}: {config.num_frames} frames, {len(truth['objects'])} objects; ground truth "
          f"{truth_path}, per-clip records {clip_records_path(truth_path)}")
    return truth


def clip_records_main(argv: list[str] | None = None) -> Path:
    """Write ``OUT_clips.json``, the per-clip records of a long video's ground truth ``OUT.json``."""
    from longvideo.clip_records import write_clip_records

    parser = CommandParser(prog="grove clip-records", description=clip_records_main.__doc__)
    parser.add_argument("truth", role="input", help="ground truth JSON of grove synthetic-long")
    parser.add_argument("--clip-seconds", type=positive_float, default=8.0,
                        help="the predict run's data.video_clip_seconds")
    parser.add_argument("--out", role="output", default=None, help="default: OUT_clips.json beside OUT.json")
    args = parser.parse_args(argv)
    truth = read_json(args.truth)
    if not isinstance(truth, dict) or "video" not in truth:
        raise UserInputError(f"{args.truth}: not the ground truth of grove synthetic-long (no 'video' key); "
                             "give the OUT.json it wrote beside OUT.mp4")
    try:
        out = write_clip_records(truth, args.truth, args.clip_seconds, args.out)
    except ValueError as err:  # records_from_truth names the file and the entry
        raise UserInputError(str(err)) from None
    except (KeyError, TypeError) as err:
        raise UserInputError(f"{args.truth}: not the ground truth of grove synthetic-long ({err!r} is missing "
                             "or of the wrong type)") from None
    print(f"{out}: the per-clip records of {truth['video']}")
    return out
