"""The grounding metrics give, to the last bit, the figures recorded from the implementation they
replaced (seeded random cases and a small benchmark set; ``grounding_reference_cases.py``), also
when fed in batches, with a warm phrase vocabulary, and with a vocabulary shared by two encoders' runs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from metrics.evaluator.evaluation import batched
from metrics.functional.grounding import GroundingAccumulator, evaluate_grounding
from metrics.text_encoder import ExactMatchEncoder, PhraseVocabulary
from tests.metrics.grounding_reference_cases import REFERENCE, WordVectorEncoder, cases, encode, settings

WANT = json.loads(REFERENCE.read_text())
CASES = list(cases())


@pytest.mark.parametrize("name,kwargs", list(settings()), ids=[n for n, _ in settings()])
def test_whole_set_figures_equal_the_recorded_ones(name, kwargs):
    for case, gt, pred in CASES:
        got = {k: encode(v) for k, v in evaluate_grounding(gt, pred, **kwargs).items()}
        assert got == WANT[f"{case}/{name}"], case


def test_a_warm_vocabulary_gives_the_same_figures():
    class Counting(WordVectorEncoder):
        texts: list = []

        def encode(self, texts):
            self.texts.extend(texts)
            return super().encode(texts)

    vocabulary, encoder = PhraseVocabulary(), Counting()
    for rerun in range(2):  # the second pass looks every phrase up
        for case, gt, pred in CASES[:20] + CASES[-1:]:
            got = evaluate_grounding(gt, pred, text_encoder=encoder, vocabulary=vocabulary)
            assert {k: encode(v) for k, v in got.items()} == WANT[f"{case}/constant"], case
        if not rerun:
            first = len(encoder.texts)
    assert len(encoder.texts) == first == len(set(encoder.texts)) > 0


def test_exact_match_embeddings_compare_across_calls():
    enc = ExactMatchEncoder()
    a, b = enc.encode(["a man", "the bowl"]), enc.encode(["The  Bowl", "a knife", "A MAN"])
    assert (a @ b.T[: a.shape[1]]).tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]


@pytest.mark.parametrize("batch", [1, 7])
def test_batches_give_the_recorded_figures_bit_for_bit_where_sums_allow(batch):
    """Batched means add per-batch sums, so only the order of additions differs (1e-12); counts are exact."""
    case, gt, pred = CASES[-1]
    keys = list(gt)
    acc = GroundingAccumulator(WordVectorEncoder())
    for part in batched(keys, batch):
        acc.add({k: gt[k] for k in part}, {k: pred[k] for k in part if k in pred},
                np.asarray([keys.index(k) for k in part]))
    got, want = acc.result(), WANT[f"{case}/constant"]
    for name, value in want.items():
        assert got[name] == pytest.approx(float.fromhex(value), abs=1e-12), name
    assert encode(got["AP50_frame"]) == want["AP50_frame"]  # one ranking of all detections: exact
