"""A tiny GROVE checkpoint for the demo's tests, and ``cli.py predict`` on one clip to compare with."""
from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args

# What the demo server is given besides the config and the checkpoint (as tiny_cli_args gives the CLI).
TINY_MODEL_ARGS = ["--model.init_args.global_encoder.checkpoint=null",
                   "--model.init_args.grounding_encoder.checkpoint=null", "--model.init_args.max_new_tokens=6",
                   "--trainer.enable_progress_bar=false"]
DEMO_CONFIG = ROOT / "configs" / "demo.yaml"


def fit_tiny(root: Path, save_dir: Path) -> Path:
    """``cli.py fit`` on the tiny synthetic set (seconds); the last checkpoint."""
    from cli import cli_main

    fit = cli_main(["fit", *tiny_cli_args(root, save_dir)])
    return Path(fit.trainer.checkpoint_callback.last_model_path)


def predict_with_cli(ckpt: Path, video: Path, save_dir: Path, *extra: str) -> dict:
    """What ``cli.py predict --data.videos VIDEO`` writes to predictions_predict.json."""
    from cli import cli_main

    cli = cli_main(["predict", *tiny_cli_args(save_dir / "unused_synthetic", save_dir), f"--ckpt_path={ckpt}",
                    f"--data.videos={video}", *extra])
    return json.loads((Path(cli.trainer.log_dir) / "predictions_predict.json").read_text())
