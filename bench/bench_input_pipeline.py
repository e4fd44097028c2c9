"""Training input: the project's DataLoader against the released GROVE loader's procedure, in clips
per CPU-second (clips/s per core), on 8-s clips at HowTo100M's 455x256 and at 1280x720.

    PYTHONPATH=. python bench/bench_input_pipeline.py [--clips 4] [--repeats 2]

Both produce a training sample at the released sizes (CLIP 336 px through CLIPImageProcessor's
geometry, SAM 512 px through ResizeLongestSide: ``global_resize: clip``, ``grounding_resize: sam``
of configs/official/grove.yaml), 8 frames drawn one per segment of the clip's 5-fps grid.

- released procedure (re-implemented here): one ``ffmpeg -ss t -i video -vframes 1`` process per
  grid frame (40 for an 8-s clip), every grid frame preprocessed for both encoders, then 8 sampled;
- project: :class:`datamodules.grounded_dataset.GroundedClipDataset` through a DataLoader: the 8
  sampled frames decoded by keyframe seeking in one open reader, only those preprocessed.

CPU time counts every thread and the ffmpeg child processes; torch runs one thread. The ffmpeg
binary is the ``imageio-ffmpeg`` wheel's. A clip/s-per-core figure times the cores feeding one GPU
is what that GPU gets.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from bench_decoding import FPS, NUM_FRAMES, panning_clip
from torch.utils.data import DataLoader

from datamodules.grounded_dataset import OPEN_VIDEOS, GroundedClipDataset
from formats.frame_grids import annotation_grid
from formats.records import GroundedRecord
from formats.video_writer import VideoWriter
from models.grove.clip_processing import GroundedCollate
from models.grove.frame_sampling import sample_segment_frames
from models.grove.image_processing import preprocess_global, preprocess_grounding


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (ffmpeg), all threads."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def training_record(path: Path, width: int, height: int, start: int, index: int) -> GroundedRecord:
    """The 8-s clip of ``path`` from source frame ``start``, one phrase boxed on every grid frame."""
    n = len(annotation_grid(FPS, start, start + NUM_FRAMES - 1))
    box = np.array([[width * 0.2, height * 0.2, width * 0.6, height * 0.7]], np.float32)
    return GroundedRecord(video_fname=path.name, video_id=path.stem, clip_id=str(index), fps=float(FPS),
                          clip_start_frame=start, clip_end_frame=start + NUM_FRAMES - 1, width=width, height=height,
                          caption="a thing moves.", tagged_caption="<p>a thing</p> moves.", phrases=["a thing"],
                          bboxes=[box] * n, labels=[["a thing"]] * n)


def source_video(path: Path, width: int, height: int, seconds: int, rng: np.random.Generator) -> Path:
    """A ``seconds``-long video (the panning texture played forwards and backwards), 1-s keyframe interval.
    Training clips are 8-s pieces of whole videos (HowTo100M's last minutes on average)."""
    content = panning_clip(rng, width, height)
    writer = VideoWriter(path, FPS, width, height, crf=23, gop=FPS)
    try:
        for k in range(seconds * FPS // NUM_FRAMES):
            writer.write(content if k % 2 == 0 else content[::-1])
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def released_sample(ffmpeg: str, root: Path, record: GroundedRecord, rng: np.random.Generator) -> tuple:
    """The released loader's ``process_data`` steps: a process per grid frame, all frames preprocessed."""
    frames = []
    for frame_id in record.frame_indices:
        out = subprocess.run([ffmpeg, "-ss", str(frame_id / record.fps), "-i", str(root / record.video_fname),
                              "-vframes", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:"],
                             capture_output=True, check=True).stdout
        frames.append(np.frombuffer(out, np.uint8).reshape(record.height, record.width, 3))
    images = np.stack(frames)
    global_frames = preprocess_global(images, 336, "clip")
    grounding_frames = preprocess_grounding(images, 512, "sam")
    picked = sample_segment_frames(len(images), 8, True, rng)
    return global_frames[picked], grounding_frames[picked]


def time_released(ffmpeg: str, root: Path, records: list, repeats: int) -> float:
    rng = np.random.default_rng(0)
    cpu = cpu_seconds()
    for _ in range(repeats):
        for record in records:
            released_sample(ffmpeg, root, record, rng)
    return repeats * len(records) / (cpu_seconds() - cpu)


def time_project(root: Path, records: list, repeats: int) -> float:
    dataset = GroundedClipDataset(records, root, num_frames=8, train=True, global_image_size=336,
                                  global_resize="clip", grounding_image_size=512, grounding_resize="sam",
                                  on_error="raise")
    loader = DataLoader(dataset, batch_size=1, num_workers=0, collate_fn=GroundedCollate(None, train=True))
    cpu = cpu_seconds()
    for _ in range(repeats):
        for batch in loader:
            assert batch["global_frames"].shape[1:] == (8, 3, 336, 336)
    return repeats * len(records) / (cpu_seconds() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=6)
    parser.add_argument("--videos", type=int, default=OPEN_VIDEOS + 1)
    parser.add_argument("--video-seconds", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--released-repeats", type=int, default=1)
    args = parser.parse_args()
    import imageio_ffmpeg

    ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.clips} clips of {NUM_FRAMES} frames "
          f"at {FPS} fps (40 grid frames; 8 sampled) from {args.videos} {args.video_seconds}-s videos in turn; "
          "torch threads 1")
    print(f"{'size':>9} {'released clips/CPU-s':>21} {'project clips/CPU-s':>20} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for width, height in ((455, 256), (1280, 720)):
            paths = [source_video(root / f"v{width}_{v}.mp4", width, height, args.video_seconds, rng)
                     for v in range(args.videos)]
            last_start = (args.video_seconds // 8 * 8 - 8) * FPS
            starts = rng.integers(0, last_start + 1, args.clips)
            # consecutive clips come from different videos, more than a worker keeps open: every clip
            # opens its video, as in training where clips are drawn from the whole dataset
            records = [training_record(paths[i % len(paths)], width, height, int(s), i) for i, s in enumerate(starts)]
            released = time_released(ffmpeg, root, records, args.released_repeats)
            project = time_project(root, records, args.repeats)
            print(f"{f'{width}x{height}':>9} {released:>21.3f} {project:>20.3f} {project / released:>6.1f}x")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"({time.perf_counter() - start:.0f} s)")
