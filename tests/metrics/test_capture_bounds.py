"""CAPTURE leaves out, by name, a sample whose caption is too long to parse, and scores the rest."""
from core.bounded_text import CAPTURE_MAX_CHARS

import logging
import math

from metrics.capture import CaptureScorer


def test_a_caption_of_a_million_characters_is_left_out_by_name(caplog):
    scorer = CaptureScorer(text_encoder="exact")
    huge = "a dog runs. " * 100_000  # 1.2 million characters: spaCy's E088 without the bound
    assert len(huge) > CAPTURE_MAX_CHARS
    candidates = ["a dog runs on the grass.", huge, "a red car."]
    references = [["a dog runs on the grass."], ["a dog runs."], ["a red car parks.", huge]]
    with caplog.at_level(logging.WARNING):
        rows = scorer.score_per_sample(candidates, references, keys=["v1_c0", "v2_c0", "v3_c0"])
    assert math.isnan(rows[1]["CAPTURE"]) and math.isnan(rows[2]["object_f1"])
    assert "2 sample(s) with a caption over the limit of 10000 characters, not scored: v2_c0 (1200000 " \
        "characters), v3_c0 (1200000 characters)" in caplog.text
    alone = scorer.score_per_sample(candidates[:1], references[:1])[0]
    assert rows[0] == alone and alone["CAPTURE"] > 0  # scored as if alone
    assert scorer.score(candidates, references)["CAPTURE"] == alone["CAPTURE"]  # the mean of the rest
    assert math.isnan(scorer.score([huge], [["a dog."]])["CAPTURE"])
