"""A callback for bench/bench_startup.py: it writes the clock time and the CPU seconds the process
has used so far to a JSON file when ``Trainer.predict`` calls the callbacks' ``setup`` (the imports,
the config and the model are done) and when the first batch reaches ``predict_step`` (the checkpoint
is loaded, the data loader has delivered its first clip).

    --trainer.callbacks+='{"class_path": "bench.first_clip_clock.FirstClipClock", "init_args": {"path": "t.json"}}'

The benchmark takes the clock time before it starts the process, so the seconds count the
interpreter's start too.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from lightning.pytorch.callbacks import Callback


def _now() -> dict[str, float]:
    used = os.times()
    return {"time": time.time(), "cpu_s": used.user + used.system}


class FirstClipClock(Callback):
    def __init__(self, path: str):
        self.path = Path(path)
        self.moments: dict[str, dict[str, float]] = {}

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage == "predict":
            self.moments["setup"] = _now()

    def on_predict_batch_start(self, trainer, pl_module, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        if "first_batch" not in self.moments:
            self.moments["first_batch"] = _now()
            self.path.write_text(json.dumps(self.moments))
