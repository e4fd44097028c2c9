"""Learning-rate schedules configured from YAML (``model.init_args.lr_scheduler``), and how a
LightningModule builds one for the run at hand.

A schedule's shape (warm-up, total steps, floor) comes from the current config and the current run
length; only its progress (steps taken) comes back from a checkpoint. Resuming with a larger
``--trainer.max_epochs`` therefore continues over the new length, as a fresh run of that length
would at the same step, instead of staying at the old run's end (learning rate 0).
"""
from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

# What a checkpoint restores of a schedule: its progress. Everything else (the shape) is this run's.
PROGRESS_KEYS = ("last_epoch", "_step_count", "base_lrs")


class RunLengthSchedule(LRScheduler):
    """Base of the step-wise schedules whose shape depends on the run length.

    ``load_state_dict`` restores the progress only, then writes the learning rate of the restored
    step, under this run's shape, into the optimizer (restore the optimizer first, as Lightning
    does), so that the first step after resuming already uses it.
    """

    def lr_factor(self, step: int, base_lr: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def get_lr(self) -> list[float]:
        return [self.lr_factor(self.last_epoch, base) * base for base in self.base_lrs]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for key in PROGRESS_KEYS:
            if key in state_dict:
                setattr(self, key, state_dict[key])
        lrs = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = list(lrs)


def _run_length(total_steps: int | None, estimated_total_steps: int | None, name: str) -> int:
    steps = total_steps or estimated_total_steps
    if steps is None or steps <= 0:
        raise ValueError(f"{name} needs total_steps > 0 (set it, or let the LightningModule pass the "
                         "trainer's estimated_total_steps)")
    return int(steps)


class WarmupLinearDecay(RunLengthSchedule):
    """Linear warm-up over ``warmup_steps`` optimiser steps, then linear decay to ``final_ratio`` at ``total_steps``.

    GROVE's recipe (100 warm-up steps, then linear decay). The run length is ``total_steps`` when
    the config sets it, else ``estimated_total_steps``, which the LightningModule fills in from the
    trainer. Stepped every optimiser step.
    """

    def __init__(self, optimizer: Optimizer, warmup_steps: int = 100, total_steps: int | None = None,
                 final_ratio: float = 0.0, estimated_total_steps: int | None = None, last_epoch: int = -1):
        self.total_steps = _run_length(total_steps, estimated_total_steps, "WarmupLinearDecay")
        self.warmup_steps = max(0, int(warmup_steps))
        self.final_ratio = float(final_ratio)
        super().__init__(optimizer, last_epoch)

    def lr_factor(self, step: int, base_lr: float = 1.0) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return 1.0 - (1.0 - self.final_ratio) * progress


class WarmupCosineDecay(RunLengthSchedule):
    """Linear warm-up over ``warmup_ratio`` of the steps, then cosine decay from the base lr to ``min_lr``.

    VC-Inspector's schedule (VC-Inspector paper, appendix C: cosine, min 1e-5, warm-up ratio 0.05).
    ``total_steps`` as for :class:`WarmupLinearDecay`.
    """

    def __init__(self, optimizer: Optimizer, total_steps: int | None = None, warmup_ratio: float = 0.05,
                 min_lr: float = 1e-5, estimated_total_steps: int | None = None, last_epoch: int = -1):
        self.total_steps = _run_length(total_steps, estimated_total_steps, "WarmupCosineDecay")
        self.warmup_steps = int(round(warmup_ratio * self.total_steps))
        self.min_lr = float(min_lr)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base_lr: float, step: int) -> float:
        if step < self.warmup_steps:
            return base_lr * (step + 1) / (self.warmup_steps + 1)
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.min_lr + (base_lr - self.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def lr_factor(self, step: int, base_lr: float) -> float:
        return self.lr_at(base_lr, step) / base_lr if base_lr else 0.0


def run_total_steps(trainer) -> int:
    """Optimizer steps of the whole run as now configured (``max_epochs`` / ``max_steps`` x batches),
    with an error that says why when there are none."""
    steps = trainer.estimated_stepping_batches
    if steps is None or (isinstance(steps, float) and math.isinf(steps)):
        raise ValueError("the run length is unknown (an unsized training dataloader and no trainer.max_steps): "
                         "set trainer.max_steps, or total_steps in the learning-rate schedule")
    if int(steps) <= 0:
        raise ValueError("the run has no optimizer steps: the training dataloader is empty (no training clips?) "
                         "or trainer.max_steps / limit_train_batches is 0")
    return int(steps)


def accepts_argument(factory: Any, name: str) -> bool:
    """Whether a scheduler factory (a class, a function, or the partial LightningCLI builds) takes ``name``."""
    if isinstance(factory, functools.partial):
        if name in factory.keywords:
            return True
        classes = [a for a in factory.args if isinstance(a, type)]
        return name in inspect.signature(classes[0]).parameters if classes else accepts_argument(factory.func, name)
    try:
        return name in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


def _configured(factory: Any, name: str) -> bool:
    """Whether the config already set ``name`` on the factory (LightningCLI passes init_args as keywords)."""
    return isinstance(factory, functools.partial) and factory.keywords.get(name) is not None


def build_scheduler(factory: Callable[..., LRScheduler], optimizer: Optimizer, trainer) -> LRScheduler:
    """``factory(optimizer)``, given the run length when it takes one: ``estimated_total_steps`` (this
    project's schedules; an explicit ``total_steps`` in the config still wins), else ``total_steps``
    (e.g. ``torch.optim.lr_scheduler.OneCycleLR``) unless the config set it."""
    if accepts_argument(factory, "estimated_total_steps"):
        return factory(optimizer, estimated_total_steps=run_total_steps(trainer))
    if accepts_argument(factory, "total_steps") and not _configured(factory, "total_steps"):
        return factory(optimizer, total_steps=run_total_steps(trainer))
    return factory(optimizer)
