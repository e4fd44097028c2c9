"""LightningDataModules for grounded clips: any annotation files + a video root, or the synthetic set."""
from __future__ import annotations

from core.paths import DATA_DIR

from pathlib import Path
from typing import Any

import lightning as L
from torch.utils.data import DataLoader

from datamodules.epoch_sampler import EpochDataLoader, EpochIndexSampler
from datamodules.grounded_dataset import ON_ERROR, GroundedClipDataset
from formats.hub_jsonl import is_jsonl, open_jsonl_records
from formats.records import read_records
from models.grove.clip_processing import GroundedCollate


def require_path(value: str | None, key: str, section: str, what: str) -> Path:
    """A data or checkpoint path from a config, or an error naming the key and the README section."""
    if value is None or not Path(value).exists():
        raise FileNotFoundError(
            f"{key}: {what} not found at {value!r}. See the README section '{section}' for how to "
            f"obtain it, then set {key} in your config or on the command line (--{key}=...)")
    return Path(value)


class GroundedVideoDataModule(L.LightningDataModule):
    """Grounded clips from annotation files (JSON / pickle / per-key pickle folder) and a video root.

    Args:
        train_annotations / val_annotations / test_annotations: annotation paths (None = no split).
        video_root: folder the records' ``video_fname`` is relative to (videos or frame folders).
        val_video_root / test_video_root: other roots for those splits (e.g. pre-train on
            HowToGround1M, validate on iGround); default ``video_root``.
        num_frames: T, frames per sample (and per inference window).
        global_image_size / global_resize: CLIP input size and resize mode
            (:mod:`models.grove.image_processing`; ``clip`` is the released GROVE's, exactly).
        grounding_image_size: SAM input size (longest side, padded square).
        grounding_resize: ``float`` (torch, whole clip at once) or ``sam`` (PIL on 8-bit frames,
            SAM's ResizeLongestSide as the released GROVE runs it).
        eval_all_frames: evaluation samples hold every annotated frame (for dense grounding).
        on_corrupt: ``skip`` (count and report) or ``raise`` for missing/corrupt videos.
        prompter: the model's text prompter; linked from the model by the CLI, not configured here.
        readme_section: which README section to cite when a path is missing.
        videos: unannotated videos to ``predict`` on instead of the test split: a file, a folder
            or a glob (see :mod:`datamodules.video_folder`); any size, frame rate and length.
        video_clip_seconds / video_clip_stride_seconds: how ``videos`` are cut into clips (8 s,
            tiled, by default; None = each whole video is one clip).
    """

    def __init__(
        self,
        train_annotations: str | None = None,
        val_annotations: str | None = None,
        test_annotations: str | None = None,
        video_root: str | None = None,
        val_video_root: str | None = None,
        test_video_root: str | None = None,
        num_frames: int = 8,
        batch_size: int = 8,
        eval_batch_size: int | None = None,
        num_workers: int = 2,
        global_image_size: int = 336,
        global_resize: str = "squash",
        grounding_image_size: int = 512,
        grounding_resize: str = "float",
        eval_all_frames: bool = True,
        max_redraws: int = 10,
        seed: int = 0,
        on_corrupt: str = "skip",
        prompter: Any = None,
        readme_section: str = "Datasets",
        videos: str | None = None,
        video_clip_seconds: float | None = 8.0,
        video_clip_stride_seconds: float | None = None,
    ):
        super().__init__()
        if on_corrupt not in ON_ERROR:
            raise ValueError(f"data.on_corrupt must be one of {ON_ERROR}, got {on_corrupt!r}")
        self.save_hyperparameters(ignore=["prompter", "readme_section"])
        self.prompter = prompter
        self.readme_section = readme_section
        self.datasets: dict[str, GroundedClipDataset] = {}

    # paths are properties so that subclasses (synthetic data) can fill them in prepare_data
    def annotation_path(self, split: str) -> str | None:
        return getattr(self.hparams, f"{split}_annotations")

    def resolved_video_root(self, split: str) -> str | None:
        return getattr(self.hparams, f"{split}_video_root", None) or self.hparams.video_root

    # The dataset class and how a split's records are read: subclasses for other public layouts
    # (VidSTG, ActivityNet-Entities) or lazy reading (HowToGround1M) replace these two.
    dataset_class = GroundedClipDataset
    collate_class = GroundedCollate

    def load_records(self, split: str, path: Path):
        """The records of one split: a list, or any lazy ``Sequence`` of GroundedRecord (a hub JSONL
        training file is read lazily through its line index)."""
        if split == "train" and is_jsonl(path):
            return open_jsonl_records(path)
        return read_records(path)

    def make_dataset(self, split: str) -> GroundedClipDataset:
        hp = self.hparams
        ann = require_path(self.annotation_path(split), f"data.init_args.{split}_annotations",
                           self.readme_section, f"{split} annotations")
        key = "video_root" if not getattr(hp, f"{split}_video_root", None) else f"{split}_video_root"
        root = require_path(self.resolved_video_root(split), f"data.init_args.{key}", self.readme_section, "video root")
        records = self.load_records(split, ann)
        if len(records) == 0:
            raise ValueError(f"data.init_args.{split}_annotations: {ann} holds no clips, so the {split} split is "
                             "empty; point the key at a file with annotations (or leave the key unset for no "
                             f"{split} split)")
        dataset = self.dataset_class(
            records, root, num_frames=hp.num_frames, train=split == "train",
            all_frames=hp.eval_all_frames, seed=hp.seed, max_redraws=hp.max_redraws,
            global_image_size=hp.global_image_size, global_resize=hp.global_resize,
            grounding_image_size=hp.grounding_image_size, grounding_resize=hp.get("grounding_resize", "float"),
            on_error=hp.on_corrupt,
        )
        # a sample spread over the split (records read lazily, one file each, get a smaller one)
        checked, missing = dataset.missing_videos(1000 if isinstance(records, list) else 100)
        if checked and len(missing) == checked:  # some missing: skipped and counted while running
            raise FileNotFoundError(
                f"data.init_args.{key}: none of the {split} split's videos is under {root} ({checked} of its "
                f"{len(records)} clips checked, e.g. {missing[0]!r} from {ann}). Is {key} the folder the "
                f"annotations' video names are relative to? See the README section '{self.readme_section}'")
        return dataset

    def setup(self, stage: str | None = None) -> None:
        if stage == "predict" and self.hparams.videos:
            if "predict" not in self.datasets:
                self.datasets["predict"] = self.make_video_dataset()
            return
        splits = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("test",)}
        for split in splits.get(stage, ("train", "val", "test")):
            if split not in self.datasets and (split == "train" or self.annotation_path(split) is not None):
                self.datasets[split] = self.make_dataset(split)

    def _loader(self, split: str, train: bool) -> DataLoader:
        hp = self.hparams
        dataset = self.datasets[split]
        batch_size = hp.batch_size if train else (hp.eval_batch_size or hp.batch_size)
        return EpochDataLoader(
            dataset,
            batch_size=batch_size,
            sampler=EpochIndexSampler(len(dataset), shuffle=train, seed=hp.seed, pad=train),
            num_workers=hp.num_workers,
            collate_fn=self.collate_class(self.prompter, train=train, seed=hp.seed),
            persistent_workers=hp.num_workers > 0,
            drop_last=False,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", train=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", train=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("predict" if "predict" in self.datasets else "test", train=False)

    def make_video_dataset(self):
        from datamodules.video_folder import VideoFolderDataset

        hp = self.hparams
        return VideoFolderDataset(
            hp.videos, clip_seconds=hp.video_clip_seconds, stride_seconds=hp.video_clip_stride_seconds,
            on_error=hp.on_corrupt, num_frames=hp.num_frames, global_image_size=hp.global_image_size,
            global_resize=hp.global_resize, grounding_image_size=hp.grounding_image_size,
            grounding_resize=hp.get("grounding_resize", "float"),
        )


class SyntheticGroundedDataModule(GroundedVideoDataModule):
    """The built-in synthetic dataset: generated into ``root`` on first use, reused afterwards."""

    def __init__(
        self,
        root: str = str(DATA_DIR / "synthetic"),
        num_train: int = 2000,
        num_val: int = 200,
        num_test: int = 200,
        synthetic_seed: int = 0,
        generation_workers: int = 2,
        frame_size: int = 128,
        duration_s: float = 8.0,
        fps: float = 25.0,
        **kwargs,
    ):
        super().__init__(readme_section="Synthetic data", **kwargs)
        self.root = Path(root)

    def prepare_data(self) -> None:
        from datamodules.synthetic import generate_synthetic_dataset

        hp = self.hparams
        if hp.videos and self.trainer is not None and self.trainer.predicting:
            return  # predicting on the user's videos needs no synthetic clips
        generate_synthetic_dataset(
            self.root, num_train=hp.num_train, num_val=hp.num_val, num_test=hp.num_test,
            seed=hp.synthetic_seed, workers=hp.generation_workers, frame_size=hp.frame_size,
            duration_s=hp.duration_s, fps=hp.fps,
        )

    def annotation_path(self, split: str) -> str | None:
        """The generated ``annotations/<split>.json``, unless ``<split>_annotations`` names another
        file of the same clips (e.g. written in the hub's JSONL layout)."""
        return getattr(self.hparams, f"{split}_annotations") or str(self.root / "annotations" / f"{split}.json")

    def resolved_video_root(self, split: str) -> str | None:
        return str(self.root / "videos")
