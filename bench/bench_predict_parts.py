"""``cli.py predict`` part by part: CPU and wall seconds per 8-s clip of decoding, preprocessing, the
model's forward, postprocessing, the prediction writer and the annotated MP4, and the released
inference procedure's input on the same clips, with the ratio.

    PYTHONPATH=.:bench python bench/bench_predict_parts.py [--clips 4] [--sizes 455x256 1280x720] \\
        [--batch-sizes 1 8] [--modes folder long]

Each part calls what ``cli.py predict`` calls, in this process, one after another, so every part's
CPU time is its own (in a real run the MP4 is drawn in a writer thread and long-video decoding may
run in a thread, overlapping the model):

- decode: ``folder``: :class:`datamodules.video_folder.VideoFolderDataset` with ``video_frames`` (the
  clip's whole span decoded once, for the model, a masker and the MP4); ``long``: long-video mode's
  one streaming pass (:func:`formats.video_reader.stream_frames`, the grid frames only);
- preprocess: :func:`models.grove.clip_processing.clip_sample` and :class:`GroundedCollate`;
- model: :meth:`models.grove.modeling.Grove.predict` (configs/demo.yaml, random weights: the
  compute of the trained demo model), all windows of each clip;
- postprocess: :func:`models.grove.postprocessing.format_clip_predictions`;
- prediction writer: the predictions file (JSON) of the clips so far;
- MP4: ``folder``: :class:`callbacks.shared_frame_video.SharedFrameVideo` on the decoded frames;
  ``long``: :func:`callbacks.annotated_video.render_annotated_video` (its own decode of the video).

The released procedure (the official ``infer_iground.py`` as the released dataset code reads a
clip): one ``ffmpeg -ss t -i video -vframes 1`` process per grid frame (40 per 8-s clip), all frames
preprocessed at the released sizes and geometry (CLIP 336 px ``clip``, SAM 512 px ``sam``); the
project's decode and preprocessing of the same clips at the same sizes beside it. The model is the
same for both, so the ratio compares what runs around it.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from bench_decoding import FPS, NUM_FRAMES, panning_clip
from bench_input_pipeline import cpu_seconds

from callbacks.annotated_video import ClipPrediction, render_annotated_video
from callbacks.shared_frame_video import SharedFrameVideo
from datamodules.video_folder import VideoFolderDataset
from formats.video_reader import PyAVVideoSource
from formats.video_writer import VideoWriter
from models.grove.clip_processing import GroundedCollate, clip_sample, evaluation_positions
from models.grove.image_processing import preprocess_global, preprocess_grounding
from models.grove.postprocessing import format_clip_predictions

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("decode", "preprocess", "model", "postprocess", "prediction writer", "MP4")


def make_video(path: Path, width: int, height: int, clips: int) -> Path:
    """``clips`` x 8 s of camera-like content (a panning texture forwards, then backwards), 1-s GOP."""
    content = panning_clip(np.random.default_rng(0), width, height)
    writer = VideoWriter(path, FPS, width, height, crf=23, gop=FPS)
    for k in range(clips * 8 * FPS // NUM_FRAMES):
        writer.write(content if k % 2 == 0 else content[::-1])
    return writer.close()


def demo_module():
    """configs/demo.yaml's GroveModule with random weights, and its datamodule's settings."""
    from core.config_loader import ConfigLoader

    class Loader(ConfigLoader):
        def instantiate_trainer(self, **kwargs):
            return None

    cli = Loader(subclass_mode_model=True, subclass_mode_data=True, run=False, save_config_callback=None,
                 args=["--config", str(ROOT / "configs" / "demo.yaml"),
                       "--model.init_args.global_encoder.checkpoint=null",
                       "--model.init_args.grounding_encoder.checkpoint=null"],
                 parser_kwargs={"parser_mode": "omegaconf"})
    return cli.model.eval(), cli.datamodule


class Timer:
    def __init__(self):
        self.cpu, self.wall = defaultdict(float), defaultdict(float)

    @contextmanager
    def part(self, name: str):
        cpu, wall = cpu_seconds(), time.perf_counter()
        yield
        self.cpu[name] += cpu_seconds() - cpu
        self.wall[name] += time.perf_counter() - wall


def run_folder(module, hp, video: Path, batch_size: int, out: Path, timer: Timer) -> int:
    """The video-folder path: a clip's span decoded once, the MP4 drawn on those frames."""
    dataset = VideoFolderDataset(video, video_frames=True, num_frames=hp["num_frames"],
                                 global_image_size=hp["global_image_size"], global_resize=hp["global_resize"],
                                 grounding_image_size=hp["grounding_image_size"],
                                 grounding_resize=hp.get("grounding_resize", "float"), on_error="raise")
    records = dataset.records
    info = dataset.videos[0]
    mp4 = SharedFrameVideo(records, out / "annotated.mp4", 0, info.num_frames - 1, info.width, info.height, info.fps)
    collate = GroundedCollate(module.prompter)
    predictions: dict = {}
    for start in range(0, len(records), batch_size):
        chunk = records[start:start + batch_size]
        samples = []
        for record in chunk:
            with timer.part("decode"):
                span = dataset.decode_frames(record, np.arange(record.clip_start_frame, record.clip_end_frame + 1))
            with timer.part("preprocess"):
                positions, caption_positions = evaluation_positions(len(record.frame_indices), hp["num_frames"])
                grid = span[record.frame_indices[positions] - record.clip_start_frame]
                samples.append(clip_sample(record, grid, positions, caption_positions, hp["global_image_size"],
                                           hp["global_resize"], hp["grounding_image_size"],
                                           hp.get("grounding_resize", "float")))
                samples[-1].update(video_frames=span, video_first=record.clip_start_frame)
        with timer.part("preprocess"):
            batch = collate(samples)
        predict_batch(module, batch, predictions, out, timer)
        with timer.part("MP4"):
            for key, first, frames in zip(batch["keys"], batch["video_first"], batch["video_frames"]):
                mp4.add(key, predictions[key], first, frames)
    with timer.part("MP4"):
        mp4.close()
    return len(records)


