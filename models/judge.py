"""VC-Inspector: a Qwen2.5-VL judge that rates a (video, caption) pair 1-5 and explains why.

The real judge is Qwen2.5-VL (3B or 7B) from a local folder with LoRA adapters on the language
model only; the vision tower and its merger (the visual-language projector) stay frozen
(seed 004 §3.3, appendix C). For CPU tests and the demo, :func:`tiny_judge_config` builds the same
architecture at toy size with random weights and :func:`build_tiny_judge_tokenizer` an offline
byte-level BPE tokenizer holding Qwen's special tokens.

The prompt is the seed's D.6 in Qwen's chat format; the answer is the score line, a blank line
and the explanation. :func:`parse_judge_answer` reads the score line back and reports every
answer it cannot read instead of turning it into a number.

:class:`JudgePrompter` (tokenizer + video processor, picklable for DataLoader workers) turns
frames and captions into model inputs; :class:`VCInspectorJudge` holds the model, computes the
answer-only loss, generates greedily and saves / loads the LoRA adapter on its own.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from models.video_feature_cache import FrozenVideoFeatureCache, pixel_digest

IGNORE_INDEX = -100
JUDGE_INSTRUCTION = (
    "<caption>{caption}</caption> You are given a video and a caption describing the video content. Please rate "
    "the helpfulness, relevance, accuracy, level of detail of the caption. The overall score should be on a scale "
    "of 1 to 5, where a higher score indicates better overall performance. Please first output a single line "
    "containing only one integer indicating the score. In the subsequent line, please provide a comprehensive "
    "explanation of your evaluation, avoiding any potential bias. STRICTLY FOLLOW THE FORMAT."
)
SYSTEM_PROMPT = "You are a helpful assistant."
# The toy judge's warm-up task (JudgeDataModule's describe_ratio): plain video description, which a
# real Qwen2.5-VL has learnt in pre-training and a randomly initialised toy has not.
DESCRIBE_INSTRUCTION = "Describe the video in one sentence."
TASKS = ("judge", "describe")
VIDEO_TOKEN = "<|video_pad|>"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|video_pad|>", "<|image_pad|>")
TEMPLATES = ("qwen", "plain")
# Qwen2.5-VL's LLM projection layers; the vision tower has gate/up/down projections too, hence the
# language_model anchor in the target regex.
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
_SCORE_LINE = re.compile(r"^(?:score\s*[:=]?\s*)?([+-]?\d+)\s*(?:/\s*5)?\s*\.?$", re.IGNORECASE)


# ----------------------------------------------------------------------------- answer format

def format_judge_answer(score: int, explanation: str) -> str:
    """Prompt D.6's answer: the score line, a blank line, the explanation."""
    return f"{int(score)}\n\n{explanation}"


class JudgeAnswer(NamedTuple):
    score: int | None
    explanation: str
    error: str | None


def parse_judge_answer(text: str) -> JudgeAnswer:
    """``(score, explanation, error)`` from a generated answer; score is None when unreadable.

    The first non-empty line must be the score line: an integer (optionally ``Score:`` before or
    ``/5`` after it) and nothing else, in 1..5. A digit inside prose, a missing or out-of-range
    score is reported in ``error``; the explanation is whatever follows the first line.
    """
    lines = text.strip().splitlines()
    if not lines:
        return JudgeAnswer(None, "", "empty answer")
    first, rest = lines[0].strip(), "\n".join(lines[1:]).strip()
    match = _SCORE_LINE.match(first)
    if match is None:
        reason = "first line is prose containing a digit, not a score line" if re.search(r"\d", first) \
            else "no score line (the first line holds no integer)"
        return JudgeAnswer(None, text.strip(), reason)
    score = int(match.group(1))
    if not 1 <= score <= 5:
        return JudgeAnswer(None, rest, f"score {score} is outside 1..5")
    return JudgeAnswer(score, rest, None)


