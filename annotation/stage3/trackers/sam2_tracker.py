"""Box tracking with SAM 2's video predictor (Ravi et al., "SAM 2: Segment Anything in Images and
Videos", 2024; the ``sam2`` package): each key-frame box is a box prompt on its frame, the masks
are propagated forward and backward through the clip, and the box on a frame is the tight box of
the object's mask (absent where the mask is empty: SAM 2 predicts the object is not visible).

One model per worker (on the GPU when there is one). The objects of a clip are tracked together
(SAM 2 batches them); clips go one after another, as its inference state is per video.
``model_config`` is a SAM 2 model YAML (a file, or a config of the package such as
``configs/sam2.1/sam2.1_hiera_l.yaml``); ``checkpoint`` the released ``.pt`` (read as tensors only).
The model is built by :func:`models.masks.sam2_builder.build_sam2_video_predictor`, as the maskers build it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from annotation.stage3.trackers.box_tracking import TrackingInput, TrackingOutput
from annotation.stage3.trackers.cotracker_tracker import pick_device
from models.masks.sam2_builder import build_sam2_video_predictor, sam2_video_state


def tight_boxes(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tight xyxy boxes (pixel edges) of boolean masks (..., H, W) and whether each mask is non-empty."""
    rows, cols = masks.any(-1), masks.any(-2)
    present = rows.any(-1)
    h, w = masks.shape[-2:]
    y1 = rows.argmax(-1)
    y2 = h - rows[..., ::-1].argmax(-1)
    x1 = cols.argmax(-1)
    x2 = w - cols[..., ::-1].argmax(-1)
    boxes = np.stack([x1, y1, x2, y2], axis=-1).astype(np.float32)
    return np.where(present[..., None], boxes, 0.0), present


class SAM2BoxTracker:
    name = "sam2"

    def __init__(self, model_config: str | Path, checkpoint: str | Path | None = None, mask_threshold: float = 0.0,
                 device: str = "auto", seed: int = 0):
        self.model_config, self.checkpoint = model_config, checkpoint
        self.mask_threshold, self.seed = float(mask_threshold), int(seed)
        self.device = pick_device(device)
        self._model = None

    @property
    def model(self):
        if self._model is None:
            self._model = build_sam2_video_predictor(self.model_config, self.checkpoint, self.device, self.seed,
                                                     key="stage3")
        return self._model

    def _state(self, frames: np.ndarray) -> dict:
        """SAM 2's inference state for in-memory frames (its ``init_state`` reads them from disk)."""
        return sam2_video_state(self.model, frames, self.device)

    @torch.inference_mode()
    def track(self, clips: list[TrackingInput]) -> list[TrackingOutput]:
        out = []
        for clip in clips:
            t, h, w = clip.frames.shape[:3]
            k = len(clip.rows)
            masks = np.zeros((t, k, h, w), dtype=bool)
            if k:
                # the predictor keeps its memory in bfloat16 (SAM 2 runs under bf16 autocast)
                with torch.autocast(self.device.type, dtype=torch.bfloat16):
                    self._propagate(clip, masks)
            boxes, present = tight_boxes(masks)
            out.append(TrackingOutput(boxes, present))
        return out

    def _propagate(self, clip: TrackingInput, masks: np.ndarray) -> None:
        state = self._state(clip.frames)
        for obj, (row, box) in enumerate(zip(clip.rows, clip.boxes)):
            self.model.add_new_points_or_box(state, frame_idx=int(row), obj_id=obj,
                                             box=np.asarray(box, dtype=np.float32))
        for reverse in (False, True):
            for frame, ids, logits in self.model.propagate_in_video(state, reverse=reverse):
                masks[frame, list(ids)] = (logits[:, 0].float() > self.mask_threshold).cpu().numpy()
