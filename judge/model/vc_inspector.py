"""VC-Inspector: a Qwen2.5-VL judge that rates a (video, caption) pair 1-5 and explains why.

The real judge is Qwen2.5-VL (3B or 7B) from a local folder with LoRA adapters on the language
model only; the vision tower and its merger (the visual-language projector) stay frozen
(VC-Inspector paper, section 3.3 and appendix C). A released judge loads by path: a merged
Hugging Face folder (``model_path``), or a LoRA adapter folder (``adapter_path``) over a local
base folder. For CPU tests and the demo, :func:`tiny_judge_config` builds the same architecture
at toy size with random weights, with the offline tokenizer of :mod:`judge.model.tokenizer`.

:class:`VCInspectorJudge` holds the model, computes the answer-only loss, generates greedily and
saves / loads the LoRA adapter on its own; :class:`~judge.model.prompter.JudgePrompter` builds
its inputs and :mod:`judge.model.prompt_format` holds the prompt (D.6) and the answer parser.
"""
from __future__ import annotations

from core.weights import load_state_dict_file

from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import Tensor, nn

from judge.model.prompt_format import IGNORE_INDEX, SPECIAL_TOKENS, JudgeAnswer, format_judge_answer, parse_judge_answer  # noqa: F401
from judge.model.prompter import JudgePrompter
from judge.model.tokenizer import build_tiny_judge_tokenizer
from judge.model.video_feature_cache import FrozenVideoFeatureCache
from models.grove.fp32_buffers import ROTARY, KeepsBuffersFp32

# Qwen2.5-VL's LLM projection layers; the vision tower has gate/up/down projections too, hence the
# language_model anchor in the target regex.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def tiny_judge_config(tokenizer, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4,
                      num_kv_heads: int = 2, intermediate_size: int = 128, vision_hidden_size: int = 32,
                      vision_depth: int = 2, vision_heads: int = 2, patch_size: int = 14,
                      temporal_patch_size: int = 2, spatial_merge_size: int = 2, tokens_per_second: int = 2,
                      window_size: int = 112, initializer_range: float = 0.02, vision_initializer_range: float = 0.02):
    """A randomly initialisable Qwen2.5-VL config at toy size, with ids from ``tokenizer``.

    ``window_size`` (pixels) is the vision tower's attention window; the default covers a whole
    112-pixel frame, so small frames need one attention call per frame instead of one per window.
    """
    from transformers import Qwen2_5_VLConfig

    head_dim = hidden_size // num_heads
    if head_dim % 2 or hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} / num_heads {num_heads} must give an even head dim")
    half = head_dim // 2  # M-RoPE splits the rotary half-dim over (time, height, width)
    mrope = [half - 2 * (half // 3), half // 3, half // 3]
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    return Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
            num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_kv_heads,
            max_position_embeddings=8192, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                            "mrope_section": mrope},
            bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
            initializer_range=initializer_range,
        ),
        vision_config=dict(
            depth=vision_depth, hidden_size=vision_hidden_size, intermediate_size=2 * vision_hidden_size,
            num_heads=vision_heads, out_hidden_size=hidden_size, patch_size=patch_size,
            spatial_merge_size=spatial_merge_size, temporal_patch_size=temporal_patch_size,
            window_size=window_size, fullatt_block_indexes=[vision_depth - 1],
            tokens_per_second=tokens_per_second, initializer_range=vision_initializer_range,
        ),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )


def tiny_video_processor(patch_size: int = 14, temporal_patch_size: int = 2, merge_size: int = 2):
    """Qwen2-VL's video processor with the tiny model's patching (CLIP mean/std, bicubic resize)."""
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    return Qwen2VLVideoProcessor(patch_size=patch_size, temporal_patch_size=temporal_patch_size, merge_size=merge_size)


# ----------------------------------------------------------------------------- the judge

VISION_PREFIXES = ("model.visual.", "visual.")


