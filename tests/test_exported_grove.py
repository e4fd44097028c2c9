"""A trained GROVE runs without the files it was initialised from, exports to a folder, and that folder
runs through ``cli.py predict/test``, the web demo and the official-style Python API with the same
outputs as the checkpoint it came from."""
from __future__ import annotations

import core  # noqa: F401

import json
import shutil
from pathlib import Path

import pytest
import torch

from models.grove import Grove
from tests.fixtures.tiny_cli import tiny_cli_args
from tests.webdemo.fixed_caption_server import FIXED_PLAIN, fixed_generate_captions

WHOLE_VIDEO = "--data.init_args.video_clip_seconds=null"
# end to end: two tiny fits, then cli.py predict/test runs (minutes on 2 shared cores)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tiny_synthetic_root, tmp_path_factory):
    """A tiny fit whose config names tower files (written from random towers), and those files."""
    from cli import cli_main
    from lightning_modules.tower_pretraining import save_towers

    tmp = tmp_path_factory.mktemp("grove_export")
    towers = tmp / "towers"
    first = cli_main(["fit", *tiny_cli_args(tiny_synthetic_root, tmp / "towers_run"), "--trainer.max_steps=1"])
    global_file, grounding_file = save_towers(first.model.model, towers)
    tower_args = [f"--model.init_args.global_encoder.checkpoint={global_file}",
                  f"--model.init_args.grounding_encoder.checkpoint={grounding_file}"]
    fit = cli_main(["fit", *tiny_cli_args(tiny_synthetic_root, tmp / "fit"), *tower_args])
    ckpt = Path(fit.trainer.checkpoint_callback.last_model_path)
    video = sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0]
    return {"root": tiny_synthetic_root, "tmp": tmp, "towers": towers, "tower_args": tower_args, "ckpt": ckpt,
            "video": video}


def _args(trained, save_dir, *extra):
    return [*tiny_cli_args(trained["root"], save_dir), *trained["tower_args"], *extra]


def _predict(trained, ckpt, save_dir, *extra) -> dict:
    from cli import cli_main

    cli = cli_main(["predict", *_args(trained, save_dir), f"--ckpt_path={ckpt}", f"--data.videos={trained['video']}",
                    *extra])
    return json.loads((Path(cli.trainer.log_dir) / "predictions_predict.json").read_text())


def _test_metrics(trained, ckpt, save_dir) -> dict:
    from cli import cli_main

    cli = cli_main(["test", *_args(trained, save_dir), f"--ckpt_path={ckpt}"])
    return {k: float(v) for k, v in cli.trainer.callback_metrics.items()}


class towers_moved_away:
    """The tower files renamed for the duration of a ``with`` block (what a machine without them sees)."""

    def __init__(self, folder: Path):
        self.folder, self.away = folder, folder.with_name(folder.name + "_away")

    def __enter__(self):
        self.folder.rename(self.away)
        return self

    def __exit__(self, *exc):
        self.away.rename(self.folder)


@pytest.fixture(scope="module")
def exported(trained):
    from command_line.model_export import export

    return export([str(Path("configs/demo.yaml"))], str(trained["ckpt"]), str(trained["tmp"] / "exported"),
                  overrides=_args(trained, trained["tmp"] / "export_logs")[2:])


def test_predict_and_test_from_a_checkpoint_need_no_init_time_files(trained, tmp_path, monkeypatch):
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)  # phrases to box
    with_towers = _predict(trained, trained["ckpt"], tmp_path / "a")
    metrics_with = _test_metrics(trained, trained["ckpt"], tmp_path / "c")
    with towers_moved_away(trained["towers"]):
        without = _predict(trained, trained["ckpt"], tmp_path / "b")
        metrics_without = _test_metrics(trained, trained["ckpt"], tmp_path / "d")
    assert with_towers == without
    assert any(frame["boxes"] for clip in without.values() for frame in clip["frames"])
    assert metrics_with == metrics_without and metrics_with


def test_fit_from_scratch_still_checks_every_path(trained, tmp_path):
    from cli import cli_main

    with towers_moved_away(trained["towers"]), pytest.raises(FileNotFoundError) as err:
        cli_main(["fit", *_args(trained, tmp_path)])
    assert "model.global_encoder.checkpoint" in str(err.value)
    assert "model.grounding_encoder.checkpoint" in str(err.value)


