"""``grove live SOURCE --config ... --ckpt-path ... --out DIR``: grounded captions of a live source.

Writes ``DIR/clips.jsonl`` (one line per clip as it is predicted: times, caption, phrases with entity
ids, boxes per grid frame with their entity, latency from the clip's last frame arriving to the line
being written, clips dropped so far), optionally the same lines on stdout, and at the end (the
source ended, Ctrl-C or SIGTERM) ``DIR/timeline.json``, ``DIR/predictions.json`` (the clips in the
predictions format), ``DIR/live.json`` (why it ended, dropped clips, gaps) and, with ``--render``, the
entity-coloured MP4 for a file source.
"""
from __future__ import annotations

from core.cli_args import existing_file, existing_path, non_negative_int, positive_float
from core.command_parser import CommandParser
from core.output_files import write_json_atomic
from core.weights import load_state_dict_file

import json
import signal
import sys
from pathlib import Path
from typing import Any

from formats.live_source import LiveSource
from live.scheduler import POLICIES
from live.session import LiveSession
from longvideo.timeline import timeline_document


def load_model(configs: list[str], ckpt_path: str | None, overrides: list[str]):
    """The configured module (weights from ``ckpt_path``) and datamodule, as ``cli.py predict`` builds them."""
    from core.config_loader import ConfigLoader

    class Loader(ConfigLoader):
        weights_follow = ckpt_path is not None  # the towers' init-time files are not needed then

    args = [a for c in configs for a in ("--config", c)] + ["--data.init_args.num_workers=0", *overrides]
    loaded = Loader(subclass_mode_model=True, subclass_mode_data=True, save_config_callback=None,
                    parser_kwargs={"parser_mode": "omegaconf"}, args=args, run=False)
    module, datamodule = loaded.model, loaded.datamodule
    if ckpt_path is not None:
        module.load_state_dict(load_state_dict_file(ckpt_path, "--ckpt-path"), strict=module.strict_loading)
    return module.eval(), datamodule


def session_for(module, datamodule, source: LiveSource, clip_seconds: float, stride_seconds: float | None,
                policy: str, text_encoder: str | None, appearance: bool, video_id: str = "live") -> LiveSession:
    """A :class:`LiveSession` running ``module`` with the datamodule's clip preprocessing and the
    long-video mode's linking settings (:class:`longvideo.timeline_writer.LongVideoTimeline`)."""
    from longvideo.timeline_writer import LongVideoTimeline  # a Lightning callback: imported when a run starts
    from models.grove.clip_processing import GroundedCollate
    from models.grove.processing import GroveProcessor

    hp = datamodule.hparams
    processor = GroveProcessor(preprocessing=dict(
        num_frames=hp.num_frames, global_image_size=hp.global_image_size, global_resize=hp.global_resize,
        grounding_image_size=hp.grounding_image_size, grounding_resize=hp.get("grounding_resize", "float")))
    writer = LongVideoTimeline(text_encoder=text_encoder, appearance=appearance, render=False)
    encode = getattr(module.model, "encode_grounding", None)
    appearance_of = (lambda batch, preds: writer.appearance_vectors(encode, batch, preds)) \
        if appearance and encode is not None else None
    text_vectors = None
    if text_encoder is not None:
        from longvideo.timeline import text_vectors as embed

        def text_vectors(phrases):
            return embed({"new": {"phrases": phrases}}, text_encoder)

        text_vectors(["a warm-up phrase"])  # the encoder loads now, not in the first clip's latency

    return LiveSession(source, processor, GroundedCollate(datamodule.prompter),
                       lambda batch: module.predict_clips(batch, masks=getattr(module, "masker", None) is not None),
                       appearance_of, text_vectors, clip_seconds, stride_seconds, policy,
                       weights=writer.weights, video_id=video_id)


