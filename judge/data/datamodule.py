"""JudgeDataModule: the VC-Inspector judge's train / val / test data from JSONL files.

Split files are generated on first use when asked (:mod:`judge.data.corruption.generator`), read with
:mod:`judge.data.readers` and served by :class:`~judge.data.dataset.JudgeDataset`
with the model's :class:`~judge.model.prompter.JudgePrompter`, which the CLI links in from the
model (``data.prompter``). A human-rated VATEX-Eval set can replace the test split.
"""
from __future__ import annotations

from core.paths import DATA_DIR

import logging
from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from formats.records import read_records
from judge.data.corruption.data_types import sources_from_records
from judge.data.corruption.generator import build_judge_split, make_backend
from judge.data.dataset import JudgeCollate, JudgeDataset, shuffle_videos
from judge.data.readers import read_judge_jsonl, read_vatex_eval

log = logging.getLogger(__name__)
SPLITS = ("train", "val", "test")
# Deprecated key -> its name today (the spelling of GROVE's data modules).


class JudgeDataModule(L.LightningDataModule):
    """Judge training / evaluation data from JSONL files (generated on first use if asked).

    Args:
        train_annotations / val_annotations / test_annotations: judge JSONL files (None = no such
            split); the names GROVE's data modules give their splits' annotation files.
        video_root: folder the rows' ``video`` is relative to (default with ``synthetic``: its videos).
        vatex_eval: optional human-rated test set (project JSON or public VATEX-Eval folder); when
            given it replaces ``test_annotations`` for ``test``, with ``vatex_video_root`` / ``vatex_video_template``.
        generate_from: ``{split: annotation path}``; a missing split file is generated from those
            records with :mod:`judge.data.corruption.generator` (``generator`` holds its options:
            backend options, ``per_caption``, ``seed``, ``balance``, ``per_score``, ``balance_by_size``,
            ``corrupt``: objects, actions or both, the VC-Inspector paper's Table 6 ablation).
        synthetic: when set, the built-in synthetic dataset is generated first (options of
            ``datamodules.synthetic.generate_synthetic_dataset``) under ``synthetic_root``.
        num_frames: frames sampled per clip (32 in the paper).
        cache_frames: decoded clips kept in memory per worker (0 = off).
        max_eval_rows: use only the first rows of val / test.
        shuffle_eval_videos: pair every val / test caption with another row's clip (a fixed
            permutation). A control: a judge that really looks at the video loses its correlation,
            one that reads only the caption keeps it.
        on_corrupt: ``skip`` (count and report) or ``raise`` for a missing or undecodable video.
        explanations: train on the score line and the explanation (the paper), or on the score line
            alone (``false``: the paper's Table 7 ablation).
        prompter: the model's JudgePrompter; linked from the model by the CLI, not configured here.
    """

    def __init__(
        self,
        train_annotations: str | None = None,
        val_annotations: str | None = None,
        test_annotations: str | None = None,
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
        on_corrupt: str = "skip",
        explanations: bool = True,
        prompter: Any = None,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["prompter"])
        self.prompter = prompter
        self.datasets: dict[str, JudgeDataset] = {}

    def split_file(self, split: str) -> str | None:
        return getattr(self.hparams, f"{split}_annotations")

    def prepare_data(self) -> None:
        hp = self.hparams
        if hp.synthetic is not None:
            from datamodules.synthetic import generate_synthetic_dataset

            generate_synthetic_dataset(hp.synthetic_root, **hp.synthetic)
        for split, annotation_file in (hp.generate_from or {}).items():
            out = self.split_file(split)
            if split not in SPLITS or out is None:
                raise ValueError(f"generate_from['{split}']: no {split}_annotations to write; splits are {SPLITS}")
            if Path(out).exists():
                continue
            options = dict(hp.generator or {})
            run_keys = ("per_caption", "seed", "balance", "per_score", "balance_by_size", "corrupt")
            run = {k: options.pop(k) for k in run_keys if k in options}
            backend = make_backend(options.pop("backend", "rule"), **options)
            log.info("generating judge data %s from %s", out, annotation_file)
            build_judge_split(sources_from_records(read_records(annotation_file)), out, backend, **run)

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
        else:
            return None
        if split != "train" and hp.max_eval_rows is not None:
            rows = rows[: hp.max_eval_rows]
        if split != "train" and hp.shuffle_eval_videos:
            rows = shuffle_videos(rows, seed=0)
        return JudgeDataset(rows, root, self.prompter, num_frames=hp.num_frames, with_answer=True,
                            cache_frames=hp.cache_frames, on_error=hp.on_corrupt, explanations=hp.explanations)

    def _loader(self, split: str, train: bool) -> DataLoader:
        if split not in self.datasets:
            raise ValueError(f"JudgeDataModule has no '{split}' data (set {split}_annotations)")
        hp = self.hparams
        dataset = self.datasets[split]
        return DataLoader(dataset, batch_size=hp.batch_size if train else hp.eval_batch_size,
                          shuffle=train, num_workers=hp.num_workers,
                          collate_fn=JudgeCollate(self.prompter), persistent_workers=hp.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)
