"""A trained judge scores without its vision-tower file, exports to a folder, and that folder scores the
same through ``VCInspectorJudge.from_pretrained``, ``grove judge`` and the agreement scorer."""
from __future__ import annotations

import core  # noqa: F401

import json
import shutil
from pathlib import Path

import pytest
import torch

from judge.model.vc_inspector import VCInspectorJudge
from tests.judge.judge_fixtures import TINY, random_frames

CAPTIONS = ["a red circle moves up.", "a blue square is still."]


@pytest.fixture(scope="module")
def trained(tiny_synthetic_root, tmp_path_factory):
    """A judge config whose vision tower comes from a file, a checkpoint of it, and the file."""
    from judge.training.module import JudgeModule

    tmp = tmp_path_factory.mktemp("judge_export")
    donor = VCInspectorJudge(tiny=TINY, seed=5)
    towers = tmp / "towers"
    towers.mkdir()
    vision = towers / "qwen_vision.bin"
    torch.save({f"model.visual.{k}": v for k, v in donor.vision_tower().state_dict().items()}, vision)
    config = {"model": {"class_path": "judge.training.module.JudgeModule",
                        "init_args": {"tiny": TINY, "max_pixels": 3136, "min_pixels": 784, "max_new_tokens": 6,
                                      "vision_checkpoint": str(vision), "error_detection_weight": 1.0,
                                      "lora": {"r": 4, "alpha": 8, "dropout": 0.0}}},
              "data": {"class_path": "judge.data.datamodule.JudgeDataModule",
                       "init_args": {"video_root": str(tiny_synthetic_root / "videos"), "num_frames": 4}}}
    (tmp / "judge.yaml").write_text(json.dumps(config))
    module = JudgeModule(**config["model"]["init_args"])
    with torch.no_grad():  # "trained": every weight moved away from its initialisation
        for p in module.parameters():
            p.add_(0.01 * torch.randn_like(p))
    ckpt = tmp / "judge.ckpt"
    torch.save({"state_dict": module.state_dict(), "epoch": 0,
                "hyper_parameters": {**dict(module.hparams), "_class_path": "judge.training.module.JudgeModule"}}, ckpt)
    return {"tmp": tmp, "config": str(tmp / "judge.yaml"), "ckpt": ckpt, "towers": towers,
            "root": tiny_synthetic_root, "state": module.judge.state_dict()}


class moved_away:
    def __init__(self, folder: Path):
        self.folder, self.away = folder, folder.with_name(folder.name + "_away")

    def __enter__(self):
        self.folder.rename(self.away)

    def __exit__(self, *exc):
        self.away.rename(self.folder)


def _answers(judge) -> list:
    frames = [random_frames(seed, t=4, size=56) for seed in (1, 2)]
    return [tuple(a) for a in judge.score(frames, CAPTIONS, max_new_tokens=6)]


def _same_weights(judge, state) -> bool:
    found = judge.state_dict()
    return set(found) == set(state) and all(torch.equal(found[k], state[k]) for k in state)


@pytest.fixture(scope="module")
def exported(trained):
    from command_line.model_export import export

    with moved_away(trained["towers"]):
        return export([trained["config"]], str(trained["ckpt"]), str(trained["tmp"] / "exported"))


def test_scoring_from_a_checkpoint_needs_no_vision_tower_file(trained):
    from judge.application.loading import load_judge

    present = load_judge(trained["config"], ckpt_path=str(trained["ckpt"]))
    direct_present = load_judge(str(trained["ckpt"]))
    with moved_away(trained["towers"]):
        absent = load_judge(trained["config"], ckpt_path=str(trained["ckpt"]))
        direct_absent = load_judge(str(trained["ckpt"]))
    for loaded in (present, absent, direct_present, direct_absent):
        assert _same_weights(loaded.judge, trained["state"])
    assert _answers(present.judge) == _answers(absent.judge) == _answers(direct_absent.judge)