def load_vision_weights(tower: nn.Module, path: str | Path) -> None:
    """Load a Qwen2.5-VL vision tower (with its merger) from a local state-dict file, all keys required."""
    location = Path(path)
    if not location.is_file():
        raise FileNotFoundError(f"model.init_args.vision_checkpoint: {location} does not exist (docs/judge.md, "
                                "grove pretrain-judge-vision writes it)")
    raw = load_state_dict_file(location, "model.init_args.vision_checkpoint")
    prefix = next((p for p in VISION_PREFIXES if any(k.startswith(p) for k in raw)), None)
    if prefix is None:
        raise ValueError(
            f"model.init_args.vision_checkpoint: {location} holds no {' or '.join(VISION_PREFIXES)}* weights")
    state = {k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)}
    try:
        tower.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise ValueError(f"model.init_args.vision_checkpoint: {location} does not match the vision tower "
                         f"(tiny vision sizes differ?): {err}") from err


class VCInspectorJudge(KeepsBuffersFp32, PyTorchModelHubMixin, library_name="grove",
                       tags=["video-caption-evaluation"]):
    """Qwen2.5-VL with LoRA on the language model; vision tower and merger frozen. Cast to 16 bits
    (``.to(torch.bfloat16)``, Lightning's ``bf16-true``), its rotary tables stay fp32 (docs/precision.md).

    ``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` (huggingface_hub's mixin) write and
    read a self-contained folder (:mod:`judge.model.pretrained`).

    Args:
        model_path: local folder of a Qwen2.5-VL checkpoint (model, tokenizer, video processor).
            When None, ``tiny`` (a dict of :func:`tiny_judge_config` sizes) builds a random toy model.
        adapter_path: a saved LoRA adapter folder to start from (see :meth:`save_adapter`).
        lora: ``{"r", "alpha", "dropout"}`` or None for no adapter (an untrained baseline, or a toy
            whose whole language model trains, where an adapter only re-parametrises trained weights).
        template, max_pixels, min_pixels: prompt style and frame size bound (see JudgePrompter).
        vision_checkpoint: a local file of vision-tower weights (``model.visual.*`` or ``visual.*`` keys,
            merger included) loaded over the base model's; for the toy judge, the output of
            grove pretrain-judge-vision (a real Qwen2.5-VL's vision tower is already pre-trained).
        train_vision: unfreeze the vision tower (only sensible for random toy models).
        train_merger: unfreeze the merger, the vision-language projector (likewise).
        train_embeddings: unfreeze the token embeddings and output layer (likewise: a random toy
            model has no vocabulary knowledge for LoRA to adapt).
        train_language_model: unfreeze the whole language model, with or without an adapter (likewise: a
            random toy model has no pre-trained abilities for a low-rank update to steer).
        dtype: parameter dtype of the base model ("bfloat16" on GPUs).
        seed: initialisation seed of the toy model (the same seed gives the same weights).
        error_head: add a linear head on the language model's hidden states that flags the caption
            tokens a corruption changed (:meth:`losses`; a training aid for the toy judge).
        error_layer: the entry of ``hidden_states`` the head reads (-1: the last layer's output).
        video_feature_cache: keep the frozen tower's video tokens of up to this many clips and reuse
            them when a clip comes again (:class:`judge.model.video_feature_cache.FrozenVideoFeatureCache`;
            exact, keyed by the clip's pixels); 0 = off. Refused with a trainable tower or merger.
        pretrained_weights: False builds ``model_path``'s architecture from its config.json without
            reading its weights (they come from a checkpoint).
        architecture_folder: an exported judge folder (:mod:`judge.model.pretrained`) whose architecture,
            tokenizer and video processor to build (random weights: a checkpoint provides them).
    """

    fp32_buffers = ROTARY

    def __init__(self, model_path: str | None = None, tiny: dict | None = None, adapter_path: str | None = None,
                 lora: dict | None = None, template: str = "qwen", max_pixels: int = 224 * 224,
                 min_pixels: int = 56 * 56, vision_checkpoint: str | None = None, train_vision: bool = False,
                 train_merger: bool = False,
                 train_embeddings: bool = False,
                 train_language_model: bool = False,
                 dtype: str = "float32",
                 gradient_checkpointing: bool = False, seed: int = 0, error_head: bool = False,
                 error_layer: int = -1, video_feature_cache: int = 0, pretrained_weights: bool = True,
                 architecture_folder: str | None = None):
        super().__init__()
        from transformers import Qwen2_5_VLForConditionalGeneration

        torch_dtype = getattr(torch, dtype)
        # what an exported folder records to rebuild this judge (judge.model.pretrained)
        self.init_settings = {"template": template, "max_pixels": max_pixels, "min_pixels": min_pixels,
                              "dtype": dtype, "error_head": error_head, "error_layer": error_layer, "lora": lora}
        self.settings: dict = {}
        if architecture_folder is not None:
            from judge.model.pretrained import build_base_from_folder

            tokenizer, video_processor, base = build_base_from_folder(architecture_folder, torch_dtype)
        elif model_path is not None:
            path = Path(model_path)
            if not (path / "config.json").exists():
                raise FileNotFoundError(
                    f"judge model_path {path} holds no config.json; put a local Qwen2.5-VL checkpoint there "
                    "(config, safetensors, tokenizer and preprocessor files)")
            from transformers import AutoTokenizer, AutoVideoProcessor

            tokenizer = AutoTokenizer.from_pretrained(str(path))
            video_processor = AutoVideoProcessor.from_pretrained(str(path))
            if pretrained_weights:
                base = Qwen2_5_VLForConditionalGeneration.from_pretrained(str(path), dtype=torch_dtype)
            else:  # the weights come from a checkpoint: the architecture only
                from transformers import AutoConfig

                base = Qwen2_5_VLForConditionalGeneration._from_config(AutoConfig.from_pretrained(str(path)),
                                                                       dtype=torch_dtype)
        else:
            tiny = dict(tiny or {})
            vocab_size = tiny.pop("vocab_size", 1024)
            tokenizer = build_tiny_judge_tokenizer(vocab_size=vocab_size)
            config = tiny_judge_config(tokenizer, **tiny)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                base = Qwen2_5_VLForConditionalGeneration(config).to(torch_dtype)
            vc = config.vision_config
            video_processor = tiny_video_processor(vc.patch_size, vc.temporal_patch_size, vc.spatial_merge_size)
        self.prompter = JudgePrompter(tokenizer, video_processor, template=template, max_pixels=max_pixels,
                                      min_pixels=min_pixels, digest_videos=bool(video_feature_cache))
        if vision_checkpoint is not None:
            load_vision_weights(base.model.visual, vision_checkpoint)
        base.requires_grad_(False)
        if gradient_checkpointing:
            base.activation_checkpointing_enable()
            base.enable_input_require_grads()
        self.model = self._with_adapter(base, lora, adapter_path)
        if train_vision:
            self.vision_tower().requires_grad_(True)
            self.vision_tower().merger.requires_grad_(train_merger)
        if train_merger:
            self.vision_tower().merger.requires_grad_(True)
        if train_embeddings:
            self.base_model.get_input_embeddings().requires_grad_(True)
            self.base_model.get_output_embeddings().requires_grad_(True)
        if train_language_model:
            self.base_model.model.language_model.requires_grad_(True)
        self.video_cache = None
        if video_feature_cache:
            if train_vision or train_merger:
                raise ValueError("video_feature_cache reuses the frozen tower's tokens; it cannot be used with "
                                 "train_vision or train_merger")
            self.video_cache = FrozenVideoFeatureCache(video_feature_cache)
        self.error_head = None
        self.error_layer = int(error_layer)
        layers = int(self.base_model.config.text_config.num_hidden_layers)
        if not -(layers + 1) <= self.error_layer <= layers:
            raise ValueError(f"error_layer {error_layer} is not an entry of hidden_states "
                             f"({layers + 1} entries: the embeddings, then {layers} layers)")
        if error_head:
            hidden = int(self.base_model.config.text_config.hidden_size)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed + 1)
                self.error_head = nn.Linear(hidden, 1).to(torch_dtype)

    # -- exported folders (huggingface_hub's ModelHubMixin)
    def _save_pretrained(self, save_directory) -> None:
        from judge.model.pretrained import save_judge

        save_judge(self, save_directory)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs) -> "VCInspectorJudge":
        """A judge from an exported folder or a hub repository id (local cache when offline)."""
        from core.weights.pretrained_folder import resolve_folder

        hub = {k: kwargs[k] for k in ("revision", "cache_dir", "force_download", "local_files_only", "token")
               if k in kwargs}
        return super().from_pretrained(str(resolve_folder(pretrained_model_name_or_path, **hub)), **kwargs)

    @classmethod
    def _from_pretrained(cls, *, model_id: str, map_location: str = "cpu", **_: object) -> "VCInspectorJudge":
        from judge.model.pretrained import load_judge_folder

        return load_judge_folder(cls, model_id, map_location)

    @staticmethod
    def _with_adapter(base: nn.Module, lora: dict | None, adapter_path: str | None) -> nn.Module:
        from peft import LoraConfig, PeftModel, get_peft_model

        if adapter_path is not None:
            if not (Path(adapter_path) / "adapter_config.json").exists():
                raise FileNotFoundError(f"adapter_path {adapter_path} holds no adapter_config.json (see save_adapter)")
            return PeftModel.from_pretrained(base, str(adapter_path), is_trainable=True)
        if lora is None:
            return base
        unknown = set(lora) - {"r", "alpha", "dropout"}
        if unknown:
            raise ValueError(f"lora takes r, alpha, dropout; unknown key(s) {sorted(unknown)}")
        config = LoraConfig(
            r=int(lora.get("r", 32)), lora_alpha=int(lora.get("alpha", 32)),
            lora_dropout=float(lora.get("dropout", 0.05)),
            target_modules=rf".*language_model.*\.({'|'.join(LORA_TARGETS)})", bias="none",
        )
        return get_peft_model(base, config)

    # -- parts
    @property
    def base_model(self) -> nn.Module:
        """The Qwen2_5_VLForConditionalGeneration inside (under the peft wrapper if any)."""
        return self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model

    def vision_tower(self) -> nn.Module:
        return self.base_model.model.visual

    @property
    def has_adapter(self) -> bool:
        return hasattr(self.model, "peft_config")

    def save_adapter(self, folder: str | Path) -> Path:
        """Write only the LoRA adapter (adapter_config.json + weights) to ``folder``."""
        if not self.has_adapter:
            raise ValueError("this judge has no LoRA adapter to save (lora=None)")
        self.model.save_pretrained(str(folder))
        return Path(folder)

    def load_adapter(self, folder: str | Path) -> None:
        """Replace the current adapter's weights by those saved in ``folder``."""
        from peft import set_peft_model_state_dict
        from peft.utils import load_peft_weights

        if not self.has_adapter:
            raise ValueError("this judge was built without an adapter; pass adapter_path or lora")
        result = set_peft_model_state_dict(self.model, load_peft_weights(str(folder), device="cpu"))
        if result.unexpected_keys:
            raise ValueError(f"adapter in {folder} has weights this judge does not: {result.unexpected_keys[:5]}")

    # -- compute
    def forward(self, batch: dict[str, Tensor]) -> Tensor:
        """Mean cross-entropy over the answer tokens (labels are -100 elsewhere)."""
        return self.losses(batch, with_errors=False)["answer"]

    def losses(self, batch: dict[str, Tensor], with_errors: bool = True,
               score_weight: float = 1.0) -> dict[str, Tensor]:
        """``answer``: the answer cross-entropy, with the first answer token (the score line) weighted
        ``score_weight`` against 1 for the others; with the error head and ``error_labels`` in the batch
        also ``error`` (mean binary cross-entropy over the labelled caption tokens) and
        ``error_accuracy``."""
        wants_errors = with_errors and self.error_head is not None and "error_labels" in batch
        if self.video_cache is None:
            video = {"pixel_values_videos": batch["pixel_values_videos"]}
        else:  # the stored tokens of clips seen before, through transformers' precomputed-features input
            video = {"mm_encoder_outputs": {"video": self.video_cache.features(
                self.base_model.model, batch["pixel_values_videos"], batch["video_grid_thw"],
                batch.get("video_digests"))}}
        labels = batch["labels"]
        # logits only from the position before the batch's earliest answer token on (the answers are
        # right-aligned ahead of the padding): the prompt's logits are never scored, and the output
        # layer over every prompt position was ~5 % of a toy step
        answered = (labels != IGNORE_INDEX).any(0)
        start = max(1, int(answered.float().argmax())) if bool(answered.any()) else labels.shape[1] - 1
        mask = batch["attention_mask"]
        if bool((mask[:, 1:] <= mask[:, :-1]).all()):
            # right padding: under the causal mask no real token sees a pad, so the padding mask changes
            # nothing that is scored, and without it attention takes the faster causal-only kernel
            mask = torch.ones_like(mask)
        out = self.model(
            input_ids=batch["input_ids"], attention_mask=mask,
            **video, video_grid_thw=batch["video_grid_thw"],
            second_per_grid_ts=batch["second_per_grid_ts"], mm_token_type_ids=batch["mm_token_type_ids"],
            use_cache=False, output_hidden_states=wants_errors, logits_to_keep=labels.shape[1] - start + 1,
        )
        # the first answer token (the score line) weighs score_weight, the others 1; 1 = the plain mean
        labels = labels[:, start:]
        keep = labels != IGNORE_INDEX
        ce = nn.functional.cross_entropy(out.logits[:, :-1][keep].float(), labels[keep], reduction="none")
        first = keep & (keep.cumsum(1) == 1)
        weights = torch.where(first[keep], score_weight, 1.0)
        result = {"answer": (ce * weights).sum() / weights.sum()}
        if wants_errors:
            labels = batch["error_labels"]
            keep = labels != IGNORE_INDEX
            if bool(keep.any()):
                logits = self.error_head(out.hidden_states[self.error_layer][keep]).squeeze(-1).float()
                target = labels[keep].float()
                result["error"] = nn.functional.binary_cross_entropy_with_logits(logits, target)
                result["error_accuracy"] = ((logits > 0).float() == target).float().mean().detach()
        return result

    @torch.no_grad()
    def generate(self, batch: dict[str, Tensor], max_new_tokens: int = 64) -> list[str]:
        """Greedy answers (temperature 0) for the batch's left-padded prompts."""
        ids = batch["prompt_ids"]
        out = self.model.generate(
            input_ids=ids, attention_mask=batch["prompt_attention_mask"],
            mm_token_type_ids=batch["prompt_mm_token_type_ids"],
            pixel_values_videos=batch["pixel_values_videos"], video_grid_thw=batch["video_grid_thw"],
            second_per_grid_ts=batch["second_per_grid_ts"], do_sample=False, max_new_tokens=max_new_tokens,
            eos_token_id=self.prompter.end_token_id, pad_token_id=self.prompter.pad_token_id,
        )
        return [self.prompter.decode(seq) for seq in out[:, ids.shape[1]:]]

    @torch.no_grad()
    def score(self, frames: Sequence[np.ndarray], captions: Sequence[str], max_new_tokens: int = 64,
              sampled_fps: Sequence[float | None] | None = None) -> list[JudgeAnswer]:
        """Rate captions of videos given as ``(T, H, W, 3)`` uint8 frame arrays."""
        fps = sampled_fps or [None] * len(captions)
        samples = [self.prompter.encode(f, c, sampled_fps=s) for f, c, s in zip(frames, captions, fps)]
        device = next(self.parameters()).device
        batch = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in self.prompter.collate(samples).items()}
        return [parse_judge_answer(text) for text in self.generate(batch, max_new_tokens=max_new_tokens)]

    def parameter_summary(self) -> dict[str, int]:
        """Trainable / frozen parameter counts, split into vision and language parts."""
        vision = {id(p) for p in self.vision_tower().parameters()}
        out = {"trainable_vision": 0, "trainable_language": 0, "frozen": 0}
        for p in self.parameters():
            if not p.requires_grad:
                out["frozen"] += p.numel()
            else:
                out["trainable_vision" if id(p) in vision else "trainable_language"] += p.numel()
        return out
