"""CLIPScore, RefCLIPScore and EMScore equal their authors' formulas on hand-computed cases."""
import math

import pytest
import torch

from metrics.functional import embedding_scores as es


def test_clip_score_is_w_times_clipped_cosine():
    v = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    c = torch.tensor([[4.0, 3.0], [-1.0, 0.0]])
    # cos = 24/25 = 0.96, and -1 (clipped to 0)
    assert es.clip_score(v, c).tolist() == pytest.approx([2.5 * 0.96, 0.0])
    assert es.clip_score(v, c, w=es.PACS_W).tolist() == pytest.approx([2.0 * 0.96, 0.0])


def test_ref_clip_score_is_harmonic_mean_with_best_reference():
    v = torch.tensor([[1.0, 0.0]])
    c = torch.tensor([[1.0, 1.0]])  # cos with v = 1/sqrt2 -> CLIP-S = 2.5/sqrt2
    refs = [torch.tensor([[0.0, 1.0], [1.0, 1.0], [-1.0, 0.0]])]  # best cos 1
    clip_s = 2.5 / math.sqrt(2)
    assert es.ref_clip_score(v, c, refs).item() == pytest.approx(2 * clip_s * 1.0 / (clip_s + 1.0))
    # every reference opposite: the reference part is 0, and so is the harmonic mean
    assert es.ref_clip_score(v, c, [torch.tensor([[-1.0, -1.0]])]).item() == 0.0


def test_emscore_video_hand_case():
    tokens = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # SOS, word, EOS
    weights = torch.ones(3)
    frames = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    caption = tokens[-1]
    out = es.emscore_video(tokens, weights, caption, frames)
    s = 1 / math.sqrt(2)
    # video embedding = (1, 0); coarse = cos(EOS, video) = 1/sqrt2
    assert out["coarse"] == pytest.approx(s)
    # precision: best frame per token 1, 0, 1/sqrt2 -> mean; recall: best token per frame 1, 1 -> 1
    p = (1 + 0 + s) / 3
    assert out["fine_P"] == pytest.approx(p) and out["fine_R"] == pytest.approx(1.0)
    f = 2 * p / (p + 1)
    assert out["fine_F"] == pytest.approx(f)
    assert out["full_F"] == pytest.approx((f + s) / 2)
    # idf weights move precision only (recall over frames is unweighted)
    weighted = es.emscore_video(tokens, torch.tensor([0.0, 1.0, 1.0]), caption, frames)
    assert weighted["fine_P"] == pytest.approx((0 + s) / 2) and weighted["fine_R"] == pytest.approx(1.0)


def test_emscore_references_keeps_the_best_reference_and_combines():
    tokens = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    w = torch.ones(2)
    same = (tokens.clone(), torch.ones(2), tokens[-1].clone())
    other = (torch.tensor([[1.0, 0.0]]), torch.ones(1), torch.tensor([1.0, 0.0]))
    out = es.emscore_references(tokens, w, tokens[-1], [other, same])
    assert out["fine_F"] == pytest.approx(1.0) and out["coarse"] == pytest.approx(1.0)
    # the 'other' reference alone: P = (1 + 0)/2, R = 1, coarse = cos((0,1),(1,0)) = 0
    alone = es.emscore_references(tokens, w, tokens[-1], [other])
    assert alone["fine_P"] == pytest.approx(0.5) and alone["fine_R"] == pytest.approx(1.0)
    assert alone["full_F"] == pytest.approx((2 * 0.5 / 1.5 + 0.0) / 2)
    video = {"coarse": 0.2, "fine_P": 0.4, "fine_R": 0.6, "fine_F": 0.48, "full_F": 0.34}
    combined = es.emscore_combined(video, alone)
    assert combined["full_F"] == pytest.approx((0.34 + alone["full_F"]) / 2)


def test_idf_table_as_the_authors_compute_it():
    docs = [[5, 1, 7, 0], [5, 2, 7, 0], [5, 1, 7, 0]]  # SOS=5, EOS=7, padding 0
    table, unseen = es.idf_table(docs, eos_id=7)
    assert table[1] == pytest.approx(math.log(4 / 3)) and table[2] == pytest.approx(math.log(4 / 2))
    assert table[5] == pytest.approx(0.0) and table[0] == pytest.approx(0.0)
    # EOS: the mean of the table with its own (zero) document-frequency weight included
    assert table[7] == pytest.approx((math.log(4 / 3) + math.log(2)) / 5)
    assert unseen == pytest.approx(math.log(4))
