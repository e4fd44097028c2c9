"""core.bounded_text: items over a bound are found and named; the rest pass."""
from core.bounded_text import describe_over_limit, over_limit


def test_over_limit_finds_items_by_their_longest_text():
    texts = {"a": "short", "b": "x" * 11, "c": ["ok", "y" * 20], "d": []}
    assert over_limit(texts, 10) == {"b": 11, "c": 20}
    assert over_limit(texts, 10, length=lambda t: len(t.split())) == {}
    line = describe_over_limit({"b": 11, "c": 20}, 10, "captions")
    assert line == "2 captions over the limit of 10 characters, not scored: b (11 characters), c (20 characters)"
