"""The one recursive merge of config mappings: stacked YAML configs, checkpoint hyper-parameters
under a config, annotation overlays."""
from __future__ import annotations

import copy
from typing import Any, Mapping


def merge_dicts(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``, recursing where both hold a mapping under a key (a partial section keeps
    the rest of ``base``'s); any other value of ``top`` (lists included) replaces ``base``'s. Neither
    input is changed, and the result shares no value of ``top``."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_dicts(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
