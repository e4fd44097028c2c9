"""Full-clip inference schedules: which T-frame windows cover a clip, and which one is captioned.

GROVE sees T frames at a time (T = 8). A clip has N annotated frames (about 40 on the 5-fps
grid of an 8-second clip), so inference captions the clip once from T frames and then grounds
the caption on every annotated frame, window by window (GROVE paper, supp. C; the released
``infer_iground.py``). Three schedules:

- ``official``: the released code's ``sliding_segment_with_mask``. With S = N // T, window k
  takes frames ``k, S + k, 2S + k, ...`` for k < S; the N mod T frames left at the end get
  extra windows whose already-seen frames are masked out. The caption comes from window
  ``(S - 1) // 2``, the central one, whose frames lie near the segment centres. A clip with
  fewer than T frames (S = 0) gets, as released, N windows of T copies of one frame each
  (window k shows frame k), and is captioned from window ``(N - 1) // 2``: from one frame.
  Each frame's prediction is kept once, from the first copy.
- ``interleaved``: W = ceil(N / T) windows, window w takes frames ``w, w + W, w + 2W, ...``
  (the same spacing as training's one-frame-per-segment sampling, covering all N frames
  without the official scheme's repeated frames); the caption comes from the clip's
  segment-centre frames (``caption_positions``). A clip shorter than T is one window of all
  its frames (the last repeated), so the caption sees every frame.
- ``contiguous``: consecutive frames ``wT .. wT + T - 1``.
- ``official_pointing``: the released YouCook-Interactions / GroundingYouTube inference's
  ``sliding_segment_with_mask``: ``official`` for N >= T, but a clip of N <= T frames is one
  window of its frames with the last repeated (no caption window: the caption is given).

Every schedule returns ``(W, T)`` frame positions and a ``(W, T)`` mask of the positions whose
prediction is kept (each frame is kept exactly once). Positions past the clip's last frame are
clamped to it and never kept. :func:`window_pairs` lists the (clip, window) pairs of a batch that
have frames to keep, in the order ``Grove.predict`` runs them through the model, several clips'
windows per pass.
"""
from __future__ import annotations

import torch
from torch import Tensor

WINDOW_MODES = ("official", "interleaved", "contiguous", "official_pointing")


def official_windows(num_frames: int, T: int) -> tuple[Tensor, Tensor, int]:
    """The released ``sliding_segment_with_mask``: positions, keep mask, caption window index."""
    if num_frames < T:  # released: window k is T copies of frame k; caption from the middle window
        positions = torch.arange(num_frames).unsqueeze(1).expand(num_frames, T).clone()
        keep = torch.zeros(num_frames, T, dtype=torch.bool)
        keep[:, 0] = True
        return positions, keep, (num_frames - 1) // 2
    size, remainder = divmod(num_frames, T)
    segment_starts = torch.arange(T) * size
    main = segment_starts.unsqueeze(0) + torch.arange(size).unsqueeze(1)  # (S, T)
    extra = (segment_starts + size).unsqueeze(0) + torch.arange(remainder).unsqueeze(1)  # (R, T), all < N
    positions = torch.cat((main, extra), dim=0)
    return positions, first_occurrence(positions, num_frames), (size - 1) // 2


def first_occurrence(positions: Tensor, num_frames: int) -> Tensor:
    """True where a frame appears for the first time in window order (the released code's mask)."""
    flat = positions.flatten()
    order = torch.arange(flat.numel())
    first = torch.full((num_frames,), flat.numel(), dtype=torch.long).scatter_reduce(0, flat, order, "amin")
    return (first[flat] == order).view_as(positions)


def official_pointing_windows(num_frames: int, T: int) -> tuple[Tensor, Tensor]:
    """The released pointing benchmarks' windows: ``official`` beyond T frames, else one padded window."""
    if num_frames > T:
        return official_windows(num_frames, T)[:2]
    slots = torch.arange(T)
    return slots.clamp(max=num_frames - 1).unsqueeze(0), (slots < num_frames).unsqueeze(0)


def interleaved_windows(num_frames: int, T: int) -> tuple[Tensor, Tensor]:
    num_windows = -(-num_frames // T)
    positions = torch.arange(num_windows).unsqueeze(1) + num_windows * torch.arange(T)
    keep = positions < num_frames
    return positions.clamp(max=num_frames - 1), keep


def contiguous_windows(num_frames: int, T: int) -> tuple[Tensor, Tensor]:
    num_windows = -(-num_frames // T)
    positions = torch.arange(num_windows * T).view(num_windows, T)
    keep = positions < num_frames
    return positions.clamp(max=num_frames - 1), keep


def clip_windows(num_frames: int, T: int, mode: str) -> tuple[Tensor, Tensor, int | None]:
    """``(positions (W, T), keep (W, T), caption window or None)`` for one clip of ``num_frames`` frames."""
    if num_frames < 1:
        raise ValueError(f"a clip needs at least one frame, got {num_frames}")
    if mode == "official":
        return official_windows(num_frames, T)
    if mode == "interleaved":
        return (*interleaved_windows(num_frames, T), None)
    if mode == "contiguous":
        return (*contiguous_windows(num_frames, T), None)
    if mode == "official_pointing":
        return (*official_pointing_windows(num_frames, T), None)
    raise ValueError(f"window mode must be one of {WINDOW_MODES}, got {mode!r}")


def batch_windows(num_frames: Tensor, T: int, mode: str) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """Windows for a batch of clips with ``num_frames (B,)`` frames each.

    Returns ``positions (B, W, T)``, ``keep (B, W, T)`` (clips with fewer windows are padded
    with never-kept copies of their last window) and, for ``official``, the caption window's
    positions ``(B, T)`` and index ``(B,)`` (else None, None).
    """
    per_clip = [clip_windows(int(n), T, mode) for n in num_frames.tolist()]  # a few clips per batch
    width = max(p.shape[0] for p, _, _ in per_clip)
    positions = torch.stack([torch.cat((p, p[-1:].expand(width - p.shape[0], -1))) for p, _, _ in per_clip])
    keep = torch.stack([torch.cat((k, k.new_zeros(width - k.shape[0], T))) for _, k, _ in per_clip])
    device = num_frames.device
    if mode != "official":
        return positions.to(device), keep.to(device), None, None
    caption = torch.stack([p[c] for p, _, c in per_clip])
    index = torch.tensor([c for _, _, c in per_clip], dtype=torch.long)
    return positions.to(device), keep.to(device), caption.to(device), index.to(device)


def window_pairs(keep: Tensor, grounded: Tensor) -> tuple[Tensor, Tensor]:
    """The ``(clip, window)`` pairs to run, clip by clip and window by window: ``clips (K,)`` and
    ``windows (K,)`` for ``keep (B, W, T)`` and ``grounded (B,)`` (False: a clip with no phrase to box).

    Windows that keep no frame (the copies :func:`batch_windows` pads shorter clips with) and the
    windows of clips that are not grounded are left out."""
    return (keep.any(dim=2) & grounded.unsqueeze(1)).nonzero(as_tuple=True)


__all__ = ["WINDOW_MODES", "batch_windows", "window_pairs", "clip_windows", "official_windows", "interleaved_windows",
           "contiguous_windows", "official_pointing_windows"]
