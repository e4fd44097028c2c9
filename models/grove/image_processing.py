"""Frame preprocessing for the two encoders, batched over a clip's frames.

Global encoder (CLIP): resize to a square ``image_size`` (``squash``, ``center_crop``, ``pad``,
``clip`` or ``clip_torch``) and normalise with CLIP's mean/std. ``clip`` is CLIPImageProcessor,
which the released GROVE uses: the shortest side to ``image_size`` (the longer one truncated to
an integer) with PIL's bicubic on 8-bit frames, then a centre crop whose offsets round down; it
gives the released model's pixels exactly. ``clip_torch`` is the same geometry with torch's bicubic
on the whole clip at once (rounded to grey levels): a fifth of the values a grey level or more
off PIL's, tens on noise (docs/official_grove.md gives the measured difference).

Grounding encoder (SAM): resize the longest side to ``image_size``, normalise with SAM's pixel
mean/std, pad bottom-right to a square, as SAM does. ``grounding_resize``: ``float`` resizes the
clip at once in floating point (torch, bilinear with antialiasing); ``sam`` is SAM's
``ResizeLongestSide`` as the released GROVE runs it: PIL's bilinear on 8-bit frames, so the
resized pixels are whole grey levels.
Boxes stay normalised to the source frame, so neither transform changes the targets.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
SAM_MEAN = (123.675, 116.28, 103.53)  # on 0..255 pixels
SAM_STD = (58.395, 57.12, 57.375)
RESIZE_MODES = ("squash", "center_crop", "pad", "clip", "clip_torch")
GROUNDING_RESIZE_MODES = ("float", "sam")


def _to_tensor(frames: np.ndarray | torch.Tensor) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, 3, H, W) float32 in 0..255."""
    t = torch.as_tensor(frames)
    if t.ndim != 4 or t.shape[-1] != 3:
        raise ValueError(f"expected frames of shape (N, H, W, 3), got {tuple(t.shape)}")
    return t.permute(0, 3, 1, 2).float()


# Bytes of frames converted to floating point at once. A whole clip's float copy at full
# resolution is large (40 frames of 640x360: 110 MB, doubled by the copy that resizing makes) while
# the resized clip is small, and every step after the conversion works frame by frame, so a clip
# converted and resized a few frames at a time gives the same values, bit for bit, in a fraction of
# the memory. Chunks this small also stay below the allocator's mapping threshold that
# :mod:`core.heap` sets for long runs, so they reuse heap memory instead of faulting in fresh pages.
FLOAT_CHUNK_BYTES = 4 * 2**20


def _float_chunks(frames, transform) -> torch.Tensor:
    """``transform(_to_tensor(frames))``, computed on chunks of about ``FLOAT_CHUNK_BYTES`` of float frames."""
    shape = np.shape(frames)
    n = shape[0] if len(shape) else 0
    step = max(1, FLOAT_CHUNK_BYTES // max(1, 4 * int(np.prod(shape[1:]))))
    if n <= step:
        return transform(_to_tensor(frames))
    return torch.cat([transform(_to_tensor(frames[i:i + step])) for i in range(0, n, step)])


def _pil_resize(frames, size: tuple[int, int], resample: str) -> torch.Tensor:
    """8-bit frames ``(N, H, W, 3)`` resized one by one with PIL -> ``(N, 3, h, w)`` uint8 (a view
    of the channels-last result; whole grey levels, as PIL writes them). The released preprocessing is
    PIL's, frame by frame. Kept 8-bit so that cropping and reordering move a quarter of the bytes floats would."""
    from PIL import Image

    array = frames.numpy() if isinstance(frames, torch.Tensor) else np.asarray(frames)
    if array.ndim != 4 or array.shape[-1] != 3 or array.dtype != np.uint8:
        raise ValueError(f"expected uint8 frames of shape (N, H, W, 3), got {array.dtype} {array.shape}")
    h, w = size
    filt = Image.Resampling.BICUBIC if resample == "bicubic" else Image.Resampling.BILINEAR
    if (h, w) == array.shape[1:3]:
        resized = array
    else:
        resized = np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(f)).resize((w, h), filt)) for f in array])
    return torch.from_numpy(resized).permute(0, 3, 1, 2)


def _clip_size(h: int, w: int, image_size: int) -> tuple[int, int]:
    """CLIPImageProcessor's resize: shortest side to ``image_size``, the other truncated."""
    short, long = (h, w) if h <= w else (w, h)
    size = (image_size, int(image_size * long / short))
    return size if h <= w else size[::-1]


def _resize(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    if tuple(x.shape[-2:]) == tuple(size):
        return x
    return F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)


