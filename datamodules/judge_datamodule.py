"""Data for the VC-Inspector judge: corruption JSONL files, ActivityNet Captions, VATEX-Eval ratings.

A judge sample is (video clip, caption) with, for training, the generated score and explanation
(:mod:`datamodules.judge_data`), and for human-correlation tests the annotators' ratings. Frames
are sampled uniformly over the clip (the centre of each of ``num_frames`` equal segments: the
paper samples 32 frames per video) and handed with the caption to the model's
:class:`models.judge.JudgePrompter`, which the CLI links in from the model (``data.prompter``).

Row format (one JSON object per line; what :func:`datamodules.judge_data.write_jsonl` writes):
``key``, ``video`` (relative to ``video_root``), ``caption``; optional ``score`` (1..5) and
``explanation`` (training targets), ``human_scores`` (list of ratings), and the clip as
``start_frame``/``end_frame`` (source frames, inclusive) or ``start_s``/``end_s`` (seconds);
without either the whole video is used.
"""
from __future__ import annotations

import json
import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any, Sequence

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from core.paths import DATA_DIR
from datamodules.judge_data import CaptionSource, substituted_spans

log = logging.getLogger(__name__)
SPLITS = ("train", "val", "test")


class JudgeDataError(ValueError):
    """A judge data file is malformed; the message names the file, the row and the field."""


# ----------------------------------------------------------------------------- readers

def read_judge_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a judge JSONL file, validated (errors name file, line and field)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"judge data file {path} does not exist")
    rows = []
    with path.open() as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise JudgeDataError(f"{path}, line {number}: not valid JSON ({err})") from None
            rows.append(validate_row(row, f"{path}, line {number}"))
    return rows


def validate_row(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise JudgeDataError(f"{where}: expected a JSON object, got {type(row).__name__}")
    for name in ("key", "video", "caption"):
        if not isinstance(row.get(name), str) or not row[name]:
            raise JudgeDataError(f"{where}: field '{name}' must be a non-empty string, got {row.get(name)!r}")
    score = row.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5):
        raise JudgeDataError(f"{where} ('{row['key']}'): field 'score' must be an integer 1..5, got {score!r}")
    if score is not None and not isinstance(row.get("explanation"), str):
        raise JudgeDataError(f"{where} ('{row['key']}'): a row with a 'score' needs a string 'explanation'")
    human = row.get("human_scores")
    if human is not None and (not isinstance(human, list) or not human
                              or not all(isinstance(h, (int, float)) and not isinstance(h, bool) for h in human)):
        raise JudgeDataError(f"{where} ('{row['key']}'): field 'human_scores' must be a non-empty list of numbers")
    for a, b in (("start_frame", "end_frame"), ("start_s", "end_s")):
        lo, hi = row.get(a), row.get(b)
        if (lo is None) != (hi is None):
            raise JudgeDataError(f"{where} ('{row['key']}'): fields '{a}' and '{b}' must be given together")
        if lo is not None and not (0 <= lo <= hi):
            raise JudgeDataError(f"{where} ('{row['key']}'): clip {a}={lo}, {b}={hi} is not a valid range")
    return row


