"""Each dataset config runs ``fit`` (fast_dev_run) through the real CLI on fixture files in the public
layouts, with the tiny model of configs/demo.yaml; missing data paths name the key and the README
section; fine-tuning starts from a pre-trained checkpoint's weights."""
import json
from pathlib import Path

import pytest
import torch
import yaml

from callbacks.init_from_checkpoint import InitFromCheckpoint
from callbacks.task_evaluation import VidSTGEvaluation
from cli import cli_main
from datamodules.howtoground import LazyRecords
from metrics.commands.vidstg import main as evaluate_vidstg_file
from tests.fixtures.paths import ROOT
from tests.fixtures.public_datasets import write_anet_public, write_howtoground_public, write_vidstg_public

pytestmark = pytest.mark.slow
CONFIGS = ROOT / "configs"


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = tmp_path_factory.mktemp("public")
    # VidSTG at VidOR's 29.97 fps, the tube [10, 70) of the used segment [0, 90): TubeDETR's grid
    # (every 6th frame from 0) gives the tube 12, 18, ..., 66; range(10, 70, 6) would give 10, 16, ...
    vidstg = write_vidstg_public(root / "vidstg", fps=29.97, num_frames=90, used=(0, 90), tube=(10, 70))
    return {"htg": write_howtoground_public(root / "htg"), "vidstg": vidstg,
            "anet": write_anet_public(root / "anet"), "root": root}


@pytest.fixture(scope="module")
def tiny(fixtures):
    """An overlay with the demo's tiny model (no pretrained files), CPU and fast_dev_run."""
    demo = yaml.safe_load((CONFIGS / "demo.yaml").read_text())["model"]["init_args"]
    model = {k: demo[k] for k in ("global_encoder", "grounding_encoder", "language_model", "decoder",
                                  "train_global_backbone", "train_grounding_backbone", "train_llm")}
    model["global_encoder"].update(checkpoint=None, feature_layer=-2)
    model["grounding_encoder"].update(checkpoint=None)
    model["language_model"].update(path=None, torch_dtype="float32", tokenizer_path=None, special_tokens="compact")
    model["decoder"]["checkpoint"] = None
    model["init_from_glamm"] = None  # the paper's GLaMM start is tested on a tiny GLaMM (test_grove_from_glamm)
    model["max_new_tokens"] = 6
    out = fixtures["root"] / "runs"
    overlay = {
        "trainer": {"accelerator": "cpu", "devices": 1, "strategy": "auto", "precision": "32-true",
                    "fast_dev_run": True, "enable_progress_bar": False, "default_root_dir": str(out),
                    "logger": {"init_args": {"save_dir": str(out)}}},
        "model": {"init_args": model},
        "data": {"init_args": {"batch_size": 2, "eval_batch_size": 2, "num_workers": 0,
                               "global_image_size": 64, "grounding_image_size": 128}},
    }
    path = fixtures["root"] / "tiny.yaml"
    path.write_text(yaml.safe_dump(overlay))
    return path


@pytest.fixture(scope="module")
def pretrained(fixtures, tiny):
    """A tiny pre-trained checkpoint (the weights of a freshly built tiny model)."""
    cli = cli_main(["--config", str(CONFIGS / "pretrain.yaml"), "--config", str(tiny), *_htg_data(fixtures)], run=False)
    path = fixtures["root"] / "pretrained.ckpt"
    torch.save({"state_dict": cli.model.state_dict()}, path)
    return path


def _overlay(name: str, checkpoint: Path, folder: Path) -> Path:
    """The config file as shipped, with only its InitFromCheckpoint path pointed at the tiny checkpoint."""
    config = yaml.safe_load((CONFIGS / name).read_text())
    inits = [c for c in config["trainer"]["callbacks"] if c["class_path"].endswith("InitFromCheckpoint")]
    assert len(inits) == 1, "fine-tuning configs start from pre-trained weights"
    inits[0]["init_args"]["checkpoint_path"] = str(checkpoint)
    path = folder / name
    path.write_text(yaml.safe_dump(config))
    return path


