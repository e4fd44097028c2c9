"""Released judge weights load by path, with no download, and score pairs through the same code:
a merged Hugging Face Qwen2.5-VL folder, a LoRA adapter folder over a local base folder, a .ckpt."""
import json

import pytest
import torch

from judge.application.loading import load_judge
from judge.application.scoring import score_pairs
from judge.model.vc_inspector import VCInspectorJudge
from tests.judge.judge_fixtures import TINY, random_frames, save_tiny_qwen_folder

SIZE = {"max_pixels": 56 * 56, "min_pixels": 28 * 28}


@pytest.fixture(scope="module")
def base_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qwen_base")
    save_tiny_qwen_folder(folder, seed=5)
    return folder


def _clip_rows(root, n=2):
    records = json.loads((root / "annotations" / "test.json").read_text())["records"][:n]
    return [{"key": f"c{i}", "video": r["video_fname"], "caption": r["caption"]} for i, r in enumerate(records)]


def _answers_of(judge, frames, captions):
    return [(a.score, a.explanation, a.error) for a in judge.score(frames, captions, max_new_tokens=6)]


def test_merged_folder_loads_and_answers_as_the_saved_weights(base_folder):
    loaded = load_judge(str(base_folder), **SIZE)
    reference = VCInspectorJudge(model_path=str(base_folder), lora=None, **SIZE)
    assert not loaded.judge.has_adapter
    frames, captions = [random_frames(0), random_frames(1)], ["a red circle.", "a blue square moves up."]
    assert _answers_of(loaded.judge, frames, captions) == _answers_of(reference, frames, captions)
    with pytest.raises(FileNotFoundError, match="not a config file"):
        load_judge(str(base_folder / "nothing_here"))


def test_lora_adapter_over_a_local_base_loads_by_its_recorded_base_path(base_folder, tmp_path, tiny_synthetic_root):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2_5_VLForConditionalGeneration

    base = Qwen2_5_VLForConditionalGeneration.from_pretrained(str(base_folder))
    config = LoraConfig(r=4, lora_alpha=8, target_modules=r".*language_model.*\.(q_proj|v_proj)",
                        init_lora_weights=False)  # random B: the adapter changes the answers' logits
    torch.manual_seed(0)
    peft_model = get_peft_model(base, config).eval()
    peft_model.save_pretrained(str(tmp_path / "adapter"))
    recorded = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())["base_model_name_or_path"]
    assert recorded == str(base_folder)

    loaded = load_judge(str(tmp_path / "adapter"), **SIZE)
    assert loaded.judge.has_adapter
    plain = load_judge(str(base_folder), **SIZE).judge
    p = loaded.judge.prompter
    batch = p.collate([p.encode(random_frames(2), "a red circle.", "3\n\nfine")])
    with torch.no_grad():
        ours = loaded.judge.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                                  pixel_values_videos=batch["pixel_values_videos"],
                                  video_grid_thw=batch["video_grid_thw"],
                                  second_per_grid_ts=batch["second_per_grid_ts"],
                                  mm_token_type_ids=batch["mm_token_type_ids"]).logits
        theirs = peft_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                            pixel_values_videos=batch["pixel_values_videos"], video_grid_thw=batch["video_grid_thw"],
                            second_per_grid_ts=batch["second_per_grid_ts"],
                            mm_token_type_ids=batch["mm_token_type_ids"]).logits
        without = plain.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              pixel_values_videos=batch["pixel_values_videos"], video_grid_thw=batch["video_grid_thw"],
                              second_per_grid_ts=batch["second_per_grid_ts"],
                              mm_token_type_ids=batch["mm_token_type_ids"]).logits
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert not torch.allclose(ours, without, atol=1e-3)

    rows = _clip_rows(tiny_synthetic_root) + [{"key": "gone", "video": "missing.mp4", "caption": "a cross."}]
    scored, summary = score_pairs(loaded.judge, rows, tmp_path / "out.jsonl",
                                  video_root=str(tiny_synthetic_root / "videos"), num_frames=4, batch_size=2,
                                  max_new_tokens=6, progress=False)
    assert [r["key"] for r in scored] == ["c0", "c1", "gone"]
    assert summary["video_errors"] == 1 and summary["scored"] + summary["unparsable"] == 2

    moved = tmp_path / "adapter_elsewhere"
    (tmp_path / "adapter").rename(moved)
    cfg = json.loads((moved / "adapter_config.json").read_text())
    (moved / "adapter_config.json").write_text(json.dumps({**cfg, "base_model_name_or_path": "/no/such/base"}))
    with pytest.raises(FileNotFoundError, match="needs its base Qwen2.5-VL as a local folder"):
        load_judge(str(moved))
    assert load_judge(str(moved), base_model=str(base_folder), **SIZE).judge.has_adapter


def test_lightning_checkpoint_loads_weights_only_from_its_hyper_parameters(tmp_path):
    from judge.training.module import JudgeModule

    module = JudgeModule(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                         min_pixels=28 * 28, seed=2)
    with torch.no_grad():
        for name, param in module.named_parameters():
            if "lora_B" in name:
                param.normal_()
    # as `cli.py fit` wrote it before the judge was a package: the LightningCLI records the class path
    hparams = {**module.hparams, "_class_path": "lightning_modules.judge_module.JudgeModule",
               "_instantiator": "lightning.pytorch.cli.instantiate_module"}
    torch.save({"state_dict": module.state_dict(), "hyper_parameters": hparams}, tmp_path / "j.ckpt")
    loaded = load_judge(str(tmp_path / "j.ckpt"))
    state = loaded.judge.state_dict()
    assert all(torch.equal(state[k], v) for k, v in module.judge.state_dict().items())

    from judge.application.callback import VCInspectorScore  # the GROVE-side callback reads it with the same loader

    state = VCInspectorScore(judge_checkpoint=str(tmp_path / "j.ckpt")).load_judge(torch.device("cpu")).state_dict()
    assert all(torch.equal(state[k], v) for k, v in module.judge.state_dict().items())
