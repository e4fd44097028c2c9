"""What every masker of :mod:`models.masks` is: kept pixel boxes of a clip's phrases + the clip's frames
-> one COCO RLE mask per kept box (:mod:`formats.mask_rle`), at the frames' own size.

A masker is called once per clip with

- ``frames`` ``(N, H, W, 3)`` uint8: the clip's frames at the video's frame size (the size the boxes are in);
- ``boxes`` ``(N, P, 4)`` pixel xyxy boxes of the clip's P phrases on its N frames;
- ``keep`` ``(N, P)`` bool: the boxes the objectness threshold kept (the ones that get a mask);
- ``scores`` ``(N, P)``: the objectness of every box (which frame is a phrase's most confident one);

and answers an ``N x P`` nested list: the RLE of the mask of each kept box, ``None`` elsewhere.

A masker is built on first use, which is inside the predict or test step, where Lightning's true 16-bit
precisions (``bf16-true``, ``16-true``) make 16-bit the default dtype. Built there unguarded, SAM's
weights would come out 16-bit while its inputs and positional encodings are float32 ("mixed dtype").
So every masker is built and called with float32 as the default dtype, whatever the run's precision:
its weights are float32 and its 16-bit compute is its own autocast (docs/precision.md).
"""
from __future__ import annotations

import functools
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from formats.mask_rle import RLE, encode_masks
from models.masks.sam2_builder import resolve_device


@contextmanager
def float32_default():
    """``torch.get_default_dtype()`` is float32 inside, whatever the precision plugin set outside."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _in_float32(call):
    @functools.wraps(call)
    def wrapped(self, *args, **kwargs):
        with float32_default():
            return call(self, *args, **kwargs)
    return wrapped


class BoxMasker:
    """Base of the box-prompted maskers (a config's ``model.init_args.masks.class_path`` names a subclass).

    Holds what every masker is configured with (its weights, the mask logit threshold, the device as
    configured and as resolved, the random weights' seed) and its model, built on first use by the
    subclass's :meth:`build_model`.
    """

    requested_device: str = "auto"
    device: torch.device = torch.device("cpu")
    _model = None

    def __init__(self, checkpoint: str | Path | None, mask_threshold: float, device: str, seed: int):
        self.checkpoint = checkpoint
        self.mask_threshold, self.seed = float(mask_threshold), int(seed)
        self.requested_device, self.device = str(device), resolve_device(device)
        self._model = None

    def build_model(self):
        """The masker's model on ``self.device`` (from ``self.checkpoint``, or random from ``self.seed``)."""
        raise NotImplementedError

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__call__" in cls.__dict__:  # every masker runs with float32 as the default dtype
            cls.__call__ = _in_float32(cls.__dict__["__call__"])

    @property
    def model(self):
        if self._model is None:
            with float32_default():
                self._model = self.build_model().float()
        return self._model

    def follow(self, device: torch.device | str) -> None:
        """With ``device="auto"``, run where GROVE runs (each rank's own GPU under DDP)."""
        device = torch.device(device)
        if str(self.requested_device) == "auto" and device != self.device:
            self.device = device
            if self._model is not None:
                self._model.to(device)

    def __call__(self, frames: np.ndarray, boxes: np.ndarray, keep: np.ndarray,
                 scores: np.ndarray) -> list[list[RLE | None]]:
        raise NotImplementedError


def frames_per_batch_of(frames_per_batch: int) -> int:
    """``model.masks.frames_per_batch`` checked: frames encoded together, at least one."""
    if int(frames_per_batch) < 1:
        raise ValueError(f"model.masks.frames_per_batch must be >= 1, got {frames_per_batch}")
    return int(frames_per_batch)


def check_clip_inputs(frames: np.ndarray, boxes: np.ndarray, keep: np.ndarray, scores: np.ndarray) -> None:
    """Refuse inputs whose shapes do not fit each other (``N`` frames, ``P`` phrases)."""
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"masker frames must be (N, H, W, 3) uint8, got {frames.shape} {frames.dtype}")
    n = len(frames)
    if boxes.shape[:1] != (n,) or boxes.ndim != 3 or boxes.shape[-1] != 4:
        raise ValueError(f"masker boxes must be (N={n}, P, 4), got {boxes.shape}")
    if keep.shape != boxes.shape[:2] or scores.shape != boxes.shape[:2]:
        raise ValueError(f"masker keep {keep.shape} and scores {scores.shape} must be (N, P) = {boxes.shape[:2]}")


def empty_answer(n: int, p: int) -> list[list[RLE | None]]:
    return [[None] * p for _ in range(n)]


def fill_frame(answer: list[list[RLE | None]], frame: int, phrases: np.ndarray, masks: np.ndarray) -> None:
    """Write the RLEs of boolean ``masks`` ``(len(phrases), H, W)`` into ``answer[frame][phrase]``."""
    for p, rle in zip(phrases.tolist(), encode_masks(masks)):
        answer[frame][p] = rle


def tight_boxes_torch(masks: torch.Tensor) -> torch.Tensor:
    """Tight xyxy pixel-edge boxes ``(..., 4)`` of boolean masks ``(..., H, W)``; all zero where empty."""
    h, w = masks.shape[-2:]
    rows, cols = masks.any(-1), masks.any(-2)
    ys = torch.arange(h, device=masks.device)
    xs = torch.arange(w, device=masks.device)
    big = max(h, w) + 1
    y1 = torch.where(rows, ys, big).amin(-1)
    y2 = torch.where(rows, ys + 1, -1).amax(-1)
    x1 = torch.where(cols, xs, big).amin(-1)
    x2 = torch.where(cols, xs + 1, -1).amax(-1)
    boxes = torch.stack([x1, y1, x2, y2], -1).float()
    return torch.where(rows.any(-1)[..., None], boxes, torch.zeros_like(boxes))


def paired_box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of boxes ``a[..., 4]`` with ``b[..., 4]`` element by element (xyxy; 0 where the union is empty)."""
    lt = np.maximum(a[..., :2], b[..., :2])
    rb = np.minimum(a[..., 2:], b[..., 2:])
    inter = np.clip(rb - lt, 0, None).prod(-1)
    area = lambda x: np.clip(x[..., 2:] - x[..., :2], 0, None).prod(-1)  # noqa: E731
    union = area(a) + area(b) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


__all__ = ["BoxMasker", "check_clip_inputs", "empty_answer", "fill_frame", "float32_default", "frames_per_batch_of",
           "paired_box_iou", "tight_boxes_torch"]
