"""experiments/judge_feature_probe.py: the verifiers' causality, their use of the video, the token labels."""
import pytest
import torch

from judge.model.vc_inspector import VCInspectorJudge
from tests.judge.judge_fixtures import TINY


def test_feature_verifier_is_causal_over_the_caption():
    from experiments.judge_feature_probe import FeatureVerifier

    torch.manual_seed(0)
    model = FeatureVerifier(feature_dim=8, vocab_size=20, dim=16, layers=2, heads=2).eval()
    video = torch.randn(2, 5, 8)
    ids = torch.randint(0, 20, (2, 6))
    padding = torch.zeros(2, 6, dtype=torch.bool)
    base = model(video, ids, padding)
    changed = ids.clone()
    changed[:, 4] = (changed[:, 4] + 1) % 20
    after = model(video, changed, padding)
    assert torch.allclose(base[:, :4], after[:, :4], atol=1e-6) and not torch.allclose(base[:, 4:], after[:, 4:])
    assert not torch.allclose(base, model(torch.randn(2, 5, 8), ids, padding))  # it reads the video
    with pytest.raises(ValueError, match="exceed the verifier's positions"):
        model(torch.randn(1, 300, 8), ids[:1], padding[:1])



def test_judge_lm_verifier_is_causal_reads_the_video_and_uses_3d_positions():
    from experiments.judge_feature_probe import JudgeLMVerifier

    judge = VCInspectorJudge(tiny={**TINY, "num_layers": 2}, max_pixels=56 * 56, min_pixels=28 * 28, seed=1)
    model = JudgeLMVerifier(judge, seed=0).eval()
    # its own fresh language model, not the judge's (training it leaves the judge untouched)
    assert not any(q is r for q in model.parameters() for r in judge.parameters())
    grid = torch.tensor([[2, 4, 4], [2, 4, 4]])  # 2 x 2 x 2 = 8 merged video tokens per clip
    layout = (grid, torch.tensor([2.0, 2.0]))
    torch.manual_seed(0)
    video = torch.randn(2, 8, 32)
    ids = torch.randint(5, 200, (2, 6))
    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[1, 4:] = True
    with torch.no_grad():
        base = model(video, ids, padding, layout)
        changed = ids.clone()
        changed[:, 3] += 1
        after = model(video, changed, padding, layout)
        assert torch.allclose(base[:, :3], after[:, :3], atol=1e-5) and not torch.allclose(base[:, 3:], after[:, 3:])
        assert not torch.allclose(base, model(torch.randn(2, 8, 32), ids, padding, layout))  # it reads the video
        # the video tokens' rotary positions follow the grid: a longer time step moves them apart
        assert not torch.allclose(base, model(video, ids, padding, (grid, torch.tensor([6.0, 6.0]))), atol=1e-5)
        # padding after a caption changes nothing before it
        shorter = model(video[1:], ids[1:, :4], padding[1:, :4], (grid[1:], layout[1][1:]))
        assert torch.allclose(base[1:, :4], shorter, atol=1e-5)

def test_feature_probe_token_labels_by_kind():
    from experiments.judge_feature_probe import token_labels

    tokenizer = VCInspectorJudge(tiny=TINY, max_pixels=56 * 56, min_pixels=28 * 28).prompter.tokenizer
    row = {"original_caption": "a red circle moves left, then a blue square stays still.",
           "caption": "a red circle moves up, then a white square stays still.",
           "substitutions": [{"kind": "action", "old": "moves left", "new": "moves up"},
                             {"kind": "object", "old": "blue square", "new": "white square"}]}
    ids, labels, kinds = token_labels(row, tokenizer)
    assert len(ids) == len(labels) == len(kinds)
    flagged = {k: tokenizer.decode([i for i, kind in zip(ids, kinds) if kind == k]).replace(" ", "") for k in (1, 2)}
    assert flagged == {1: "whitesquare", 2: "movesup"}
    assert labels == [int(k > 0) for k in kinds]
    assert token_labels({"caption": "a red circle."}, tokenizer) is None  # no substitution record


@pytest.mark.slow
@pytest.mark.parametrize("verifier", ["scratch", "judge"])
def test_feature_probe_runs_on_the_judge_config(tiny_synthetic_root, tmp_path, verifier):
    from experiments.judge_feature_probe import main
    from tests.fixtures.paths import ROOT

    overrides = ["--data.init_args.synthetic={num_train: 6, num_val: 2, num_test: 2, duration_s: 2.0, workers: 1}",
                 f"--data.init_args.synthetic_root={tiny_synthetic_root}", "--data.init_args.num_workers=0",
                 "--data.init_args.num_frames=4", "--model.init_args.vision_checkpoint=null",
                 "--data.init_args.generator={backend: rule, in_domain: require, max_climb: 4, balance: false}",
                 *[f"--data.init_args.{s}_annotations={tmp_path / f'{s}.jsonl'}" for s in ("train", "val", "test")],
                 "--data.init_args.generate_from={" + ", ".join(
                     f"{s}: {tiny_synthetic_root / 'annotations' / f'{s}.json'}"
                     for s in ("train", "val", "test")) + "}"]
    report = main(["--config", str(ROOT / "configs" / "judge_demo.yaml"), "--steps", "3", "--eval-every", "2",
                   "--batch-size", "4", "--verifier", verifier, "--clip", "1.0", "--", *overrides])
    assert report["verifier"] == verifier and [h["step"] for h in report["history"]] == [2, 3]
    last = report["history"][-1]
    assert 0.0 <= last["token_accuracy"] <= 1.0 and 0.0 < last["base_rate_unchanged"] <= 1.0
    assert set(last) >= {"accuracy_unchanged", "accuracy_object", "accuracy_action", "kendall_tau_b", "train_loss"}


