"""Stage 1 from GLaMM, as HowToGround1M was made (GROVE paper, section 3): a grounded still-image
captioner on each sampled frame, its masks turned into boxes.

GLaMM (:class:`glamm.model.GLaMM`) writes each frame's caption with ``<p> phrase </p> [SEG]`` and
decodes one mask per phrase; the phrase's box is the mask's tight box (logits > 0, foreground
pixels' extent). An empty mask gives no box, so that phrase is left out of the frame's
(phrase, box) pairs while the caption keeps it. Boxes are continuous pixel ``xyxy`` (the mask's last
row and column included: ``x_max + 1``); a box's score is the mean mask probability over its
pixels. The model loads once per worker (one per Ray actor), on the GPU when there is one, and
frames go through in batches.
"""
from __future__ import annotations

import core  # noqa: F401  (transformers imports torchvision: the shim must run first)

from pathlib import Path

import numpy as np
import torch

from annotation.stage1.decoding import DecodedClip
from annotation.stage1.frame_annotations import FrameAnnotation


class GLaMMFrameAnnotator:
    """``path``: a GLaMM checkpoint folder; ``clip_path``: OpenAI's CLIP ViT-L/14-336 weights (file or
    folder; without it the CLIP tower is random). ``config``: the GLaMM geometry
    (``configs/official/glamm.yaml`` by default). ``tokenizer_path`` defaults to ``path``."""

    name = "glamm"

    def __init__(self, path: str, clip_path: str | None = None, tokenizer_path: str | None = None,
                 config: str | None = None, max_new_tokens: int = 512, batch_size: int = 8, device: str = "auto"):
        from glamm.model import GLAMM_CONFIG, GLaMM

        for key, value in (("path", path), ("clip_path", clip_path), ("tokenizer_path", tokenizer_path),
                           ("config", config)):
            if value is not None and not Path(value).exists():
                raise FileNotFoundError(f"stage1.{key}: {value} does not exist")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if str(device).startswith("cuda") else None  # GLaMM's own precision on GPU
        self.model = GLaMM.from_folder(path, clip_dir=clip_path, tokenizer_dir=tokenizer_path,
                                       config=config or GLAMM_CONFIG, device=device, dtype=dtype)
        self.max_new_tokens, self.batch_size = int(max_new_tokens), int(batch_size)

    def annotate_frames(self, frames: np.ndarray) -> list[tuple[str, list[str], np.ndarray, np.ndarray]]:
        """``(caption, phrases, boxes (n, 4) pixel xyxy, scores (n,))`` per frame of one size."""
        from glamm.model import frame_boxes, ground_in_batches

        out = []
        for result in ground_in_batches(self.model, frames, self.batch_size, max_new_tokens=self.max_new_tokens):
            labels, boxes, scores = frame_boxes(result)
            out.append((result.caption, labels, np.asarray(boxes, np.float32).reshape(-1, 4),
                        np.asarray(scores, np.float32)))
        return out

    def annotate(self, clips: list[DecodedClip]) -> list[list[FrameAnnotation]]:
        out = []
        for clip in clips:  # a clip's frames share a size: batched together
            results = self.annotate_frames(clip.frames) if len(clip.frames) else []
            out.append([FrameAnnotation(int(index), caption, phrases, boxes, scores)
                        for index, (caption, phrases, boxes, scores) in zip(clip.frame_indices, results)])
        return out
