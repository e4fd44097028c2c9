"""JudgeModule: the learning-rate schedule, the error head's bookkeeping, and fit -> test through the CLI."""
import json
import math

import pytest
import torch

from judge.model.prompt_format import format_judge_answer
from tests.judge.judge_fixtures import TINY
from tests.judge.judge_fixtures import random_frames as _frames


def test_warmup_cosine_schedule():
    from lightning_modules.schedules import WarmupCosineDecay

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-4)
    sched = WarmupCosineDecay(opt, total_steps=100, warmup_ratio=0.05, min_lr=1e-5)
    lrs = [sched.lr_at(1e-4, s) for s in range(101)]
    assert lrs[0] == pytest.approx(1e-4 / 6) and lrs[4] == pytest.approx(1e-4 * 5 / 6)
    assert lrs[5] == pytest.approx(1e-4)  # warm-up over 5 % of the steps
    assert lrs[5 + 95 // 2] == pytest.approx(1e-5 + 0.5 * 9e-5 * (1 + math.cos(math.pi * 47 / 95)))
    assert lrs[100] == pytest.approx(1e-5) and all(a >= b for a, b in zip(lrs[5:], lrs[6:]))


def test_judge_fits_and_tests_through_the_cli(tmp_path):
    """Tiny synthetic data -> corruptions -> a few training steps -> test with correlations logged."""
    from cli import cli_main

    config = {
        "seed_everything": 0,
        "trainer": {"accelerator": "cpu", "devices": 1, "max_steps": 4, "limit_val_batches": 1,
                    "limit_test_batches": 2, "num_sanity_val_steps": 0, "logger": False,
                    "enable_progress_bar": False, "default_root_dir": str(tmp_path),
                    "callbacks": [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                                   "init_args": {"dirpath": str(tmp_path / "ckpt"), "save_last": True,
                                                 "save_top_k": 0}}]},
        "model": {"class_path": "judge.training.module.JudgeModule",
                  "init_args": {"tiny": TINY, "lora": {"r": 4, "alpha": 8, "dropout": 0.05},
                                "max_pixels": 3136, "min_pixels": 784, "max_new_tokens": 4,
                                "error_detection_weight": 0.5, "video_feature_cache": 16,
                                "adapter_dir": str(tmp_path / "adapter"),
                                "answers_file": str(tmp_path / "answers.jsonl")}},
        "data": {"class_path": "judge.data.datamodule.JudgeDataModule",
                 "init_args": {"synthetic": {"num_train": 6, "num_val": 2, "num_test": 3, "workers": 1},
                               "synthetic_root": str(tmp_path / "synthetic"),
                               **{f"{s}_annotations": str(tmp_path / f"{s}.jsonl") for s in ("train", "val", "test")},
                               "generate_from": {s: str(tmp_path / "synthetic" / "annotations" / f"{s}.json")
                                                 for s in ("train", "val", "test")},
                               "generator": {"in_domain": "require", "max_climb": 4, "balance": False},
                               "num_frames": 4, "batch_size": 2, "eval_batch_size": 4, "num_workers": 0}},
    }
    path = tmp_path / "judge_tiny.yaml"
    path.write_text(json.dumps(config))
    fit = cli_main(["fit", "--config", str(path)])
    assert fit.trainer.global_step == 4
    logged = fit.trainer.callback_metrics  # the auxiliary error loss is added with its weight
    assert logged["train/loss"].item() == pytest.approx(
        logged["train/answer_loss"].item() + 0.5 * logged["train/error_loss"].item(), rel=1e-5)
    assert 0.0 <= logged["train/error_accuracy"].item() <= 1.0
    cache = fit.model.judge.video_cache  # 8 training clips drawn from 6 videos: at least 2 come again
    assert cache.hits >= 2 and cache.misses >= 1
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    test = cli_main(["test", "--config", str(path), f"--ckpt_path={tmp_path / 'ckpt' / 'last.ckpt'}"])
    metrics = test.trainer.callback_metrics
    assert {"test/loss", "test/unparsable"} <= set(metrics)
    answers = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == 8 and all((a["score"] is None) == (a["error"] is not None) for a in answers)
    assert metrics["test/unparsable"].item() == pytest.approx(sum(a["score"] is None for a in answers) / 8)


def test_error_head_warns_once_and_counts_batches_without_labels():
    from judge.training.module import JudgeModule

    module = JudgeModule(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                         min_pixels=28 * 28, error_detection_weight=1.0)
    p = module.prompter
    unlabelled = p.collate([p.encode(_frames(0), "a red circle.", format_judge_answer(4, "fine"))])  # no spans
    unlabelled["keys"] = ["a"]
    with pytest.warns(UserWarning, match="no caption token to flag"):
        loss = module.training_step(unlabelled, 0)
    assert loss.item() == pytest.approx(module.judge(unlabelled).item(), rel=1e-5)  # the answer loss alone
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module.training_step(unlabelled, 1)
    assert not [w for w in caught if "no caption token to flag" in str(w.message)]  # once, then only counted
    assert module._unlabelled_batches == 2
    labelled = p.collate([p.encode(_frames(1), "a white square.", format_judge_answer(3, "x"), error_spans=[(2, 14)])])
    labelled["keys"] = ["b"]
    module.training_step(labelled, 2)
    assert module._unlabelled_batches == 2


def test_a_checkpoint_weight_of_another_kind_is_refused_naming_the_key():
    from core.weights.dtypes import WeightDtypeError

    from judge.training.module import JudgeModule

    module = JudgeModule(tiny=TINY, max_pixels=56 * 56, min_pixels=28 * 28)
    state = {k: v.clone() for k, v in module.state_dict().items()}
    key = next(k for k, v in state.items() if v.is_floating_point() and v.dim() == 2)
    module.on_load_checkpoint({"state_dict": state})  # the module's own kinds load
    state[key] = (state[key] * 100).to(torch.int32)
    with pytest.raises(WeightDtypeError, match=rf"checkpoint: 1 weight\(s\).*{key}: stored torch.int32"):
        module.on_load_checkpoint({"state_dict": state})
