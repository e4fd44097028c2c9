"""GLaMM's GCG mask mIoU and recall against an oracle that follows the published algorithm step by step
on decoded masks (numpy IoU with its NaN for two empty masks, ``argmax`` on the matrix, rows and
columns deleted or zeroed), on random masks with ties, empty masks and graded phrase similarities."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from formats.mask_rle import decode_masks, encode_masks
from metrics.functional.gcg_masks import GCGImage, gcg_mask_miou, gcg_mask_recall
from metrics.text_encoder import ExactMatchEncoder
from tests.metrics.grounding_reference_cases import WordVectorEncoder

H, W = 12, 14
PHRASES = ["a man", "a red knife", "the bowl", "a man walking", "red bowl"]


def numpy_iou(a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.sum(np.logical_and(a, b)) / np.sum(np.logical_or(a, b))


def oracle_miou(images):
    values = []
    for im in images:
        pred = decode_masks(im.predicted_masks) if im.predicted_masks else []
        gt = decode_masks(im.truth_masks) if im.truth_masks else []
        m = np.array([[numpy_iou(p, g) for g in gt] for p in pred]).reshape(len(pred), len(gt))
        paired = []
        while m.size > 0 and np.max(m) > 0:
            i, j = np.unravel_index(np.argmax(m), m.shape)
            paired.append(m[i, j])
            m = np.delete(np.delete(m, i, axis=0), j, axis=1)
        values.append(np.mean(paired) if paired else 0.0)
    return float(np.mean(values)) if values else 0.0


def oracle_recall(images, similarity):
    tp = positives = 0
    for im in images:
        positives += len(im.truth_labels)
        pred = decode_masks(im.predicted_masks) if im.predicted_masks else []
        gt = decode_masks(im.truth_masks) if im.truth_masks else []
        ious = np.array([[numpy_iou(g, p) for p in pred] for g in gt]).reshape(len(gt), len(pred))
        sims = np.array([[similarity(a, b) for b in im.predicted_labels] for a in im.truth_labels]).reshape(ious.shape)
        while ious.size > 0:
            i, j = np.unravel_index(np.argmax(ious), ious.shape)
            if ious[i, j] < 0.5 or sims[i, j] < 0.5:
                break
            tp += 1
            ious[i, :] = ious[:, j] = 0
            sims[i, :] = sims[:, j] = 0
    return tp / positives if positives else 0


def random_images(seed):
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(int(rng.integers(1, 7))):
        truth = []
        for _ in range(int(rng.choice([0, 1, 2, 3, 4]))):
            m = np.zeros((H, W), bool)
            if rng.random() > 0.15:  # sometimes an empty mask
                x, y = rng.integers(0, W - 1), rng.integers(0, H - 1)
                m[y:y + rng.integers(1, 7), x:x + rng.integers(1, 7)] = True
            truth.append(m)
        pred = []
        for g in truth:
            for _ in range(int(rng.choice([0, 1, 1, 2]))):
                p = g.copy()
                if rng.random() < 0.6:
                    p ^= rng.random((H, W)) < 0.08
                if rng.random() < 0.1:
                    p[:] = False
                pred.append(p)
        for _ in range(int(rng.choice([0, 0, 1, 2]))):
            p = np.zeros((H, W), bool)
            x, y = rng.integers(0, W - 1), rng.integers(0, H - 1)
            p[y:y + rng.integers(1, 7), x:x + rng.integers(1, 7)] = rng.random() > 0.1
            pred.append(p)
        pred = [pred[i] for i in rng.permutation(len(pred))]
        t_labels = [str(rng.choice(PHRASES)) for _ in truth]
        p_labels = [str(rng.choice(PHRASES)) for _ in pred]
        images.append(GCGImage(encode_masks(np.asarray(truth).reshape(-1, H, W)), t_labels,
                               encode_masks(np.asarray(pred).reshape(-1, H, W)), p_labels))
    return images


def _cosine(encoder):
    def similarity(a, b):
        x, y = encoder.encode([a])[0].double().numpy(), encoder.encode([b])[0].double().numpy()
        return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))
    return similarity


CASES = [random_images(seed) for seed in range(150)]


def test_cases_hold_empty_pairs_and_ties():
    empty_pairs = sum(any(m["counts"] == encode_masks(np.zeros((H, W), bool))[0]["counts"] for m in im.truth_masks)
                      and any(m["counts"] == encode_masks(np.zeros((H, W), bool))[0]["counts"]
                              for m in im.predicted_masks) for case in CASES for im in case)
    assert empty_pairs >= 5


def test_miou_equals_the_published_algorithm():
    for seed, images in enumerate(CASES):
        assert gcg_mask_miou(images) == pytest.approx(oracle_miou(images), abs=1e-12), seed


@pytest.mark.parametrize("encoder", [ExactMatchEncoder(), WordVectorEncoder()], ids=["exact", "graded"])
def test_recall_equals_the_published_algorithm(encoder):
    similarity = _cosine(encoder)
    for seed, images in enumerate(CASES):
        assert gcg_mask_recall(images, encoder) == pytest.approx(oracle_recall(images, similarity), abs=1e-12), seed


def test_hand_case_nan_rules():
    empty, square = np.zeros((1, H, W), bool), np.zeros((1, H, W), bool)
    square[0, 2:6, 2:6] = True
    e, s = encode_masks(empty)[0], encode_masks(square)[0]
    # A perfect pair next to an empty-vs-empty pair: mIoU 0 for the image (NaN maximum), recall takes both.
    image = GCGImage([s, e], ["a man", "the bowl"], [s, e], ["a man", "the bowl"])
    assert gcg_mask_miou([image]) == 0.0
    assert gcg_mask_recall([image], ExactMatchEncoder()) == 1.0
    # Without the empty masks: IoU 1 paired, one image of two without predictions.
    assert gcg_mask_miou([GCGImage([s], ["a man"], [s], ["a man"]), GCGImage([s], ["a man"], [], [])]) == 0.5
    # The first refused pair (wrong phrase at the best IoU) ends the image.
    shifted = np.roll(square, 1, axis=2)
    image = GCGImage([s, s], ["a man", "the bowl"], [s, encode_masks(shifted)[0]], ["a knife", "the bowl"])
    assert gcg_mask_recall([image], ExactMatchEncoder()) == 0.0
    with pytest.raises(ValueError, match="2 true masks but 1 true phrases"):
        GCGImage([s, s], ["a"], [], [])
