"""The judge itself: the Qwen2.5-VL judge (:mod:`~judge.model.vc_inspector`), its prompt and answer
format (:mod:`~judge.model.prompt_format`), the prompter that turns frames and captions into model
inputs (:mod:`~judge.model.prompter`), the toy judge's tokenizer, the frozen tower's feature cache,
the exported folder (:mod:`~judge.model.pretrained`) and the same judge behind an OpenAI-compatible
endpoint (:mod:`~judge.model.endpoint`).

Configs and checkpoints that name a class as ``judge.model.<Class>`` still resolve (to
:mod:`judge.model.vc_inspector`), with a FutureWarning that names the full path.
"""
from __future__ import annotations

import importlib
import importlib.util
import warnings


def __getattr__(name: str):
    if name.startswith("__") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(name)  # a submodule (the import system loads it) or a dunder
    vc_inspector = importlib.import_module(f"{__name__}.vc_inspector")
    try:
        value = getattr(vc_inspector, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    warnings.warn(f"{__name__}.{name} moved to {__name__}.vc_inspector.{name}; import it from there (the old "
                  "path goes in the next release)", FutureWarning, stacklevel=2)
    globals()[name] = value  # one warning per name (``from judge.model import X`` looks it up twice)
    return value
