"""Dataset of grounded clips: records + videos -> model-ready samples (collated by
:class:`models.grove.clip_processing.GroundedCollate`).

A training sample holds the T sparse-sampled frames (GROVE paper, supp. C). An evaluation sample holds every
annotated frame of the clip (``all_frames=True``), because the evaluation grounds phrases on the
whole 5-fps grid; ``caption_positions`` then marks the T segment-centre frames the caption is
generated from. The dataset picks the frames and decodes them; the sample itself (frames
preprocessed for each encoder, normalised ``(cx, cy, w, h)`` targets per (frame, phrase) with a
presence mask) is :func:`models.grove.clip_processing.clip_sample`, as prediction builds it.

A missing or corrupt video never kills a long run by default: in training the sample is replaced
by the next clip, in evaluation it is dropped, and either way the batch carries ``skipped`` entries
(key and reason) that :class:`callbacks.skipped_videos.SkippedVideoReport` counts and reports once per epoch.
"""
from __future__ import annotations

from core.yuv_compositing import YuvFrame

import logging
import os
from collections import OrderedDict
from collections.abc import Sequence as SequenceABC
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from torch.utils.data import Dataset

from formats.records import GroundedRecord, RecordError
from formats.video_files import find_video, open_video
from formats.video_reader import PyAVVideoSource, VideoDecodeError
from formats.yuv_frames import RgbToYuv
from models.grove.clip_processing import clip_sample, evaluation_positions
from models.grove.frame_sampling import sample_rng, sample_segment_frames

log = logging.getLogger(__name__)
ON_ERROR = ("skip", "raise")
# What a sample may fail with without killing a run: a missing/corrupt video, or (for records read
# lazily per sample, e.g. HowToGround1M) a missing or malformed annotation file.
SKIPPABLE_ERRORS = (VideoDecodeError, FileNotFoundError, OSError, RecordError)
# Videos a dataset keeps open per process (each DataLoader worker has its own): clips of one video
# read one after another (evaluation, the clips of a long video) reuse its reader instead of
# reopening the file and re-reading its index. Each open reader holds its decoder's reference
# frames (up to tens of MB at 1080p), hence few.
OPEN_VIDEOS = 2


