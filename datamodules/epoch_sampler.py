"""A sampler that tells the dataset which epoch it is in.

Training draws depend on (seed, epoch, index). DataLoader workers hold copies of the dataset, so
an epoch counter set on the dataset in the main process would not reach them (persistent
workers). Instead the sampler yields ``(index, epoch)`` pairs: Lightning calls ``set_epoch`` on
it every epoch, and the pairs travel to whichever worker loads them. It also shards across
processes itself, so configs set ``trainer.use_distributed_sampler: false``: training pads with
repeats like ``DistributedSampler`` (every process takes the same number of steps), evaluation
(``pad=False``) gives every clip to exactly one process, so epoch figures summed over processes
count each clip once whatever the world size.

:class:`EpochDataLoader` starts its workers on the first batch asked for, not when ``iter()`` is
called: Lightning creates the first epoch's iterator before it calls ``set_epoch``, and worker
processes fetch their first indices as soon as the iterator exists, so a run resumed at epoch k
would otherwise replay epoch 0's order.
"""
from __future__ import annotations

import math
from typing import Iterator

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Sampler


class EpochIndexSampler(Sampler):
    def __init__(self, num_samples: int, shuffle: bool, seed: int = 0,
                 num_replicas: int | None = None, rank: int | None = None, pad: bool = True):
        self.num_samples_total = int(num_samples)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.epoch = 0
        if num_replicas is None:
            num_replicas = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        if rank is None:
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.pad = bool(pad)
        self.per_replica = math.ceil(self.num_samples_total / self.num_replicas) if self.num_samples_total else 0
        if not self.pad:  # ranks below the remainder take one more clip
            self.per_replica = len(range(self.rank, self.num_samples_total, self.num_replicas))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.per_replica

    def __iter__(self) -> Iterator[tuple[int, int]]:
        n = self.num_samples_total
        if n == 0:
            return iter(())
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            order = torch.randperm(n, generator=g)
        else:
            order = torch.arange(n)
        if not self.pad:
            return iter([(i, self.epoch) for i in order[self.rank::self.num_replicas].tolist()])
        total = self.per_replica * self.num_replicas
        if total > n:  # pad with repeats so every process gets the same count
            order = torch.cat([order, order[: total - n].repeat(math.ceil((total - n) / n))[: total - n]])
        mine = order[self.rank:total:self.num_replicas].tolist()
        return iter([(i, self.epoch) for i in mine])


class _IteratorOnFirstBatch:
    """Creates the loader's iterator (and with it the sampler's order) when the first batch is asked for."""

    def __init__(self, loader: DataLoader):
        self.loader = loader
        self.iterator = None

    def __iter__(self):
        return self

    def __next__(self):
        if self.iterator is None:
            self.iterator = DataLoader.__iter__(self.loader)
        return next(self.iterator)

    def __len__(self) -> int:
        return len(self.loader)


class EpochDataLoader(DataLoader):
    """A DataLoader whose sampler's epoch may be set after ``iter()``, up to the first batch."""

    def __iter__(self):
        return _IteratorOnFirstBatch(self)
