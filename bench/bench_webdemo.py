"""Seconds from upload to result in the web demo, for an 8-s synthetic clip (128 px, 25 fps), on this machine.

A real ``grove webdemo`` server and headless Chromium: the clock runs from the upload to the
caption appearing in the page (upload, decoding, caption generation, grounding on all 40 grid
frames, drawing the annotated MP4, page update); the server's own prediction time is read from
the status line.

    PYTHONPATH=. .venv/bin/python bench/bench_webdemo.py [--ckpt-path CKPT] [--repeats 3] [--screenshot PNG]
        [--key=value ...]

Without ``--ckpt-path`` it takes the newest best checkpoint of ``make demo`` (runs/demo/), else a
randomly initialised demo-size model with random towers (said in the output).
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import json
import re
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RANDOM_TOWERS = ["--model.init_args.global_encoder.checkpoint=null",
                 "--model.init_args.grounding_encoder.checkpoint=null"]


def random_checkpoint(config: str, folder: Path, overrides: list[str]) -> Path:
    """The config's model, randomly initialised, saved as a checkpoint holding only its weights."""
    import torch

    from command_line.grove_cli import cli_main

    cli = cli_main(["--config", config, *RANDOM_TOWERS, *overrides], run=False)
    path = folder / "random_init.ckpt"
    torch.save({"state_dict": cli.model.state_dict()}, path)
    return path


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "demo.yaml"))
    parser.add_argument("--ckpt-path", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--screenshot", default=None, help="save a PNG of the last result page here")
    args, overrides = parser.parse_known_args(argv)
    from webdemo.browser import chromium_page, demo_server, upload_and_predict
    from webdemo.samples import write_samples

    with tempfile.TemporaryDirectory(prefix="bench-webdemo-") as tmp:
        tmp = Path(tmp)
        ckpt, model = args.ckpt_path, "the given checkpoint"
        if ckpt is None:
            found = sorted(ROOT.glob("runs/demo/version_*/checkpoints/best-*.ckpt"), key=lambda p: p.stat().st_mtime)
            if found:
                ckpt, model = str(found[-1]), "make demo's best checkpoint"
            else:
                overrides = [*RANDOM_TOWERS, *overrides]
                ckpt, model = str(random_checkpoint(args.config, tmp, overrides)), "randomly initialised (no demo run)"
        (sample,) = write_samples(tmp / "samples", count=1)
        server_args = ["--config", args.config, "--ckpt-path", ckpt, "--samples", "1", *overrides]
        seconds, server = [], []
        with demo_server(server_args, tmp / "server.log") as (url, _), chromium_page() as page:
            for _ in range(args.repeats):
                seconds.append(round(upload_and_predict(page, url, sample.path), 2))
                status = page.inner_text("#grove-status")
                match = re.search(r"predicted in ([0-9.]+) s", status)
                server.append(float(match.group(1)) if match else None)
                caption = page.inner_text("#grove-caption")
            if args.screenshot:  # three quarters into the clip, in the frame view and the video
                page.locator("#grove-frame-slider input[type=range]").fill("30")
                page.wait_for_function("() => document.querySelector('#grove-frame-label').innerText.includes('31 of')")
                page.eval_on_selector("#grove-annotated video", "v => { v.currentTime = 6.0; }")
                page.wait_for_timeout(1500)
                page.screenshot(path=args.screenshot, full_page=True)
    report = {"checkpoint": ckpt, "model": model, "clip": "8 s synthetic, 128x128, 25 fps (1 clip, 40 grid frames)",
              "upload_to_result_s": seconds, "server_predict_s": server, "caption": caption.strip(),
              "ground_truth_caption": sample.caption}
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
