"""Start-up of the commands, each against ``python -c "import torch"`` measured in the same run: wall
and CPU seconds of ``cli.py predict --help``, ``grove --help``, each ``grove VERB --help``, and of
``cli.py predict --config configs/demo.yaml --ckpt-path CKPT --data.videos DIR`` from the start of
its process to its first ``predict_step``.

    PYTHONPATH=. python bench/bench_startup.py [--repeats 3] [--verbs evaluate vidstg] [--no-predict]

Every command is a fresh process; each figure is the least of ``--repeats`` runs (the commands take
turns, so a burst of load elsewhere does not fall on one command's runs alone). CPU seconds are the
process's and its children's; to the first clip they are the predict process's own, read by
bench/first_clip_clock.py (the data loader's workers decode in other processes). The benchmark first
writes a checkpoint of the demo model (random weights; what start-up costs does not depend on them)
and a one-clip video, which also warms the file cache for every command alike. A second line,
``import core, lightning.pytorch.cli``, is what any LightningCLI command imports before it can build
its parser (docs/input_pipeline.md, "Start-up", says why it weighs as it does).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_decoding import FPS, panning_clip

from command_line.grove import VERBS

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "configs/demo.yaml"
RANDOM_TOWERS = ["--model.init_args.global_encoder.checkpoint=null",
                 "--model.init_args.grounding_encoder.checkpoint=null"]
FIRST = "the first predict_step"
GOAL = 3.0  # start-up to the first clip, in units of `import torch`
# What predict imports, in the order it first imports it; in one process, each line the CPU seconds it
# adds to the lines above (lightning.pytorch imports torchmetrics whole, and torchmetrics imports
# torchvision, transformers, scipy.signal and matplotlib when they are installed; transformers' model
# code imports torchao when it is installed)
CHAIN = ["torch", "core", "torchvision", "transformers", "scipy.signal", "matplotlib.pyplot", "torchmetrics",
         "lightning.pytorch.cli", "command_line.grove_cli", "torchao", "transformers.modeling_utils", "open_clip",
         "lightning_modules.grove_module", "datamodules.grounded_datamodule", "callbacks"]
CHAIN_CODE = """
import importlib, json, os, sys
out = []
for name in sys.argv[1:]:
    before = os.times()
    importlib.import_module(name)
    after = os.times()
    out.append([name, max(0.0, after.user + after.system - before.user - before.system)])
print(json.dumps(out))
"""


def run(argv: list[str], env: dict[str, str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall and CPU seconds (the process and its children) of one command."""
    before = os.times()
    wall = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - wall
    after = os.times()
    cpu = (after.children_user + after.children_system) - (before.children_user + before.children_system)
    return wall, cpu, done


def write_checkpoint(path: Path) -> Path:
    """The demo model, built as ``cli.py`` builds it (random towers), saved by Lightning's Trainer."""
    from core.config_loader import load_configured

    cli = load_configured(["--config", CONFIG, *RANDOM_TOWERS, "--trainer.logger=false"])
    cli.trainer.strategy.connect(cli.model)
    cli.trainer.save_checkpoint(path, weights_only=True)
    return path


def write_video(path: Path) -> Path:
    """One 8-s 455x256 25-fps video: one clip of the demo's predict."""
    import numpy as np

    from formats.video_writer import VideoWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = VideoWriter(path, FPS, 455, 256, crf=23, gop=FPS)
    writer.write(panning_clip(np.random.default_rng(0), 455, 256))
    return writer.close()


