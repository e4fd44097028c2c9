"""Judge rows -> encoded samples: the clip's frames (segment centres) and the prompt of the model's prompter.

Frames are sampled uniformly over the clip (the centre of each of ``num_frames`` equal segments:
the VC-Inspector paper samples 32 frames per video). A missing or undecodable video gives a
``skipped`` entry (key, reason) that the collate function passes on, so that a broken file in a
large dataset is counted and reported instead of ending the run.
"""
from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from formats.video_files import open_video
from formats.video_reader import VideoDecodeError
from judge.data.targets import substituted_spans
from judge.model.prompt_format import format_judge_answer
from models.grove.frame_sampling import centre_frames

CLIP_FIELDS = ("video", "fps", "start_frame", "end_frame", "start_s", "end_s")


def uniform_frame_indices(start: int, end: int, num_frames: int) -> np.ndarray:
    """Centre frame of each of ``num_frames`` equal segments of ``[start, end]`` (inclusive)."""
    if end < start:
        raise ValueError(f"empty clip [{start}, {end}]")
    return int(start) + centre_frames(int(end) - int(start) + 1, num_frames)


def shuffle_videos(rows: Sequence[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """The rows with their clips (video and clip range) permuted among them, captions kept."""
    order = np.random.default_rng(seed).permutation(len(rows))
    return [{**row, **{k: rows[j].get(k) for k in CLIP_FIELDS}} for row, j in zip(rows, order)]


class JudgeDataset(Dataset):
    """Rows -> encoded samples (frames decoded here; a missing or broken video is skipped and reported)."""

    def __init__(self, rows: Sequence[dict[str, Any]], video_root: str | Path, prompter: Any, num_frames: int = 32,
                 with_answer: bool = True, cache_frames: int = 0, on_error: str = "skip", explanations: bool = True):
        if on_error not in ("skip", "raise"):
            raise ValueError(f"on_error must be 'skip' or 'raise', got {on_error!r}")
        self.rows = list(rows)
        self.video_root = Path(video_root)
        self.prompter = prompter
        self.num_frames = num_frames
        self.with_answer = with_answer
        self.cache_frames = cache_frames
        self.on_error = on_error
        self.explanations = explanations
        self._cache: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self.rows)

    def clip_frames(self, row: dict[str, Any]) -> tuple[np.ndarray, float | None]:
        """The row's frames ``(T, H, W, 3)`` uint8 and their sampling rate (frames per second)."""
        cache_key = (row["video"], row.get("start_frame"), row.get("end_frame"), row.get("start_s"), row.get("end_s"))
        if cache_key in self._cache:
            self._cache.move_to_end(cache_key)
            return self._cache[cache_key]
        with open_video(self.video_root, row["video"]) as video:
            fps = float(video.fps) if video.fps else None
            last = video.num_frames - 1
            if row.get("start_frame") is not None:
                start, end = int(row["start_frame"]), min(int(row["end_frame"]), last)
            elif row.get("start_s") is not None and fps:
                start = min(int(round(row["start_s"] * fps)), last)
                end = max(start, min(int(round(row["end_s"] * fps)) - 1, last))
            else:
                start, end = 0, last
            frames = video.read_frames(uniform_frame_indices(start, end, self.num_frames).tolist())
        sampled_fps = self.num_frames * fps / (end - start + 1) if fps else None
        if self.cache_frames:
            self._cache[cache_key] = (frames, sampled_fps)
            while len(self._cache) > self.cache_frames:
                self._cache.popitem(last=False)
        return frames, sampled_fps

    def __getitem__(self, index: int) -> dict[str, Any]:
        row = self.rows[index]
        try:
            frames, sampled_fps = self.clip_frames(row)
        except (VideoDecodeError, FileNotFoundError, OSError) as err:
            if self.on_error == "raise":
                raise
            return {"skipped": (row["key"], f"{type(err).__name__}: {err}")}
        answer = None
        if self.with_answer and row.get("score") is not None:
            answer = format_judge_answer(row["score"], row["explanation"] if self.explanations else None)
        # which caption words the corruption changed, when the row records it (the judge's error head)
        spans = substituted_spans(row) if self.with_answer else None
        sample = self.prompter.encode(frames, row["caption"], answer=answer, sampled_fps=sampled_fps,
                                      error_spans=spans)
        human = row.get("human_scores")
        sample.update(key=row["key"], caption=row["caption"],
                      score=float(row["score"]) if row.get("score") is not None else float("nan"),
                      human_score=float(np.mean(human)) if human else float("nan"))
        return sample


class JudgeCollate:
    """Model inputs from the prompter plus ``keys``, ``captions``, ``scores``/``human_scores`` (NaN = none)."""

    def __init__(self, prompter: Any):
        self.prompter = prompter

    def __call__(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        skipped = [s["skipped"] for s in samples if "skipped" in s]
        samples = [s for s in samples if "skipped" not in s]
        batch: dict[str, Any] = {"skipped": skipped, "keys": [s["key"] for s in samples]}
        if not samples:
            return batch
        if any("answer_ids" in s for s in samples) and not all("answer_ids" in s for s in samples):
            samples = [{k: v for k, v in s.items() if k != "answer_ids"} for s in samples]
        batch.update(self.prompter.collate(samples))
        batch["captions"] = [s["caption"] for s in samples]
        batch["scores"] = torch.tensor([s["score"] for s in samples], dtype=torch.float64)
        batch["human_scores"] = torch.tensor([s["human_score"] for s in samples], dtype=torch.float64)
        return batch
