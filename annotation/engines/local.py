"""The single-process engine: batches of clips go through decoding, Stage 1, Stages 2-3 in turn."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from annotation.clips import ClipSpec, SkippedClip
from annotation.engines.workers import FrameWorker, TextWorker
from annotation.stage1.frame_annotations import ClipFrameAnnotations

BAR_STAGES = (("decode", "decode"), ("stage1", "stage 1 (frames)"), ("stage2", "stage 2 (caption)"),
              ("stage3", "stage 3 (boxes)"))


class LocalEngine:
    name = "local"

    def __init__(self, config: dict, videos: str | Path, truth: str | Path | None = None, progress: bool = True):
        self.config, self.videos, self.truth, self.progress = config, videos, truth, progress

    def process(self, specs: list[ClipSpec]) -> Iterator[tuple[list, dict[str, float], int]]:
        """Yield per batch ``(results, stage seconds, clips, readable clips)``; results are records,
        rejections or skips."""
        from tqdm import tqdm

        frames_worker = FrameWorker(self.config, self.videos, self.truth)
        text_worker = TextWorker(self.config)
        bars = {stage: tqdm(total=len(specs), desc=label, position=i, leave=True, disable=not self.progress,
                            unit="clip") for i, (stage, label) in enumerate(BAR_STAGES)}
        size = int(self.config["engine"]["batch_size"])
        try:
            for start in range(0, len(specs), size):
                batch = specs[start:start + size]
                frames, timings = frames_worker.run(batch)
                bars["decode"].update(len(batch))
                bars["stage1"].update(len(batch))
                readable = [f for f in frames if isinstance(f, ClipFrameAnnotations)]
                results, text_timings = text_worker.run(readable)
                bars["stage2"].update(len(batch))
                bars["stage3"].update(len(batch))
                by_key = {r.key: r for r in results}
                ordered = [f if isinstance(f, SkippedClip) else by_key[f.key] for f in frames]
                yield ordered, {**timings, **text_timings}, len(batch), len(readable)
        finally:
            for bar in bars.values():
                bar.close()
