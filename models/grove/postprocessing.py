"""GROVE's outputs -> the predictions format: per clip, the caption, its phrases and their pixel boxes
on every frame where the objectness keeps them, and with a masker their masks beside the boxes
(docs/formats.md, "Predictions"; docs/inputs_and_outputs.md, "Masks")."""
from __future__ import annotations

from core.box_ops import cxcywh_to_xyxy, denormalize_boxes

from typing import Callable

import numpy as np
import torch

from formats.records import strip_tags


def format_clip_predictions(batch, tagged, phrases, boxes, scores, captions, threshold: float, strict: bool,
                            has_objectness: bool = True, masker=None,
                            clip_frames: Callable[[int], np.ndarray] | None = None) -> dict[str, dict]:
    """Tensors -> prediction-format dicts: pixel xyxy boxes, kept where score >= ``threshold`` (``> threshold``
    when ``strict``; every box without an objectness head); ``captions`` (plain, to score) default to the
    tagged captions without their tags.

    With a ``masker`` (:class:`models.masks.BoxMasker`), every kept box also gets a mask: a frame entry
    carries ``masks``, one COCO RLE per box, at the frame size the boxes are in; ``clip_frames(i)`` gives
    clip ``i``'s real frames ``(N, height, width, 3)`` uint8 at that size."""
    size = batch["size"].to(boxes.device).float()
    px = denormalize_boxes(cxcywh_to_xyxy(boxes), size[:, 0, None, None], size[:, 1, None, None])
    px = torch.minimum(px.clamp(min=0), torch.stack([size[:, 0], size[:, 1]] * 2, -1)[:, None, None])
    above = scores > threshold if strict else scores >= threshold
    keep = above & batch["frame_mask"].to(boxes.device).unsqueeze(-1)
    if not has_objectness:
        keep = batch["frame_mask"].to(boxes.device).unsqueeze(-1).expand_as(scores)
    px, scores, keep = px.cpu().numpy().round(2), scores.cpu().numpy(), keep.cpu().numpy()
    frame_indices = batch["frame_indices"].cpu().numpy()
    frame_mask = batch["frame_mask"].cpu().numpy()
    out = {}
    for i, key in enumerate(batch["keys"]):
        n_p = len(phrases[i])
        frames = []
        f_idx, p_idx = keep[i, :, :n_p].nonzero()
        masks = None
        if masker is not None and len(f_idx):
            n_f = int(frame_mask[i].sum())
            masks = masker(clip_frames(i), px[i, :n_f, :n_p], keep[i, :n_f, :n_p], scores[i, :n_f, :n_p])
        for f in sorted(set(f_idx.tolist())):
            sel = p_idx[f_idx == f]
            entry = {
                "frame": int(frame_indices[i, f]),
                "boxes": px[i, f, sel].tolist(),
                "labels": [phrases[i][j] for j in sel],
                "scores": [float(s) for s in scores[i, f, sel]],
            }
            if masks is not None:
                entry["masks"] = [masks[f][j] for j in sel]
            frames.append(entry)
        caption = captions[i] if captions is not None else strip_tags(tagged[i])
        out[key] = {"caption": caption, "tagged_caption": tagged[i],
                    "phrases": list(phrases[i]), "frames": frames}
    return out


def objectness_by_clip(batch, phrases, scores) -> dict[str, dict]:
    """Per clip key: ``frames`` (source-frame indices of its real frames) and ``scores`` (one row per
    frame, one objectness probability per phrase of the clip), before any threshold."""
    mask = batch["frame_mask"].cpu().numpy().astype(bool)
    scores, frame_indices = scores.float().cpu().numpy(), batch["frame_indices"].cpu().numpy()
    return {key: {"frames": frame_indices[i][mask[i]].tolist(),
                  "scores": scores[i][mask[i]][:, :len(phrases[i])].tolist()}
            for i, key in enumerate(batch["keys"])}


__all__ = ["format_clip_predictions", "objectness_by_clip"]
