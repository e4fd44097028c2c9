"""Masks from boxes frame by frame with the original SAM (Kirillov et al., "Segment Anything", 2023;
the ``segment_anything`` package): every kept box prompts SAM on its own frame. Frames are encoded
``frames_per_batch`` at a time; each frame's boxes go through the prompt encoder and mask decoder
together (SAM's decoder takes one image per call, so frames with boxes are decoded one after another).

``encoder`` is a released size (``vit_h``, ``vit_l``, ``vit_b``, matching ``sam_vit_h_4b8939.pth`` etc.)
or a dict of sizes (tests: a tiny SAM); ``checkpoint`` the local weights, read as tensors only.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from formats.mask_rle import RLE
from models.masks.box_masker import BoxMasker, check_clip_inputs, empty_answer, fill_frame, frames_per_batch_of

# the released image encoders (the SAM paper, appendix: ViT-H/L/B)
SAM_SIZES = {
    "vit_h": {"embed_dim": 1280, "depth": 32, "num_heads": 16, "global_attn_indexes": [7, 15, 23, 31]},
    "vit_l": {"embed_dim": 1024, "depth": 24, "num_heads": 16, "global_attn_indexes": [5, 11, 17, 23]},
    "vit_b": {"embed_dim": 768, "depth": 12, "num_heads": 12, "global_attn_indexes": [2, 5, 8, 11]},
}
SAM_DEFAULTS = {"image_size": 1024, "patch_size": 16, "window_size": 14, "prompt_dim": 256, "decoder_mlp_dim": 2048,
                "decoder_heads": 8}


def build_sam(encoder: str | dict, checkpoint: str | Path | None, device: torch.device, seed: int = 0,
              key: str = "model.masks"):
    """A ``segment_anything`` ``Sam`` of the given size, weights from ``checkpoint`` (random from ``seed`` without)."""
    import core  # noqa: F401  (segment_anything imports torchvision)

    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    if isinstance(encoder, str):
        if encoder not in SAM_SIZES:
            raise ValueError(f"{key}.encoder must be one of {sorted(SAM_SIZES)} or a dict of sizes, got {encoder!r}")
        sizes = {**SAM_DEFAULTS, **SAM_SIZES[encoder]}
    else:
        unknown = set(encoder) - set(SAM_DEFAULTS) - set(SAM_SIZES["vit_h"])
        if unknown:
            raise ValueError(f"{key}.encoder: unknown size(s) {sorted(unknown)}")
        sizes = {**SAM_DEFAULTS, **encoder}
    torch.manual_seed(seed)
    image_size, prompt_dim = int(sizes["image_size"]), int(sizes["prompt_dim"])
    grid = image_size // int(sizes["patch_size"])
    sam = Sam(
        image_encoder=ImageEncoderViT(
            img_size=image_size, patch_size=int(sizes["patch_size"]), embed_dim=int(sizes["embed_dim"]),
            depth=int(sizes["depth"]), num_heads=int(sizes["num_heads"]), mlp_ratio=4.0,
            norm_layer=partial(torch.nn.LayerNorm, eps=1e-6), qkv_bias=True, use_rel_pos=True,
            global_attn_indexes=list(sizes["global_attn_indexes"]), window_size=int(sizes["window_size"]),
            out_chans=prompt_dim),
        prompt_encoder=PromptEncoder(embed_dim=prompt_dim, image_embedding_size=(grid, grid),
                                     input_image_size=(image_size, image_size), mask_in_chans=16),
        mask_decoder=MaskDecoder(num_multimask_outputs=3, transformer_dim=prompt_dim, iou_head_depth=3,
                                 iou_head_hidden_dim=prompt_dim,
                                 transformer=TwoWayTransformer(depth=2, embedding_dim=prompt_dim,
                                                               mlp_dim=int(sizes["decoder_mlp_dim"]),
                                                               num_heads=int(sizes["decoder_heads"]))),
        pixel_mean=[123.675, 116.28, 103.53], pixel_std=[58.395, 57.12, 57.375])
    if checkpoint is not None:
        from core.weights import load_state_dict_file

        state = load_state_dict_file(checkpoint, f"{key}.checkpoint")
        missing, unexpected = sam.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ValueError(f"{key}.checkpoint {checkpoint}: does not fit encoder {encoder} "
                             f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    return sam.to(device).eval()


class SAMFrameMasker(BoxMasker):
    """SAM box prompts frame by frame.

    Args:
        encoder: ``vit_h`` / ``vit_l`` / ``vit_b`` or a dict of sizes (``embed_dim``, ``depth``, ``num_heads``,
            ``global_attn_indexes``, ``image_size``, ``patch_size``, ``window_size``, ``prompt_dim``,
            ``decoder_mlp_dim``, ``decoder_heads``).
        checkpoint: the local weights (``sam_vit_h_4b8939.pth``); None: random weights from ``seed``.
        mask_threshold / frames_per_batch / device / seed: as :class:`models.masks.SAM2FrameMasker`.
    """

    def __init__(self, encoder: str | dict = "vit_h", checkpoint: str | Path | None = None,
                 mask_threshold: float = 0.0, frames_per_batch: int = 4, device: str = "auto", seed: int = 0):
        super().__init__(checkpoint, mask_threshold, device, seed)
        self.encoder, self.frames_per_batch = encoder, frames_per_batch_of(frames_per_batch)

    def build_model(self):
        return build_sam(self.encoder, self.checkpoint, self.device, self.seed)

    @torch.inference_mode()
    def __call__(self, frames: np.ndarray, boxes: np.ndarray, keep: np.ndarray,
                 scores: np.ndarray) -> list[list[RLE | None]]:
        check_clip_inputs(frames, boxes, keep, scores)
        n, p = keep.shape
        answer = empty_answer(n, p)
        for start in range(0, n, self.frames_per_batch):
            stop = min(start + self.frames_per_batch, n)
            if keep[start:stop].any():
                self._chunk(frames[start:stop], boxes[start:stop], keep[start:stop], start, answer)
        return answer

    def _chunk(self, frames: np.ndarray, boxes: np.ndarray, keep: np.ndarray, offset: int,
               answer: list[list[RLE | None]]) -> None:
        sam = self.model
        size = sam.image_encoder.img_size
        height, width = frames.shape[1:3]
        scale = size / max(height, width)  # SAM's longest side to its input size, the rest padded
        resized = (int(height * scale + 0.5), int(width * scale + 0.5))
        video = torch.from_numpy(np.ascontiguousarray(frames)).to(self.device).permute(0, 3, 1, 2).float()
        video = F.interpolate(video, resized, mode="bilinear", align_corners=False, antialias=True)
        embeddings = sam.image_encoder(sam.preprocess(video))
        image_pe = sam.prompt_encoder.get_dense_pe()
        for f in np.flatnonzero(keep.any(1)):
            phrases = np.flatnonzero(keep[f])
            prompt = torch.from_numpy(boxes[f, phrases].astype(np.float32)).to(self.device)
            prompt = prompt * torch.tensor([resized[1] / width, resized[0] / height] * 2, device=self.device)
            sparse, dense = sam.prompt_encoder(points=None, boxes=prompt, masks=None)
            low_res, _ = sam.mask_decoder(image_embeddings=embeddings[f:f + 1], image_pe=image_pe,
                                          sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
                                          multimask_output=False)
            masks = sam.postprocess_masks(low_res, resized, (height, width))[:, 0] > self.mask_threshold
            fill_frame(answer, offset + int(f), phrases, masks.cpu().numpy())


__all__ = ["SAM_SIZES", "SAMFrameMasker", "build_sam"]
