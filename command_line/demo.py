"""The README's main job: synthetic data (generated if absent) -> tower pre-training (if absent) ->
fit the tiny GROVE -> test the best checkpoint.

Run through ``make demo`` (which sets up the environment first). Extra arguments are passed to the
tower stage, ``fit`` and ``test`` alike (e.g. ``--trainer.max_steps=50`` for a quick look). The tower
stage (grove pretrain-towers) stands in for the pre-trained CLIP and SAM of the real model and
writes the checkpoints configs/demo.yaml loads; it runs once and counts towards the demo's budget.
"""
from __future__ import annotations

import core  # noqa: F401

import json
import time
from pathlib import Path

from command_line.grove_cli import cli_main
from lightning_modules import tower_pretraining

ROOT = Path(__file__).resolve().parent.parent

CONFIG = ROOT / "configs" / "demo.yaml"
TOWER_STEPS = 250
TOWER_BOX_WEIGHT = 0.3


def seed_of(extra: list[str]) -> int:
    """The run's ``seed_everything``: the last command-line override, else the demo config's."""
    import yaml

    seed = yaml.safe_load(CONFIG.read_text()).get("seed_everything") or 0
    for i, arg in enumerate(extra):
        if arg.startswith("--seed_everything="):
            seed = arg.split("=", 1)[1]
        elif arg == "--seed_everything" and i + 1 < len(extra):
            seed = extra[i + 1]
    return int(seed)


def stale_towers(folder: Path, seed: int = 0) -> str | None:
    """Why the towers in ``folder`` do not come from the current tower recipe (None: they do).

    The recipe (steps, box weight, and the seed the towers start from) is read back from the stage's
    ``pretext.json``; towers written by another recipe (or with no record) are pre-trained again
    rather than silently reused.
    """
    record = folder / "pretext.json"
    if not record.exists():
        return f"{record} is missing"
    try:
        report = json.loads(record.read_text())
    except json.JSONDecodeError as err:
        return f"{record} is not valid JSON ({err})"
    wanted = {"steps": TOWER_STEPS, "box_weight": TOWER_BOX_WEIGHT, "seed": seed}
    found = {key: report.get(key) for key in wanted if key != "seed"}
    found["seed"] = seed_of(list(report.get("overrides") or []))
    return None if found == wanted else f"{record} records {found}, the demo's recipe is {wanted}"


def configured_towers(extra: list[str]) -> tuple[Path, Path] | None:
    """The tower checkpoints the demo config (with the extra ``--key=value`` overrides) will load;
    None when an override sets either to null (random towers: no tower stage)."""
    import yaml

    model = yaml.safe_load(CONFIG.read_text())["model"]["init_args"]
    paths = [model["global_encoder"]["checkpoint"], model["grounding_encoder"]["checkpoint"]]
    for arg in extra:  # a command-line override wins
        for i, key in enumerate(("global_encoder.checkpoint", "grounding_encoder.checkpoint")):
            if arg.startswith(f"--model.init_args.{key}="):
                paths[i] = arg.split("=", 1)[1]
    if any(p is None or str(p).strip().lower() in ("null", "none", "~") for p in paths):
        return None
    return tuple(ROOT / p if not Path(p).is_absolute() else Path(p) for p in paths)


def main(extra: list[str]) -> dict:
    start = time.perf_counter()
    timings = {}
    towers = configured_towers(extra)
    global_ckpt, grounding_ckpt = towers if towers is not None else (None, None)
    reason = None
    if towers is not None:
        missing = [str(p) for p in towers if not p.exists()]
        reason = f"{', '.join(missing)} not found" if missing else stale_towers(grounding_ckpt.parent, seed_of(extra))
    if reason is not None:
        if global_ckpt.parent != grounding_ckpt.parent:
            raise ValueError("demo: the two tower checkpoints must share a folder to be written by the tower stage")
        print(f"\ntower stage ({reason}): pre-training the tiny towers -> {global_ckpt.parent}\n")
        tower_pretraining.main(["--config", str(CONFIG), "--steps", str(TOWER_STEPS), "--box-weight",
                                str(TOWER_BOX_WEIGHT), "--out", str(global_ckpt.parent), "--", *extra])
        timings["towers_s"] = round(time.perf_counter() - start, 1)
    fit_start = time.perf_counter()
    fit = cli_main(["fit", "--config", str(CONFIG), *extra])
    timings["fit_s"] = round(time.perf_counter() - fit_start, 1)
    timings["towers_and_fit_s"] = round(time.perf_counter() - start, 1)
    checkpoint = fit.trainer.checkpoint_callback
    best = checkpoint.best_model_path or checkpoint.last_model_path
    print(f"\nbest checkpoint: {best}\n")
    test = cli_main(["test", "--config", str(CONFIG), f"--ckpt_path={best}", *extra])
    results = {k: float(v) for k, v in test.trainer.callback_metrics.items() if k.startswith("test/")}
    print("\nTest metrics (synthetic test split):")
    for name in sorted(results):
        print(f"  {name:<28} {results[name]:.4f}")
    print("\nWall time: " + ", ".join(f"{k} {v}" for k, v in timings.items()))
    out = Path(test.trainer.log_dir or ".") / "demo_test_metrics.json"
    out.write_text(json.dumps({"checkpoint": best, "metrics": results, "timings": timings}, indent=2))
    print(f"\nwritten to {out}")
    return results
