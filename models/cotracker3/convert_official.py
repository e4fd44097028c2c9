"""The released CoTracker3 offline checkpoint (``scaled_offline.pth``) in this project's model.

:class:`models.cotracker3.modeling.CoTracker3Offline` keeps the release's parameter names, so the mapping
is the identity (a ``module.`` prefix from a data-parallel save is stripped); what the check
adds is that every released key lands on a model tensor of the same shape and every model
tensor is filled. The file is read with the project's safe loader (``weights_only``, no code
run). Sizes the file decides (window length, number of virtual tracks, widths) are read from
it; the model resolution is not stored and comes from the caller (the release: 384 × 512).
"""
from __future__ import annotations

from core.weights import read_weights

from dataclasses import replace
from pathlib import Path

import torch
from torch import Tensor

from models.cotracker3.modeling import CoTracker3Config, CoTracker3Offline
from models.grove.convert_official import ConversionReport, OfficialLayout, convert_official

COTRACKER3_LAYOUT = OfficialLayout("CoTracker3", renames=((r"^module\.(.+)$", r"\1"), (r"^(.+)$", r"\1")),
                                   dropped={}, merge_output_tokens=False)


def config_from_state(state: dict[str, Tensor], base: CoTracker3Config = CoTracker3Config()) -> CoTracker3Config:
    """``base`` with the sizes a checkpoint's tensors fix (shapes only: works on meta tensors)."""
    def get(name: str) -> Tensor | None:
        return state.get(name, state.get(f"module.{name}"))

    changes = {}
    if (t := get("time_emb")) is not None:
        changes["window_len"] = int(t.shape[1])
    if (t := get("updateformer.virual_tracks")) is not None:
        changes["num_virtual_tracks"], changes["hidden_size"] = int(t.shape[1]), int(t.shape[-1])
    if (t := get("fnet.conv3.weight")) is not None:
        changes["latent_dim"] = int(t.shape[0])
    if (t := get("corr_mlp.fc1.weight")) is not None:
        changes["corr_hidden"] = int(t.shape[0])
        changes["corr_radius"] = int(round(t.shape[1] ** 0.25)) // 2
    if (t := get("corr_mlp.fc2.weight")) is not None:
        changes["corr_out"] = int(t.shape[0])
    for part, key in (("time_blocks", "time_depth"), ("space_virtual_blocks", "space_depth")):
        prefix = f"updateformer.{part}."
        found = {k.split(prefix, 1)[1].split(".", 1)[0] for k in state if prefix in k}
        if found:
            changes[key] = len(found)
    return replace(base, **changes)


def check_cotracker3(checkpoint: str | Path, base: CoTracker3Config = CoTracker3Config()
                     ) -> tuple[ConversionReport, CoTracker3Config]:
    """Every key and shape of a released checkpoint against the model it configures, on the meta device."""
    official = read_weights(checkpoint)
    cfg = config_from_state(official, base)
    with torch.device("meta"):
        target = CoTracker3Offline(cfg).state_dict()
    _, report = convert_official(official, target, materialize=lambda t: t.to("meta"), device="meta",
                                 layout=COTRACKER3_LAYOUT)
    return report, cfg


def load_cotracker3(checkpoint: str | Path, base: CoTracker3Config = CoTracker3Config(),
                    device: str | torch.device = "cpu") -> CoTracker3Offline:
    """The model with a checkpoint's weights; raises ``ValueError`` with the check's table if any key fails."""
    official = read_weights(checkpoint)
    cfg = config_from_state(official, base)
    model = CoTracker3Offline(cfg)
    converted, report = convert_official(official, model.state_dict(), layout=COTRACKER3_LAYOUT)
    if not report.ok:
        raise ValueError(f"{checkpoint}: not a CoTracker3 offline checkpoint for this model:\n{report.table()}")
    model.load_state_dict(converted, strict=True)
    return model.to(device).eval()