def run_long(module, hp, video: Path, batch_size: int, out: Path, timer: Timer) -> int:
    """Long-video mode: one streaming pass over the grid frames; the MP4 decodes the video again."""
    from longvideo.datamodule import LongVideoClips
    from longvideo.segments import clip_record

    clips = LongVideoClips(video, clip_seconds=8.0, num_frames=hp["num_frames"],
                           global_image_size=hp["global_image_size"], global_resize=hp["global_resize"],
                           grounding_image_size=hp["grounding_image_size"],
                           grounding_resize=hp.get("grounding_resize", "float"), on_error="raise")
    info = clips.videos[0]
    records = []
    preprocess = Timer()
    sample_clip = clips.sample

    def timed_sample(info, clip):  # the preprocessing inside the streaming pass, timed apart from decoding
        records.append(clip_record(info, clip))
        with preprocess.part("preprocess"):
            return sample_clip(info, clip)

    clips.sample = timed_sample
    collate = GroundedCollate(module.prompter)
    predictions: dict = {}
    stream = clips.clips_of(info)
    samples: list = []
    while True:
        with timer.part("decode"):
            sample = next(stream, None)
        if sample is not None and "key" in sample:
            samples.append(sample)
        if samples and (sample is None or len(samples) == batch_size):
            with timer.part("preprocess"):
                batch = collate(samples)
            predict_batch(module, batch, predictions, out, timer)
            samples = []
        if sample is None:
            break
    for name in ("cpu", "wall"):  # the preprocessing ran inside the decode's timing
        getattr(timer, name)["decode"] -= getattr(preprocess, name)["preprocess"]
        getattr(timer, name)["preprocess"] += getattr(preprocess, name)["preprocess"]
    with timer.part("MP4"), PyAVVideoSource(video) as source:
        render_annotated_video(source, out / "annotated.mp4", [ClipPrediction(r, predictions[r.key]) for r in records],
                               0, info.num_frames - 1, info.fps)
    return len(records)


def predict_batch(module, batch: dict, predictions: dict, out: Path, timer: Timer) -> None:
    """The model's forward and the postprocessing of :func:`models.grove.processing.predict_clips`."""
    settings = module.inference_settings()
    model = module.model
    with timer.part("model"), torch.no_grad():
        result = model.predict(batch["global_frames"], batch["grounding_frames"], batch["frame_mask"],
                               window=batch["caption_positions"].shape[1], window_mode=settings["window_mode"],
                               caption_positions=batch["caption_positions"], captions=None,
                               max_new_tokens=settings["max_new_tokens"], text_protocol=settings["text_protocol"])
    with timer.part("postprocess"):
        predictions.update(format_clip_predictions(
            batch, result.tagged_captions, result.phrases, result.boxes, result.scores, result.captions,
            float(settings["objectness_threshold"]), bool(settings["objectness_strict"]),
            model.objectness_head is not None, None, None))
    with timer.part("prediction writer"):
        (out / "predictions.json").write_text(json.dumps(predictions))


