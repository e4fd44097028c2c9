"""Sets torch's intra-op thread count for a run (from the config, not from code edits).

On small CPU machines the default (one thread per core) competes with the DataLoader workers
that decode video, and OpenMP threads spin while they wait: one compute thread leaves a core to
the decoders and is faster overall there. GPU runs leave it unset.
"""
from __future__ import annotations

import lightning as L
import torch


class CpuThreads(L.Callback):
    def __init__(self, num_threads: int = 1):
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        self.num_threads = num_threads

    def setup(self, trainer, pl_module, stage: str) -> None:
        torch.set_num_threads(self.num_threads)
