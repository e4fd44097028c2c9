"""Masks from boxes with SAM 2's video predictor (Ravi et al., 2024): each phrase's box on its most
confident frame prompts SAM 2, the mask is propagated forward and backward over the clip, and where
the propagated mask's tight box and the phrase's own box part ways (IoU below ``reprompt_iou``) the box
of that frame becomes a prompt too and the clip is propagated again (at most ``reprompt_rounds`` times).

All phrases of a clip are objects of one SAM 2 inference state (its image features are computed once
per frame for all of them). Clips go one after another, as SAM 2's state is per video.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from formats.mask_rle import RLE
from models.masks.box_masker import (
    BoxMasker,
    check_clip_inputs,
    empty_answer,
    fill_frame,
    paired_box_iou,
    tight_boxes_torch,
)
from models.masks.sam2_builder import build_sam2_video_predictor, sam2_video_state


class SAM2VideoMasker(BoxMasker):
    """SAM 2 video mode.

    Args:
        model_config: a SAM 2 model YAML (a file, or a config of the ``sam2`` package such as
            ``configs/sam2.1/sam2.1_hiera_l.yaml``).
        checkpoint: the local ``.pt`` of those weights (``sam2.1_hiera_large.pt``); None: random weights.
        reprompt_iou: a kept box whose IoU with the propagated mask's tight box is below this becomes a prompt.
        reprompt_rounds: how many times disagreeing boxes are added and the clip propagated again (0: never).
        max_reprompts: per phrase and round, at most this many boxes are added, those farthest from their
            masks first (every prompt costs a decoder pass, and SAM 2 attends to all its prompted frames).
        mask_threshold: a pixel is in the mask where SAM 2's logit exceeds this.
        device: ``auto`` (the GPU when there is one), ``cpu``, ``cuda:0``, ...
        seed: the random weights' seed when there is no checkpoint.
    """

    def __init__(self, model_config: str | Path, checkpoint: str | Path | None = None, reprompt_iou: float = 0.5,
                 reprompt_rounds: int = 1, max_reprompts: int = 4, mask_threshold: float = 0.0, device: str = "auto",
                 seed: int = 0):
        if not 0.0 <= float(reprompt_iou) <= 1.0:
            raise ValueError(f"model.masks.reprompt_iou must be in [0, 1], got {reprompt_iou}")
        if int(reprompt_rounds) < 0:
            raise ValueError(f"model.masks.reprompt_rounds must be >= 0, got {reprompt_rounds}")
        if int(max_reprompts) < 1:
            raise ValueError(f"model.masks.max_reprompts must be >= 1, got {max_reprompts}")
        super().__init__(checkpoint, mask_threshold, device, seed)
        self.max_reprompts = int(max_reprompts)
        self.model_config = model_config
        self.reprompt_iou, self.reprompt_rounds = float(reprompt_iou), int(reprompt_rounds)
        self.prompted: list[np.ndarray] = []  # (N, P) bool per round of the last clip: where boxes prompted SAM 2

    def build_model(self):
        return build_sam2_video_predictor(self.model_config, self.checkpoint, self.device, self.seed, key="model.masks")

    @torch.inference_mode()
    def __call__(self, frames: np.ndarray, boxes: np.ndarray, keep: np.ndarray,
                 scores: np.ndarray) -> list[list[RLE | None]]:
        check_clip_inputs(frames, boxes, keep, scores)
        n, p = keep.shape
        answer = empty_answer(n, p)
        self.prompted = []
        if not keep.any():
            return answer
        phrases = np.flatnonzero(keep.any(0))
        # each phrase's most confident kept frame
        anchor = np.where(keep, scores, -np.inf).argmax(0)
        prompts = np.zeros_like(keep)
        prompts[anchor[phrases], phrases] = True
        # the predictor keeps its memory in bfloat16 (SAM 2 runs under bf16 autocast)
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            state = sam2_video_state(self.model, frames, self.device)
            for round_ in range(self.reprompt_rounds + 1):
                self.prompted.append(prompts.copy())
                mask_boxes = self._propagate(state, boxes, keep, prompts, phrases, answer)
                if round_ == self.reprompt_rounds:
                    break
                iou = paired_box_iou(mask_boxes, boxes.astype(np.float64))
                apart = keep & (iou < self.reprompt_iou) & ~prompts
                if not apart.any():
                    break
                prompts |= self._worst(apart, iou)
        return answer

    def _worst(self, apart: np.ndarray, iou: np.ndarray) -> np.ndarray:
        """Of the disagreeing boxes ``apart`` (N, P), each phrase's ``max_reprompts`` of lowest IoU."""
        order = np.argsort(np.where(apart, iou, np.inf), axis=0, kind="stable")[:self.max_reprompts]
        chosen = np.zeros_like(apart)
        np.put_along_axis(chosen, order, True, axis=0)
        return chosen & apart

    def _propagate(self, state: dict, boxes: np.ndarray, keep: np.ndarray, prompts: np.ndarray,
                   phrases: np.ndarray, answer: list[list[RLE | None]]) -> np.ndarray:
        """One propagation from the prompts (all conditioning frames), both directions; fills ``answer``
        on kept boxes and returns the masks' tight boxes ``(N, P, 4)``."""
        model = self.model
        model.reset_state(state)
        for f, ph in zip(*np.nonzero(prompts)):
            model.add_new_points_or_box(state, frame_idx=int(f), obj_id=int(ph),
                                        box=np.asarray(boxes[f, ph], dtype=np.float32))
        mask_boxes = np.zeros(boxes.shape, dtype=np.float64)
        for reverse in (False, True):
            for frame, ids, logits in model.propagate_in_video(state, reverse=reverse):
                ids = np.asarray(ids, dtype=np.int64)
                masks = logits[:, 0].float() > self.mask_threshold
                mask_boxes[frame, ids] = tight_boxes_torch(masks).cpu().numpy()
                kept = keep[frame, ids]
                if kept.any():
                    fill_frame(answer, frame, ids[kept], masks[torch.from_numpy(kept).to(masks.device)].cpu().numpy())
        return mask_boxes


__all__ = ["SAM2VideoMasker"]
