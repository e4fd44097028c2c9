"""``Grove.save_pretrained`` / ``from_pretrained`` (huggingface_hub's mixin): a local folder and the local hub
cache give back the same model to the last bit; damaged folders are refused, naming what is wrong."""
from __future__ import annotations

import core  # noqa: F401
from core.weights import WeightFileError
from core.weights.pretrained_folder import INDEX_FILE, PretrainedFolderError

import json
import shutil

import pytest
import torch

from models.grove import Grove
from models.grove.configuration import tiny_configs


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    grove = Grove(**tiny_configs()).eval()
    grove.settings = {"prompt": {"chat_template": "plain", "target_text": "as_is", "sample_question": False},
                      "preprocessing": {"num_frames": 4, "global_image_size": 64, "grounding_image_size": 128}}
    grove.prompter = grove.make_prompter(sample_question=False, template="plain")
    return grove


def _inputs():
    gen = torch.Generator().manual_seed(3)
    return (torch.randn(1, 4, 3, 64, 64, generator=gen), torch.randn(1, 4, 3, 128, 128, generator=gen),
            torch.ones(1, 4, dtype=torch.bool))


def _same_outputs(a: Grove, b: Grove) -> None:
    g, s, mask = _inputs()
    positions = torch.arange(4).unsqueeze(0)
    outs = [m.predict(g, s, mask, caption_positions=positions, max_new_tokens=5) for m in (a, b)]
    assert outs[0].tagged_captions == outs[1].tagged_captions
    caption = ["a <p> red shape </p> [DET] near <p> a wall </p> [DET]"]
    forced = [m.predict(g, s, mask, caption_positions=positions, captions=caption) for m in (a, b)]
    assert forced[0].boxes.abs().sum() > 0
    assert torch.equal(forced[0].boxes, forced[1].boxes) and torch.equal(forced[0].scores, forced[1].scores)
    sa, sb = a.state_dict(), b.state_dict()
    assert set(sa) == set(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_local_folder_round_trip_is_exact(model, tmp_path):
    model.save_pretrained(tmp_path / "grove")
    names = {p.name for p in (tmp_path / "grove").iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "preprocessor_config.json", "README.md"} <= names
    loaded = Grove.from_pretrained(tmp_path / "grove")
    _same_outputs(model, loaded)
    assert loaded.prompter.template == "plain" and loaded.settings["preprocessing"]["num_frames"] == 4


def test_sharded_weights_load_through_their_index(model, tmp_path):
    model.max_shard_bytes = 2_000_000
    try:
        model.save_pretrained(tmp_path / "grove")
    finally:
        del model.max_shard_bytes
    shards = sorted((tmp_path / "grove").glob("model-*-of-*.safetensors"))
    assert len(shards) >= 3 and not (tmp_path / "grove" / "model.safetensors").exists()
    index = json.loads((tmp_path / "grove" / INDEX_FILE).read_text())
    assert set(index["weight_map"]) == set(model.state_dict())
    _same_outputs(model, Grove.from_pretrained(tmp_path / "grove"))


def _hub_cache(model, cache, repo_id="someone/tiny-grove", commit="0123456789abcdef0123456789abcdef01234567"):
    """The layout huggingface_hub keeps downloads in: models--org--name/{refs/main, snapshots/<commit>/...}."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    model.save_pretrained(repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    return repo_id


def test_a_hub_id_loads_from_the_local_cache_offline(model, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    repo_id = _hub_cache(model, tmp_path / "cache")
    _same_outputs(model, Grove.from_pretrained(repo_id, cache_dir=tmp_path / "cache"))
    from models.grove.processing import GroveProcessor

    assert GroveProcessor.from_pretrained(repo_id, cache_dir=tmp_path / "cache").preprocessing["num_frames"] == 4


def test_a_hub_id_not_in_the_cache_offline_says_so(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(FileNotFoundError, match="offline") as err:
        Grove.from_pretrained("someone/not-downloaded", cache_dir=tmp_path / "empty")
    assert "not in the local Hugging Face cache" in str(err.value)


def test_a_missing_shard_is_named(model, tmp_path):
    model.max_shard_bytes = 2_000_000
    try:
        model.save_pretrained(tmp_path / "grove")
    finally:
        del model.max_shard_bytes
    lost = sorted((tmp_path / "grove").glob("model-*-of-*.safetensors"))[1]
    lost.unlink()
    with pytest.raises(FileNotFoundError, match=lost.name):
        Grove.from_pretrained(tmp_path / "grove")


def test_a_config_that_does_not_fit_the_weights_is_refused(model, tmp_path):
    model.save_pretrained(tmp_path / "grove")
    config_path = tmp_path / "grove" / "config.json"
    config = json.loads(config_path.read_text())
    config["decoder"]["mlp_dim"] = 96  # the weights' decoder MLP is 128 wide
    config_path.write_text(json.dumps(config))
    with pytest.raises(PretrainedFolderError, match="do not fit") as err:
        Grove.from_pretrained(tmp_path / "grove")
    assert "box_decoder" in str(err.value) and str(tmp_path / "grove") in str(err.value)


def test_weights_with_nan_are_refused_by_name(model, tmp_path):
    from safetensors.torch import load_file, save_file

    model.save_pretrained(tmp_path / "grove")
    path = tmp_path / "grove" / "model.safetensors"
    state = load_file(str(path))
    state["box_head.mlp.0.weight"][0, 0] = float("nan")
    save_file(state, str(path))
    with pytest.raises(WeightFileError, match="box_head.mlp.0.weight"):
        Grove.from_pretrained(tmp_path / "grove")


def test_a_folder_of_another_model_type_is_refused(model, tmp_path):
    model.save_pretrained(tmp_path / "grove")
    shutil.copytree(tmp_path / "grove", tmp_path / "other")
    config = json.loads((tmp_path / "other" / "config.json").read_text())
    config["model_type"] = "qwen2_5_vl"
    (tmp_path / "other" / "config.json").write_text(json.dumps(config))
    with pytest.raises(PretrainedFolderError, match="model_type is 'qwen2_5_vl'"):
        Grove.from_pretrained(tmp_path / "other")


@pytest.mark.slow
def test_the_api_s_instruction_threshold_and_embeddings_arguments(model, tiny_synthetic_root, monkeypatch):
    from models.grove.processing import GroveProcessor
    from tests.webdemo.fixed_caption_server import FIXED_CAPTION

    asked = []

    def fixed(self, global_frames, max_new_tokens=64, video_embeds=None):
        asked.append(self.prompter.questions[0])
        return [FIXED_CAPTION] * len(global_frames)

    monkeypatch.setattr(Grove, "generate_captions", fixed)
    processor = GroveProcessor({"num_frames": 4, "global_image_size": 64, "grounding_image_size": 128})
    video = str(sorted((tiny_synthetic_root / "videos").glob("synthtest*.mp4"))[0])
    everything = processor.generate(model, video, None, "cpu", instruction="Where is the red shape?",
                                    temp_objectness_threshold=0.0, start_frame=10, end_frame=39)
    assert asked == ["Where is the red shape?"] and model.prompter.questions[0] != asked[0]
    assert everything["frame_indices"] == list(range(10, 40, 5))  # 25 fps: every 5th frame, end inclusive
    assert all(len(b) == len(labels) == 2 for b, labels in zip(everything["bboxes"], everything["labels_per_frame"]))
    nothing = processor.generate(model, video, None, "cpu", temp_objectness_threshold=1.01)
    assert all(len(b) == len(labels) == 0 for b, labels in zip(nothing["bboxes"], nothing["labels_per_frame"]))
    half = processor.generate(model, video, None, "cpu", temp_objectness_threshold=0.5)
    for boxes, labels, probs in zip(half["bboxes"], half["labels_per_frame"], half["probs_temp_objectness"]):
        assert labels == [p for p, s in zip(half["phrases"], probs.tolist()) if s >= 0.5] and len(boxes) == len(labels)
    table = model.language_model.get_input_embeddings().weight
    assert processor.generate(model, video, table.detach(), "cpu")["text"] == half["text"]
    with pytest.raises(ValueError, match="token_embeddings"):
        processor.generate(model, video, table[:10], "cpu")
