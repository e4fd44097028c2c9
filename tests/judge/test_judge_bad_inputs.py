"""Inputs the judge must refuse by name: another model's checkpoint, a non-HTTP endpoint, an output that is an input."""
import json

import pytest
import torch

from judge.application.loading import load_judge
from tests.judge.judge_fixtures import TINY


def test_a_grove_checkpoint_is_refused_naming_the_file_and_both_classes(tmp_path):
    grove = {"state_dict": {f"model.language_model.layers.{i}.weight": torch.zeros(2) for i in range(500)},
             "hyper_parameters": {"_class_path": "lightning_modules.grove_module.GroveModule", "num_frames": 8}}
    torch.save(grove, tmp_path / "grove.ckpt")
    with pytest.raises(ValueError) as err:
        load_judge(str(tmp_path / "grove.ckpt"))
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'grove.ckpt'} is a checkpoint of lightning_modules.grove_module."
                              "GroveModule, not of judge.training.module.JudgeModule")
    assert len(message) < 400  # not every key name
    # no saved class: the mismatch is summarised with a few keys
    del grove["hyper_parameters"]["_class_path"]
    grove["hyper_parameters"].update(tiny=TINY, max_pixels=56 * 56, min_pixels=28 * 28)
    torch.save(grove, tmp_path / "bare.ckpt")
    with pytest.raises(ValueError, match=r"bare.ckpt: its weights do not fit judge.training.module.JudgeModule: 500 "
                                         r"unexpected key\(s\) \(e.g. \['model.language_model") as err:
        load_judge(str(tmp_path / "bare.ckpt"))
    assert len(str(err.value)) < 600


@pytest.mark.parametrize("url", ["file:///etc/hostname", "ftp://host/v1", "localhost:8000/v1"])
def test_only_http_endpoints_are_accepted(url, tmp_path):
    from core.chat_completions import post_chat_completion

    from judge.application.commands import main
    from judge.model.endpoint import EndpointJudge

    with pytest.raises(ValueError, match="must start with http:// or https://"):
        EndpointJudge(url, "m")
    with pytest.raises(ValueError, match="must start with http:// or https://"):
        post_chat_completion(url + "/chat/completions", {})
    (tmp_path / "pairs.jsonl").write_text(json.dumps({"video": "a.mp4", "caption": "x"}) + "\n")
    with pytest.raises(SystemExit, match=f"error: --endpoint: endpoint must start with http:// or https://, "
                                         f"got '{url}'"):
        main(["score", "--endpoint", url, "--endpoint-model", "m", "--pairs", str(tmp_path / "pairs.jsonl"),
              "--out", str(tmp_path / "out.jsonl"), "--no-progress"])
    assert not (tmp_path / "out.jsonl").exists()


def test_the_output_may_not_be_an_input_and_numbers_are_checked(tmp_path, capsys):
    from judge.application.commands import main

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"video": "a.mp4", "caption": "x"}) + "\n")
    before = pairs.read_bytes()
    with pytest.raises(SystemExit, match=r"--out .*pairs.jsonl is --pairs .*pairs.jsonl, an input of this command"):
        main(["score", "--endpoint", "http://localhost:1/v1", "--endpoint-model", "m", "--pairs", str(pairs),
              "--out", str(pairs), "--no-progress"])
    assert pairs.read_bytes() == before
    with pytest.raises(SystemExit):
        main(["score", "--endpoint", "http://localhost:1/v1", "--endpoint-model", "m", "--pairs", str(pairs),
              "--out", str(tmp_path / "o.jsonl"), "--batch-size", "0"])
    assert "argument --batch-size: must be a positive integer, got '0'" in capsys.readouterr().err
