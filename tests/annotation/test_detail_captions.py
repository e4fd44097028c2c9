"""Detail captions (CAPTURE paper, sec. 4.1): the maximal-rectangle step on hand-made masks, the
salient-region selection, the hallucination filter with fixed phrase scores, and the five stages
end to end on a synthetic frame with tiny random models (GIT, SAM, OWLv2, Llama) through the CLI."""
import json

import numpy as np
import pytest
import torch
import yaml

from annotation.detail_captions import (
    filter_hallucinations,
    limit_words,
    maximal_rectangle,
    remove_phrases,
    salient_regions,
)
from tests.annotation.test_annotation_backends import tiny_models  # noqa: F401  (fixture)


def test_maximal_rectangle_on_hand_made_masks():
    mask = np.zeros((6, 8), bool)
    mask[1:4, 2:7] = True  # a 3 x 5 block ...
    mask[4, 2:4] = True  # ... with a 1 x 2 foot
    assert maximal_rectangle(mask) == ((2, 1, 7, 4), 15)
    # an L shape: the tall arm (5 x 2 = 10) beats the long arm (2 x 4 = 8)
    ell = np.zeros((5, 6), bool)
    ell[:, 0:2] = True
    ell[3:5, 0:4] = True
    assert maximal_rectangle(ell) == ((0, 0, 2, 5), 10)
    assert maximal_rectangle(np.zeros((3, 3), bool))[1] == 0
    assert maximal_rectangle(np.ones((2, 3), bool)) == ((0, 0, 3, 2), 6)


def test_salient_regions_drop_extreme_masks_and_reduce_overlap():
    masks = np.zeros((4, 20, 20), bool)
    masks[0] = True  # the whole image: too large
    masks[1, 0:10, 0:10] = True  # 25 %
    masks[2, 5:15, 5:15] = True  # 25 %, overlapping the previous one's corner
    masks[3, 19, 19] = True  # one pixel: too small
    regions = salient_regions(masks, min_area=0.01, max_area=0.8, min_region=0.05)
    assert regions[0] == (0, 0, 10, 10)
    # the second mask minus the first crop: its largest free rectangle is 10 rows x 5 columns (x 10..15)
    assert regions[1] in [(10, 5, 15, 15), (5, 10, 15, 15)] and len(regions) == 2


class FixedScores:
    def __init__(self, scores):
        self.scores, self.calls = scores, []

    def score(self, image, phrases):
        self.calls.append(list(phrases))
        return np.array([self.scores[p] for p in phrases])


def test_hallucination_filter_drops_phrases_scored_below_threshold():
    captions = ["A dog sits next to a red ball on the grass.", "A red ball and a cat."]
    phrases = [["dog", "red ball", "grass"], ["red ball", "cat"]]
    scorer = FixedScores({"dog": 0.4, "red ball": 0.02, "grass": 0.2, "cat": 0.005})
    filtered, scores = filter_hallucinations(np.zeros((4, 4, 3), np.uint8), captions, phrases, scorer, 0.01)
    assert filtered == ["A dog sits next to a red ball on the grass.", "A red ball and a."]
    assert scores["cat"] == 0.005 and scorer.calls == [["dog", "red ball", "grass", "cat"]]  # each phrase once
    assert remove_phrases("The Cat sat; a cat.", ["cat"]) == "The sat; a."
    assert limit_words("one two three four", 3) == "one two three"


def test_five_stages_end_to_end_on_a_synthetic_frame(tiny_models, tmp_path):  # noqa: F811
    from PIL import Image
    from segment_anything.build_sam import _build_sam

    torch.manual_seed(0)
    sam = _build_sam(16, 1, 2, [])
    torch.save(sam.state_dict(), tmp_path / "tiny_sam.pth")
    frame = np.full((48, 64, 3), 90, np.uint8)
    frame[10:30, 8:28] = (220, 30, 30)  # a red square on grey
    Image.fromarray(frame).save(tmp_path / "frame.png")
    config = {
        "detail_captions": {
            "lvlm": {"backend": "captioner", "path": str(tiny_models / "captioner"), "max_new_tokens": 6,
                     "device": "cpu"},
            "segmenter": {"backend": "sam", "checkpoint": str(tmp_path / "tiny_sam.pth"), "model_type": "custom",
                          "encoder": {"embed_dim": 16, "depth": 1, "num_heads": 2}, "points_per_side": 2,
                          "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0, "device": "cpu"},
            "scorer": {"backend": "owlv2", "path": str(tiny_models / "detector"), "device": "cpu"},
            "extractor": {"backend": "spacy"},
            "local_max_words": 20, "score_threshold": 0.01, "min_mask_area": 0.0, "max_mask_area": 1.0,
            "min_region": 0.0, "max_regions": 2,
        },
        "llm": {"backend": "transformers", "path": str(tiny_models / "llm"), "max_new_tokens": 8},
    }
    (tmp_path / "detail.yaml").write_text(yaml.safe_dump(config))
    from annotation.__main__ import main

    result = main(["detail-captions", "--config", str(tmp_path / "detail.yaml"), "--out", str(tmp_path / "out.json"),
                   str(tmp_path / "frame.png")])
    item = result["captions"][str(tmp_path / "frame.png")]
    assert json.loads((tmp_path / "out.json").read_text())["captions"] == result["captions"]
    assert isinstance(item["caption"], str) and item["overall"] is not None
    assert 1 <= len(item["regions"]) <= 2 and len(item["local"]) == len(item["regions"])
    assert all(len(t.split()) <= 20 for t in item["local"])
    for x1, y1, x2, y2 in item["regions"]:
        assert 0 <= x1 < x2 <= 64 and 0 <= y1 < y2 <= 48
    assert all(0.0 <= s <= 1.0 for s in item["phrase_scores"].values())
