"""Shared fixtures; importing core first makes torchvision importable on CPU torch."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import core  # noqa: E402,F401

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_synthetic_root(tmp_path_factory):
    """A few short synthetic clips (2 s) in the real on-disk layout, shared by the tests."""
    from datamodules.synthetic import generate_synthetic_dataset

    root = tmp_path_factory.mktemp("synthetic")
    generate_synthetic_dataset(root, num_train=6, num_val=2, num_test=2, seed=0, workers=1, duration_s=2.0)
    return root


def tiny_cli_args(root, save_dir, *extra):
    """Overrides that shrink configs/demo.yaml to a seconds-long run on the tiny synthetic set."""
    return [
        "--config", str(ROOT / "configs" / "demo.yaml"),
        f"--data.init_args.root={root}", "--data.init_args.num_train=6", "--data.init_args.num_val=2",
        "--data.init_args.num_test=2", "--data.init_args.duration_s=2.0", "--data.init_args.generation_workers=1",
        "--data.init_args.batch_size=2", "--data.init_args.eval_batch_size=2", "--data.init_args.num_workers=0",
        "--trainer.max_epochs=1", "--trainer.check_val_every_n_epoch=1", "--trainer.enable_progress_bar=false",
        f"--trainer.logger.init_args.save_dir={save_dir}", "--model.init_args.max_new_tokens=6",
        "--model.init_args.lr_scheduler.init_args.warmup_steps=2",
        # random towers: the tests check mechanics, not the demo's pre-trained towers (data/demo_towers)
        "--model.init_args.global_encoder.checkpoint=null", "--model.init_args.grounding_encoder.checkpoint=null",
        *extra,
    ]
