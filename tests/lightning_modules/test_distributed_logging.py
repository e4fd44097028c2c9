"""Epoch-level training losses are means over every rank's batches, not rank zero's alone."""
import json
import os
import subprocess
import sys

import pytest

from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args


@pytest.mark.slow
def test_the_logged_epoch_loss_is_the_mean_over_both_ranks_batches(tiny_synthetic_root, tmp_path):
    record = tmp_path / "losses"
    recorder = json.dumps({"class_path": "tests.fixtures.loss_recorder.BatchLossRecorder",
                           "init_args": {"out_dir": str(record)}})
    args = [sys.executable, str(ROOT / "cli.py"), "fit", *tiny_cli_args(tiny_synthetic_root, tmp_path / "runs"),
            "--trainer.strategy=ddp", "--trainer.devices=2", "--trainer.accelerator=cpu",
            "--trainer.limit_val_batches=0", "--trainer.num_sanity_val_steps=0", "--trainer.accumulate_grad_batches=1",
            f"--trainer.callbacks+={recorder}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    ranks = [json.loads((record / f"rank{k}.json").read_text()) for k in (0, 1)]
    assert all(r["world_size"] == 2 and r["batches"] for r in ranks)
    batches = [b for r in ranks for b in r["batches"]]
    # Lightning's epoch value of a logged mean: batch-size-weighted over every batch the epoch saw
    expected = sum(b["loss"] * b["batch_size"] for b in batches) / sum(b["batch_size"] for b in batches)
    rank_means = [sum(b["loss"] * b["batch_size"] for b in r["batches"]) / sum(b["batch_size"] for b in r["batches"])
                  for r in ranks]
    assert rank_means[0] != pytest.approx(rank_means[1], rel=1e-4)  # a rank-zero-only value would differ
    for r in ranks:  # every rank logs the same, reduced value
        assert r["epoch"]["train/loss_epoch"] == pytest.approx(expected, rel=1e-5)
