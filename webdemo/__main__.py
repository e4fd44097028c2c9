"""``grove webdemo [serve] --config CONFIG --ckpt-path CKPT [--judge JUDGE] [--port N]``: serve the demo locally.

``grove webdemo timeline RUN/timeline.json [--port 7861]`` serves the timeline page of a finished
long-video predict run instead.

The page's long-video mode stacks ``--long-video-config`` (``configs/overlays/long_video.yaml``) on the
configs, as ``cli.py predict --config CONFIG --config configs/overlays/long_video.yaml`` does.

Arguments the demo does not know (``--model.init_args.max_new_tokens=32``, ...) go to the config
parsing as they would on ``cli.py predict``.
"""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import existing_file, non_negative_int, port_number
from core.command_parser import CommandParser
from core.user_errors import UserInputError, run_command

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from webdemo.workspace import Workspace


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    parser = CommandParser(prog="grove webdemo serve", description=__doc__.splitlines()[0])
    parser.add_argument("--config", role="input", action="append", required=True,
                        help="the config the checkpoint was trained with (repeat to stack configs)")
    parser.add_argument("--ckpt-path", role="input", required=True,
                        help="a GROVE checkpoint (cli.py fit, or a converted release) or an exported folder")
    parser.add_argument("--judge", role="input", default=None,
                        help="VC-Inspector judge to rate each clip's caption: a judge .ckpt, a released Hugging Face "
                             "folder, a LoRA adapter folder, or a judge config (with --judge-ckpt)")
    parser.add_argument("--judge-ckpt", role="input", default=None,
                        help="checkpoint of the judge config given as --judge")
    parser.add_argument("--long-video-config", role="input", default=None,
                        help="the overlay the page's long-video mode stacks on --config, as cli.py predict stacks it "
                             "(default: configs/overlays/long_video.yaml)")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on (default: this machine only)")
    parser.add_argument("--port", type=port_number, default=7860)
    parser.add_argument("--samples", type=non_negative_int, default=3,
                        help="synthetic sample videos offered on the page")
    return parser.parse_known_args(argv)


# Seconds a stopping server waits for the prediction in flight to reach its next batch.
STOP_WAIT_S = 60.0


def _stop(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop at a time; SIGKILL still ends it at once
    raise KeyboardInterrupt


def timeline_main(argv: list[str] | None = None) -> None:
    """``grove webdemo timeline RUN/timeline.json``: the long-video timeline page."""
    from longvideo.timeline import read_timeline
    from webdemo.timeline import build_timeline_app

    parser = CommandParser(prog="grove webdemo timeline", description=timeline_main.__doc__)
    parser.add_argument("timeline", role="input", type=existing_file, help="timeline.json of a long-video predict run")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port_number, default=7861)
    args = parser.parse_args(argv)
    document = read_timeline(Path(args.timeline))
    build_timeline_app(document).launch(server_name=args.host, server_port=args.port, show_error=True)


def main(argv: list[str] | None = None) -> None:
    """``grove webdemo [serve] ...`` or ``grove webdemo timeline ...``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["timeline"]:
        return timeline_main(argv[1:])
    return serve_main(argv[1:] if argv[:1] == ["serve"] else argv)


def serve_main(argv: list[str] | None = None) -> None:
    args, overrides = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for option, path in [*(("--config", p) for p in args.config),
                         *([("--long-video-config", args.long_video_config)] if args.long_video_config else [])]:
        if not Path(path).is_file():
            raise UserInputError(f"{path}: no such file (given as {option})")
    if not Path(args.ckpt_path).exists():
        raise UserInputError(f"{args.ckpt_path}: no such file or folder (--ckpt-path takes a checkpoint file or an "
                             "exported folder)")
    signal.signal(signal.SIGTERM, _stop)  # a terminated server cleans up like an interrupted one
    with Workspace() as workspace:
        logging.getLogger("webdemo").info("temporary folder %s (removed when the server stops)", workspace.root)
        # Gradio keeps uploads and served files in its cache: inside the workspace, removed with it
        os.environ["GRADIO_TEMP_DIR"] = str(workspace.uploads_dir)
        from webdemo.app import CSS, THEME, build_app
        from webdemo.predictor import DemoPredictor
        from webdemo.samples import write_samples

        samples = write_samples(workspace.samples_dir, count=max(1, args.samples))
        long_video = {"long_video_config": args.long_video_config} if args.long_video_config else {}
        predictor = DemoPredictor(args.config, args.ckpt_path, samples[0].path, overrides, **long_video)
        judge = None
        if args.judge:
            from webdemo.judging import load_clip_judge

            judge = load_clip_judge(args.judge, args.judge_ckpt)
        demo = build_app(predictor, workspace, samples[:args.samples], judge)
        try:
            demo.queue(default_concurrency_limit=1).launch(
                server_name=args.host, server_port=args.port, allowed_paths=[str(workspace.root)], show_error=False,
                css=CSS, theme=THEME, footer_links=[])
        finally:
            # Gradio returns from launch on SIGINT/SIGTERM with a prediction maybe still running in
            # its worker thread: end it before the interpreter exits around it
            log = logging.getLogger("webdemo")
            log.info("stopping: ending the prediction in flight, if any")
            if not predictor.stop(STOP_WAIT_S):
                log.error("a prediction did not stop within %.0f s; exiting without it", STOP_WAIT_S)
                workspace.close()
                logging.shutdown()
                os._exit(1)
            demo.close()


if __name__ == "__main__":
    run_command(main)