def first_clip(ckpt: Path, videos: Path, out: Path, env: dict[str, str]) -> dict[str, tuple[float, float]]:
    """(wall, CPU) from the process's start to Trainer.predict's setup and to the first predict_step,
    and of the whole one-clip run."""
    clock = out / "first_clip.json"
    clock.unlink(missing_ok=True)
    callback = {"class_path": "bench.first_clip_clock.FirstClipClock", "init_args": {"path": str(clock)}}
    argv = [sys.executable, "cli.py", "predict", "--config", CONFIG, "--ckpt-path", str(ckpt), "--data.videos",
            str(videos), f"--trainer.logger.init_args.save_dir={out / 'runs'}",
            f"--trainer.callbacks+={json.dumps(callback)}"]
    started = time.time()
    wall, cpu, done = run(argv, env)
    if done.returncode != 0 or not clock.exists():
        raise SystemExit(f"cli.py predict failed ({done.returncode}):\n{done.stderr[-3000:]}")
    moments = json.loads(clock.read_text())
    return {f"cli.py predict: start -> {what}": (moments[key]["time"] - started, moments[key]["cpu_s"])
            for key, what in (("setup", "Trainer.predict's setup"), ("first_batch", FIRST))} | {
        "cli.py predict: the whole one-clip run": (wall, cpu)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs of each command; the least is shown")
    parser.add_argument("--verbs", nargs="*", default=list(VERBS), choices=list(VERBS),
                        help="the grove verbs whose --help is timed (default: all)")
    parser.add_argument("--no-predict", action="store_true", help="skip the start-up to the first clip")
    parser.add_argument("--no-chain", action="store_true", help="skip the CPU seconds of each import of predict")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    python = sys.executable
    commands = {
        'python -c "import torch"': [python, "-c", "import torch"],
        'python -c "import core, lightning.pytorch.cli"': [python, "-c", "import core, lightning.pytorch.cli"],
        "cli.py predict --help": [python, "cli.py", "predict", "--help"],
        "grove --help": [python, "-m", "command_line.grove", "--help"],
        **{f"grove {verb} --help": [python, "-m", "command_line.grove", verb, "--help"] for verb in args.verbs},
    }
    best: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if not args.no_predict:
            ckpt = write_checkpoint(tmp / "demo.ckpt")
            videos = write_video(tmp / "videos" / "clip.mp4").parent
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; least of {args.repeats} run(s); "
              f"bytecode cache {'off (PYTHONDONTWRITEBYTECODE)' if sys.dont_write_bytecode else 'on'}")
        for _ in range(args.repeats):
            for name, argv in commands.items():
                wall, cpu, done = run(argv, env)
                if done.returncode != 0:
                    raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
                old = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(old[0], wall), min(old[1], cpu))
            if not args.no_predict:
                for name, (wall, cpu) in first_clip(ckpt, videos, tmp, env).items():
                    old = best.get(name, (float("inf"), float("inf")))
                    best[name] = (min(old[0], wall), min(old[1], cpu))
    torch_wall, torch_cpu = best['python -c "import torch"']
    width = max(map(len, best))
    print(f"{'command':<{width}}  {'wall s':>7} {'CPU s':>7} {'wall/torch':>10} {'CPU/torch':>9}")
    for name, (wall, cpu) in best.items():
        print(f"{name:<{width}}  {wall:7.2f} {cpu:7.2f} {wall / torch_wall:10.2f} {cpu / torch_cpu:9.2f}")
    first = best.get(f"cli.py predict: start -> {FIRST}")
    if first is not None:
        print(f"first clip: {first[0] / torch_wall:.1f}x `import torch` wall, {first[1] / torch_cpu:.1f}x CPU "
              f"(goal: {GOAL:.0f}x)")
    if not args.no_chain:
        chain = import_chain(env, args.repeats)
        print("\npredict's imports in one process, each the CPU seconds it adds to those above it:")
        for name, cpu in {**chain, "sum": sum(chain.values())}.items():
            print(f"  {name:<32} {cpu:6.2f} {cpu / chain['torch']:6.2f}x torch")


def import_chain(env: dict[str, str], repeats: int) -> dict[str, float]:
    """CPU seconds each entry of :data:`CHAIN` adds, the least of ``repeats`` fresh processes."""
    best: dict[str, float] = {}
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", CHAIN_CODE, *CHAIN], cwd=ROOT, env=env, capture_output=True,
                              text=True, check=True)
        for name, cpu in json.loads(done.stdout.strip().splitlines()[-1]):
            best[name] = min(best.get(name, float("inf")), cpu)
    return best


if __name__ == "__main__":
    main()
