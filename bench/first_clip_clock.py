"""A callback for bench/bench_startup.py: when the first predict batch reaches ``predict_step``, it
writes the clock time and the CPU seconds the process has used so far to a JSON file.

    --trainer.callbacks+='{"class_path": "bench.first_clip_clock.FirstClipClock", "init_args": {"path": "t.json"}}'

The benchmark takes the clock time before it starts the process, so wall seconds to the first clip
count the interpreter's start, every import, the config parse, the model build and the first
decoded batch.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from lightning.pytorch.callbacks import Callback


class FirstClipClock(Callback):
    def __init__(self, path: str):
        self.path = Path(path)
        self.written = False

    def on_predict_batch_start(self, trainer, pl_module, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        if self.written:
            return
        used = os.times()
        self.path.write_text(json.dumps({"time": time.time(), "cpu_s": used.user + used.system}))
        self.written = True
