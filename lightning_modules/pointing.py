"""The pointing benchmarks' inference (YouCook-Interactions, GroundingYouTube), as the released GROVE runs it.

The caption is teacher-forced as one grounded phrase (``<p> caption </p> [DET]``, built by
:mod:`datamodules.pointing`) after the released benchmarks' own question
(:data:`models.grove.prompting.OFFICIAL_POINTING_QUESTION`), and grounded on every sampled frame with
the released windows (``official_pointing`` in :mod:`models.grove.windows`: 8 interleaved frames per
window, each frame's box kept once); temporal objectness is not applied, so every frame has a box. Boxes are scaled
by the annotated width and height and turned into corners without clipping, as released. Each
target second then takes the box of the sampled frame nearest in time.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from formats.pointing_records import closest_samples
from models.grove.modeling import Grove
from models.grove.prompting import OFFICIAL_POINTING_QUESTION

POINTING_WINDOW_MODE = "official_pointing"


def pixel_corners(boxes: torch.Tensor, size: torch.Tensor) -> torch.Tensor:
    """Normalised ``(cx, cy, w, h)`` ``(B, ..., 4)`` -> pixel ``(x1, y1, x2, y2)`` for sizes ``(B, 2)``
    (width, height): scaled first, then to corners, unclipped (the released order of operations)."""
    scale = torch.cat((size, size), dim=-1).to(boxes).view(size.shape[0], *[1] * (boxes.dim() - 2), 4)
    px = boxes * scale
    return torch.cat((px[..., :2] - 0.5 * px[..., 2:], px[..., :2] + 0.5 * px[..., 2:]), dim=-1)


@torch.no_grad()
def pointing_predictions(model: Grove, batch: dict[str, Any]) -> dict[str, dict]:
    """Per clip key: the grounded caption, a box on every sampled frame (``frames``), and per
    target second ``final_boxes`` (``[[x1, y1, x2, y2]]``), ``selected_pts`` and ``target_seconds``."""
    window = batch["caption_positions"].shape[1]
    out = model.predict(batch["global_frames"], batch["grounding_frames"], batch["frame_mask"], window=window,
                        window_mode=POINTING_WINDOW_MODE, answers=list(batch["answers"]),
                        question=OFFICIAL_POINTING_QUESTION)
    corners = pixel_corners(out.boxes[:, :, :1].float(), batch["size"].float()).to(torch.float32).cpu().numpy()
    frame_counts = batch["frame_mask"].sum(dim=1).tolist()
    frame_indices = batch["frame_indices"].cpu().numpy()
    predictions = {}
    for i, key in enumerate(batch["keys"]):
        n, phrase = int(frame_counts[i]), out.phrases[i][0]
        boxes = corners[i, :n, 0]  # (n, 4): the one phrase's box on each sampled frame
        sampled = np.asarray(batch["sampled_pts"][i], dtype=float)
        seconds = np.asarray(batch["target_seconds"][i], dtype=float)
        pick = closest_samples(sampled, seconds) if seconds.size else np.zeros(0, dtype=np.int64)
        predictions[key] = {
            "caption": batch["captions"][i],
            "tagged_caption": out.tagged_captions[i],
            "phrases": [phrase],
            "frames": [{"frame": int(f), "boxes": [b], "labels": [phrase], "scores": [1.0]}
                       for f, b in zip(frame_indices[i, :n].tolist(), boxes.tolist())],
            "final_boxes": [[b] for b in boxes[pick].tolist()],
            "selected_pts": sampled[pick].tolist(),
            "target_seconds": seconds.tolist(),
        }
    return predictions


__all__ = ["POINTING_WINDOW_MODE", "pixel_corners", "pointing_predictions"]