def read_activitynet_captions(path: str | Path, video_template: str = "{video_id}.mp4") -> list[CaptionSource]:
    """ActivityNet Captions (``{video_id: {duration, timestamps: [[s, e], ...], sentences: [...]}}``).

    One source per (video, sentence), keyed ``{video_id}_{k}``; timestamps are clipped to the
    video's duration (the public files overshoot it slightly at times).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise JudgeDataError(f"{path}: cannot read ActivityNet Captions JSON ({err})") from None
    if not isinstance(data, dict):
        raise JudgeDataError(f"{path}: expected an object keyed by video id, got {type(data).__name__}")
    sources = []
    for video_id, entry in data.items():
        where = f"{path}, video '{video_id}'"
        if not isinstance(entry, dict):
            raise JudgeDataError(f"{where}: expected an object, got {type(entry).__name__}")
        missing = [k for k in ("duration", "timestamps", "sentences") if k not in entry]
        if missing:
            raise JudgeDataError(f"{where}: missing field(s) {', '.join(missing)}")
        duration, stamps, sentences = entry["duration"], entry["timestamps"], entry["sentences"]
        if not isinstance(duration, (int, float)) or duration <= 0:
            raise JudgeDataError(f"{where}: field 'duration' must be a positive number, got {duration!r}")
        if not isinstance(stamps, list) or not isinstance(sentences, list) or len(stamps) != len(sentences):
            raise JudgeDataError(f"{where}: 'timestamps' and 'sentences' must be lists of equal length")
        for k, (stamp, sentence) in enumerate(zip(stamps, sentences)):
            if not (isinstance(stamp, (list, tuple)) and len(stamp) == 2 and all(isinstance(t, (int, float)) for t in stamp)):
                raise JudgeDataError(f"{where}: timestamps[{k}] must be [start, end] in seconds, got {stamp!r}")
            start, end = max(0.0, float(stamp[0])), min(float(duration), float(stamp[1]))
            if end <= start:
                raise JudgeDataError(f"{where}: timestamps[{k}] = {stamp} is empty within duration {duration}")
            if not isinstance(sentence, str) or not sentence.strip():
                raise JudgeDataError(f"{where}: sentences[{k}] must be a non-empty string")
            sources.append(CaptionSource(key=f"{video_id}_{k}", video=video_template.format(video_id=video_id),
                                         caption=sentence.strip(), start_s=start, end_s=end))
    return sources


def read_vatex_eval(path: str | Path, video_template: str = "{video_id}.mp4") -> list[dict[str, Any]]:
    """Human-rated candidate captions as judge rows (``human_scores`` = every annotator's rating).

    Accepts the project's JSON, ``[{"video_id", "caption", "human_scores": [...]}, ...]``, or the
    public VATEX-Eval folder (``candidates_list.pkl``, ``human_scores.pkl`` with the annotators
    stacked as 3 x N, ``video_ids.pkl``), read through the restricted unpickler.
    """
    path = Path(path)
    if path.is_dir():
        from datamodules.safe_pickle import safe_load

        files = {n: path / f"{n}.pkl" for n in ("candidates_list", "human_scores", "video_ids")}
        missing = [str(p) for p in files.values() if not p.exists()]
        if missing:
            raise FileNotFoundError(f"VATEX-Eval folder {path} lacks {', '.join(missing)}")
        captions = [str(c) for c in np.asarray(safe_load(files["candidates_list"]), dtype=object).reshape(-1)]
        video_ids = [str(v) for v in np.asarray(safe_load(files["video_ids"]), dtype=object).reshape(-1)]
        scores = np.asarray(safe_load(files["human_scores"]), dtype=np.float64).reshape(-1)
        if len(captions) != len(video_ids) or scores.size % max(1, len(captions)):
            raise JudgeDataError(f"{path}: {len(captions)} candidates, {len(video_ids)} video ids and "
                                 f"{scores.size} human scores do not line up")
        ratings = scores.reshape(-1, len(captions)).T  # annotators are stacked: (A, N) -> (N, A)
        entries = [{"video_id": v, "caption": c, "human_scores": r.tolist()}
                   for v, c, r in zip(video_ids, captions, ratings)]
        source = str(path)
    else:
        try:
            entries = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise JudgeDataError(f"{path}: cannot read VATEX-Eval JSON ({err})") from None
        if not isinstance(entries, list):
            raise JudgeDataError(f"{path}: expected a list of {{video_id, caption, human_scores}} objects")
        source = str(path)
    rows = []
    for i, entry in enumerate(entries):
        where = f"{source}, entry {i}"
        if not isinstance(entry, dict) or "video_id" not in entry:
            raise JudgeDataError(f"{where}: expected an object with 'video_id', 'caption', 'human_scores'")
        row = {"key": f"{entry['video_id']}#{i}", "video": video_template.format(video_id=entry["video_id"]),
               "caption": entry.get("caption"), "human_scores": entry.get("human_scores")}
        if row["human_scores"] is None:
            raise JudgeDataError(f"{where}: missing field 'human_scores'")
        rows.append(validate_row(row, where))
    return rows


# ----------------------------------------------------------------------------- dataset

def uniform_frame_indices(start: int, end: int, num_frames: int) -> np.ndarray:
    """Centre frame of each of ``num_frames`` equal segments of ``[start, end]`` (inclusive)."""
    if end < start:
        raise ValueError(f"empty clip [{start}, {end}]")
    edges = np.linspace(start, end + 1, num_frames + 1)
    return np.minimum(np.floor((edges[:-1] + edges[1:]) / 2).astype(np.int64), end)


def describe_rows(rows: Sequence[dict[str, Any]], ratio: float, where: str = "rows") -> list[dict[str, Any]]:
    """``round(ratio * len(rows))`` video-description samples: each clip's reference caption as the answer.

    A warm-up for a randomly initialised toy judge, standing in for the captioning a real
    Qwen2.5-VL learnt in pre-training: judging a caption only becomes learnable once the model
    links what it sees to words, and a judge row never asks for that alone (neither the video nor
    the caption predicts the score by itself). Clips are taken in order of first appearance,
    cycling, from the rows' ``source_key`` / ``original_caption`` (what the generator writes).
    """
    if ratio < 0:
        raise ValueError(f"describe_ratio must be >= 0, got {ratio}")
    clips: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(rows):
        if not isinstance(row.get("original_caption"), str) or not row["original_caption"]:
            raise JudgeDataError(f"{where}, row {number} ('{row.get('key')}'): describe_ratio needs the reference "
                                 "caption in field 'original_caption' (written by datamodules.judge_data)")
        clips.setdefault(row.get("source_key", row["video"]), row)
    count = int(round(ratio * len(rows)))
    if count == 0 or not clips:
        return []
    clip_fields = ("video", "fps", "start_frame", "end_frame", "start_s", "end_s")
    order = list(clips.values())
    return [{"key": f"{order[i % len(order)].get('source_key', order[i % len(order)]['video'])}#describe{i // len(order)}",
             "task": "describe", "caption": order[i % len(order)]["original_caption"],
             **{k: order[i % len(order)].get(k) for k in clip_fields}} for i in range(count)]


def shuffle_videos(rows: Sequence[dict[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """The rows with their clips (video and clip range) permuted among them, captions kept."""
    clip_fields = ("video", "fps", "start_frame", "end_frame", "start_s", "end_s")
    order = np.random.default_rng(seed).permutation(len(rows))
    return [{**row, **{k: rows[j].get(k) for k in clip_fields}} for row, j in zip(rows, order)]


class DescribeFirstSampler(Sampler[int]):
    """Epoch 0 serves the description rows (shuffled) before the judge rows (shuffled); later epochs
    only the judge rows: the warm-up ends before judging is learnt, not mixed into it.

    The phase follows :meth:`set_epoch` (Lightning calls it before every epoch), never the number
    of ``iter()`` calls, which a length or sanity check can trigger."""

    def __init__(self, rows: Sequence[dict[str, Any]], seed: int = 0):
        self.describe = [i for i, r in enumerate(rows) if r.get("task") == "describe"]
        self.judge = [i for i, r in enumerate(rows) if r.get("task") != "describe"]
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        order = ([int(i) for i in rng.permutation(self.describe)] if self.epoch == 0 else []) + \
                [int(i) for i in rng.permutation(self.judge)]
        return iter(order)

    def __len__(self) -> int:
        return (len(self.describe) if self.epoch == 0 else 0) + len(self.judge)


class JudgeDataset(Dataset):
    """Rows -> encoded samples (frames decoded here; a missing or broken video is skipped and reported)."""

    def __init__(self, rows: Sequence[dict[str, Any]], video_root: str | Path, prompter: Any, num_frames: int = 32,
                 with_answer: bool = True, cache_frames: int = 0, on_error: str = "skip"):
        if on_error not in ("skip", "raise"):
            raise ValueError(f"on_error must be 'skip' or 'raise', got {on_error!r}")
        self.rows = list(rows)
        self.video_root = Path(video_root)
        self.prompter = prompter
        self.num_frames = num_frames
        self.with_answer = with_answer
        self.cache_frames = cache_frames
        self.on_error = on_error
        self._cache: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self.rows)

    def clip_frames(self, row: dict[str, Any]) -> tuple[np.ndarray, float | None]:
        """The row's frames ``(T, H, W, 3)`` uint8 and their sampling rate (frames per second)."""
        cache_key = (row["video"], row.get("start_frame"), row.get("end_frame"), row.get("start_s"), row.get("end_s"))
        if cache_key in self._cache:
            self._cache.move_to_end(cache_key)
            return self._cache[cache_key]
        from datamodules.video import open_video

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
        from datamodules.video import VideoDecodeError
        from models.judge import format_judge_answer

        row = self.rows[index]
        try:
            frames, sampled_fps = self.clip_frames(row)
        except (VideoDecodeError, FileNotFoundError, OSError) as err:
            if self.on_error == "raise":
                raise
            return {"skipped": (row["key"], f"{type(err).__name__}: {err}")}
        answer = None
        if row.get("task") == "describe":  # warm-up: the clip's reference caption is the answer
            sample = self.prompter.encode(frames, row["caption"], answer=row["caption"], sampled_fps=sampled_fps,
                                          task="describe")
            sample.update(key=row["key"], caption=row["caption"], score=float("nan"), human_score=float("nan"))
            return sample
        if self.with_answer and row.get("score") is not None:
            answer = format_judge_answer(row["score"], row["explanation"])
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


# ----------------------------------------------------------------------------- datamodule

class JudgeDataModule(L.LightningDataModule):
    """Judge training / evaluation data from JSONL files (generated on first use if asked).

    Args:
        train_file / val_file / test_file: judge JSONL files (None = no such split).
        video_root: folder the rows' ``video`` is relative to (default with ``synthetic``: its videos).
        vatex_eval: optional human-rated test set (project JSON or public VATEX-Eval folder); when
            given it replaces ``test_file`` for ``test``, with ``vatex_video_root`` / ``vatex_video_template``.
        generate_from: ``{split: annotation path}``; a missing split file is generated from those
            records with :mod:`datamodules.judge_data` (``generator`` holds its options:
            backend options, ``per_caption``, ``seed``, ``balance``, ``per_score``, ``balance_by_size``).
        synthetic: when set, the built-in synthetic dataset is generated first (options of
            ``datamodules.synthetic.generate_synthetic_dataset``) under ``synthetic_root``.
        num_frames: frames sampled per clip (32 in the paper).
        cache_frames: decoded clips kept in memory per worker (0 = off).
        max_eval_rows: use only the first rows of val / test.
        shuffle_eval_videos: pair every val / test caption with another row's clip (a fixed
            permutation). A control: a judge that really looks at the video loses its correlation,
            one that reads only the caption keeps it.
        describe_ratio: add this many video-description samples per training row (see
            :func:`describe_rows`), served before the judge rows in the first epoch
            (:class:`DescribeFirstSampler`): a warm-up for a randomly initialised toy judge only;
            0 (the paper's recipe) for a pre-trained Qwen2.5-VL.
        prompter: the model's JudgePrompter; linked from the model by the CLI, not configured here.
    """

    def __init__(
        self,
        train_file: str | None = None,
        val_file: str | None = None,
        test_file: str | None = None,
        video_root: str | None = None,
        vatex_eval: str | None = None,
        vatex_video_root: str | None = None,
        vatex_video_template: str = "{video_id}.mp4",
        generate_from: dict[str, str] | None = None,
        generator: dict[str, Any] | None = None,
        synthetic: dict[str, Any] | None = None,
        synthetic_root: str = str(DATA_DIR / "synthetic"),
        num_frames: int = 32,
        batch_size: int = 4,
        eval_batch_size: int = 8,
        num_workers: int = 2,
        cache_frames: int = 0,
        max_eval_rows: int | None = None,
        shuffle_eval_videos: bool = False,
        describe_ratio: float = 0.0,
        on_error: str = "skip",
        prompter: Any = None,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["prompter"])
        self.prompter = prompter
        self.datasets: dict[str, JudgeDataset] = {}

    def split_file(self, split: str) -> str | None:
        return getattr(self.hparams, f"{split}_file")

    def prepare_data(self) -> None:
        hp = self.hparams
        if hp.synthetic is not None:
            from datamodules.synthetic import generate_synthetic_dataset

            generate_synthetic_dataset(hp.synthetic_root, **hp.synthetic)
        for split, annotations in (hp.generate_from or {}).items():
            out = self.split_file(split)
            if split not in SPLITS or out is None:
                raise ValueError(f"generate_from['{split}']: no {split}_file to write; splits are {SPLITS}")
            if Path(out).exists():
                continue
            from datamodules.judge_data import build_judge_split, make_backend, sources_from_records
            from datamodules.records import read_records

            options = dict(hp.generator or {})
            run = {k: options.pop(k) for k in ("per_caption", "seed", "balance", "per_score", "balance_by_size") if k in options}
            backend = make_backend(options.pop("backend", "rule"), **options)
            log.info("generating judge data %s from %s", out, annotations)
            build_judge_split(sources_from_records(read_records(annotations)), out, backend, **run)

    def setup(self, stage: str | None = None) -> None:
        if self.prompter is None:
            raise ValueError("JudgeDataModule needs the model's prompter (the CLI links it from the model; "
                             "in code pass prompter=judge_module.prompter)")
        splits = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("test",)}
        for split in splits.get(stage, SPLITS):
            if split in self.datasets:
                continue
            dataset = self.make_dataset(split)
            if dataset is not None:
                self.datasets[split] = dataset

    def resolved_video_root(self) -> str:
        hp = self.hparams
        if hp.video_root is not None:
            return hp.video_root
        if hp.synthetic is not None:
            return str(Path(hp.synthetic_root) / "videos")
        raise ValueError("JudgeDataModule needs video_root (or synthetic, whose videos are then used)")

    def make_dataset(self, split: str) -> JudgeDataset | None:
        hp = self.hparams
        root = self.resolved_video_root()
        if split == "test" and hp.vatex_eval is not None:
            rows = read_vatex_eval(hp.vatex_eval, video_template=hp.vatex_video_template)
            root = hp.vatex_video_root or root
        elif self.split_file(split) is not None:
            rows = read_judge_jsonl(self.split_file(split))
            if split == "train" and hp.describe_ratio:
                rows = rows + describe_rows(rows, hp.describe_ratio, where=self.split_file(split))
        else:
            return None
        if split != "train" and hp.max_eval_rows is not None:
            rows = rows[: hp.max_eval_rows]
        if split != "train" and hp.shuffle_eval_videos:
            rows = shuffle_videos(rows, seed=0)
        return JudgeDataset(rows, root, self.prompter, num_frames=hp.num_frames, with_answer=True,
                            cache_frames=hp.cache_frames, on_error=hp.on_error)

    def _loader(self, split: str, train: bool) -> DataLoader:
        if split not in self.datasets:
            raise ValueError(f"JudgeDataModule has no '{split}' data (set {split}_file)")
        hp = self.hparams
        dataset = self.datasets[split]
        sampler = DescribeFirstSampler(dataset.rows, seed=0) if train and hp.describe_ratio else None
        return DataLoader(dataset, batch_size=hp.batch_size if train else hp.eval_batch_size,
                          shuffle=train and sampler is None, sampler=sampler, num_workers=hp.num_workers,
                          collate_fn=JudgeCollate(self.prompter), persistent_workers=hp.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)