def test_exported_folder_lists_the_hugging_face_files(exported):
    names = {p.name for p in exported.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json", "README.md"} <= names
    config = json.loads((exported / "config.json").read_text())
    assert config["global_encoder"]["checkpoint"] is None and config["language_model"]["path"] is None
    assert config["language_model"]["llama_config"]["hidden_size"] == 192


def test_from_pretrained_gives_the_checkpoint_s_outputs_to_the_last_bit(trained, exported):
    from core.weights import read_checkpoint

    with towers_moved_away(trained["towers"]):
        model = Grove.from_pretrained(exported)
    state = {k[len("model."):]: v for k, v in read_checkpoint(trained["ckpt"])["state_dict"].items()
             if k.startswith("model.")}
    loaded = model.state_dict()
    assert set(state) == set(loaded) and all(torch.equal(state[k], loaded[k]) for k in state)
    torch.manual_seed(1)
    frames_g, frames_s = torch.randn(1, 8, 3, 64, 64), torch.randn(1, 8, 3, 128, 128)
    mask = torch.ones(1, 8, dtype=torch.bool)
    from command_line.model_export import build_module

    module, _ = build_module([str(Path("configs/demo.yaml"))], str(trained["ckpt"]),
                             _args(trained, trained["tmp"] / "ref_logs")[2:])
    for grove in (model, module.model):  # the caption generated, then its grounding on every frame
        grove.eval()
    outs = [g.predict(frames_g, frames_s, mask, window_mode="interleaved",
                      caption_positions=torch.arange(8).unsqueeze(0), max_new_tokens=6) for g in (model, module.model)]
    assert outs[0].tagged_captions == outs[1].tagged_captions
    assert torch.equal(outs[0].boxes, outs[1].boxes) and torch.equal(outs[0].scores, outs[1].scores)
    forced = [g.predict(frames_g, frames_s, mask, caption_positions=torch.arange(8).unsqueeze(0),
                        captions=["a <p> red shape </p> [DET] moves"]) for g in (model, module.model)]
    assert forced[0].boxes.abs().sum() > 0
    assert torch.equal(forced[0].boxes, forced[1].boxes) and torch.equal(forced[0].scores, forced[1].scores)


def test_cli_predict_and_test_take_the_folder(trained, exported, tmp_path, monkeypatch):
    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)
    from_ckpt = _predict(trained, trained["ckpt"], tmp_path / "a")
    metrics_ckpt = _test_metrics(trained, trained["ckpt"], tmp_path / "c")
    with towers_moved_away(trained["towers"]):
        from_folder = _predict(trained, exported, tmp_path / "b")
        metrics_folder = _test_metrics(trained, exported, tmp_path / "d")
    assert from_folder == from_ckpt
    assert metrics_folder == metrics_ckpt


@pytest.mark.parametrize("fixed_caption", [False, True])
def test_the_python_api_gives_cli_predict_s_boxes_and_captions(trained, exported, tmp_path, monkeypatch,
                                                               fixed_caption):
    from models.grove.processing import GroveProcessor

    if fixed_caption:  # phrases to box (the tiny model's own captions rarely tag one)
        monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)
    with towers_moved_away(trained["towers"]):
        expected = _predict(trained, exported, tmp_path / "cli", WHOLE_VIDEO)
        model = Grove.from_pretrained(exported)
        processor = GroveProcessor.from_pretrained(exported)
    out = processor.generate(model, str(trained["video"]), token_embeddings=None, device="cpu", max_new_tokens=6)
    (clip,) = expected.values()
    assert out["text"] == clip["caption"] and out["phrases"] == clip["phrases"]
    if fixed_caption:
        assert out["text"] == FIXED_PLAIN
    kept = {f["frame"]: f for f in clip["frames"]}
    assert set(kept) <= set(out["frame_indices"]) and len(out["bboxes"]) == len(out["frame_indices"])
    for frame, boxes, labels, probs in zip(out["frame_indices"], out["bboxes"], out["labels_per_frame"],
                                           out["probs_temp_objectness"]):
        want = kept.get(frame, {"boxes": [], "labels": []})
        assert boxes.tolist() == want["boxes"] and labels == want["labels"]
        assert probs.shape == (len(out["phrases"]),)
    if fixed_caption:
        assert sum(len(b) for b in out["bboxes"]) == sum(len(f["boxes"]) for f in clip["frames"]) > 0
    assert out["original_size"] == (128, 128)
    assert set(out["center_frame_indices"]) <= set(out["frame_indices"]) and len(out["center_frame_indices"]) == 8


def test_the_api_refuses_metadata_that_does_not_fit_the_file(trained, exported):
    from models.grove.processing import GroveProcessor

    processor = GroveProcessor.from_pretrained(exported)
    with pytest.raises(ValueError, match="w=99"):
        processor.generate(Grove.from_pretrained(exported), str(trained["video"]), None, "cpu", w=99)


def test_the_web_demo_takes_the_folder(trained, exported, tmp_path, monkeypatch):
    from tests.webdemo.tiny_model import TINY_MODEL_ARGS
    from webdemo.predictor import DemoPredictor
    from webdemo.workspace import Workspace

    monkeypatch.setattr(Grove, "generate_captions", fixed_generate_captions)
    expected = _predict(trained, exported, tmp_path / "cli")
    with towers_moved_away(trained["towers"]):
        predictor = DemoPredictor([Path("configs/demo.yaml")], exported, trained["video"],
                                  [*TINY_MODEL_ARGS, *trained["tower_args"]])
        with Workspace(parent=tmp_path) as workspace:
            result = predictor.predict(trained["video"], predictor.defaults, workspace.new_run())
            page = json.loads(result.predictions_path.read_text())
    assert page == expected


def test_old_lightning_checkpoints_keep_working(trained, tmp_path):
    copied = tmp_path / "old.ckpt"
    shutil.copy(trained["ckpt"], copied)
    assert _predict(trained, copied, tmp_path / "a") == _predict(trained, trained["ckpt"], tmp_path / "b")
