"""A resumed run draws each epoch's samples in the order an uninterrupted run would, with worker processes."""
from __future__ import annotations

import core  # noqa: F401

import lightning as L
import torch
from torch.utils.data import Dataset

from datamodules.epoch_sampler import EpochDataLoader, EpochIndexSampler


class _IndexEpoch(Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, item):
        index, epoch = item
        return torch.tensor([index, epoch])


class _Recorder(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen: dict[int, list[tuple[int, int]]] = {}

    def training_step(self, batch, batch_idx):
        self.seen.setdefault(self.current_epoch, []).extend(map(tuple, batch.tolist()))
        return self.layer(batch[:, :1].float()).sum() * 0

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return EpochDataLoader(_IndexEpoch(), batch_size=3, sampler=EpochIndexSampler(12, shuffle=True, seed=5),
                               num_workers=2, persistent_workers=True)


def _fit(root, max_epochs, ckpt_path=None):
    module = _Recorder()
    every_epoch = L.pytorch.callbacks.ModelCheckpoint(dirpath=root, filename="{epoch}", save_top_k=-1)
    trainer = L.Trainer(max_epochs=max_epochs, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=root, callbacks=[every_epoch],
                        use_distributed_sampler=False)
    trainer.fit(module, ckpt_path=ckpt_path)
    return module.seen


def test_a_run_resumed_at_an_epoch_boundary_sees_the_uninterrupted_order(tmp_path):
    full = _fit(tmp_path / "full", max_epochs=3)  # checkpoints after each epoch, as a run writes them
    resumed = _fit(tmp_path / "resumed", max_epochs=3, ckpt_path=tmp_path / "full" / "epoch=1.ckpt")
    assert sorted(resumed) == [2]
    assert resumed[2] == full[2]
    assert {epoch for _, epoch in resumed[2]} == {2}
    assert [i for i, _ in full[2]] != [i for i, _ in full[0]]  # the epochs' orders differ, so this can fail


def test_the_order_is_drawn_when_the_first_batch_is_asked_for():
    sampler = EpochIndexSampler(12, shuffle=True, seed=5)
    loader = EpochDataLoader(_IndexEpoch(), batch_size=12, sampler=sampler, num_workers=2)
    iterator = iter(loader)
    sampler.set_epoch(4)  # after iter(), as Lightning does at a run's first epoch
    batch = next(iterator)
    assert batch[:, 1].tolist() == [4] * 12
    sampler.set_epoch(4)
    assert batch[:, 0].tolist() == [i for i, _ in sampler]
    assert len(iterator) == 1


def test_evaluation_shards_give_every_clip_to_exactly_one_process():
    import random

    rng = random.Random(0)
    for _ in range(200):
        n, world = rng.randint(1, 40), rng.randint(1, 8)
        shuffle = rng.random() < 0.5
        shards = [EpochIndexSampler(n, shuffle=shuffle, seed=3, num_replicas=world, rank=r, pad=False)
                  for r in range(world)]
        items = [[i for i, _ in shard] for shard in shards]
        assert sorted(i for part in items for i in part) == list(range(n))  # each clip once, none repeated
        assert [len(shard) for shard in shards] == [len(part) for part in items]
        padded = [list(EpochIndexSampler(n, shuffle=shuffle, seed=3, num_replicas=world, rank=r)) for r in range(world)]
        assert len({len(p) for p in padded}) == 1  # training still pads to equal steps
