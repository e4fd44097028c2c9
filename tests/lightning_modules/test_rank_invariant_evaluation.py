"""Test figures and the predictions file of two processes equal one process's: each clip counted once."""
import json
import os
import subprocess
import sys

import pytest

from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args


def _test_run(root, out, *extra):
    recorder = json.dumps({"class_path": "tests.fixtures.loss_recorder.EvalMetricRecorder",
                           "init_args": {"out_dir": str(out / "figures")}})
    writer = json.dumps({"class_path": "callbacks.prediction_writer.PredictionWriter",
                         "init_args": {"output_dir": str(out / "predictions")}})
    args = [sys.executable, str(ROOT / "cli.py"), "test", *tiny_cli_args(root, out / "runs"),
            "--data.init_args.num_test=3", "--data.init_args.eval_batch_size=1",
            f"--trainer.callbacks+={recorder}", f"--trainer.callbacks+={writer}", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, "\n".join(line for line in done.stderr.splitlines()
                                            if not line.startswith("[rank0]"))[-4000:]
    return out


@pytest.mark.slow
def test_two_gloo_processes_give_the_one_process_figures_and_file(tmp_path):
    from datamodules.synthetic import generate_synthetic_dataset

    root = tmp_path / "data"
    generate_synthetic_dataset(root, num_train=6, num_val=2, num_test=3, seed=0, workers=1, duration_s=2.0)
    one = _test_run(root, tmp_path / "one")
    two = _test_run(root, tmp_path / "two", "--trainer.strategy=ddp", "--trainer.devices=2",
                    "--trainer.accelerator=cpu")
    single = json.loads((one / "figures" / "rank0.json").read_text())["figures"]
    ranks = [json.loads((two / "figures" / f"rank{k}.json").read_text()) for k in (0, 1)]
    assert all(r["world_size"] == 2 for r in ranks)
    assert any(k.startswith("test/") for k in single)
    for r in ranks:
        assert set(r["figures"]) == set(single)
        for name, value in single.items():
            assert r["figures"][name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
    assert sorted(p.name for p in (two / "predictions").glob("predictions_*.json")) == ["predictions_test.json"]
    merged = json.loads((two / "predictions" / "predictions_test.json").read_text())
    alone = json.loads((one / "predictions" / "predictions_test.json").read_text())
    assert len(alone) == 3 and sorted(merged) == sorted(alone)
    assert json.dumps(merged, sort_keys=True) == json.dumps(alone, sort_keys=True)
