"""GroveModule: training and evaluation logic for GROVE. The architecture lives in models/."""
from __future__ import annotations

from core.user_errors import UserInputError
from core.weights.dtypes import refuse_dtype_mismatch

import warnings
from contextlib import nullcontext
from typing import Any

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable

from lightning_modules.schedules import build_scheduler
from metrics.teacher_forced import TeacherForcedGrounding
from models.grove.configuration import DecoderConfig, GlobalEncoderConfig, GroundingEncoderConfig, LanguageModelConfig
from models.grove.loss import GroveLoss
from models.grove.modeling import TEXT_PROTOCOLS, Grove
from models.grove.processing import predict_clips
from models.grove.quantization import check_scheme, quantize_weights
from models.grove.windows import WINDOW_MODES
from models.masks.box_masker import BoxMasker

# Evaluation settings: excluded from the saved hyper-parameters, so that with --ckpt_path the
# command line decides them rather than the checkpoint.
EVAL_SETTINGS = ("objectness_threshold", "objectness_strict", "max_new_tokens", "window_mode", "text_protocol",
                 "weight_quantization", "windows_per_pass")
# frozen_dtype: the 16-bit types the frozen weights can be held in (docs/precision.md)
FROZEN_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def start_from_glamm(model: Grove, folder: str) -> str:
    """Load a GLaMM folder into ``model`` (:func:`models.grove.convert_official.init_grove_from_glamm`);
    returns the table of tensors from GLaMM / CLIP / new, also printed on rank zero."""
    from pathlib import Path

    from lightning.pytorch.utilities import rank_zero_info

    from models.grove.convert_official import init_grove_from_glamm, init_table

    if not Path(folder).is_dir():
        raise FileNotFoundError(f"model.init_from_glamm: {folder!r} is not a folder. See the README section "
                                "'Pretrained weights' (GLaMM-GranD-Pretrained), or stack "
                                "configs/overlays/pretrain_raw_towers.yaml to start from the raw towers instead")
    table = init_table(init_grove_from_glamm(model, folder), model.global_encoder.config.checkpoint)
    rank_zero_info(f"GROVE initialised from GLaMM ({folder}):\n{table}")
    return table


def _default_optimizer(params):
    return torch.optim.AdamW(params, lr=5e-5, betas=(0.9, 0.95), weight_decay=0.0)


