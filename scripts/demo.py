"""The README's main job: synthetic data (generated if absent) -> fit the tiny GROVE -> test the best checkpoint.

Run through ``make demo`` (which sets up the environment first). Extra arguments are passed to
both ``fit`` and ``test`` (e.g. ``--trainer.max_steps=50`` for a quick look).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import core  # noqa: E402,F401

from cli import cli_main  # noqa: E402


def main(extra: list[str]) -> dict:
    config = str(ROOT / "configs" / "demo.yaml")
    fit = cli_main(["fit", "--config", config, *extra])
    checkpoint = fit.trainer.checkpoint_callback
    best = checkpoint.best_model_path or checkpoint.last_model_path
    print(f"\nbest checkpoint: {best}\n")
    test = cli_main(["test", "--config", config, f"--ckpt_path={best}", *extra])
    results = {k: float(v) for k, v in test.trainer.callback_metrics.items() if k.startswith("test/")}
    print("\nTest metrics (synthetic test split):")
    for name in sorted(results):
        print(f"  {name:<28} {results[name]:.4f}")
    out = Path(test.trainer.log_dir or ".") / "demo_test_metrics.json"
    out.write_text(json.dumps({"checkpoint": best, "metrics": results}, indent=2))
    print(f"\nwritten to {out}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