def _htg_data(fx, train="folder"):
    h = fx["htg"]
    return [f"--data.init_args.train_annotations={h[train]}", f"--data.init_args.val_annotations={h['raw']}",
            f"--data.init_args.video_root={h['videos']}", f"--data.init_args.val_video_root={h['videos']}"]


def _fit(*args):
    cli = cli_main(["fit", *args])
    assert cli.trainer.state.finished
    return cli


def test_pretrain_config(fixtures, tiny):
    cli = _fit("--config", str(CONFIGS / "pretrain.yaml"), "--config", str(tiny), *_htg_data(fixtures),
               f"--data.init_args.train_keys={fixtures['htg']['keys']}")
    assert isinstance(cli.datamodule.datasets["train"].records, LazyRecords)  # HowToGround1M is read lazily
    assert "val/AP50" in cli.trainer.callback_metrics and "val/recall" in cli.trainer.callback_metrics


def test_finetune_iground_config(fixtures, tiny, pretrained, tmp_path):
    h = fixtures["htg"]
    cli = _fit("--config", str(CONFIGS / "pretrain.yaml"),
               "--config", str(_overlay("finetune_iground.yaml", pretrained, tmp_path)),
               "--config", str(tiny), f"--data.init_args.train_annotations={h['processed']}",
               f"--data.init_args.val_annotations={h['raw']}", f"--data.init_args.test_annotations={h['raw']}",
               f"--data.init_args.video_root={h['videos']}")
    init = next(c for c in cli.trainer.callbacks if isinstance(c, InitFromCheckpoint))
    assert init.loaded and cli.model.hparams.ce_weight == 1.0
    assert isinstance(cli.datamodule.datasets["train"].records, list)
    assert "val/AP50" in cli.trainer.callback_metrics


def test_vidstg_config(fixtures, tiny, pretrained, tmp_path):
    v = fixtures["vidstg"]
    args = ["--config", str(CONFIGS / "pretrain.yaml"), "--config", str(_overlay("vidstg.yaml", pretrained, tmp_path)),
            "--config", str(tiny), f"--data.init_args.train_annotations={v['original']}",
            f"--data.init_args.vidor_annotations={v['vidor']}", f"--data.init_args.val_annotations={v['tubedetr']}",
            f"--data.init_args.test_annotations={v['tubedetr']}", f"--data.init_args.video_root={v['videos']}",
            "--data.init_args.eval_batch_size=4"]  # fast_dev_run evaluates one batch: all four sentences
    cli = _fit(*args)
    assert cli.model.hparams.teacher_forced and cli.model.model.objectness_head is None
    assert next(c for c in cli.trainer.callbacks if isinstance(c, InitFromCheckpoint)).loaded
    metrics = cli.trainer.callback_metrics
    for name in ("all_m_vIoU", "declarative_vIoU@0.5", "interrogative_m_vIoU_gt_temporal"):
        assert f"val/vidstg/{name}" in metrics, name
    tubedetr_frames = list(range(12, 70, 6))  # TubeDETR's grid frames in the tube (fixture above)
    assert all(r.frame_indices.tolist() == tubedetr_frames for r in cli.datamodule.datasets["val"].records)
    test = cli_main(["test", *args, f"--trainer.default_root_dir={tmp_path / 'test'}"])
    assert "test/vidstg/all_m_vIoU" in test.trainer.callback_metrics
    path = tmp_path / "test" / "predictions_test.json"
    predictions = json.loads(path.read_text())
    assert all(len(p["phrases"]) == 1 for p in predictions.values())  # the sentence, teacher-forced
    assert all([f["frame"] for f in p["frames"]] == tubedetr_frames for p in predictions.values())
    # the test metric is TubeDETR's figure: the offline evaluator, which reads every tube frame from
    # the annotation file and scores TubeDETR's grid, gives the same numbers from the written predictions
    results = next(c for c in test.trainer.callbacks if isinstance(c, VidSTGEvaluation)).last_results["test"]
    offline = evaluate_vidstg_file(["--annotations", str(v["tubedetr"]), "--pred", str(path)])
    assert offline["num_pred_frames_missing"] == 0 and results == pytest.approx(offline, rel=1e-5, nan_ok=True)
    # object 0 (two sentences' target) has no box on frame 12, a TubeDETR grid frame of the tube
    assert results["num_gt_frames_missing"] == 2