class GroveModule(L.LightningModule):
    """Grounded video caption generation (the GROVE paper).

    Args:
        global_encoder / grounding_encoder / language_model / decoder: architecture configs.
        ce_weight / giou_weight / l1_weight / objectness_weight: loss weights (GROVE paper, supp. C; the
            released fine-tuning script uses CE 1).
        train_*: what trains. Paper defaults: adapters, VL, LQ, box decoder, heads, the LLM's
            input embeddings and output layer and the grounding positional embedding train; CLIP,
            SAM's encoder and the LLM blocks stay frozen. ``train_adapters=False`` is the "no
            adapters" ablation (zero-initialised gates then stay at 0: the identity).
        teacher_forced: ground a given caption instead of generating one (VidSTG; GROVE paper, supp. C).
        sample_question / chat_template: prompt paraphrase sampling in training; ``vicuna_v1``
            (Vicuna's system prompt, as the paper's LLM expects) or ``plain`` (shorter, for tiny LLMs).
        objectness_threshold: keep a box when sigmoid(objectness) >= threshold (0 = always).
        objectness_strict: keep it only when sigmoid(objectness) > threshold, as the released code.
        window_mode: how evaluation covers all annotated frames with T-frame windows
            (:mod:`models.grove.windows`): ``official`` (the released code's windows, caption from the
            central one), ``interleaved`` (window w takes every W-th frame, the spacing training
            saw; caption from the segment centres) or ``contiguous`` (consecutive frames).
        text_protocol: how the generated caption is grounded and scored (:meth:`models.grove.Grove.predict`):
            ``project`` (parsed and re-tokenised once for every window) or ``official`` (the
            training repository's inference scripts: the caption window grounded on the generated ids,
            the others on their slow-tokenizer decode re-tokenised; the released caption string is
            scored) or ``package`` (the same with the official inference package's fast-tokenizer decode).
        windows_per_pass: how many (clip, window) pairs of a batch go through the model at once in
            prediction and evaluation (:meth:`models.grove.modeling.Grove.predict`); ``null``: as many as
            the batch has clips, so a batch needs the memory of one window per clip. The predictions
            are the same whatever it is.
        target_text: ``as_is`` or ``official`` (targets lower-cased, surrounding quotes stripped,
            as the released datasets build them; :func:`models.grove.prompting.official_target_text`).
        train_rel_pos: also train the relative position tables of SAM's global-attention blocks
            (the released GROVE does).
        masks: a box masker (:mod:`models.masks`, e.g. ``configs/masks.yaml``): ``predict`` and ``test``
            then write a mask beside every kept box (an evaluation setting, not saved with the checkpoint).
        init_from_glamm: a released GLaMM checkpoint folder to start from, as the official
            pre-training does (:func:`models.grove.convert_official.init_grove_from_glamm`: the LLM,
            projector, SAM and [SEG] projection from GLaMM; CLIP from ``global_encoder.checkpoint``;
            adapters and heads new). A table of where each tensor came from is printed.
        weight_quantization: ``null`` or ``int8``: weight-only 8-bit backbones for predict, test and
            validate (:mod:`models.grove.quantization`), applied when the stage starts, after the
            weights (``--ckpt_path``) are loaded and cast; fitting with it is refused.
        frozen_dtype: ``bf16`` or ``fp16`` holds every frozen weight (towers, LLM blocks under LoRA) in
            that 16-bit type while the trained ones keep fp32 master weights, and runs the model under
            autocast to it: about half the weight memory, as the paper's DeepSpeed bf16 run (which
            holds every weight in bf16). ``null`` (default): every weight as built (docs/precision.md).
        optimizer / lr_scheduler: set from the config (AdamW, warm-up + linear decay by default).
    """

    def __init__(
        self,
        global_encoder: GlobalEncoderConfig,
        grounding_encoder: GroundingEncoderConfig,
        language_model: LanguageModelConfig,
        decoder: DecoderConfig,
        ce_weight: float = 1.0,
        giou_weight: float = 2.0,
        l1_weight: float = 2.0,
        objectness_weight: float = 2.0,
        train_global_backbone: bool = False,
        train_grounding_backbone: bool = False,
        train_llm: bool = False,
        train_adapters: bool = True,
        train_vl: bool = True,
        train_lq: bool = True,
        train_decoder: bool = True,
        train_pos_embed: bool = True,
        train_rel_pos: bool = False,
        teacher_forced: bool = False,
        sample_question: bool = True,
        chat_template: str = "vicuna_v1",
        objectness_threshold: float = 0.5,
        objectness_strict: bool = False,
        max_new_tokens: int = 64,
        window_mode: str = "interleaved",
        text_protocol: str = "project",
        windows_per_pass: int | None = None,
        target_text: str = "as_is",
        init_from_glamm: str | None = None,
        weight_quantization: str | None = None,
        frozen_dtype: str | None = None,
        masks: BoxMasker | None = None,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
    ):
        super().__init__()
        if window_mode not in WINDOW_MODES:
            raise ValueError(f"model.window_mode must be one of {WINDOW_MODES}, got {window_mode!r}")
        if text_protocol not in TEXT_PROTOCOLS:
            raise ValueError(f"model.text_protocol must be one of {TEXT_PROTOCOLS}, got {text_protocol!r}")
        if frozen_dtype is not None and frozen_dtype not in FROZEN_DTYPES:
            raise ValueError(f"model.frozen_dtype must be one of {sorted(FROZEN_DTYPES)} or null, got {frozen_dtype!r}")
        if windows_per_pass is not None and (not isinstance(windows_per_pass, int) or isinstance(windows_per_pass, bool)
                                             or windows_per_pass < 1):
            raise ValueError(f"model.windows_per_pass must be a whole number >= 1 or null, got {windows_per_pass!r}")
        self.save_hyperparameters(ignore=list(EVAL_SETTINGS) + ["masks"])
        self.masker = masks
        self.objectness_threshold = float(objectness_threshold)
        self.objectness_strict = bool(objectness_strict)
        self.max_new_tokens = int(max_new_tokens)
        self.window_mode = window_mode
        self.text_protocol = text_protocol
        self.windows_per_pass = None if windows_per_pass is None else int(windows_per_pass)
        self.weight_quantization = (None if weight_quantization is None
                                    else check_scheme(weight_quantization, "model.weight_quantization"))
        self.quantization_report = None
        # predict_step also returns every phrase's objectness on every frame (the web demo's plot)
        self.report_objectness = False
        self.optimizer_factory = optimizer
        self.lr_scheduler_factory = lr_scheduler
        self.model = Grove(global_encoder, grounding_encoder, language_model, decoder)
        if init_from_glamm is not None:
            self.init_table = start_from_glamm(self.model, init_from_glamm)
        self.criterion = GroveLoss(ce_weight, giou_weight, l1_weight, objectness_weight,
                                   use_objectness=decoder.use_objectness)
        self.prompter = self.model.make_prompter(sample_question=sample_question, template=chat_template,
                                                 target_text=target_text)
        self.model.prompter = self.prompter  # one prompter for training, generation and the data pipeline
        self.apply_freezing()
        # teacher-forced diagnostics per evaluation stage (metrics.teacher_forced): summed counts,
        # logged once per epoch as {stage}/box_hit_rate_tf[_1phrase|_2phrases|_3plus_phrases],
        # {stage}/box_other_object_rate_tf, {stage}/objectness_acc[_absent]
        # (objectness accuracy is the classifier's, at sigmoid >= 0.5, whatever objectness_threshold keeps)
        self._eval_loss_sums: dict[str, dict[str, tuple[float, int]]] = {}  # stage -> loss -> (sum, clips)
        self.teacher_forced_metrics = torch.nn.ModuleDict(
            {stage: TeacherForcedGrounding() for stage in ("val", "test")})

    # ------------------------------------------------------------------ parameters
    def trainable_groups(self) -> list[str]:
        """Parameter groups of :meth:`models.grove.Grove.parameter_groups` that train under this config."""
        hp = self.hparams
        flags = {
            "global_backbone": hp.train_global_backbone,
            "global_adapters": hp.train_adapters,
            "vision_projector": hp.train_vl,
            "grounding_backbone": hp.train_grounding_backbone,
            "grounding_pos_embed": hp.train_pos_embed,
            "grounding_rel_pos": hp.get("train_rel_pos", False),
            "grounding_adapters": hp.train_adapters,
            "llm_blocks": hp.train_llm,
            # the new tokens' rows live in the input embeddings and the output layer
            "llm_embeddings": True,
            "llm_lora": True,
            "query_projector": hp.train_lq,
            "box_decoder": hp.train_decoder,
            "heads": True,
        }
        return [group for group, on in flags.items() if on]

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """A weight stored as another kind of number than the module's (an int tensor for a float
        weight) is refused naming the key before Lightning loads it, which would cast it."""
        refuse_dtype_mismatch(self.state_dict(), checkpoint.get("state_dict", {}), "checkpoint")

    def setup(self, stage: str) -> None:
        if stage == "fit" and self.weight_quantization is not None:
            raise UserInputError(f"model.weight_quantization={self.weight_quantization}: quantised weights are for "
                             "predict, test and validate; fit without it (set model.weight_quantization=null)")

    def quantize_for_inference(self) -> None:
        """Quantise the weights per ``weight_quantization`` (once). Lightning calls it when predict, test
        or validate starts: after the checkpoint is restored and the precision plugin has cast the model."""
        if self.weight_quantization is not None and self.quantization_report is None:
            from lightning.pytorch.utilities import rank_zero_info

            self.quantization_report = quantize_weights(self.model, self.weight_quantization)
            rank_zero_info(str(self.quantization_report))

    def on_predict_start(self) -> None:
        self.quantize_for_inference()

    def on_test_start(self) -> None:
        self.quantize_for_inference()

    def on_validation_start(self) -> None:
        self.quantize_for_inference()

    def apply_freezing(self) -> None:
        """requires_grad per the config (frozen parts get no gradient and never change); with
        ``frozen_dtype``, the frozen weights are then held in that 16-bit type."""
        self.trainable_counts = self.model.configure_trainable(self.trainable_groups())
        dtype = FROZEN_DTYPES.get(self.hparams.get("frozen_dtype"))
        if dtype is None:
            return
        for module in self.model.modules():
            if "Norm" in type(module).__name__:  # LayerNorm/RMSNorm weights: tiny, and layer_norm wants fp32 ones
                continue
            for param in module.parameters(recurse=False):
                if not param.requires_grad and param.is_floating_point():
                    param.data = param.data.to(dtype)

    def compute_context(self):
        """Autocast to ``frozen_dtype`` where the model holds 16-bit and fp32 weights side by side (the
        trained fp32 masters are cast per operation, as in Lightning's ``bf16-mixed``); else nothing."""
        dtype = FROZEN_DTYPES.get(self.hparams.get("frozen_dtype"))
        return torch.autocast(self.device.type, dtype=dtype) if dtype is not None else nullcontext()

    def configure_optimizers(self):
        # None = the paper's AdamW (a function default would reach jsonargparse as a string)
        optimizer = (self.optimizer_factory or _default_optimizer)([p for p in self.parameters() if p.requires_grad])
        if self.lr_scheduler_factory is None:
            return optimizer
        # schedules that need the run length (WarmupLinearDecay) get it from the trainer
        scheduler = build_scheduler(self.lr_scheduler_factory, optimizer, self.trainer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # ------------------------------------------------------------------ training
    def _window(self, batch: dict[str, Any], positions: torch.Tensor) -> dict[str, torch.Tensor]:
        """Gather frames/targets at ``positions (B, T)`` of each clip's frame axis."""
        b = torch.arange(positions.shape[0], device=positions.device).unsqueeze(1)
        return {k: batch[k][b, positions] for k in ("global_frames", "grounding_frames", "boxes", "present")}

    def compute_losses(self, batch: dict[str, Any], positions: torch.Tensor | None = None) -> tuple[dict, Any, dict]:
        view = batch if positions is None else {**batch, **self._window(batch, positions)}
        out = self.model(
            global_frames=view["global_frames"], grounding_frames=view["grounding_frames"],
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
            labels=batch["labels"], phrase_mask=batch["phrase_mask"],
        )
        losses = self.criterion(out.lm_loss, out.boxes, out.objectness_logits, view["boxes"],
                                view["present"], batch["phrase_mask"])
        return losses, out, view

    def training_step(self, batch: dict[str, Any], batch_idx: int):
        if not batch["keys"]:
            return None  # every clip of the batch was unreadable (reported by SkippedVideoReport)
        with self.compute_context():
            losses, _, _ = self.compute_losses(batch)
        bs = len(batch["keys"])
        # the epoch values are means over every rank's batches (sync_dist), not rank zero's alone
        self.log_dict({f"train/{k}": v.detach() for k, v in losses.items()}, batch_size=bs,
                      prog_bar=False, on_step=True, on_epoch=True, sync_dist=True)
        self.log("train/loss_step", losses["loss"].detach(), prog_bar=True, batch_size=bs, on_step=True, on_epoch=False)
        return losses["loss"]

    # ------------------------------------------------------------------ evaluation
    def _eval_step(self, batch: dict[str, Any], stage: str) -> dict[str, Any]:
        if not batch["keys"]:
            return {"predictions": {}, "skipped": batch["skipped"]}
        bs = len(batch["keys"])
        with self.compute_context():
            losses, out, view = self.compute_losses(batch, batch["caption_positions"])
        sums = self._eval_loss_sums.setdefault(stage, {})
        for name, value in losses.items():  # clip-weighted sums, reduced over ranks at epoch end
            total, count = sums.get(name, (0.0, 0))
            sums[name] = (total + float(value.detach()) * bs, count + bs)
        self.teacher_forced_metrics[stage].update(out.boxes, out.objectness_logits, view["boxes"], view["present"],
                                                  batch["phrase_mask"])
        predictions = self.predict_clips(batch, masks=stage == "test")
        return {"predictions": predictions, "skipped": batch["skipped"]}

    def validation_step(self, batch, batch_idx):
        return self._eval_step(batch, "val")

    def test_step(self, batch, batch_idx):
        return self._eval_step(batch, "test")

    def _log_eval_losses(self, stage: str) -> None:
        """``{stage}/<loss>``: the mean over every clip of the epoch, each clip counted once whatever
        the world size (the samplers give every evaluation clip to one process). Lightning's own
        reduction of a logged mean averages the processes' means, which is not the mean over clips
        when the processes saw different numbers of clips."""
        sums = self._eval_loss_sums.pop(stage, {})
        names = sorted(sums)
        if self.trainer.world_size > 1:  # a process without clips still joins, with no names
            import torch.distributed as dist

            parts: list = [None] * self.trainer.world_size
            dist.all_gather_object(parts, names)
            names = sorted({name for part in parts for name in part})
        if not names:
            return
        state = torch.tensor([[sums.get(n, (0.0, 0))[0] for n in names], [sums.get(n, (0.0, 0))[1] for n in names]],
                             dtype=torch.float64, device=self.device)
        state = self.trainer.strategy.reduce(state, reduce_op="sum")
        self.log_dict({f"{stage}/{name}": (state[0, i] / state[1, i]).float() for i, name in enumerate(names)
                       if state[1, i] > 0}, sync_dist=False)

    def on_validation_epoch_start(self) -> None:
        self._eval_loss_sums.pop("val", None)

    def on_test_epoch_start(self) -> None:
        self._eval_loss_sums.pop("test", None)

    def _log_teacher_forced(self, stage: str) -> None:
        metric = self.teacher_forced_metrics[stage]
        # every rank computes (the sync is collective), even one whose clips were all skipped; the
        # summed counts are then the same everywhere, and rates without cases are left out
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*was called before the ``update`` method")
            rates = metric.compute()
        self.log_dict({f"{stage}/{name}": value for name, value in rates.items()})
        metric.reset()

    def on_validation_epoch_end(self) -> None:
        self._log_eval_losses("val")
        self._log_teacher_forced("val")

    def on_test_epoch_end(self) -> None:
        self._log_eval_losses("test")
        self._log_teacher_forced("test")

    def predict_step(self, batch, batch_idx, dataloader_idx: int = 0):
        """``{"predictions", "skipped"}``; with ``report_objectness`` set, also ``"objectness"``:
        every phrase's objectness on every frame, whatever the threshold keeps
        (:func:`models.grove.postprocessing.objectness_by_clip`)."""
        if not batch["keys"]:
            return {"predictions": {}, "skipped": batch["skipped"]}
        if "answers" in batch:  # a pointing benchmark's segments (datamodules.pointing)
            from lightning_modules.pointing import pointing_predictions

            with self.compute_context():
                return {"predictions": pointing_predictions(self.model, batch), "skipped": batch["skipped"]}
        with self.compute_context():
            result = predict_clips(self.model, batch, report_objectness=self.report_objectness,
                                   **self.inference_settings(), **self.mask_settings("predict"))
        return {**result, "skipped": batch["skipped"]}

    # ------------------------------------------------------------------ inference
    def inference_settings(self) -> dict[str, Any]:
        """The keyword arguments of :func:`models.grove.processing.predict_clips` under this module's settings."""
        return {"objectness_threshold": self.objectness_threshold, "objectness_strict": self.objectness_strict,
                "window_mode": self.window_mode, "text_protocol": self.text_protocol,
                "max_new_tokens": self.max_new_tokens, "teacher_forced": bool(self.hparams.teacher_forced),
                "windows_per_pass": self.windows_per_pass}

    def predict_clips(self, batch: dict[str, Any], masks: bool = False) -> dict[str, dict]:
        """Prediction-format dicts for the clips of a batch: caption, phrases and boxes on every frame
        (and masks with ``masks`` when the module has a masker)."""
        extra = self.mask_settings("test") if masks else {}
        with self.compute_context():
            return predict_clips(self.model, batch, **self.inference_settings(), **extra)["predictions"]

    def mask_settings(self, stage: str) -> dict[str, Any]:
        """The masker and the video root its clips are read from again (the ``stage``'s dataset's), for
        :func:`models.grove.processing.predict_clips`; nothing without a masker."""
        if self.masker is None:
            return {}
        loaders = getattr(self._trainer, f"{stage}_dataloaders", None) if self._trainer is not None else None
        loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders
        return {"masker": self.masker, "video_root": getattr(getattr(loader, "dataset", None), "video_root", "/")}
