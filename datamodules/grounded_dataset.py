"""Dataset of grounded clips: records + videos -> model-ready samples, and their collate.

A training sample holds the T sparse-sampled frames (GROVE paper, supp. C). An evaluation sample holds every
annotated frame of the clip (``all_frames=True``), because the evaluation grounds phrases on the
whole 5-fps grid; ``caption_positions`` then marks the T segment-centre frames the caption is
generated from. Frames are given twice, preprocessed for each encoder; targets are normalised
``(cx, cy, w, h)`` per (frame, phrase) with a presence mask.

A missing or corrupt video never kills a long run by default: in training the sample is replaced
by the next clip, in evaluation it is dropped, and either way the batch carries ``skipped`` entries
(key and reason) that :class:`callbacks.skipped_videos.SkippedVideoReport` counts and reports once per epoch.
"""
from __future__ import annotations

from core.box_ops import normalize_boxes, xyxy_to_cxcywh
from core.image_preprocessing import preprocess_global, preprocess_grounding

import logging
import os
import random
import zlib
from collections import OrderedDict
from collections.abc import Sequence as SequenceABC
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from datamodules.sampling import centre_frames, sample_rng, sample_segment_frames
from formats.records import GroundedRecord, RecordError, tagged_phrases
from formats.video import VideoDecodeError, find_video, open_video

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
        key = record.video_fname
        video, kept = self._open_reader(key)
        try:
            frames = video.read_frames(frame_indices.tolist())
        except BaseException:
            kept = False
            self._readers.pop(key, None)
            raise
        finally:
            if not kept:
                video.close()
        return frames

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
        grid = record.frame_indices
        if self.all_frames:
            positions = np.arange(len(grid))
            caption_positions = centre_frames(len(grid), self.num_frames)
        else:
            positions = self.sample_positions(record, rng)
            caption_positions = np.arange(len(positions))
        source_frames = grid[positions]
        frames = self.decode_frames(record, source_frames)
        boxes_px, present = record.phrase_boxes()
        # Slots follow the tagged phrases in caption order (repeats included): the k-th [DET] of
        # the target belongs to the k-th tagged phrase.
        slot_phrases = tagged_phrases(record.tagged_caption)
        index = {p: j for j, p in enumerate(record.phrases)}
        slots = np.array([index.get(p, -1) for p in slot_phrases], dtype=np.int64)
        boxes_px = np.where((slots >= 0)[None, :, None], boxes_px[:, np.maximum(slots, 0)], 0.0).astype(np.float32)
        present = present[:, np.maximum(slots, 0)] & (slots >= 0)[None, :]
        boxes = xyxy_to_cxcywh(normalize_boxes(torch.from_numpy(boxes_px[positions]), record.width, record.height))
        present_t = torch.from_numpy(present[positions])
        return {
            "key": record.key,
            "video_fname": record.video_fname,
            "global_frames": preprocess_global(frames, self.global_image_size, self.global_resize),
            "grounding_frames": preprocess_grounding(frames, self.grounding_image_size, self.grounding_resize),
            "boxes": boxes * present_t.unsqueeze(-1),
            "present": present_t,
            "phrases": slot_phrases,
            "tagged_caption": record.tagged_caption,
            "caption": record.caption,
            "frame_indices": torch.from_numpy(source_frames.astype(np.int64)),
            "caption_positions": torch.from_numpy(np.asarray(caption_positions, dtype=np.int64)),
            "size": torch.tensor([record.width, record.height], dtype=torch.int64),
        }


def _pad_stack(tensors: list[torch.Tensor], dims: Sequence[int], value=0) -> torch.Tensor:
    """Stack tensors padding the given dims to their max size."""
    shape = list(tensors[0].shape)
    if all(t.shape == tensors[0].shape for t in tensors):  # nothing to pad (training: T frames each)
        return torch.stack(tensors)
    for d in dims:
        shape[d] = max(t.shape[d] for t in tensors)
    out = tensors[0].new_full((len(tensors), *shape), value)
    for i, t in enumerate(tensors):
        out[(i, *[slice(0, s) for s in t.shape])] = t
    return out


class GroundedCollate:
    """Pads samples into batch tensors and tokenises captions with the model's prompter.

    Batch keys: ``global_frames (B, F, 3, Hg, Wg)``, ``grounding_frames (B, F, 3, S, S)``,
    ``boxes (B, F, P, 4)``, ``present (B, F, P)``, ``frame_mask (B, F)``, ``phrase_mask (B, P)``,
    ``frame_indices (B, F)`` (-1 padded), ``caption_positions (B, T)``, ``size (B, 2)``;
    ``input_ids``/``attention_mask``/``labels`` (prompt + target, loss on the answer only) and
    ``prompt_ids``/``prompt_attention_mask`` (left-padded, for generation) when a prompter is set;
    lists ``keys``, ``phrases``, ``tagged_captions``, ``captions``, ``video_fnames``, ``skipped``.
    """

    def __init__(self, prompter=None, train: bool = False, seed: int = 0):
        self.prompter = prompter
        self.train = train
        self.seed = seed

    def __call__(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        skipped = [s for sample in samples for s in sample.get("skipped", [])]
        samples = [s for s in samples if "key" in s]
        batch: dict[str, Any] = {"skipped": skipped, "keys": [s["key"] for s in samples]}
        if not samples:
            return batch
        batch["global_frames"] = _pad_stack([s["global_frames"] for s in samples], dims=(0,))
        batch["grounding_frames"] = _pad_stack([s["grounding_frames"] for s in samples], dims=(0,))
        batch["boxes"] = _pad_stack([s["boxes"] for s in samples], dims=(0, 1))
        batch["present"] = _pad_stack([s["present"] for s in samples], dims=(0, 1), value=False)
        nf = [len(s["frame_indices"]) for s in samples]
        npz = [len(s["phrases"]) for s in samples]
        batch["frame_mask"] = torch.arange(max(nf)).unsqueeze(0) < torch.tensor(nf).unsqueeze(1)
        batch["phrase_mask"] = torch.arange(max(npz, default=0)).unsqueeze(0) < torch.tensor(npz).unsqueeze(1)
        batch["frame_indices"] = _pad_stack([s["frame_indices"] for s in samples], dims=(0,), value=-1)
        batch["caption_positions"] = torch.stack([s["caption_positions"] for s in samples])
        batch["size"] = torch.stack([s["size"] for s in samples])
        for name, key in (("phrases", "phrases"), ("tagged_captions", "tagged_caption"),
                          ("captions", "caption"), ("video_fnames", "video_fname")):
            batch[name] = [s[key] for s in samples]
        if self.prompter is not None:
            rng = None
            if self.train:  # question paraphrase drawn per batch, reproducibly (str hash is salted)
                rng = random.Random(zlib.crc32("|".join(batch["keys"]).encode()) ^ self.seed)
            batch.update(self.prompter.encode_training(batch["tagged_captions"], rng=rng))
            prompts = self.prompter.encode_prompts(len(samples))
            batch["prompt_ids"] = prompts["input_ids"]
            batch["prompt_attention_mask"] = prompts["attention_mask"]
        return batch
