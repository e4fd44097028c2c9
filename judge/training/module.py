"""JudgeModule: training and evaluation of the VC-Inspector judge (VC-Inspector paper). The model is in
judge/model/vc_inspector.py.

Training minimises the cross-entropy of the answer (score line + explanation) given the video and
the D.6 prompt. Validation and test generate greedily, parse the score line and correlate the
parsed scores (Kendall tau-b, Spearman rho) with the generated scores of held-out corruptions and,
when the data has them, with human ratings averaged over annotators; unparsable answers are
logged as a share and left out of the correlations.
"""
from __future__ import annotations

from core.output_files import atomic_write
from core.weights.dtypes import refuse_dtype_mismatch

import functools
import json
import math
from typing import Any

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.utilities import rank_zero_warn

from judge.model.vc_inspector import VCInspectorJudge, parse_judge_answer
from judge.training.correlation import JudgeCorrelation
from lightning_modules.schedules import WarmupCosineDecay, build_scheduler

# Evaluation settings: not saved as hyper-parameters, so the command line decides them at test time.
EVAL_SETTINGS = ("max_new_tokens", "answers_file")


def _default_optimizer(params):
    return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)


# the paper's schedule (appendix C); the run length is filled in from the trainer
_default_scheduler = functools.partial(WarmupCosineDecay, warmup_ratio=0.05, min_lr=1e-5)


