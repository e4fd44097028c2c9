"""``predict`` on long videos: clips made while each video streams by once, in bounded memory.

:class:`LongVideoDataModule` is :class:`datamodules.grounded_datamodule.GroundedVideoDataModule`
whose predict loader streams ``data.videos`` (:class:`LongVideoClips`): every video is decoded in
one forward pass (:meth:`formats.video_reader.PyAVVideoSource.stream`), its grid frames are cut into clips
on the grid or at shot boundaries (:mod:`longvideo.segments`), and each clip is preprocessed exactly as
:class:`datamodules.video_folder.VideoFolderDataset` would (same keys, same tensors) and handed
on, so only the clips in flight are ever in memory. A decoding gap in the middle of a video skips
the clips it touches (named with their times) and the stream goes on after it.

Batches carry ``long_video``: per clip, where it lies (video, frames, shot), and the gaps met.
"""
from __future__ import annotations

from core.user_errors import UserInputError

import math
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from datamodules.grounded_datamodule import GroundedVideoDataModule
from datamodules.video_folder import probe_videos, seconds_to_grid_frames
from formats.frame_grids import annotation_grid, annotation_step
from formats.video_files import VideoInfo
from formats.video_reader import DecodeGap, VideoDecodeError, stream_frames
from longvideo.prefetch import BackgroundIterable
from longvideo.segments import SEGMENTERS, ClipPlanner, PlannedClip, ShotCutDetector, clip_record
from models.grove.clip_processing import GroundedCollate
from models.grove.processing import GroveProcessor


def video_meta(info: VideoInfo) -> dict[str, Any]:
    return {"video_id": info.video_id, "path": str(info.path), "fps": info.fps, "num_frames": info.num_frames,
            "width": info.width, "height": info.height}


class LongVideoClips(IterableDataset):
    """The clips of ``videos`` (file, folder or glob), each video streamed once, in order.

    Yields preprocessed clip samples (plus ``long_video``: the clip's place) and, for gaps and
    unreadable files, samples holding only ``skipped`` and ``long_video`` entries.
    """

    def __init__(self, videos: str | Path, clip_seconds: float | None = 8.0, segmenter: str = "grid",
                 shot_threshold: float = 27.0, min_shot_seconds: float = 0.6, on_error: str = "skip",
                 **dataset_kwargs: Any):
        if segmenter not in SEGMENTERS:
            raise ValueError(f"data.segmenter must be one of {SEGMENTERS}, got {segmenter!r}")
        self.clip_seconds = clip_seconds
        self.segmenter = segmenter
        self.shot_threshold = shot_threshold
        self.min_shot_seconds = min_shot_seconds
        self.on_error = on_error
        self.videos, self.unreadable = probe_videos(videos, on_error)
        # the evaluation preprocessing of every clip, on frames already decoded (the processor's, as ``predict``'s)
        self.processor = GroveProcessor(preprocessing=dataset_kwargs)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        worker = get_worker_info()
        share, of = (worker.id, worker.num_workers) if worker is not None else (0, 1)
        for n, info in enumerate(self.videos):
            if n % of == share:
                yield from self.clips_of(info)
        if share == 0:
            for path, reason in self.unreadable:
                yield {"skipped": [(path, reason)], "long_video": [{"kind": "unreadable", "path": path,
                                                                     "reason": reason}]}

    def planner(self, info: VideoInfo) -> ClipPlanner:
        cut = None
        if self.segmenter == "shots":
            grid_fps = info.fps / annotation_step(info.fps)
            cut = ShotCutDetector(self.shot_threshold, max(1, int(round(self.min_shot_seconds * grid_fps))), grid_fps)
        return ClipPlanner(seconds_to_grid_frames(self.clip_seconds, info.fps), cut)

    def sample(self, info: VideoInfo, clip: PlannedClip) -> dict[str, Any]:
        record = clip_record(info, clip)
        where = {"kind": "clip", "key": record.key, **video_meta(info), "clip": clip.index, "shot": clip.shot,
                 "frames": clip.frames.tolist(), "start_frame": record.clip_start_frame,
                 "end_frame": record.clip_end_frame, "segmenter": self.segmenter}
        sample = self.processor.sample(np.stack(clip.pixels), record)
        sample["skipped"] = []
        sample["long_video"] = [where]
        return sample

    def clips_of(self, info: VideoInfo) -> Iterator[dict[str, Any]]:
        grid = annotation_grid(info.fps, 0, info.num_frames - 1)
        planner = self.planner(info)
        try:
            for item in stream_frames(info.path, grid):
                if isinstance(item, DecodeGap):
                    for clip in planner.gap():
                        yield self.sample(info, clip)
                    message = item.describe(info.path)
                    if self.on_error == "raise":
                        raise VideoDecodeError(message)
                    yield {"skipped": [(f"{info.video_id}@{item.start_s:.2f}s", message)],
                           "long_video": [{"kind": "gap", **video_meta(info), "first_frame": item.first,
                                           "last_frame": item.last, "start_s": item.start_s, "end_s": item.end_s,
                                           "reason": item.reason}]}
                    continue
                for clip in planner.push(*item):
                    yield self.sample(info, clip)
            for clip in planner.close():
                yield self.sample(info, clip)
        except VideoDecodeError as err:
            if self.on_error == "raise":
                raise
            yield {"skipped": [(str(info.path), f"{type(err).__name__}: {err}")],
                   "long_video": [{"kind": "unreadable", "path": str(info.path), "reason": str(err)}]}
        yield {"long_video": [{"kind": "end", **video_meta(info), "cuts": planner.cuts}]}


