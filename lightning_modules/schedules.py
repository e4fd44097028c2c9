"""Learning-rate schedules configured from YAML (``model.init_args.lr_scheduler``)."""
from __future__ import annotations

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler


class WarmupLinearDecay(LRScheduler):
    """Linear warm-up over ``warmup_steps`` optimiser steps, then linear decay to ``final_ratio`` at ``total_steps``.

    GROVE's recipe (100 warm-up steps, then linear decay). The run length is ``total_steps`` when
    the config sets it, else ``estimated_total_steps``, which the LightningModule fills in from the
    trainer. Stepped every optimiser step; its state (``last_epoch`` = steps taken) is
    checkpointed, so resuming continues the curve.
    """

    def __init__(self, optimizer: Optimizer, warmup_steps: int = 100, total_steps: int | None = None,
                 final_ratio: float = 0.0, estimated_total_steps: int | None = None, last_epoch: int = -1):
        total_steps = total_steps or estimated_total_steps
        if total_steps is None or total_steps <= 0:
            raise ValueError("WarmupLinearDecay needs total_steps > 0 (set it, or let the LightningModule "
                             "pass the trainer's estimated_total_steps)")
        self.warmup_steps = max(0, int(warmup_steps))
        self.total_steps = int(total_steps)
        self.final_ratio = float(final_ratio)
        super().__init__(optimizer, last_epoch)

    def lr_factor(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / (self.warmup_steps + 1)
        span = max(1, self.total_steps - self.warmup_steps)
        progress = min(1.0, (step - self.warmup_steps) / span)
        return 1.0 - (1.0 - self.final_ratio) * progress

    def get_lr(self) -> list[float]:
        factor = self.lr_factor(self.last_epoch)
        return [base * factor for base in self.base_lrs]
