"""A clip's decoded frames and its record -> GROVE's inputs, and samples -> a batch.

:func:`clip_sample` turns the frames of one clip (already decoded, at the record's grid positions
chosen) into a sample: the frames preprocessed for each encoder (:mod:`models.grove.image_processing`),
the boxes normalised ``(cx, cy, w, h)`` per (frame, phrase slot) with a presence mask, and the
positions the caption is generated from. :class:`GroundedCollate` pads samples into batch tensors
and tokenises the captions with the model's prompter. Training data, evaluation, ``cli.py predict``,
long-video mode and :class:`models.grove.processing.GroveProcessor` all build their inputs here.
"""
from __future__ import annotations

from core.box_ops import normalize_boxes, xyxy_to_cxcywh

import random
import zlib
from typing import Any, Sequence

import numpy as np
import torch

from formats.records import GroundedRecord, tagged_phrases
from models.grove.frame_sampling import centre_frames
from models.grove.image_processing import preprocess_global, preprocess_grounding


def evaluation_positions(num_annotated: int, num_frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Every annotated frame of a clip, and the ``num_frames`` segment centres the caption is generated from."""
    return np.arange(num_annotated), centre_frames(num_annotated, num_frames)


def clip_sample(record: GroundedRecord, frames: np.ndarray, positions: np.ndarray, caption_positions: np.ndarray,
                global_image_size: int = 336, global_resize: str = "squash", grounding_image_size: int = 512,
                grounding_resize: str = "float") -> dict[str, Any]:
    """One clip's model inputs and targets.

    Args:
        record: the clip (its grid, phrases, boxes, caption, frame size).
        frames: ``(len(positions), H, W, 3)`` uint8, the decoded frames at ``record.frame_indices[positions]``.
        positions: which of the record's annotated frames ``frames`` are.
        caption_positions: the T positions (into ``positions``) the caption is generated from.
    """
    source_frames = record.frame_indices[positions]
    if len(frames) != len(source_frames):
        raise ValueError(f"{record.key}: {len(frames)} frames given for {len(source_frames)} positions")
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
        "global_frames": preprocess_global(frames, global_image_size, global_resize),
        "grounding_frames": preprocess_grounding(frames, grounding_image_size, grounding_resize),
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
    lists ``keys``, ``phrases``, ``tagged_captions``, ``captions``, ``video_fnames``, ``skipped``; and
    ``video_frames``, ``video_first``, ``source_frames`` when the samples carry their decoded frames
    (numpy arrays, which the move to the model's device leaves where they are).
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
        for key in ("video_frames", "video_first", "source_frames"):  # decoded frames, kept as numpy arrays
            if all(key in s for s in samples):
                batch[key] = [s[key] for s in samples]
        if self.prompter is not None:
            rng = None
            if self.train:  # question paraphrase drawn per batch, reproducibly (str hash is salted)
                rng = random.Random(zlib.crc32("|".join(batch["keys"]).encode()) ^ self.seed)
            batch.update(self.prompter.encode_training(batch["tagged_captions"], rng=rng))
            prompts = self.prompter.encode_prompts(len(samples))
            batch["prompt_ids"] = prompts["input_ids"]
            batch["prompt_attention_mask"] = prompts["attention_mask"]
        return batch


__all__ = ["GroundedCollate", "clip_sample", "evaluation_positions"]
