"""The corruption generator leaves out, by name, a caption too long to parse, and corrupts the rest."""
import logging

from judge.data.corruption.data_types import CaptionSource
from judge.data.corruption.generator import generate_corruptions
from judge.data.corruption.rule_backend import RuleBackend

CAPTIONS = ["a red circle moves up, then a blue square enters from the left.",
            "a green triangle bounces up and down, then a red square leaves to the right.",
            "a red circle moves up. " * 55_000]  # 1.27 million characters: spaCy's E088 without the bound


def test_an_over_long_caption_is_left_out_by_name(caplog):
    sources = [CaptionSource(key=f"c{i}", video=f"c{i}.mp4", caption=c, fps=25.0, start_frame=0, end_frame=99)
               for i, c in enumerate(CAPTIONS)]
    with caplog.at_level(logging.WARNING):
        rows, stats = generate_corruptions(sources, RuleBackend(), per_caption=4, seed=0)
    alone, _ = generate_corruptions(sources[:2], RuleBackend(), per_caption=4, seed=0)
    assert rows == alone and rows  # the others are corrupted as without it
    assert "1 caption(s) over the limit of 10000 characters, not scored: c2 (1265000 characters)" in caplog.text
    assert stats.failures == {"caption over 10000 characters (1265000): c2": 1}