class LongVideoCollate(GroundedCollate):
    """:class:`GroundedCollate` that also passes the samples' ``long_video`` entries on, in order."""

    def __call__(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        events = [e for s in samples for e in s.get("long_video", [])]
        batch = super().__call__(samples)
        batch["long_video"] = events
        return batch


# Where clips are decoded and preprocessed while the model runs: ``thread`` (a background thread of
# the model's process, :mod:`longvideo.prefetch`), ``worker`` (a forked DataLoader worker: the pair of
# processes grows with the video's length as pages get copied on write), ``inline`` (between
# batches, in the model's own thread: the least memory, no overlap).
DECODE_IN = ("thread", "worker", "inline")


class LongVideoDataModule(GroundedVideoDataModule):
    """:class:`GroundedVideoDataModule` whose ``predict`` on ``videos`` streams each video once.

    Args (beyond the parent's):
        segmenter: ``grid`` (clips of ``video_clip_seconds`` on the 5-fps grid, tiled) or ``shots``
            (PySceneDetect's content detector; clips never straddle a cut).
        shot_threshold / min_shot_seconds: the detector's threshold and shortest shot.
        decode_in: where clips are decoded while the model runs (:data:`DECODE_IN`): ``thread``
            (default), ``worker`` (a DataLoader worker, when ``num_workers`` > 0) or ``inline``.
    """

    def __init__(self, segmenter: str = "grid", shot_threshold: float = 27.0, min_shot_seconds: float = 0.6,
                 decode_in: str = "thread", **kwargs: Any):
        super().__init__(**kwargs)
        if segmenter not in SEGMENTERS:
            raise ValueError(f"data.init_args.segmenter must be one of {SEGMENTERS}, got {segmenter!r}")
        if decode_in not in DECODE_IN:
            raise ValueError(f"data.init_args.decode_in must be one of {DECODE_IN}, got {decode_in!r}")
        clip_seconds = self.hparams.get("video_clip_seconds")
        if clip_seconds is not None and (isinstance(clip_seconds, bool) or not isinstance(clip_seconds, (int, float))
                                         or not math.isfinite(clip_seconds) or clip_seconds <= 0):
            raise UserInputError(f"data.init_args.video_clip_seconds: long-video mode cuts clips of this many seconds, "
                             f"got {clip_seconds!r}; give a positive number (8 is the default)")

    def make_video_dataset(self) -> LongVideoClips:
        hp = self.hparams
        if hp.video_clip_stride_seconds is not None:
            raise ValueError("data.init_args.video_clip_stride_seconds: long-video mode tiles its clips; "
                             "leave it null")
        return LongVideoClips(hp.videos, clip_seconds=hp.video_clip_seconds, segmenter=hp.segmenter,
                              shot_threshold=hp.shot_threshold, min_shot_seconds=hp.min_shot_seconds,
                              on_error=hp.on_corrupt, num_frames=hp.num_frames,
                              global_image_size=hp.global_image_size, global_resize=hp.global_resize,
                              grounding_image_size=hp.grounding_image_size,
                              grounding_resize=hp.get("grounding_resize", "float"))

    def predict_dataloader(self) -> DataLoader:
        if not isinstance(self.datasets.get("predict"), LongVideoClips):
            return super().predict_dataloader()
        hp = self.hparams
        batch_size = hp.eval_batch_size or hp.batch_size
        clips, workers = self.datasets["predict"], 0
        if hp.decode_in == "thread":
            clips = BackgroundIterable(clips, depth=batch_size)
        elif hp.decode_in == "worker":
            # one worker decodes while the model runs; more would each hold a decoder (videos are shared out)
            workers = min(1, hp.num_workers)
        return DataLoader(clips, batch_size=batch_size, num_workers=workers,
                          collate_fn=LongVideoCollate(self.prompter), persistent_workers=False)


__all__ = ["LongVideoDataModule", "LongVideoClips", "LongVideoCollate"]