def test_anet_entities_config(fixtures, tiny, pretrained, tmp_path):
    a = fixtures["anet"]
    args = ["--config", str(CONFIGS / "pretrain.yaml"),
            "--config", str(_overlay("anet_entities.yaml", pretrained, tmp_path)),
            "--config", str(tiny),
            *[f"--data.init_args.{k}_annotations={a['cleaned']}" for k in ("train", "val", "test")],
            f"--data.init_args.split_annotations={a['split']}",
            f"--data.init_args.timestamp_annotations=[{a['captions']}]",
            f"--data.init_args.frame_size_annotations={a['raw']}", f"--data.init_args.video_root={a['videos']}"]
    cli = _fit(*args)
    assert cli.model.model.objectness_head is None and not cli.model.hparams.teacher_forced
    assert next(c for c in cli.trainer.callbacks if isinstance(c, InitFromCheckpoint)).loaded
    for name in ("F1_all", "F1_loc", "F1_all_per_sent", "F1_loc_per_sent"):
        assert f"val/anet/{name}" in cli.trainer.callback_metrics, name
    test = cli_main(["test", *args, f"--trainer.default_root_dir={tmp_path / 'test'}"])
    assert "test/anet/F1_all" in test.trainer.callback_metrics
    predictions = json.loads((tmp_path / "test" / "predictions_test.json").read_text())
    assert {f["frame"] for p in predictions.values() for f in p["frames"]} <= set(range(10))  # sampled frames 0-9


@pytest.mark.parametrize("overlay, key", [
    (None, "data.train_annotations"),
    ("finetune_iground.yaml", "data.test_annotations"),
    ("vidstg.yaml", "data.val_annotations"),
    ("anet_entities.yaml", "data.split_annotations"),
])
def test_missing_data_path_names_key_and_readme(tiny, overlay, key, tmp_path, pretrained):
    args = ["--config", str(CONFIGS / "pretrain.yaml")]
    if overlay:
        args += ["--config", str(_overlay(overlay, pretrained, tmp_path))]
    with pytest.raises(FileNotFoundError) as err:
        cli_main([*args, "--config", str(tiny)], run=False)
    assert key in str(err.value) and "README section 'Datasets'" in str(err.value)


def test_init_from_checkpoint_loads_weights_not_state(fixtures, tiny, pretrained):
    cli = cli_main(["--config", str(CONFIGS / "pretrain.yaml"), "--config", str(tiny), *_htg_data(fixtures),
                    "--seed_everything=7"], run=False)
    expected = torch.load(pretrained, weights_only=False)["state_dict"]
    name = next(k for k in expected if k.startswith("model.box_head"))
    assert not torch.equal(cli.model.state_dict()[name], expected[name])  # another random init
    callback = InitFromCheckpoint(str(pretrained))
    callback.setup(cli.trainer, cli.model, "validate")
    assert not callback.loaded  # only fitting starts from the weights
    callback.setup(cli.trainer, cli.model, "fit")
    assert callback.loaded and all(torch.equal(v, expected[k]) for k, v in cli.model.state_dict().items())
    with pytest.raises(FileNotFoundError, match="checkpoint_path.*README section 'Datasets'"):
        InitFromCheckpoint(str(fixtures["root"] / "nope.ckpt"))
