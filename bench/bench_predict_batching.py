"""Model-forward throughput of prediction by batch size: ``predict_clips`` (``Grove.predict``) on 8 clips
as 8 calls of one clip and as one call of 8, in clips per second, on 1 and on 2 CPU threads.

    PYTHONPATH=. python bench/bench_predict_batching.py [--clips 8] [--batch-sizes 1 8] [--threads 1 2]
        [--captions generated given] [--repeats 3] [--max-new-tokens 64] [--config configs/demo.yaml]

To see where the time goes: ``PYTHONPATH=. python -m cProfile -s cumtime bench/bench_predict_batching.py
--batch-sizes 8 --threads 1 --repeats 1``.

The model is the config's GROVE (configs/demo.yaml: the demo's tiny sizes) with random weights
(``torch.manual_seed(0)``, no checkpoint; the compute per clip is the trained model's), its prompter
as ``GroveModule`` builds it (the config's chat template). The clips are what ``cli.py predict`` on a
video folder gives the model for 8-s clips: 40 grid frames at 5 fps, preprocessed to the config's
image sizes, ``caption_positions`` the 8 segment centres, ``window_mode=interleaved`` (5 windows of 8
frames). ``--captions generated``: what ``cli.py predict`` runs, a greedy caption per clip then its
grounding on every window; the model is random, so are its captions: up to ``--max-new-tokens``
each, and whatever number of phrases it writes (often none: such a clip has no windows to ground,
where a trained model's captions always have phrases). ``--captions given``: the grounding alone,
on given captions of 1 to 4 phrases (teacher forcing, as VidSTG predicts), so that every clip's
windows run. Decoding, collation and writing are not timed (bench/bench_predict.py times the whole
command). Each figure is the best of ``--repeats`` runs: wall-clock clips/s, and clips per CPU-second
of the process, which a loaded machine disturbs less (on one thread the two agree when it is idle).
Every batch size's predictions are compared with the first's (captions identical, largest box
difference in pixels) so that a speed-up that changes predictions shows up here.
"""
from __future__ import annotations

import core  # noqa: F401

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import torch

from models.grove import Grove
from models.grove.clip_processing import evaluation_positions
from models.grove.configuration import model_configs_from_yaml, read_stacked_yaml
from models.grove.processing import predict_clips

ROOT = Path(__file__).resolve().parent.parent
GRID_FRAMES = 40  # an 8-s clip on the 5-fps grid
PHRASES = ("<p> a person </p> [DET] cuts", "<p> a red onion </p> [DET] with", "<p> a knife </p> [DET] on",
           "<p> the wooden board </p> [DET]")


def build_model(config: Path) -> Grove:
    """The config's GROVE with random weights and GroveModule's prompter settings."""
    configs = model_configs_from_yaml([config])
    configs = {name: replace(part, checkpoint=None) if hasattr(part, "checkpoint") else part
               for name, part in configs.items()}
    init_args = (read_stacked_yaml([config]).get("model") or {}).get("init_args") or {}
    torch.manual_seed(0)
    model = Grove(**configs).eval()
    model.prompter = model.make_prompter(sample_question=bool(init_args.get("sample_question", True)),
                                         template=init_args.get("chat_template", "vicuna_v1"))
    return model


def make_clips(model: Grove, count: int, seed: int = 0) -> list[dict]:
    """``count`` preprocessed one-clip batches of ``GRID_FRAMES`` frames, as the video-folder predict gives them."""
    gen = torch.Generator().manual_seed(seed)
    global_size = model.global_encoder.config.image_size
    grounding_size = model.grounding_encoder.config.image_size
    positions, caption_positions = evaluation_positions(GRID_FRAMES, 8)
    clips = []
    for i in range(count):
        clips.append({
            "keys": [f"clip{i}"],
            "global_frames": torch.randn(1, GRID_FRAMES, 3, global_size, global_size, generator=gen),
            "grounding_frames": torch.randn(1, GRID_FRAMES, 3, grounding_size, grounding_size, generator=gen),
            "frame_mask": torch.ones(1, GRID_FRAMES, dtype=torch.bool),
            "frame_indices": torch.from_numpy(positions * 5).unsqueeze(0),
            "caption_positions": torch.from_numpy(caption_positions).long().unsqueeze(0),
            "size": torch.tensor([[455, 256]]),
            "tagged_captions": [" ".join(PHRASES[:1 + i % len(PHRASES)]) + "."],
        })
    return clips


def concat(clips: list[dict]) -> dict:
    return {k: (sum((c[k] for c in clips), []) if isinstance(clips[0][k], list) else torch.cat([c[k] for c in clips]))
            for k in clips[0]}


def run(model: Grove, batches: list[dict], max_new_tokens: int, given: bool, **options) -> tuple[float, float, dict]:
    """Wall seconds, CPU seconds of this process, predictions."""
    began, cpu = time.perf_counter(), time.process_time()
    predictions: dict = {}
    for batch in batches:
        out = predict_clips(model, batch, 0.5, max_new_tokens=max_new_tokens, teacher_forced=given, **options)
        predictions.update(out["predictions"])
    return time.perf_counter() - began, time.process_time() - cpu, predictions


def largest_box_difference(a: dict, b: dict) -> float:
    worst = 0.0
    for key in a:
        for fa, fb in zip(a[key]["frames"], b[key]["frames"]):
            diff = (torch.tensor(fa["boxes"]) - torch.tensor(fb["boxes"])).abs()
            worst = max(worst, float(diff.max()) if diff.numel() else 0.0)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    parser.add_argument("--clips", type=int, default=8)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--captions", nargs="+", default=["generated", "given"], choices=["generated", "given"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--windows-per-pass", type=int, default=None,
                        help="Grove.predict's windows_per_pass (default: its own, the batch's clip count)")
    args = parser.parse_args()
    options = {} if args.windows_per_pass is None else {"windows_per_pass": args.windows_per_pass}
    model = build_model(args.config)
    clips = make_clips(model, args.clips)
    print(f"{args.config.name}, random weights; {args.clips} clips of {GRID_FRAMES} frames, interleaved windows, "
          f"up to {args.max_new_tokens} new tokens; windows per pass: {args.windows_per_pass or 'batch size'}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'captions':>9} {'threads':>7} {'batch':>5} {'clips/s':>8} {'ratio':>6} {'clips/CPU-s':>11} {'ratio':>6} "
          f"{'same captions':>13} {'box diff px':>11}")
    for captions in args.captions:
        given = captions == "given"
        for threads in args.threads:
            torch.set_num_threads(threads)
            run(model, clips[:1], args.max_new_tokens, given, **options)  # warm-up
            first = None
            for size in args.batch_sizes:
                batches = [concat(clips[i:i + size]) for i in range(0, len(clips), size)]
                timed = [run(model, batches, args.max_new_tokens, given, **options) for _ in range(args.repeats)]
                wall, cpu = min(t[0] for t in timed), min(t[1] for t in timed)
                predictions = timed[0][2]
                first = first or (wall, cpu, predictions)
                same = sum(first[2][k]["tagged_caption"] == predictions[k]["tagged_caption"] for k in predictions)
                print(f"{captions:>9} {threads:>7} {size:>5} {len(clips) / wall:>8.2f} {first[0] / wall:>6.2f} "
                      f"{len(clips) / cpu:>11.2f} {first[1] / cpu:>6.2f} {f'{same}/{len(predictions)}':>13} "
                      f"{largest_box_difference(first[2], predictions):>11.2f}")


if __name__ == "__main__":
    main()