def test_without_a_checkpoint_the_vision_tower_file_is_still_required(trained):
    from judge.application.loading import load_judge

    with moved_away(trained["towers"]), pytest.raises(FileNotFoundError, match="vision_checkpoint"):
        load_judge(trained["config"])


def test_export_then_from_pretrained_gives_the_same_judge_to_the_last_bit(trained, exported):
    from judge.application.loading import load_judge

    names = {p.name for p in exported.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "video_preprocessor_config.json",
            "README.md"} <= names
    with moved_away(trained["towers"]):
        judge = VCInspectorJudge.from_pretrained(exported)
        from_ckpt = load_judge(trained["config"], ckpt_path=str(trained["ckpt"])).judge
    assert _same_weights(judge, trained["state"]) and judge.has_adapter and judge.error_head is not None
    assert _answers(judge) == _answers(from_ckpt)


@pytest.mark.slow
def test_python_m_judge_and_the_agreement_scorer_take_the_folder(trained, exported, tmp_path):
    from agreement.scorers.judge import load_judge_scorer
    from judge.application.commands import main

    records = json.loads((trained["root"] / "annotations" / "test.json").read_text())["records"]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"key": f"c{i}", "video": r["video_fname"], "caption": r["caption"]}) + "\n"
                             for i, r in enumerate(records)))
    outputs = {}
    with moved_away(trained["towers"]):
        for name, judge_args in (("ckpt", ["--config", trained["config"], "--ckpt-path", str(trained["ckpt"])]),
                                 ("folder_as_ckpt", ["--config", trained["config"], "--ckpt-path", str(exported)]),
                                 ("folder", ["--judge", str(exported), "--num-frames", "4"])):
            main(["score", *judge_args, "--pairs", str(pairs), "--out", str(tmp_path / f"{name}.jsonl"),
                  "--video-root", str(trained["root"] / "videos"), "--no-progress"])
            # "scored_with" names the judge's source (checkpoint or folder): it differs by design
            outputs[name] = [{k: v for k, v in json.loads(line).items() if k not in ("seconds", "scored_with")}
                             for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        scorer = load_judge_scorer(config=[trained["config"]], ckpt_path=str(exported))
        assert _same_weights(scorer.judge, trained["state"])
    assert outputs["ckpt"] == outputs["folder_as_ckpt"] == outputs["folder"] and len(outputs["ckpt"]) == len(records)


def test_a_damaged_judge_folder_is_refused_by_name(trained, exported, tmp_path):
    from core.weights.pretrained_folder import PretrainedFolderError

    folder = tmp_path / "judge"
    shutil.copytree(exported, folder)
    config = json.loads((folder / "config.json").read_text())
    config["judge"]["lora"]["r"] = 8  # the weights' adapter has rank 4
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(PretrainedFolderError, match="do not fit"):
        VCInspectorJudge.from_pretrained(folder)


def test_a_judge_on_a_qwen_folder_reads_only_its_config_and_tokenizer_with_a_checkpoint(tmp_path):
    from judge.application.loading import load_judge
    from judge.training.module import JudgeModule
    from tests.judge.judge_fixtures import save_tiny_qwen_folder

    save_tiny_qwen_folder(tmp_path / "qwen")
    module = JudgeModule(model_path=str(tmp_path / "qwen"), max_pixels=3136, min_pixels=784)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.01)
    ckpt = tmp_path / "judge.ckpt"
    torch.save({"state_dict": module.state_dict(), "epoch": 0,
                "hyper_parameters": {**dict(module.hparams), "_class_path": "judge.training.module.JudgeModule"}}, ckpt)
    for weights in (tmp_path / "qwen").glob("*.safetensors"):
        weights.unlink()  # a machine with the base folder's small files only
    loaded = load_judge(str(ckpt))
    assert _same_weights(loaded.judge, module.judge.state_dict())
    with pytest.raises(OSError):  # without a checkpoint the base weights are needed
        JudgeModule(model_path=str(tmp_path / "qwen"))
