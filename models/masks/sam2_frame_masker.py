"""Masks from boxes frame by frame with SAM 2's image mode (Ravi et al., 2024; SAM's box prompt,
Kirillov et al., "Segment Anything", 2023): every kept box prompts SAM 2 on its own frame, with no
memory of the other frames. Cheaper than :class:`models.masks.sam2_video_masker.SAM2VideoMasker` (one
encoder pass per frame, one decoder pass for all boxes) and blind to time: the mask follows the box.

Frames are encoded ``frames_per_batch`` at a time; the (frame, box) pairs of a batch of frames go
through SAM 2's prompt encoder and mask decoder together, each pair with its own frame's features.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from formats.mask_rle import RLE
from models.masks.box_masker import BoxMasker, check_clip_inputs, empty_answer, fill_frame, frames_per_batch_of
from models.masks.sam2_builder import build_sam2_video_predictor, sam2_images


class SAM2FrameMasker(BoxMasker):
    """SAM 2 image mode, box prompts frame by frame.

    Args:
        model_config / checkpoint / mask_threshold / device / seed: as :class:`models.masks.SAM2VideoMasker`.
        frames_per_batch: frames encoded together (the GPU memory it takes grows with it).
    """

    def __init__(self, model_config: str | Path, checkpoint: str | Path | None = None, mask_threshold: float = 0.0,
                 frames_per_batch: int = 8, device: str = "auto", seed: int = 0):
        super().__init__(checkpoint, mask_threshold, device, seed)
        self.model_config, self.frames_per_batch = model_config, frames_per_batch_of(frames_per_batch)

    def build_model(self):
        return build_sam2_video_predictor(self.model_config, self.checkpoint, self.device, self.seed, key="model.masks")

    @torch.inference_mode()
    def __call__(self, frames: np.ndarray, boxes: np.ndarray, keep: np.ndarray,
                 scores: np.ndarray) -> list[list[RLE | None]]:
        check_clip_inputs(frames, boxes, keep, scores)
        n, p = keep.shape
        answer = empty_answer(n, p)
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            for start in range(0, n, self.frames_per_batch):
                stop = min(start + self.frames_per_batch, n)
                if keep[start:stop].any():
                    self._chunk(frames[start:stop], boxes[start:stop], keep[start:stop], start, answer)
        return answer

    def _chunk(self, frames: np.ndarray, boxes: np.ndarray, keep: np.ndarray, offset: int,
               answer: list[list[RLE | None]]) -> None:
        model = self.model
        size = model.image_size
        height, width = frames.shape[1:3]
        backbone = model.forward_image(sam2_images(frames, size, self.device))
        _, feats, _, feat_sizes = model._prepare_backbone_features(backbone)
        if model.directly_add_no_mem_embed:  # as SAM 2 does for a frame without memory
            feats[-1] = feats[-1] + model.no_mem_embed
        # (HW, B, C) sequences -> (B, C, H, W) maps, coarsest last
        maps = [f.permute(1, 2, 0).reshape(f.shape[1], f.shape[2], *hw) for f, hw in zip(feats, feat_sizes)]
        f_idx, p_idx = np.nonzero(keep)
        pick = torch.from_numpy(f_idx).to(self.device)
        scale = torch.tensor([size / width, size / height], device=self.device)
        corners = torch.from_numpy(boxes[f_idx, p_idx].astype(np.float32)).to(self.device).reshape(-1, 2, 2) * scale
        labels = torch.tensor([[2, 3]], dtype=torch.int32, device=self.device).expand(len(f_idx), 2)
        sparse, dense = model.sam_prompt_encoder(points=(corners, labels), boxes=None, masks=None)
        low_res, _, _, _ = model.sam_mask_decoder(
            image_embeddings=maps[-1][pick], image_pe=model.sam_prompt_encoder.get_dense_pe(),
            sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense, multimask_output=False,
            repeat_image=False, high_res_features=[m[pick] for m in maps[:-1]])
        masks = F.interpolate(low_res.float(), (height, width), mode="bilinear", align_corners=False)[:, 0]
        masks = (masks > self.mask_threshold).cpu().numpy()
        for f in np.unique(f_idx):
            rows = f_idx == f
            fill_frame(answer, offset + int(f), p_idx[rows], masks[rows])


__all__ = ["SAM2FrameMasker"]
