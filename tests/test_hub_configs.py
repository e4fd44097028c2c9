"""The hub-layout data overlays (configs/hub/) and the fine-tuning-only overlays (configs/ft_only/)
stack on the shipped configs and run ``fit`` through the real CLI, on fixture files in the hub's JSONL
layout with the tiny model of configs/demo.yaml."""
import json

import pytest
import yaml

from callbacks.init_from_checkpoint import InitFromCheckpoint
from cli import cli_main
from datamodules.howtoground import merge_instances
from formats.hub_jsonl import JsonlRecords, write_jsonl_records
from tests.fixtures.paths import ROOT
from tests.fixtures.public_datasets import howtoground_records
from tests.test_dataset_configs import fixtures, tiny  # noqa: F401 (module fixtures reused)

pytestmark = pytest.mark.slow
CONFIGS = ROOT / "configs"


@pytest.fixture(scope="module")
def hub(fixtures):  # noqa: F811
    folder = fixtures["root"] / "hub"
    raw = howtoground_records(raw=True)
    return {
        "htg": write_jsonl_records(raw, folder / "HowToGround1M_automatic_annotation_method.jsonl",
                                   keys_companion=True),
        "train": write_jsonl_records([merge_instances(r) for r in raw], folder / "iGround_train_set_processed.jsonl"),
        "raw": write_jsonl_records(raw, folder / "iGround_val_set_raw.jsonl"),
        "videos": fixtures["htg"]["videos"],
    }


def test_shipped_overlays_name_the_hub_files():
    iground = yaml.safe_load((CONFIGS / "hub" / "iground.yaml").read_text())["data"]["init_args"]
    assert [iground[f"{s}_annotations"] for s in ("train", "val", "test")] == [
        "data/iground/iGround_train_set_processed.jsonl", "data/iground/iGround_val_set_raw.jsonl",
        "data/iground/iGround_test_set_raw.jsonl"]
    htg = yaml.safe_load((CONFIGS / "hub" / "howtoground1m.yaml").read_text())["data"]["init_args"]
    assert htg["train_annotations"] == "data/howtoground1m/HowToGround1M_automatic_annotation_method.jsonl"
    for name in ("iground", "vidstg", "anet_entities"):
        callbacks = yaml.safe_load((CONFIGS / "ft_only" / f"{name}.yaml").read_text())["trainer"]["callbacks"]
        assert not any(c["class_path"].endswith("InitFromCheckpoint") for c in callbacks), name


def test_pretraining_on_the_hub_jsonl_reads_it_lazily(hub, tiny):  # noqa: F811
    cli = cli_main(["fit", "--config", str(CONFIGS / "pretrain.yaml"),
                    "--config", str(CONFIGS / "hub" / "howtoground1m.yaml"), "--config", str(tiny),
                    f"--data.init_args.train_annotations={hub['htg']}",
                    f"--data.init_args.val_annotations={hub['raw']}", f"--data.init_args.video_root={hub['videos']}",
                    f"--data.init_args.val_video_root={hub['videos']}"])
    assert cli.trainer.state.finished
    assert isinstance(cli.datamodule.datasets["train"].records, JsonlRecords)
    assert "val/AP50" in cli.trainer.callback_metrics


def test_finetuning_only_starts_from_nothing_but_glamm(hub, tiny, tmp_path):  # noqa: F811
    args = ["--config", str(CONFIGS / "pretrain.yaml"), "--config", str(CONFIGS / "finetune_iground.yaml"),
            "--config", str(CONFIGS / "hub" / "iground.yaml"), "--config", str(CONFIGS / "ft_only" / "iground.yaml"),
            "--config", str(tiny), f"--data.init_args.train_annotations={hub['train']}",
            f"--data.init_args.val_annotations={hub['raw']}", f"--data.init_args.test_annotations={hub['raw']}",
            f"--data.init_args.video_root={hub['videos']}"]
    cli = cli_main(["fit", *args])  # no pre-trained checkpoint exists: InitFromCheckpoint would refuse to start
    assert cli.trainer.state.finished and cli.model.hparams.ce_weight == 1.0
    assert not any(isinstance(c, InitFromCheckpoint) for c in cli.trainer.callbacks)
    test = cli_main(["test", *args, f"--trainer.default_root_dir={tmp_path}"])
    assert "test/AP50" in test.trainer.callback_metrics
    predictions = json.loads((tmp_path / "predictions_test.json").read_text())
    assert set(predictions) <= {r.key for r in howtoground_records()}
