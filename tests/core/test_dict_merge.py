"""merge_dicts: the recursive merge used by stacked configs, checkpoint hyper-parameters and annotation overlays."""
from core.dict_merge import merge_dicts

import random


def test_nested_sections_merge_and_other_values_replace():
    base = {"model": {"lr": 1.0, "decoder": {"depth": 2, "dim": 64}}, "tags": [1, 2], "seed": 0}
    top = {"model": {"decoder": {"depth": 3}}, "tags": [3], "name": "x"}
    assert merge_dicts(base, top) == {"model": {"lr": 1.0, "decoder": {"depth": 3, "dim": 64}}, "tags": [3],
                                      "seed": 0, "name": "x"}
    # a mapping over a non-mapping (and the reverse) replaces it
    assert merge_dicts({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}
    assert merge_dicts({"a": {"b": 2}}, {"a": None}) == {"a": None}


def _random_tree(rng, depth):
    return {rng.choice("abcd"): (_random_tree(rng, depth - 1) if depth and rng.random() < 0.5 else rng.randint(0, 9))
            for _ in range(rng.randint(0, 3))}


def _leaves(tree, prefix=()):
    for key, value in tree.items():
        if isinstance(value, dict):  # an empty section has no leaf: it keeps what base holds there
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def test_every_leaf_of_top_wins_and_inputs_are_untouched():
    rng = random.Random(0)
    for _ in range(200):
        base, top = _random_tree(rng, 3), _random_tree(rng, 3)
        base_before, top_before = repr(base), repr(top)
        merged = merge_dicts(base, top)
        assert repr(base) == base_before and repr(top) == top_before
        for path, value in _leaves(top):
            node = merged
            for key in path[:-1]:
                node = node[key]
            assert node[path[-1]] == value
        for key in base:
            assert key in merged
    assert merge_dicts({"a": {"b": 1}}, {"a": {}}) == {"a": {"b": 1}}
