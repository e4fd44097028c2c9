"""``cli.py predict`` part by part, for bench/bench_predict.py (which runs it; this module has no
command of its own): CPU and wall seconds per 8-s clip of decoding, preprocessing, the model's
forward, postprocessing, the prediction writer and the annotated MP4.

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
"""
from __future__ import annotations

import json
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
from models.grove.postprocessing import format_clip_predictions

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("decode", "preprocess", "model", "postprocess", "prediction writer", "MP4")


def make_video(path: Path, seconds: int, rng: np.random.Generator, width: int = 455, height: int = 256) -> Path:
    """``seconds`` (whole 8-s clips, at least one) of camera-like 25-fps content: a panning texture
    forwards, then backwards; 1-s GOP."""
    content = panning_clip(rng, width, height)
    writer = VideoWriter(path, FPS, width, height, crf=23, gop=FPS)
    for k in range(max(1, seconds * FPS // NUM_FRAMES)):
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
            positions, caption_positions = evaluation_positions(len(record.frame_indices), hp["num_frames"])
            with timer.part("decode"):  # as VideoFolderDataset(video_frames=True) decodes a clip
                grid, span = dataset.decode_span(record, np.arange(record.clip_start_frame, record.clip_end_frame + 1),
                                                 record.frame_indices[positions] - record.clip_start_frame)
            with timer.part("preprocess"):
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
