"""Learning-rate schedules: the run length comes from the current run, the progress from the checkpoint."""
from __future__ import annotations

import core  # noqa: F401

import functools
import random

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_modules.schedules import WarmupCosineDecay, WarmupLinearDecay, build_scheduler, run_total_steps

SCHEDULES = {
    "linear": functools.partial(WarmupLinearDecay, warmup_steps=3),
    "cosine": functools.partial(WarmupCosineDecay, warmup_ratio=0.1, min_lr=1e-3),
}


def _optimizer(lr=0.1):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=lr)


def _lr_after(factory, total: int, steps: int, resumed_from: int | None = None) -> float:
    """The learning rate of optimizer step ``steps`` of a run of ``total`` steps; with ``resumed_from``,
    the first ``steps`` steps ran in a run of that length and were restored into this one."""
    opt = _optimizer()
    sched = factory(opt, estimated_total_steps=resumed_from or total)
    for _ in range(steps):
        opt.step()
        sched.step()
    if resumed_from is None:
        return opt.param_groups[0]["lr"]
    opt_state, sched_state = opt.state_dict(), sched.state_dict()
    opt2 = _optimizer()
    sched2 = factory(opt2, estimated_total_steps=total)
    opt2.load_state_dict(opt_state)  # Lightning's order: optimizers, then schedulers
    sched2.load_state_dict(sched_state)
    assert sched2.get_last_lr() == [opt2.param_groups[0]["lr"]]
    return opt2.param_groups[0]["lr"]


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_a_restored_schedule_continues_over_the_new_run_length(name):
    factory = SCHEDULES[name]
    rng = random.Random(0)
    for _ in range(20):
        old = rng.randint(5, 40)
        new = old + rng.randint(1, 40)
        done = rng.randint(1, old)
        expected = _lr_after(factory, new, done)
        assert _lr_after(factory, new, done, resumed_from=old) == pytest.approx(expected, rel=1e-12)
    # the failure this guards against: at the end of the first run the rate is at its floor
    floor = _lr_after(factory, 10, 10)
    assert _lr_after(factory, 30, 10, resumed_from=10) > 3 * floor + 1e-3


class _Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.1)
        sched = build_scheduler(functools.partial(WarmupLinearDecay, warmup_steps=2), opt, self.trainer)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=2)


class _RecordLR(L.Callback):
    def __init__(self):
        self.lrs = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.lrs[trainer.global_step] = trainer.optimizers[0].param_groups[0]["lr"]


def _fit(root, max_epochs, ckpt_path=None):
    record = _RecordLR()
    trainer = L.Trainer(max_epochs=max_epochs, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=root, callbacks=[record],
                        enable_checkpointing=False)
    torch.manual_seed(0)
    trainer.fit(_Tiny(), ckpt_path=ckpt_path)
    return trainer, record.lrs


def test_resuming_with_more_epochs_trains_at_the_rate_of_a_fresh_run_of_that_length(tmp_path):
    short, _ = _fit(tmp_path, max_epochs=2)  # 8 steps, the schedule decays to 0
    short.save_checkpoint(tmp_path / "short.ckpt")
    _, resumed = _fit(tmp_path, max_epochs=5, ckpt_path=tmp_path / "short.ckpt")
    _, fresh = _fit(tmp_path, max_epochs=5)  # 20 steps
    assert sorted(resumed) == list(range(8, 20))
    assert resumed == pytest.approx({step: fresh[step] for step in resumed}, rel=1e-12)
    assert resumed[8] > 0.05


def test_a_run_without_steps_says_why():
    class NoSteps:
        estimated_stepping_batches = 0

    with pytest.raises(ValueError, match="training dataloader is empty"):
        run_total_steps(NoSteps())


def test_build_scheduler_fills_the_run_length_unless_the_config_sets_it():
    class FakeTrainer:
        estimated_stepping_batches = 50

    sched = build_scheduler(functools.partial(WarmupLinearDecay, warmup_steps=0), _optimizer(), FakeTrainer())
    assert sched.total_steps == 50
    sched = build_scheduler(functools.partial(WarmupLinearDecay, warmup_steps=0, total_steps=7), _optimizer(),
                            FakeTrainer())
    assert sched.total_steps == 7  # the config's explicit length wins
    one_cycle = build_scheduler(functools.partial(torch.optim.lr_scheduler.OneCycleLR, max_lr=0.1), _optimizer(),
                                FakeTrainer())
    assert one_cycle.total_steps == 50  # torch's schedules that take total_steps get it too
    step = build_scheduler(functools.partial(torch.optim.lr_scheduler.StepLR, step_size=3), _optimizer(), FakeTrainer())
    assert step.step_size == 3  # and the others are built as configured
