"""Synthetic sample videos for the page, made on start by the project's synthetic-data generator
(the clips the demo model was trained on; nothing binary ships with the code)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from datamodules.synthetic_scenes import SyntheticConfig, clip_rng, generate_clip
from formats.video_writer import write_video

# Test-split clips of the default generator (seed 0): never seen in the demo model's training.
SAMPLE_SPLIT = "test"


@dataclass(frozen=True)
class Sample:
    path: Path
    caption: str  # the generator's own (ground-truth) caption


def write_samples(folder: str | Path, count: int = 3, seed: int = 0, duration_s: float = 8.0) -> list[Sample]:
    """``count`` synthetic clips of ``duration_s`` seconds as ``folder/synthetic_<i>.mp4``."""
    folder = Path(folder)
    config = SyntheticConfig(seed=seed, duration_s=duration_s)
    samples = []
    for index in range(count):
        frames, record = generate_clip(clip_rng(seed, SAMPLE_SPLIT, index), config, SAMPLE_SPLIT, index)
        path = write_video(folder / f"synthetic_{index + 1}.mp4", frames, config.fps, crf=config.crf,
                           preset=config.preset)
        samples.append(Sample(path, record.caption))
    return samples
