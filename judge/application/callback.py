"""VCInspectorScore: rate the captions a captioning model generates, with a trained VC-Inspector judge.

A reference-free check of caption quality during GROVE's validation and test (VC-Inspector paper): every
generated caption is scored 1-5 by the judge from the clip's frames; the callback logs the mean
parsed score as ``{stage}/vc_inspector`` and the share of answers whose score line could not be
read as ``{stage}/vc_inspector_unparsable`` (those are never counted as a score).

What it reads, per validation / test batch:

* from ``outputs`` (the module's ``validation_step`` / ``test_step`` return value): ``keys`` and
  ``captions`` (plain generated captions, aligned), or GROVE's ``predictions``
  (``{key: {"caption": ...}}``) from which both are taken in batch order; optionally ``frames``
  (uint8 ``(B, T, H, W, 3)``) to rate on exactly those frames;
* otherwise the frames come from the batch: ``global_frames (B, F, 3, H, W)`` normalised with
  ``frames_mean`` / ``frames_std`` (CLIP's by default), restricted to ``caption_positions (B, T)``
  when the batch has them (the frames the caption was generated from); or, with
  ``frames_source="video"``, ``num_frames`` frames decoded from ``video_root`` / ``video_fnames``
  uniformly over each clip's ``frame_indices`` (-1 = padding).

The judge comes from a JudgeModule checkpoint (``judge_checkpoint``) or from a base model folder
plus a saved LoRA adapter (``model_path`` / ``adapter_path`` and other ``judge`` options). It is
kept outside the LightningModule (not trained, not checkpointed) and moved to its device.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback

from models.grove.image_processing import CLIP_MEAN, CLIP_STD

FRAME_SOURCES = ("auto", "batch", "video")


class VCInspectorScore(Callback):
    def __init__(self, judge_checkpoint: str | None = None, model_path: str | None = None,
                 adapter_path: str | None = None, judge: dict | None = None, frames_source: str = "auto",
                 video_root: str | None = None, num_frames: int = 32, max_new_tokens: int = 64,
                 frames_mean: Sequence[float] = CLIP_MEAN, frames_std: Sequence[float] = CLIP_STD):
        if frames_source not in FRAME_SOURCES:
            raise ValueError(f"frames_source must be one of {FRAME_SOURCES}, got {frames_source!r}")
        if frames_source == "video" and video_root is None:
            raise ValueError("frames_source='video' needs video_root")
        if judge_checkpoint is None and model_path is None and not (judge or {}).get("tiny"):
            raise ValueError("VCInspectorScore needs judge_checkpoint, or model_path (+ adapter_path), "
                             "or judge={'tiny': {...}} for a toy judge")
        self.judge_checkpoint = judge_checkpoint
        self.judge_kwargs = dict(judge or {}, model_path=model_path, adapter_path=adapter_path)
        self.frames_source = frames_source
        self.video_root = video_root
        self.num_frames = num_frames
        self.max_new_tokens = max_new_tokens
        self.mean = torch.tensor(frames_mean, dtype=torch.float32).view(1, 1, 3, 1, 1)
        self.std = torch.tensor(frames_std, dtype=torch.float32).view(1, 1, 3, 1, 1)
        self.judge = None
        self._totals: dict[str, torch.Tensor] = {}

    # ------------------------------------------------------------------ judge
    def load_judge(self, device: torch.device):
        if self.judge is None:
            if self.judge_checkpoint is not None:
                from judge.application.loading import load_judge

                self.judge = load_judge(self.judge_checkpoint).judge
            else:
                from judge.model.vc_inspector import VCInspectorJudge

                self.judge = VCInspectorJudge(**self.judge_kwargs)
            self.judge.requires_grad_(False).eval()
        return self.judge.to(device)

    # ------------------------------------------------------------------ inputs
    @staticmethod
    def captions_of(outputs: Any) -> tuple[list[str], list[str]]:
        if isinstance(outputs, dict) and "keys" in outputs and "captions" in outputs:
            keys, captions = list(outputs["keys"]), list(outputs["captions"])
        elif isinstance(outputs, dict) and isinstance(outputs.get("predictions"), dict):
            keys = list(outputs["predictions"])
            captions = [outputs["predictions"][k]["caption"] for k in keys]
        else:
            got = sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__
            raise ValueError("VCInspectorScore expects the validation/test step to return a dict with 'keys' and "
                             f"'captions' (or GROVE's 'predictions'), got {got}")
        if len(keys) != len(captions):
            raise ValueError(f"VCInspectorScore: {len(keys)} keys but {len(captions)} captions in the step output")
        return keys, captions

    def frames_of(self, outputs: dict, batch: dict, keys: list[str]) -> tuple[list[np.ndarray], list[float | None]]:
        """uint8 ``(T, H, W, 3)`` frames for each key (in ``keys`` order) and their sampling rate."""
        rows = [batch["keys"].index(k) for k in keys] if "keys" in batch else list(range(len(keys)))
        if "frames" in outputs:
            frames = torch.as_tensor(outputs["frames"])
            return [frames[i].cpu().numpy() for i in range(len(keys))], [None] * len(keys)
        use_video = self.frames_source == "video" or (self.frames_source == "auto" and "global_frames" not in batch)
        if use_video:
            return self._decode(batch, rows)
        frames = batch["global_frames"]
        if "caption_positions" in batch:
            b = torch.arange(frames.shape[0], device=frames.device).unsqueeze(1)
            frames = frames[b, batch["caption_positions"]]
        pixels = (frames.float().cpu() * self.std + self.mean).clamp(0, 1).mul(255).round().to(torch.uint8)
        pixels = pixels.permute(0, 1, 3, 4, 2).numpy()  # (B, T, H, W, 3)
        return [pixels[r] for r in rows], [None] * len(keys)

    def _decode(self, batch: dict, rows: list[int]) -> tuple[list[np.ndarray], list[float | None]]:
        from formats.video_files import open_video
        from judge.data.dataset import uniform_frame_indices

        if self.video_root is None or "video_fnames" not in batch or "frame_indices" not in batch:
            raise ValueError("VCInspectorScore: decoding frames needs video_root and the batch's 'video_fnames' and "
                             "'frame_indices' (or pass frames through 'global_frames' / outputs['frames'])")
        out, rates = [], []
        for r in rows:
            valid = batch["frame_indices"][r]
            valid = valid[valid >= 0]
            start, end = int(valid.min()), int(valid.max())
            with open_video(self.video_root, batch["video_fnames"][r]) as video:
                out.append(video.read_frames(uniform_frame_indices(start, end, self.num_frames).tolist()))
                rates.append(self.num_frames * video.fps / (end - start + 1) if video.fps else None)
        return out, rates

    # ------------------------------------------------------------------ hooks
    def _on_batch_end(self, stage: str, pl_module: L.LightningModule, outputs: Any, batch: dict) -> None:
        if outputs is None or (isinstance(outputs, dict) and not outputs.get("keys", outputs.get("predictions"))):
            return  # an empty batch (every clip failed to decode)
        keys, captions = self.captions_of(outputs)
        frames, rates = self.frames_of(outputs, batch, keys)
        judge = self.load_judge(pl_module.device)
        answers = judge.score(frames, captions, max_new_tokens=self.max_new_tokens, sampled_fps=rates)
        parsed = [a.score for a in answers if a.score is not None]
        totals = self._totals.setdefault(stage, torch.zeros(3, dtype=torch.float64))
        totals += torch.tensor([float(sum(parsed)), float(len(parsed)), float(len(answers) - len(parsed))],
                               dtype=torch.float64)

    def _on_epoch_end(self, stage: str, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        totals = self._totals.pop(stage, None)
        if totals is None:
            return
        totals = trainer.strategy.reduce(totals.to(pl_module.device), reduce_op="sum").cpu()
        score_sum, parsed, unparsable = totals.tolist()
        answered = parsed + unparsable
        pl_module.log(f"{stage}/vc_inspector", score_sum / parsed if parsed else math.nan, rank_zero_only=True)
        pl_module.log(f"{stage}/vc_inspector_unparsable", unparsable / answered if answered else math.nan,
                      rank_zero_only=True)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if not trainer.sanity_checking:
            self._on_batch_end("val", pl_module, outputs, batch)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._on_batch_end("test", pl_module, outputs, batch)

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        self._on_epoch_end("val", trainer, pl_module)

    def on_test_epoch_end(self, trainer, pl_module) -> None:
        self._on_epoch_end("test", trainer, pl_module)
