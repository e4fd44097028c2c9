"""Sparse segment sampling and the epoch-aware sampler."""
import numpy as np
import pytest

from datamodules.epoch_sampler import EpochIndexSampler
from models.grove.frame_sampling import centre_frames, sample_rng, sample_segment_frames, segment_bounds


@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 40, 41, 163])
def test_one_index_per_segment_in_range(n):
    T = 8
    start, end = segment_bounds(n, T)
    for seed in range(20):
        idx = sample_segment_frames(n, T, train=True, rng=sample_rng(seed, 0, 0))
        assert idx.shape == (T,) and idx.dtype == np.int64
        assert (idx >= 0).all() and (idx < n).all()
        assert (np.diff(idx) >= 0).all()
        if n >= T:  # each draw lies in its own segment's frames
            assert (idx >= np.floor(start)).all() and (idx < np.floor(end)).all()


def test_training_draws_cover_each_segment():
    n, T = 40, 8
    seen = np.zeros((T, n), dtype=bool)
    for i in range(400):
        idx = sample_segment_frames(n, T, True, sample_rng(0, 0, i))
        seen[np.arange(T), idx] = True
    # segment i owns frames 5i..5i+4 and every one of them gets drawn
    expected = np.zeros((T, n), dtype=bool)
    for i in range(T):
        expected[i, 5 * i:5 * i + 5] = True
    assert (seen == expected).all()


def test_eval_takes_centres():
    assert centre_frames(40, 8).tolist() == [2, 7, 12, 17, 22, 27, 32, 37]
    assert sample_segment_frames(40, 8, train=False).tolist() == [2, 7, 12, 17, 22, 27, 32, 37]
    # fewer frames than segments: repeats, still in range and ordered
    short = centre_frames(3, 8)
    assert short.tolist() == sorted(short.tolist()) and set(short.tolist()) == {0, 1, 2}


def test_reproducible_per_seed_epoch_index():
    a = sample_segment_frames(40, 8, True, sample_rng(3, 1, 5))
    b = sample_segment_frames(40, 8, True, sample_rng(3, 1, 5))
    assert (a == b).all()
    others = [sample_segment_frames(40, 8, True, sample_rng(*k)).tolist() for k in [(4, 1, 5), (3, 2, 5), (3, 1, 6)]]
    assert any(o != a.tolist() for o in others)


def test_redraw_until_visible():
    n, T = 40, 8
    visible = np.zeros(n, dtype=bool)
    visible[23] = True  # only frame 23 (segment 4) shows an object
    hits = 0
    for i in range(200):
        idx = sample_segment_frames(n, T, True, sample_rng(0, 0, i), visible=visible, max_redraws=10)
        hits += visible[idx].any()
    # one draw hits with p = 1/5; eleven draws with p = 1 - 0.8**11 ~ 0.91
    assert hits / 200 > 0.8
    no_redraw = sum(
        visible[sample_segment_frames(n, T, True, sample_rng(0, 0, i), visible=visible, max_redraws=0)].any()
        for i in range(200))
    assert no_redraw / 200 < 0.35
    # nothing visible anywhere: still a valid draw
    idx = sample_segment_frames(n, T, True, sample_rng(0, 0, 0), visible=np.zeros(n, bool))
    assert idx.shape == (T,)


def test_epoch_sampler_yields_epoch_and_shards():
    s = EpochIndexSampler(10, shuffle=True, seed=1)
    s.set_epoch(3)
    pairs = list(s)
    assert sorted(i for i, _ in pairs) == list(range(10)) and {e for _, e in pairs} == {3}
    s.set_epoch(4)
    assert [i for i, _ in s] != [i for i, _ in pairs]
    shards = [list(EpochIndexSampler(10, shuffle=False, num_replicas=3, rank=r)) for r in range(3)]
    assert all(len(x) == 4 for x in shards)
    covered = sorted(i for shard in shards for i, _ in shard)
    assert set(covered) == set(range(10)) and len(covered) == 12  # two padded repeats
