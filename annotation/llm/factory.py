"""A chat backend from an ``llm``-style options dict (``backend: transformers | openai`` + its options)."""
from __future__ import annotations


def make_chat(options: dict, where: str = "llm"):
    from annotation.llm.openai_chat import OpenAIChat
    from annotation.llm.transformers_chat import TransformersChat

    options = dict(options or {})
    known = {"transformers": TransformersChat, "openai": OpenAIChat}
    name = options.pop("backend", None)
    if name not in known:
        raise ValueError(f"{where}.backend must be one of {sorted(known)}, got {name!r}")
    return known[name](**options)
