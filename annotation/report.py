"""``OUT/report.json``: what a run did (clips seen, accepted, rejected, skipped, with reasons) and how fast.

Stage throughput is clips divided by the seconds spent in that stage, summed over batches (and
over workers for the Ray engine), i.e. clips per second of one worker; ``wall_s`` is the run's
elapsed time. Totals over the output folder (earlier runs included) sit beside this run's counts.
"""
from __future__ import annotations

from core.output_files import write_json_atomic

import re
import time
from collections import Counter, defaultdict
from pathlib import Path

from annotation.clips import SkippedClip
from annotation.outcomes import Rejection

STAGES = ("decode", "stage1", "stage3_tracking", "stage2", "stage3", "tracks")


def reason_kind(reason: str) -> str:
    """A reason without its particulars (quoted text, counts), to count rejections by kind."""
    kind = re.sub(r"(['\"]).*", "", reason)
    kind = re.sub(r"\(after \d+ tries\)|\d+", "#", kind)
    return kind.strip(" :#") or reason


class RunReport:
    def __init__(self, engine: str, config_files: list[str], planned: int, already_done: int):
        self.engine, self.config_files = engine, list(config_files)
        self.planned, self.already_done = planned, already_done
        self.accepted = 0
        self.rejected: list[Rejection] = []
        self.skipped: list[SkippedClip] = []
        self.seconds: dict[str, float] = defaultdict(float)
        self.clips: dict[str, int] = defaultdict(int)
        self.started = time.perf_counter()

    def add_timings(self, timings: dict[str, float], clips: int) -> None:
        for stage, seconds in timings.items():
            self.seconds[stage] += float(seconds)
            self.clips[stage] += int(clips)

    def to_dict(self, totals: dict | None = None) -> dict:
        wall = time.perf_counter() - self.started
        seen = self.accepted + len(self.rejected) + len(self.skipped)
        stages = {}
        for stage in STAGES:
            if stage in self.seconds:
                s, n = self.seconds[stage], self.clips[stage]
                stages[stage] = {"seconds": round(s, 3), "clips": n, "clips_per_s": round(n / s, 2) if s > 0 else None}
        text = [s for s in ("stage2", "stage3", "tracks") if s in self.seconds]
        if text:
            s = sum(self.seconds[x] for x in text)
            n = self.clips[text[0]]
            stages["stages_2_3"] = {"seconds": round(s, 3), "clips": n,
                                    "clips_per_s": round(n / s, 2) if s > 0 else None}
        return {
            "engine": self.engine, "config": self.config_files,
            "clips": {"planned": self.planned, "already_done": self.already_done, "seen": seen,
                      "accepted": self.accepted, "rejected": len(self.rejected),
                      "skipped_corrupt": len(self.skipped)},
            "rejected_by_reason": dict(Counter(f"{r.stage}: {reason_kind(r.reason)}" for r in self.rejected)),
            "rejected": {r.key: f"{r.stage}: {r.reason}" + (" (will be redone)" if r.retryable else "")
                         for r in self.rejected},
            "skipped_corrupt": {s.key: s.reason for s in self.skipped},
            "stages": stages, "wall_s": round(wall, 2),
            "clips_per_s": round(seen / wall, 2) if wall > 0 else None,
            "totals_in_output": totals or {},
        }

    def write(self, path: str | Path, totals: dict | None = None) -> dict:
        data = self.to_dict(totals)
        write_json_atomic(path, data)
        return data