class JudgeModule(L.LightningModule):
    """VC-Inspector: a reference-free caption judge (Qwen2.5-VL + LoRA).

    Args:
        model_path / tiny / adapter_path / lora / template / max_pixels / min_pixels / vision_checkpoint /
            train_vision /
            train_merger / train_embeddings / train_language_model / dtype / gradient_checkpointing / seed: see
            :class:`judge.model.vc_inspector.VCInspectorJudge`.
        max_new_tokens: answer length bound at validation / test.
        adapter_dir: where to save the LoRA adapter on its own when fitting ends (None = don't).
        checkpoint_trainable_only: keep only trainable weights (the adapter) in Lightning checkpoints,
            so a 3B judge's checkpoint is megabytes; the frozen base is reloaded from ``model_path``.
        answers_file: at test, write every answer (key, caption, target, parsed score, error) as JSONL.
        error_detection_weight: weight of an auxiliary loss (0 = off, the paper's recipe): a linear head
            on the language model's hidden states (``error_layer``) flags the caption tokens the
            corruption changed (``substitutions`` of the generated rows). Dense, per-word supervision
            that makes a randomly initialised toy judge compare the caption with the clip; a
            pre-trained Qwen2.5-VL does not need it.
        error_layer: which entry of the language model's ``hidden_states`` the head reads (-1 the
            last, -2 the one before). An earlier layer leaves the layers above it to gather the
            flags into the score line.
        score_token_weight: weight of the answer's first token, the score digit, in the answer loss
            (1 = the paper's plain mean over answer tokens). Otherwise one token among ~40 of the
            template explanation, it carries the whole ranking.
        video_feature_cache: reuse the frozen vision tower's tokens of up to this many clips instead of
            recomputing them each time a clip is drawn (exact: keyed by the clip's pixels; 0 = off). Worth
            it when clips repeat across epochs and the tower is a fair share of a step (the toy judge:
            about 17 %); memory is clips x tokens x hidden size.
        pretrained_weights / architecture_folder: see :class:`judge.model.vc_inspector.VCInspectorJudge` (set when a
            checkpoint or an exported folder provides every weight).
        optimizer / lr_scheduler: from the config; None means the paper's AdamW lr 1e-4 with 5 %
            warm-up and cosine decay to 1e-5 (appendix C).
    """

    def __init__(
        self,
        model_path: str | None = None,
        tiny: dict | None = None,
        adapter_path: str | None = None,
        lora: dict | None = None,
        template: str = "qwen",
        max_pixels: int = 224 * 224,
        min_pixels: int = 56 * 56,
        vision_checkpoint: str | None = None,
        train_vision: bool = False,
        train_merger: bool = False,
        train_embeddings: bool = False,
        train_language_model: bool = False,
        dtype: str = "float32",
        gradient_checkpointing: bool = False,
        seed: int = 0,
        max_new_tokens: int = 64,
        adapter_dir: str | None = None,
        checkpoint_trainable_only: bool = False,
        answers_file: str | None = None,
        video_feature_cache: int = 0,
        error_detection_weight: float = 0.0,
        error_layer: int = -1,
        score_token_weight: float = 1.0,
        pretrained_weights: bool = True,
        architecture_folder: str | None = None,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=list(EVAL_SETTINGS) + ["optimizer", "lr_scheduler"])
        self.max_new_tokens = int(max_new_tokens)
        self.answers_file = answers_file
        self.optimizer_factory = optimizer or _default_optimizer
        self.lr_scheduler_factory = lr_scheduler or _default_scheduler
        self.judge = VCInspectorJudge(
            model_path=model_path, tiny=tiny, adapter_path=adapter_path, lora=lora, template=template,
            max_pixels=max_pixels, min_pixels=min_pixels, vision_checkpoint=vision_checkpoint,
            train_vision=train_vision,
            train_merger=train_merger, train_embeddings=train_embeddings,
            train_language_model=train_language_model, dtype=dtype,
            gradient_checkpointing=gradient_checkpointing, seed=seed, error_head=error_detection_weight > 0,
            error_layer=error_layer, video_feature_cache=video_feature_cache,
            pretrained_weights=pretrained_weights, architecture_folder=architecture_folder)
        self.prompter = self.judge.prompter
        self.strict_loading = not checkpoint_trainable_only
        self.correlations = torch.nn.ModuleDict({
            f"{stage}_{ref}": JudgeCorrelation() for stage in ("val", "test") for ref in ("generated", "human")})
        self._answers: list[dict[str, Any]] = []
        self._unlabelled_batches = 0  # training batches the error head could not use

    # ------------------------------------------------------------------ optimisation
    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        if not params:
            raise ValueError("JudgeModule has nothing to train: set model.lora (or train_vision)")
        optimizer = self.optimizer_factory(params)
        scheduler = build_scheduler(self.lr_scheduler_factory, optimizer, self.trainer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def training_step(self, batch: dict[str, Any], batch_idx: int):
        if not batch["keys"]:
            return None  # every clip of the batch failed to decode
        bs = len(batch["keys"])
        losses = self.judge.losses(batch, score_weight=self.hparams.score_token_weight)
        loss = losses["answer"]
        if self.hparams.error_detection_weight > 0 and "error" not in losses:
            self._unlabelled_batches += 1
            if self._unlabelled_batches == 1:
                rank_zero_warn(
                    "error_detection_weight > 0 but this training batch has no caption token to flag: none of its "
                    "rows' substitution records could be located in the caption (LLM rewrites, human ratings, "
                    "description samples), so the error head is skipped there; see train/unlabelled_batches")
            self.log("train/unlabelled_batches", float(self._unlabelled_batches), batch_size=bs)
        if "error" in losses:
            loss = loss + self.hparams.error_detection_weight * losses["error"]
            self.log("train/answer_loss", losses["answer"], batch_size=bs)
            self.log("train/error_loss", losses["error"], batch_size=bs)
            self.log("train/error_accuracy", losses["error_accuracy"], prog_bar=True, batch_size=bs)
        self.log("train/loss", loss, prog_bar=True, batch_size=bs)
        return loss

    def on_train_end(self) -> None:
        if self.hparams.adapter_dir is not None and self.judge.has_adapter and self.trainer.is_global_zero:
            self.judge.save_adapter(self.hparams.adapter_dir)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A weight stored as another kind of number than the module's (an int tensor for a float
        weight) is refused naming the key before Lightning loads it, which would cast it."""
        refuse_dtype_mismatch(self.state_dict(), checkpoint.get("state_dict", {}), "checkpoint")

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.hparams.checkpoint_trainable_only:
            trainable = {name for name, p in self.named_parameters() if p.requires_grad}
            checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in trainable}

    # ------------------------------------------------------------------ evaluation
    def _eval_step(self, batch: dict[str, Any], stage: str) -> dict[str, Any] | None:
        if not batch["keys"]:
            return None
        bs = len(batch["keys"])
        if "labels" in batch:
            losses = self.judge.losses(batch)
            self.log(f"{stage}/loss", losses["answer"], batch_size=bs, sync_dist=True)
            if "error_accuracy" in losses:
                self.log(f"{stage}/error_accuracy", losses["error_accuracy"], batch_size=bs, sync_dist=True)
        answers = [parse_judge_answer(text) for text in self.judge.generate(batch, self.max_new_tokens)]
        predicted = torch.tensor([math.nan if a.score is None else float(a.score) for a in answers],
                                 dtype=torch.float64)
        self.correlations[f"{stage}_generated"].update(predicted, batch["scores"])
        self.correlations[f"{stage}_human"].update(predicted, batch["human_scores"])
        if stage == "test" and self.answers_file is not None:
            rows = zip(batch["keys"], batch["captions"], batch["scores"].tolist(), answers)
            for key, caption, target, answer in rows:
                self._answers.append({"key": key, "caption": caption, "target": None if math.isnan(target) else target,
                                      "score": answer.score, "explanation": answer.explanation, "error": answer.error})
        return {"keys": batch["keys"], "answers": answers}

    def _log_correlations(self, stage: str) -> None:
        for ref, prefix in (("generated", f"{stage}/"), ("human", f"{stage}/human_")):
            metric = self.correlations[f"{stage}_{ref}"]
            values = metric.compute()
            metric.reset()
            if int(values["count"]) == 0:
                continue  # no reference of this kind in the data
            for name in ("kendall_tau_b", "spearman_rho", "unparsable", "mean_score"):
                self.log(f"{prefix}{name}", values[name].float(), sync_dist=False)

    def validation_step(self, batch: dict[str, Any], batch_idx: int):
        return self._eval_step(batch, "val")

    def test_step(self, batch: dict[str, Any], batch_idx: int):
        return self._eval_step(batch, "test")

    def on_validation_epoch_end(self) -> None:
        self._log_correlations("val")

    def on_test_epoch_end(self) -> None:
        self._log_correlations("test")
        if self.answers_file is not None and self.trainer.is_global_zero:
            with atomic_write(self.answers_file) as f:
                for row in self._answers:
                    f.write(json.dumps(row) + "\n")
            self._answers = []
