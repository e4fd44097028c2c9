"""GLaMM's released checkpoint (``GLaMMForCausalLM``, the model GROVE extends) in this project's layout.

GLaMM's keys follow GROVE's for what the two share (the LLaMA, LLaVA's projector, SAM's image
encoder, the text projection: :data:`models.grove.convert_official.SHARED_RENAMES`); SAM's prompt
encoder and mask decoder keep their own names, the region encoder is dropped, and the CLIP tower,
which the release does not hold, comes from OpenAI's CLIP weights. The conversion itself is
:func:`models.grove.convert_official.convert_official` with :data:`GLAMM_LAYOUT`.
"""
from __future__ import annotations

from core.json_file import read_json
from core.weights import read_weights

import re
from pathlib import Path
from typing import Mapping

from torch import Tensor

from models.grove.convert_official import (
    CLIP_SOURCE,
    REGION_ENCODER,
    ROTARY_INV_FREQ,
    SAM,
    SHARED_RENAMES,
    ConversionReport,
    OfficialLayout,
    convert_official,
)

GLAMM_LAYOUT = OfficialLayout(
    "GLaMM",
    (*SHARED_RENAMES,
     (rf"^{re.escape(SAM)}prompt_encoder\.(.+)$", r"prompt_encoder.\1"),
     (rf"^{re.escape(SAM)}mask_decoder\.(.+)$", r"mask_decoder.\1")),
    REGION_ENCODER, ignored=ROTARY_INV_FREQ, external={"global_encoder.backbone.": CLIP_SOURCE},
    merge_output_tokens=False)


def folder_config_notes(folder: str | Path, target: Mapping[str, Tensor]) -> list[str]:
    """Differences between a Hugging Face folder's ``config.json`` geometry and the built model."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return [f"{path}: not found (geometry taken from the config only)"]
    config = read_json(path)
    embed = target.get("language_model.model.model.embed_tokens.weight")
    layers = {int(k.split(".")[4]) for k in target if k.startswith("language_model.model.model.layers.")}
    built = {"vocab_size": None if embed is None else embed.shape[0],
             "hidden_size": None if embed is None else embed.shape[1], "num_hidden_layers": len(layers) or None}
    return [f"{path}: {key} is {config[key]}, the model built has {value}"
            for key, value in built.items() if key in config and value is not None and config[key] != value]


def load_glamm_state(folder: str | Path, target: Mapping[str, Tensor],
                     layout: OfficialLayout = GLAMM_LAYOUT) -> tuple[dict[str, Tensor], ConversionReport]:
    """A GLaMM folder's tensors under ``target``'s names (GLaMM's, or another model's with another
    ``layout``), cast to its dtypes; and the report."""
    return convert_official(read_weights(folder), target, layout=layout)