def released_input(ffmpeg: str, video: Path, records: list, timer: Timer) -> None:
    """The released procedure's input of each clip: a process per grid frame, all frames preprocessed."""
    import subprocess

    for record in records:
        with timer.part("released decode"):
            frames = []
            for frame_id in record.frame_indices:
                raw = subprocess.run([ffmpeg, "-ss", str(frame_id / record.fps), "-i", str(video), "-vframes", "1",
                                      "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:"],
                                     capture_output=True, check=True).stdout
                frames.append(np.frombuffer(raw, np.uint8).reshape(record.height, record.width, 3))
            images = np.stack(frames)
        with timer.part("released preprocess"):
            preprocess_global(images, 336, "clip")
            preprocess_grounding(images, 512, "sam")


def project_input(video: Path, timer: Timer) -> list:
    """The project's decode (the grid frames, no MP4 to feed) and preprocessing of the same clips at the
    released sizes and geometry."""
    dataset = VideoFolderDataset(video, global_image_size=336, global_resize="clip", grounding_image_size=512,
                                 grounding_resize="sam", on_error="raise")
    for record in dataset.records:
        with timer.part("project decode"):
            frames = dataset.decode_frames(record, record.frame_indices)
        with timer.part("project preprocess"):
            positions, caption_positions = evaluation_positions(len(record.frame_indices), 8)
            clip_sample(record, frames, positions, caption_positions, 336, "clip", 512, "sam")
    return dataset.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", type=int, default=4, help="8-s clips per video")
    parser.add_argument("--sizes", nargs="+", default=["455x256", "1280x720"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--modes", nargs="+", default=["folder", "long"], choices=["folder", "long"])
    parser.add_argument("--threads", type=int, default=1, help="torch's threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    module, datamodule = demo_module()
    hp = dict(datamodule.hparams)
    import imageio_ffmpeg

    ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; torch threads {args.threads}; demo model "
          f"(random weights); {args.clips} clips of 8 s per video, 25 fps; seconds per clip, CPU / wall")
    header = f"{'size':>9} {'mode':>6} {'batch':>5} " + " ".join(f"{p:>17}" for p in PARTS) + f" {'non-model CPU':>13}"
    print(header)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for size in args.sizes:
            width, height = (int(v) for v in size.split("x"))
            video = make_video(tmp / f"v{size}.mp4", width, height, args.clips)
            for mode in args.modes:
                for batch_size in args.batch_sizes:
                    timer = Timer()
                    run = run_folder if mode == "folder" else run_long
                    n = run(module, hp, video, batch_size, tmp, timer)
                    cells = " ".join(f"{timer.cpu[p] / n:>8.2f} /{timer.wall[p] / n:>7.2f}" for p in PARTS)
                    non_model = sum(timer.cpu[p] for p in PARTS if p != "model") / n
                    print(f"{size:>9} {mode:>6} {batch_size:>5} {cells} {non_model:>13.2f}", flush=True)
            timer = Timer()
            records = project_input(video, timer)
            released_input(ffmpeg, video, records, timer)
            n = len(records)
            cpu = {k: v / n for k, v in timer.cpu.items()}
            released = cpu["released decode"] + cpu["released preprocess"]
            project = cpu["project decode"] + cpu["project preprocess"]
            print(f"{size:>9} input of a clip at the released sizes (336 px clip, 512 px sam), CPU-s: released "
                  f"{released:.2f} (40 ffmpeg processes {cpu['released decode']:.2f}, preprocessing "
                  f"{cpu['released preprocess']:.2f}), project {project:.2f} (decode {cpu['project decode']:.2f}, "
                  f"preprocessing {cpu['project preprocess']:.2f}): {released / project:.1f}x; decoding alone "
                  f"{cpu['released decode'] / cpu['project decode']:.1f}x", flush=True)


if __name__ == "__main__":
    main()
