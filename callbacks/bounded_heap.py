"""Keeps a long run's resident memory flat: glibc's allocator told to hand freed memory back.

Streaming an hour of video through ``predict`` allocates and frees the same large buffers once per
clip; with glibc's default, adaptive thresholds the heap fragments and the process grows with the
number of clips although nothing is kept (:mod:`core.heap`). This callback fixes the thresholds
when the run is set up (before the DataLoader worker forks, which inherits them) and trims the
heap every ``trim_every`` batches. It changes no result. Added by ``configs/overlays/long_video.yaml``.
"""
from __future__ import annotations

from core.heap import DEFAULT_MMAP_THRESHOLD, bound_heap, release_heap

import lightning as L
from lightning.pytorch.utilities import rank_zero_info


class BoundedHeap(L.Callback):
    """Args:
        mmap_threshold: buffers of at least this many bytes get their own mapping, returned when freed.
        trim_threshold: the heap's free top beyond this many bytes is returned.
        arena_max: most malloc arenas (threads share them); None leaves glibc's default.
        trim_every: ``malloc_trim`` after every this many batches (0: never).
    """

    def __init__(self, mmap_threshold: int | None = DEFAULT_MMAP_THRESHOLD,
                 trim_threshold: int | None = DEFAULT_MMAP_THRESHOLD,
                 arena_max: int | None = 2,
                 trim_every: int = 16):
        if trim_every < 0:
            raise ValueError(f"trim_every must be >= 0, got {trim_every}")
        self.settings = dict(mmap_threshold=mmap_threshold, trim_threshold=trim_threshold, arena_max=arena_max)
        self.trim_every = int(trim_every)
        self.applied: bool | None = None
        self.trims = 0

    def setup(self, trainer, pl_module, stage: str) -> None:
        self.applied = bound_heap(**self.settings)
        if not self.applied:
            rank_zero_info("BoundedHeap: the C library is not glibc (or refused the settings); its allocator is "
                           "left as it is")

    def _batch_end(self, batch_idx: int) -> None:
        if self.applied and self.trim_every and (batch_idx + 1) % self.trim_every == 0:
            release_heap()
            self.trims += 1

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._batch_end(batch_idx)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._batch_end(batch_idx)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self._batch_end(batch_idx)


__all__ = ["BoundedHeap"]