# ----------------------------------------------------------------------------- tiny model parts

_TOKENIZER_CORPUS_WORDS = """
a an the then and of to in on at from behind with while is are video caption content helpful relevant
accurate accurately informative capture does not example objects actions incorrect score scale higher
indicates better overall performance explanation evaluation comprehensive bias format rate given
describing please first output single line containing only one integer subsequent provide avoiding any
potential strictly follow level detail relevance helpfulness accuracy you assistant system user
red green blue yellow purple orange white black brown pink gray grey circle square triangle diamond cross
rectangle star wall left right top bottom up down still man woman boy girl child person dog cat ball car
enters leaves moves stays bounces hides emerges passes spins shakes grows slides rolls jumps runs walks
enter leave move stay bounce hide emerge pass spin shake grow slide roll jump run walk sits stands plays
entering leaving moving staying bouncing hiding emerging passing playing holding throwing catching
"""


def tokenizer_corpus() -> list[str]:
    """A fixed corpus for the tiny tokenizer: the judge prompt, explanations and scene words."""
    words = _TOKENIZER_CORPUS_WORDS.split()
    lines = [" ".join(words[i:i + 10]) for i in range(0, len(words), 10)]
    lines += [JUDGE_INSTRUCTION.format(caption="a red circle moves left, then a blue square stays still.")] * 4
    lines += [DESCRIBE_INSTRUCTION] * 4
    lines += ["The caption is helpful, relevant, accurate, and informative to the video content."] * 4
    lines += ["The caption does not accurately capture the video content. For example, the objects "
              "(blue circle) and actions (hides) are incorrect."] * 4
    lines += [f"{d}\n\n" for d in "12345"] * 4
    lines += [f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n"] * 4
    return lines


def build_tiny_judge_tokenizer(out_dir: str | Path | None = None, vocab_size: int = 1024):
    """Byte-level BPE with Qwen's special tokens, trained on :func:`tokenizer_corpus` (deterministic).

    Saved to ``out_dir`` when given (and read back from there if already built).
    """
    from transformers import PreTrainedTokenizerFast

    if out_dir is not None and (Path(out_dir) / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(str(out_dir))
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(tokenizer_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    if out_dir is not None:
        fast.save_pretrained(str(out_dir))
    return fast


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


# ----------------------------------------------------------------------------- prompter

class JudgePrompter:
    """Frames + caption (+ answer) -> Qwen2.5-VL inputs; picklable (tokenizer, processor, numbers).

    ``max_pixels`` bounds each frame (224 x 224 in the paper); frames keep their aspect ratio and
    are resized to multiples of ``patch_size * merge_size``. ``digest_videos`` adds each clip's
    pixel digest to its sample (``video_digest``), the key of the judge's frozen-tower memo.
    """

    def __init__(self, tokenizer, video_processor, template: str = "qwen", max_pixels: int = 224 * 224,
                 min_pixels: int = 56 * 56, digest_videos: bool = False):
        if template not in TEMPLATES:
            raise ValueError(f"template must be one of {TEMPLATES}, got {template!r}")
        missing = [t for t in ("<|vision_start|>", "<|vision_end|>", VIDEO_TOKEN, "<|im_end|>")
                   if tokenizer.convert_tokens_to_ids(t) in (None, tokenizer.unk_token_id)]
        if missing:
            raise ValueError(f"the judge tokenizer lacks Qwen's special token(s) {missing}")
        self.tokenizer = tokenizer
        self.video_processor = video_processor
        self.template = template
        self.max_pixels, self.min_pixels = int(max_pixels), int(min_pixels)
        self.digest_videos = bool(digest_videos)  # add each clip's pixel digest, the frozen-tower memo's key
        self.video_token_id = tokenizer.convert_tokens_to_ids(VIDEO_TOKEN)
        self.end_token = "<|im_end|>" if template == "qwen" else tokenizer.eos_token
        self.end_token_id = tokenizer.convert_tokens_to_ids(self.end_token)
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.end_token_id
        self.temporal_patch_size = int(video_processor.temporal_patch_size)

    def prompt_text(self, caption: str, num_video_tokens: int, task: str = "judge") -> str:
        """Prompt D.6 with the caption (``judge``), or the video-description prompt (``describe``)."""
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
        video = f"<|vision_start|>{VIDEO_TOKEN * num_video_tokens}<|vision_end|>"
        instruction = JUDGE_INSTRUCTION.format(caption=caption) if task == "judge" else DESCRIBE_INSTRUCTION
        if self.template == "qwen":
            return (f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n{video}{instruction}"
                    "<|im_end|>\n<|im_start|>assistant\n")
        return f"USER:\n{video}\n\n{instruction}\nASSISTANT:\n"

    def encode_video(self, frames: np.ndarray | Tensor) -> tuple[Tensor, Tensor]:
        """``(T, H, W, 3)`` uint8 frames -> ``pixel_values_videos (N, D)`` and ``video_grid_thw (3,)``."""
        frames = frames.cpu().numpy() if isinstance(frames, Tensor) else np.asarray(frames)
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise ValueError(f"expected uint8 frames of shape (T, H, W, 3), got {frames.shape} {frames.dtype}")
        out = self.video_processor(videos=[frames], do_sample_frames=False, return_tensors="pt",
                                   size={"shortest_edge": self.min_pixels, "longest_edge": self.max_pixels},
                                   cap_pixels_per_frame=False)
        return out["pixel_values_videos"], out["video_grid_thw"][0]

    def num_video_tokens(self, grid_thw: Tensor) -> int:
        return int(grid_thw.prod()) // int(self.video_processor.merge_size) ** 2

    def encode(self, frames: np.ndarray | Tensor, caption: str, answer: str | None = None,
               sampled_fps: float | None = None, task: str = "judge",
               error_spans: Sequence[tuple[int, int]] | None = None) -> dict[str, Any]:
        """One sample: prompt ids, answer ids (loss only there) and the video's patches.

        ``task="describe"`` asks for a description of the video instead (the caption is then not
        in the prompt; pass it as the answer to train on it). ``error_spans`` (character spans of
        ``caption`` that are wrong, ``[]`` for a correct caption) adds ``error_labels``: per prompt
        token 1 inside a span, 0 elsewhere in the caption, -100 outside it."""
        pixels, grid = self.encode_video(frames)
        text = self.prompt_text(caption, self.num_video_tokens(grid), task)
        encoded = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=error_spans is not None)
        prompt = encoded["input_ids"]
        sample = {"prompt_ids": torch.tensor(prompt, dtype=torch.long), "pixel_values_videos": pixels,
                  "video_grid_thw": grid,
                  # seconds per temporal patch: M-RoPE spaces video time positions by it
                  "second_per_grid_ts": float(self.temporal_patch_size / sampled_fps) if sampled_fps else 1.0}
        if self.digest_videos:  # hashed here, in the loader workers, not in the training step
            sample["video_digest"] = pixel_digest(pixels)
        if answer is not None:
            ids = self.tokenizer(answer + self.end_token, add_special_tokens=False)["input_ids"]
            sample["answer_ids"] = torch.tensor(ids, dtype=torch.long)
        if error_spans is not None:
            if task != "judge":
                raise ValueError("error_spans label the caption of a judge prompt, not a describe prompt")
            sample["error_labels"] = self.error_labels(text, caption, encoded["offset_mapping"], error_spans)
        return sample

    @staticmethod
    def error_labels(text: str, caption: str, offsets: Sequence[tuple[int, int]],
                     error_spans: Sequence[tuple[int, int]]) -> Tensor:
        """Per-token labels of the caption in ``text``: 1 on a token overlapping a wrong span, else 0; -100 off it."""
        marked = f"<caption>{caption}</caption>"
        at = text.find(marked)
        if at < 0:
            raise ValueError("the prompt does not hold the caption between <caption> tags")
        begin = at + len("<caption>")
        bounds = torch.tensor(offsets, dtype=torch.long).view(-1, 2)
        spans = torch.tensor([(begin + a, begin + b) for a, b in error_spans], dtype=torch.long).view(-1, 2)
        if len(spans) and (bool((spans[:, 0] >= spans[:, 1]).any()) or int(spans.max()) > begin + len(caption)
                           or int(spans.min()) < begin):
            raise ValueError(f"error spans {list(error_spans)} do not lie inside the caption ({len(caption)} chars)")

        def overlaps(lo: Tensor, hi: Tensor) -> Tensor:  # tokens (N,) x ranges (M,) -> (N,)
            hits = (bounds[:, :1] < hi.view(1, -1)) & (bounds[:, 1:] > lo.view(1, -1))
            return hits.any(dim=1)

        labels = torch.full((len(bounds),), IGNORE_INDEX, dtype=torch.long)
        labels[overlaps(torch.tensor([begin]), torch.tensor([begin + len(caption)]))] = 0
        if len(spans):
            labels[overlaps(spans[:, 0], spans[:, 1])] = 1
        return labels

    def collate(self, samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Right-padded prompt+answer (training) and left-padded prompts (generation); tensors, and
        ``video_digests`` (a list of str: the clips' keys for the frozen-tower memo)."""
        out: dict[str, Any] = {
            "pixel_values_videos": torch.cat([s["pixel_values_videos"] for s in samples]),
            "video_grid_thw": torch.stack([s["video_grid_thw"] for s in samples]),
            "second_per_grid_ts": torch.tensor([s["second_per_grid_ts"] for s in samples], dtype=torch.float32),
        }
        if all("video_digest" in s for s in samples):
            out["video_digests"] = [s["video_digest"] for s in samples]
        prompts = [s["prompt_ids"] for s in samples]
        width = max(len(p) for p in prompts)
        ids = torch.full((len(samples), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(samples), width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding: generation appends on the right
            ids[i, width - len(p):] = p
            mask[i, width - len(p):] = 1
        out.update(prompt_ids=ids, prompt_attention_mask=mask, prompt_mm_token_type_ids=self.token_types(ids))
        if all("answer_ids" in s for s in samples):
            full = [torch.cat([s["prompt_ids"], s["answer_ids"]]) for s in samples]
            width = max(len(f) for f in full)
            ids = torch.full((len(samples), width), self.pad_token_id, dtype=torch.long)
            labels = torch.full((len(samples), width), IGNORE_INDEX, dtype=torch.long)
            mask = torch.zeros((len(samples), width), dtype=torch.long)
            for i, (f, s) in enumerate(zip(full, samples)):
                ids[i, :len(f)] = f
                mask[i, :len(f)] = 1
                labels[i, len(s["prompt_ids"]):len(f)] = s["answer_ids"]  # loss on the answer tokens only
            out.update(input_ids=ids, attention_mask=mask, labels=labels, mm_token_type_ids=self.token_types(ids))
            if any("error_labels" in s for s in samples):  # aligned with input_ids; -100 where a sample has none
                errors = torch.full((len(samples), width), IGNORE_INDEX, dtype=torch.long)
                for i, s in enumerate(samples):
                    if "error_labels" in s:
                        errors[i, :len(s["error_labels"])] = s["error_labels"]
                out["error_labels"] = errors
        return out

    def token_types(self, ids: Tensor) -> Tensor:
        """Qwen2.5-VL's modality ids (0 text, 2 video) that drive its 3-D rotary positions."""
        return (ids == self.video_token_id).to(torch.int32) * 2

    def decode(self, ids: Tensor) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


# ----------------------------------------------------------------------------- the judge

VISION_PREFIXES = ("model.visual.", "visual.")


def load_vision_weights(tower: nn.Module, path: str | Path) -> None:
    """Load a Qwen2.5-VL vision tower (with its merger) from a local state-dict file, all keys required."""
    location = Path(path)
    if not location.is_file():
        raise FileNotFoundError(f"model.init_args.vision_checkpoint: {location} does not exist (README, "
                                "'The VC-Inspector judge': scripts/pretrain_judge_vision.py writes it)")
    if location.suffix == ".safetensors":
        from safetensors.torch import load_file

        raw = load_file(str(location))
    else:
        raw = torch.load(location, map_location="cpu", weights_only=True)
    prefix = next((p for p in VISION_PREFIXES if any(k.startswith(p) for k in raw)), None)
    if prefix is None:
        raise ValueError(f"model.init_args.vision_checkpoint: {location} holds no {' or '.join(VISION_PREFIXES)}* weights")
    state = {k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)}
    try:
        tower.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise ValueError(f"model.init_args.vision_checkpoint: {location} does not match the vision tower "
                         f"(tiny vision sizes differ?): {err}") from err


class VCInspectorJudge(nn.Module):
    """Qwen2.5-VL with LoRA on the language model; vision tower and merger frozen.

    Args:
        model_path: local folder of a Qwen2.5-VL checkpoint (model, tokenizer, video processor).
            When None, ``tiny`` (a dict of :func:`tiny_judge_config` sizes) builds a random toy model.
        adapter_path: a saved LoRA adapter folder to start from (see :meth:`save_adapter`).
        lora: ``{"r", "alpha", "dropout"}`` or None for no adapter (an untrained baseline, or a toy
            whose whole language model trains, where an adapter only re-parametrises trained weights).
        template, max_pixels, min_pixels: prompt style and frame size bound (see JudgePrompter).
        vision_checkpoint: a local file of vision-tower weights (``model.visual.*`` or ``visual.*`` keys,
            merger included) loaded over the base model's; for the toy judge, the output of
            scripts/pretrain_judge_vision.py (a real Qwen2.5-VL's vision tower is already pre-trained).
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
            them when a clip comes again (:class:`models.video_feature_cache.FrozenVideoFeatureCache`;
            exact, keyed by the clip's pixels); 0 = off. Refused with a trainable tower or merger.
    """

    def __init__(self, model_path: str | None = None, tiny: dict | None = None, adapter_path: str | None = None,
                 lora: dict | None = None, template: str = "qwen", max_pixels: int = 224 * 224,
                 min_pixels: int = 56 * 56, vision_checkpoint: str | None = None, train_vision: bool = False,
                 train_merger: bool = False,
                 train_embeddings: bool = False,
                 train_language_model: bool = False,
                 dtype: str = "float32",
                 gradient_checkpointing: bool = False, seed: int = 0, error_head: bool = False,
                 error_layer: int = -1, video_feature_cache: int = 0):
        super().__init__()
        from transformers import Qwen2_5_VLForConditionalGeneration

        torch_dtype = getattr(torch, dtype)
        if model_path is not None:
            path = Path(model_path)
            if not (path / "config.json").exists():
                raise FileNotFoundError(
                    f"judge model_path {path} holds no config.json; put a local Qwen2.5-VL checkpoint there "
                    "(config, safetensors, tokenizer and preprocessor files)")
            from transformers import AutoTokenizer, AutoVideoProcessor

            tokenizer = AutoTokenizer.from_pretrained(str(path))
            video_processor = AutoVideoProcessor.from_pretrained(str(path))
            base = Qwen2_5_VLForConditionalGeneration.from_pretrained(str(path), dtype=torch_dtype)
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
            base.gradient_checkpointing_enable()
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
            r=int(lora.get("r", 32)), lora_alpha=int(lora.get("alpha", 32)), lora_dropout=float(lora.get("dropout", 0.05)),
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

    def losses(self, batch: dict[str, Tensor], with_errors: bool = True, score_weight: float = 1.0) -> dict[str, Tensor]:
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