def preprocess_global(frames, image_size: int, mode: str = "squash") -> torch.Tensor:
    """Frames for the global (CLIP) encoder: (N, 3, image_size, image_size), CLIP-normalised."""
    if mode not in RESIZE_MODES:
        raise ValueError(f"global resize mode must be one of {RESIZE_MODES}, got {mode!r}")
    if mode == "clip":
        h, w = np.shape(frames)[1:3]
        x = _pil_resize(frames, _clip_size(h, w, image_size), "bicubic")
        return _clip_normalise(_centre_crop(x, image_size))
    return _clip_normalise(_float_chunks(frames, lambda x: _global_geometry(x, image_size, mode)))


def _global_geometry(x: torch.Tensor, image_size: int, mode: str) -> torch.Tensor:
    """The resize (and crop or pad) of ``mode`` on float frames ``(N, 3, H, W)`` in 0..255."""
    h, w = x.shape[-2:]
    if mode == "squash":
        return _resize(x, (image_size, image_size))
    if mode == "center_crop":
        scale = image_size / min(h, w)
        nh, nw = max(image_size, round(h * scale)), max(image_size, round(w * scale))
        x = _resize(x, (nh, nw))
        top, left = (nh - image_size) // 2, (nw - image_size) // 2
        return x[..., top:top + image_size, left:left + image_size]
    if mode == "clip_torch":
        nh, nw = _clip_size(h, w, image_size)
        if (nh, nw) != (h, w):
            # PIL's bicubic resamples 0..255 values and rounds them to integers
            x = F.interpolate(x, size=(nh, nw), mode="bicubic", align_corners=False, antialias=True)
            x = x.round().clamp(0, 255)
        return _centre_crop(x, image_size)
    return _pad_square(_resize_longest(x, image_size), image_size, value=0.0)


def _centre_crop(x: torch.Tensor, image_size: int) -> torch.Tensor:
    nh, nw = x.shape[-2:]
    top, left = (nh - image_size) // 2, (nw - image_size) // 2
    return x[..., top:top + image_size, left:left + image_size]


def _normalised(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor,
                size: tuple[int, int] | None = None) -> torch.Tensor:
    """``(x - mean) / std`` in float32 (8-bit or float ``x``), zero-padded bottom-right to ``size``:
    written into one new tensor, in place, so a clip's frames are not copied three times over (the
    values are those of the out-of-place expression, bit for bit)."""
    n, c, h, w = x.shape
    out_h, out_w = size or (h, w)
    out = (torch.zeros if (out_h, out_w) != (h, w) else torch.empty)((n, c, out_h, out_w), dtype=torch.float32)
    region = out[..., :h, :w]
    region.copy_(x).sub_(mean).div_(std)
    return out


def _clip_normalise(x: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(CLIP_MEAN).view(1, 3, 1, 1) * 255.0
    std = torch.tensor(CLIP_STD).view(1, 3, 1, 1) * 255.0
    return _normalised(x, mean, std)


def _longest_side_size(h: int, w: int, image_size: int) -> tuple[int, int]:
    """SAM's ResizeLongestSide target: the longest side to ``image_size``, the other rounded half up."""
    scale = image_size / max(h, w)
    return max(1, int(h * scale + 0.5)), max(1, int(w * scale + 0.5))


def _resize_longest(x: torch.Tensor, image_size: int) -> torch.Tensor:
    return _resize(x, _longest_side_size(*x.shape[-2:], image_size))


def _pad_square(x: torch.Tensor, image_size: int, value: float) -> torch.Tensor:
    h, w = x.shape[-2:]
    return F.pad(x, (0, image_size - w, 0, image_size - h), value=value)


def preprocess_grounding(frames, image_size: int, mode: str = "float") -> torch.Tensor:
    """Frames for the grounding (SAM) encoder: longest side to ``image_size``, SAM-normalised, padded.

    ``mode``: ``float`` (torch, in chunks of frames) or ``sam`` (PIL on 8-bit frames, as SAM's
    ``ResizeLongestSide`` and the released GROVE).
    """
    if mode not in GROUNDING_RESIZE_MODES:
        raise ValueError(f"grounding resize mode must be one of {GROUNDING_RESIZE_MODES}, got {mode!r}")
    if mode == "sam":
        x = _pil_resize(frames, _longest_side_size(*np.shape(frames)[1:3], image_size), "bilinear")
    else:
        x = _float_chunks(frames, lambda t: _resize_longest(t, image_size))
    mean = torch.tensor(SAM_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(SAM_STD).view(1, 3, 1, 1)
    # Pad after normalising, with zeros, exactly as SAM's preprocess does.
    return _normalised(x, mean, std, (image_size, image_size))