def finish(session: LiveSession, out: Path, render: bool) -> dict[str, Any]:
    """Write the timeline and the run's summary (and the MP4); the summary."""
    timeline = session.timeline()
    summary = session.summary()
    if timeline is not None:
        write_json_atomic(out / "timeline.json", timeline_document([timeline]), indent=None)
        write_json_atomic(out / "predictions.json", session.predictions, indent=None)
        summary["entities"] = len(timeline["entities"])
        if render and Path(session.source.source).is_file():
            from longvideo.render import render_timeline_video

            summary["video"] = str(render_timeline_video(timeline, out / "annotated.mp4"))
    write_json_atomic(out / "live.json", summary, indent=1)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="grove live", description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="URL (rtsp/http/hls/udp/tcp/srt), /dev/videoN, a file, or - for stdin")
    parser.add_argument("--config", action="append", required=True, role="input", type=existing_file,
                        help="the model's config (repeat to stack)")
    parser.add_argument("--ckpt-path", role="input", type=existing_path, help="the checkpoint's weights")
    parser.add_argument("--out", required=True, role="output", help="output folder")
    parser.add_argument("--clip-seconds", type=positive_float, default=8.0)
    parser.add_argument("--stride-seconds", type=positive_float, default=None,
                        help="step between clip starts (default: tiled)")
    parser.add_argument("--skip-policy", choices=POLICIES, default=None,
                        help="when the model falls behind (default: drop-oldest live, queue for a plain file)")
    parser.add_argument("--follow", action="store_true", help="read a file while it is being written")
    parser.add_argument("--stall-timeout", type=positive_float, default=5.0,
                        help="seconds without data that are a stall")
    parser.add_argument("--reconnects", type=non_negative_int, default=3, help="reopenings of a network source")
    parser.add_argument("--listen", type=positive_float, default=None, metavar="SECONDS",
                        help="serve the rtsp:// or tcp:// address and wait up to SECONDS for the source to push "
                             "to it (RTSP's listen mode: ffmpeg -f rtsp URL publishes)")
    parser.add_argument("--fps", type=positive_float, default=None, help="frame rate when the stream does not say")
    parser.add_argument("--format", default=None, help="FFmpeg demuxer (v4l2, mpegts, ...)")
    parser.add_argument("--text-encoder", default="minilm", help="meaning cue encoder ('none': off)")
    parser.add_argument("--no-appearance", action="store_true", help="no appearance cue")
    parser.add_argument("--video-id", default=None, help="the clips' key prefix (default: the source's stem)")
    parser.add_argument("--stdout", action="store_true", help="also print each clip's line on stdout")
    parser.add_argument("--render", action="store_true", help="the entity-coloured MP4 (file sources)")
    parser.epilog = "Config overrides (--key=value, as cli.py takes them) go after --."
    argv = list(sys.argv[1:] if argv is None else argv)
    overrides = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    source = LiveSource(args.source, follow=args.follow, stall_timeout=args.stall_timeout,
                        reconnects=args.reconnects, fps=args.fps, input_format=args.format, listen=args.listen)
    live = args.follow or source.network or args.source == "-" or args.source.startswith("/dev/")
    policy = args.skip_policy or ("drop-oldest" if live else "queue")
    module, datamodule = load_model(args.config, args.ckpt_path, overrides)
    text_encoder = None if args.text_encoder == "none" else args.text_encoder
    session = session_for(module, datamodule, source, args.clip_seconds, args.stride_seconds, policy,
                          text_encoder, not args.no_appearance,
                          args.video_id or Path(args.source.split("?")[0]).stem or "live")
    previous = {s: signal.signal(s, lambda *_: session.stop()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with open(out / "clips.jsonl", "w") as lines:
            for record in session.run():
                line = json.dumps(record)
                lines.write(line + "\n")
                lines.flush()
                if args.stdout:
                    print(line, flush=True)
                else:
                    print(f"{record['start_s']:.1f}-{record['end_s']:.1f} s (latency {record['latency_s']:.2f} s, "
                          f"dropped {record['dropped']}): {record['caption']}", file=sys.stderr, flush=True)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        summary = finish(session, out, args.render)
    print(f"live: {summary['clips']} clip(s), {len(summary['dropped_clips'])} dropped, ended: {summary['ended']}; "
          f"{out / 'clips.jsonl'}, {out / 'timeline.json'}", file=sys.stderr)
    return 0
