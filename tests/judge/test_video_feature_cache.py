"""The frozen-tower memo: exact reuse, counting, eviction, invalidation on a weight change, refusals."""
import numpy as np
import pytest
import torch

from judge.model.vc_inspector import VCInspectorJudge, format_judge_answer
from judge.model.video_feature_cache import FrozenVideoFeatureCache, pixel_digest

TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64,
        "vision_hidden_size": 32, "vision_depth": 1, "vision_heads": 2}


def _judge(**kwargs):
    return VCInspectorJudge(tiny=TINY, lora={"r": 4, "alpha": 8, "dropout": 0.0}, max_pixels=56 * 56,
                            min_pixels=28 * 28, seed=3, error_head=True, **kwargs)


def _batch(judge, seeds):
    samples = []
    for seed in seeds:
        frames = np.random.default_rng(seed).integers(0, 256, (4, 64, 64, 3), dtype=np.uint8)
        samples.append(judge.prompter.encode(frames, "a red circle stays still.", format_judge_answer(4, "ok"),
                                             error_spans=[(2, 12)]))
    return judge.prompter.collate(samples)


def test_pixel_digest_is_exact():
    x = torch.arange(12.0).view(3, 4)
    assert pixel_digest(x) == pixel_digest(x.clone())
    y = x.clone()
    y[2, 3] += 1e-6
    assert pixel_digest(y) != pixel_digest(x)
    assert pixel_digest(x.view(4, 3)) != pixel_digest(x)  # the same values in another shape
    assert pixel_digest(x.double()) != pixel_digest(x)


def test_cached_losses_and_gradients_equal_the_plain_ones():
    plain, cached = _judge(), _judge(video_feature_cache=8)
    cached.load_state_dict(plain.state_dict())  # peft draws the adapters' initial weights unseeded
    assert "video_digests" not in _batch(plain, [0])  # no memo, no hashing
    batch = _batch(cached, [0, 1, 0])  # the third clip repeats the first
    assert batch["video_digests"][0] == batch["video_digests"][2] != batch["video_digests"][1]
    for step in range(2):
        a, b = plain.losses(batch, score_weight=5.0), cached.losses(batch, score_weight=5.0)
        for key in a:
            assert b[key].item() == pytest.approx(a[key].item(), rel=1e-6, abs=1e-7)
        (a["answer"] + a["error"]).backward()
        (b["answer"] + b["error"]).backward()
        for (name, p), q in zip(plain.named_parameters(), cached.parameters()):
            if p.grad is not None:
                assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7), name
        plain.zero_grad(), cached.zero_grad()
    # two distinct clips computed once; the repeat within the batch and the whole second step are hits
    assert (cached.video_cache.misses, cached.video_cache.hits) == (2, 1 + 3)


def test_the_tower_runs_only_on_new_clips_and_the_oldest_clip_leaves_first(monkeypatch):
    judge = _judge(video_feature_cache=1)  # its prompter adds the digests; the memo under test is built below
    model = judge.base_model.model
    calls = []
    original = model.get_video_features

    def counting(pixels, grid, **kwargs):
        calls.append(len(grid))
        return original(pixels, grid, **kwargs)

    monkeypatch.setattr(model, "get_video_features", counting)
    cache = FrozenVideoFeatureCache(max_clips=2)
    first, second, third = (_batch(judge, [s]) for s in (0, 1, 2))

    def run(batch):
        return cache.features(model, batch["pixel_values_videos"], batch["video_grid_thw"], batch["video_digests"])

    reference = original(first["pixel_values_videos"], first["video_grid_thw"], return_dict=True).pooler_output[0]
    assert torch.equal(run(first).pooler_output[0], reference)
    run(second)
    assert torch.equal(run(first).pooler_output[0], reference) and calls == [1, 1]  # a hit; `first` is now newest
    run(third)  # evicts `second`, the least recently used
    assert len(cache) == 2 and calls == [1, 1, 1]
    run(first)
    assert calls == [1, 1, 1]
    run(second)
    assert calls == [1, 1, 1, 1]
    # without digests the memo computes them itself
    assert torch.equal(cache.features(model, first["pixel_values_videos"], first["video_grid_thw"]).pooler_output[0],
                       reference)
    with pytest.raises(ValueError, match="2 video digests for 1 clips"):
        cache.features(model, first["pixel_values_videos"], first["video_grid_thw"], ["a", "b"])


def test_a_changed_tower_empties_the_memo():
    judge = _judge(video_feature_cache=4)
    batch = _batch(judge, [0])
    model = judge.base_model.model
    before = judge.video_cache.features(model, batch["pixel_values_videos"], batch["video_grid_thw"],
                                        batch["video_digests"]).pooler_output[0]
    with torch.no_grad():  # an in-place load, as load_state_dict does
        judge.vision_tower().merger.mlp[-1].bias.add_(1.0)
    after = judge.video_cache.features(model, batch["pixel_values_videos"], batch["video_grid_thw"],
                                       batch["video_digests"]).pooler_output[0]
    assert torch.allclose(after, before + 1.0, atol=1e-5)  # recomputed, with the new bias
    assert judge.video_cache.misses == 2


def test_the_memo_refuses_a_training_tower():
    with pytest.raises(ValueError, match="video_feature_cache.*train_vision or train_merger"):
        _judge(video_feature_cache=4, train_merger=True)
    judge = _judge(video_feature_cache=4)
    judge.vision_tower().merger.requires_grad_(True)
    batch = _batch(judge, [0])
    with pytest.raises(ValueError, match="frozen vision tower.*merger"):
        judge.losses(batch)
    with pytest.raises(ValueError, match="max_clips >= 1"):
        FrozenVideoFeatureCache(0)