class GroundedClipDataset(Dataset):
    def __init__(
        self,
        records: Sequence[GroundedRecord],
        video_root: str | Path,
        num_frames: int = 8,
        train: bool = False,
        all_frames: bool = False,
        seed: int = 0,
        max_redraws: int = 10,
        global_image_size: int = 336,
        global_resize: str = "squash",
        grounding_image_size: int = 512,
        grounding_resize: str = "float",
        on_error: str = "skip",
        max_substitutions: int = 10,
    ):
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        # A lazy sequence (records read per sample) is used as given, never materialised.
        self.records = records if isinstance(records, SequenceABC) else list(records)
        self.video_root = Path(video_root)
        self.num_frames = num_frames
        self.train = train
        self.all_frames = all_frames and not train
        self.seed = seed
        self.max_redraws = max_redraws
        self.global_image_size = global_image_size
        self.global_resize = global_resize
        self.grounding_image_size = grounding_image_size
        self.grounding_resize = grounding_resize
        self.on_error = on_error
        self.max_substitutions = max_substitutions

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, item) -> dict[str, Any] | None:
        index, epoch = item if isinstance(item, tuple) else (item, 0)
        skipped = []
        for attempt in range(self.max_substitutions + 1 if self.train else 1):
            position = (index + attempt) % len(self.records)
            record = None
            try:
                record = self.records[position]
                sample = self.load(record, sample_rng(self.seed, epoch, index + attempt))
            except SKIPPABLE_ERRORS as err:
                if self.on_error == "raise":
                    raise
                key = record.key if record is not None else self.key_at(position)
                skipped.append((key, f"{type(err).__name__}: {err}"))
                continue
            sample["skipped"] = skipped
            return sample
        # Evaluation drops the clip (collate filters it); training ran out of substitutes.
        return {"skipped": skipped}

    def key_at(self, position: int) -> str:
        """Clip key at ``position`` without loading the record when the sequence can tell it."""
        key_of = getattr(self.records, "key", None)
        return key_of(position) if callable(key_of) else f"#{position}"

    def video_exists(self, record: GroundedRecord) -> bool:
        """Whether ``record``'s video (file or frame folder) is where :meth:`decode_frames` looks."""
        return find_video(self.video_root, record.video_fname) is not None

    def missing_videos(self, max_checked: int = 1000) -> tuple[int, list[str]]:
        """``(checked, missing)``: up to ``max_checked`` records spread over the split, and the video
        names of those whose video does not exist. Records that cannot be read are not counted."""
        n = len(self.records)
        positions = np.unique(np.linspace(0, n - 1, num=min(n, max_checked)).round().astype(int)) if n else []
        checked, missing = 0, []
        for position in positions:
            try:
                record = self.records[int(position)]
            except SKIPPABLE_ERRORS:
                continue
            checked += 1
            if not self.video_exists(record):
                missing.append(record.video_fname)
        return checked, missing

    def decode_frames(self, record: GroundedRecord, frame_indices: np.ndarray) -> np.ndarray:
        """``(N, H, W, 3)`` uint8 frames of ``record`` at the given frame indices.

        Frame indices are source frames of the annotation grid; datasets whose records number
        frames differently (ActivityNet-Entities' 10 sampled frames) override this mapping.
        Every read seeks afresh, so a reused reader gives the frames a new one would.
        """
        return self._with_reader(record, lambda video: video.read_frames(np.asarray(frame_indices).tolist()))

    def decode_span(self, record: GroundedRecord, frame_indices: np.ndarray, rgb_positions: np.ndarray
                    ) -> tuple[np.ndarray, list[YuvFrame]]:
        """One decode of ``frame_indices``: the frames at ``rgb_positions`` (into ``frame_indices``) as
        ``(n, H, W, 3)`` RGB, the frames :meth:`decode_frames` gives, and every frame as YUV planes
        (:class:`core.yuv_compositing.YuvFrame`, for the annotated MP4), never stacked into one array: a
        clip's whole span is hundreds of MB at 720p."""
        indices = np.asarray(frame_indices).tolist()
        positions = np.asarray(rgb_positions, dtype=np.int64).tolist()

        def read(video):
            if isinstance(video, PyAVVideoSource):
                frames = video.read_frame_list(indices, colour="frame")
                return (np.stack([video.upright_rgb(frames[p]) for p in positions]),
                        [video.upright_yuv(f) for f in frames])
            rgb = video.read_frames(indices)
            to_yuv = RgbToYuv(rgb.shape[2], rgb.shape[1])
            return rgb[positions], [to_yuv(f) for f in rgb]

        return self._with_reader(record, read)

    def _with_reader(self, record: GroundedRecord, read):
        """``read(reader)`` on the reader of ``record``'s video (kept open for the next clip, or closed)."""
        key = record.video_fname
        video, kept = self._open_reader(key)
        try:
            return read(video)
        except BaseException:
            kept = False
            self._readers.pop(key, None)
            raise
        finally:
            if not kept:
                video.close()

    def _open_reader(self, video_fname: str):
        """``(reader, kept)``: the reader of ``video_fname`` from this process's :data:`OPEN_VIDEOS`
        most recent ones, or newly opened (a file changed on disk since it was opened is reopened);
        ``kept``: whether it stays open for the next clip."""
        if getattr(self, "_readers_pid", None) != os.getpid():  # a forked worker starts with none of its own
            self._readers: OrderedDict = OrderedDict()
            self._readers_pid = os.getpid()
        path = find_video(self.video_root, video_fname)
        stamp = None
        if path is not None and path.is_file():
            stat = path.stat()
            stamp = (str(path), stat.st_mtime_ns, stat.st_size)
        cached = self._readers.pop(video_fname, None)
        if cached is not None and stamp is not None and cached[0] == stamp:
            self._readers[video_fname] = cached
            return cached[1], True
        if cached is not None:
            cached[1].close()
        video = open_video(self.video_root, video_fname)
        if stamp is not None:  # frame folders are not kept: each frame is a file read anyway
            self._readers[video_fname] = (stamp, video)
            while len(self._readers) > OPEN_VIDEOS:
                self._readers.popitem(last=False)[1][1].close()
        return video, stamp is not None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (spawned workers) without the open readers."""
        state = dict(self.__dict__)
        state.pop("_readers", None)
        state.pop("_readers_pid", None)
        return state

    def sample_positions(self, record: GroundedRecord, rng: np.random.Generator) -> np.ndarray:
        num_annotated = len(record.bboxes)
        visible = np.array([len(b) > 0 for b in record.bboxes], dtype=bool)
        return sample_segment_frames(num_annotated, self.num_frames, self.train, rng, visible, self.max_redraws)

    def load(self, record: GroundedRecord, rng: np.random.Generator) -> dict[str, Any]:
        if self.all_frames:
            positions, caption_positions = evaluation_positions(len(record.frame_indices), self.num_frames)
        else:
            positions = self.sample_positions(record, rng)
            caption_positions = np.arange(len(positions))
        frames = self.decode_frames(record, record.frame_indices[positions])
        return clip_sample(record, frames, positions, caption_positions, self.global_image_size, self.global_resize,
                           self.grounding_image_size, self.grounding_resize)
