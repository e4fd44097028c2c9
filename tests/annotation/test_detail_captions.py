"""Detail captions (CAPTURE paper, sec. 4.1): the maximal-rectangle step on hand-made masks, the
salient-region selection, the hallucination filter with fixed phrase scores, and the five stages
end to end on a synthetic frame with tiny random models (GIT, SAM, OWLv2, Llama) through the CLI."""
import json

import numpy as np

from annotation.stage1.detail_captions import (
    filter_hallucinations,
    limit_words,
    maximal_rectangle,
    remove_phrases,
    salient_regions,
)


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


def test_five_stages_end_to_end_on_a_synthetic_frame(tmp_path):
    from PIL import Image

    from annotation.__main__ import main
    from tests.fixtures.tiny_detail_models import save_tiny_detail_models

    config = save_tiny_detail_models(tmp_path / "models")
    frame = np.full((48, 64, 3), 90, np.uint8)
    frame[10:30, 8:28] = (220, 30, 30)  # a red square on grey
    Image.fromarray(frame).save(tmp_path / "frame.png")
    result = main(["detail-captions", "--config", str(config), "--out", str(tmp_path / "out.json"),
                   str(tmp_path / "frame.png")])
    item = result["captions"][str(tmp_path / "frame.png")]
    assert json.loads((tmp_path / "out.json").read_text())["captions"] == result["captions"]
    assert isinstance(item["caption"], str) and item["overall"] is not None
    assert 1 <= len(item["regions"]) <= 2 and len(item["local"]) == len(item["regions"])
    assert all(len(t.split()) <= 20 for t in item["local"])
    for x1, y1, x2, y2 in item["regions"]:
        assert 0 <= x1 < x2 <= 64 and 0 <= y1 < y2 <= 48
    assert all(0.0 <= s <= 1.0 for s in item["phrase_scores"].values())


def test_detail_captions_as_the_stage1_caption_mode(tmp_path):
    import yaml

    from annotation.commands.run import run_annotation
    from annotation.config import load_config
    from datamodules.synthetic import generate_synthetic_dataset
    from tests.fixtures.tiny_detail_models import save_tiny_detail_models

    detail = yaml.safe_load(save_tiny_detail_models(tmp_path / "models").read_text())
    d = detail["detail_captions"]
    stage1 = {"backend": "detail_captions", "captioner": d["lvlm"]["path"], "detector": d["scorer"]["path"],
              "merge_llm": detail["llm"], "segmenter": {k: v for k, v in d["segmenter"].items() if k != "backend"},
              "extractor": d["extractor"], "device": "cpu",
              "detail": {k: v for k, v in d.items() if k not in ("lvlm", "segmenter", "scorer", "extractor")}}
    paths = generate_synthetic_dataset(tmp_path / "data", num_train=0, num_val=0, num_test=1, seed=0, workers=1,
                                       duration_s=2.0)
    overlay = tmp_path / "detail_stage1.yaml"  # a file that switches the backend starts stage1 afresh
    overlay.write_text(yaml.safe_dump({"stage1": stage1, "decode": {"every": 5}, "stage3": {"encoder": "exact"}}))
    config = load_config(["configs/annotation/synthetic.yaml", str(overlay)])
    report = run_annotation(config, [], tmp_path / "data" / "videos", tmp_path / "out", paths["test"],
                            progress=False)
    assert report["clips"]["seen"] == 1 and report["stages"]["stage1"]["clips"] == 1


def test_region_search_on_sampled_down_masks_scales_back_to_pixels():
    masks = np.zeros((1, 400, 300), bool)
    masks[0, 100:300, 60:240] = True
    regions = salient_regions(masks, min_area=0.0, max_area=1.0, min_region=0.0, search_size=100)  # step 4
    x1, y1, x2, y2 = regions[0]
    assert abs(x1 - 60) <= 4 and abs(y1 - 100) <= 4 and abs(x2 - 240) <= 4 and abs(y2 - 300) <= 4
