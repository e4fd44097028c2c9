"""The LLM of GROVE: a causal LM whose prompt carries projected video tokens.

The prompt holds ``num_video_tokens`` placeholder tokens; their embeddings are replaced by the
video tokens (masked scatter), so the whole multimodal sequence is one ``inputs_embeds`` tensor.
The language-modelling loss is computed here, on the answer positions only (labels != -100),
and the post-norm last-layer hidden states are returned for the [DET] queries.
"""
from __future__ import annotations

import core  # noqa: F401  (torchvision compatibility before transformers imports it)
from core.json_file import read_json
from core.paths import DATA_DIR

import importlib.util
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaTokenizer,
)

from models.grove.configuration import LanguageModelConfig, require_path
from models.grove.fp32_buffers import ROTARY, KeepsBuffersFp32
from models.grove.prompting import DET_TOKEN, IGNORE_INDEX, OFFICIAL_VIDEO_INDEX, VIDEO_TOKEN, add_grove_tokens
from models.tiny_tokenizer import VOCAB_SIZE as TINY_VOCAB_SIZE
from models.tiny_tokenizer import build_tiny_tokenizer

TINY_TOKENIZER_DIR = DATA_DIR / "tiny_tokenizer"
QUERY_TOKENS = ("det", "before_det")
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# "sdpa": PyTorch's fused attention (any device); "flash_attention_2": the paper's, needs flash-attn.
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2")


def load_tokenizer(config: LanguageModelConfig):
    """The configured tokenizer (``tokenizer_path``, else ``path``, else the tiny offline tokenizer)."""
    source = config.tokenizer_path or config.path
    if source is None:
        size = int(config.tiny_vocab_size)
        folder = (TINY_TOKENIZER_DIR if size == TINY_VOCAB_SIZE
                  else TINY_TOKENIZER_DIR.with_name(f"tiny_tokenizer_{size}"))
        return build_tiny_tokenizer(folder, vocab_size=size)
    key = "model.language_model.tokenizer_path" if config.tokenizer_path else "model.language_model.path"
    return load_tokenizer_folder(require_path(source, key), key)


def _is_llama_sentencepiece(folder: Path) -> bool:
    """A LLaMA-family SentencePiece tokenizer: the config names a Llama tokenizer class, or the
    folder has only ``tokenizer.model`` (GLaMM's and LLaVA's checkpoint layout) and no class."""
    config_file = folder / "tokenizer_config.json"
    tokenizer_class = None
    if config_file.is_file():
        try:
            tokenizer_class = json.loads(config_file.read_text(encoding="utf-8")).get("tokenizer_class")
        except (json.JSONDecodeError, AttributeError) as err:
            raise ValueError(f"tokenizer folder {folder}: {config_file.name} is not a JSON object ({err})") from err
    if tokenizer_class:
        return str(tokenizer_class).startswith("Llama")
    return (folder / "tokenizer.model").is_file()


def _check_sentencepiece(path: Path, key: str) -> None:
    """Refuse a ``tokenizer.model`` SentencePiece cannot read, naming it: transformers would go on to
    try other readers and report the last one's complaint (a missing ``tiktoken`` package)."""
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(path.read_bytes())
    except Exception as err:  # noqa: BLE001  (sentencepiece raises RuntimeError or its own errors)
        raise ValueError(f"{key}: {path} is not a SentencePiece model (damaged, truncated or another kind of file: "
                         f"{str(err).splitlines()[0] if str(err) else type(err).__name__})") from None
    if processor.GetPieceSize() == 0:
        raise ValueError(f"{key}: {path} is a SentencePiece model with no pieces")


def load_tokenizer_folder(folder: str | Path, key: str = "tokenizer folder"):
    """The tokenizer of a local Hugging Face folder; ``key`` names the setting in errors.

    LLaMA/Vicuna/GLaMM tokenizers are loaded with ``legacy=False`` whatever the folder says, so
    that text right after an added token (``[DET].``) is encoded without a word-boundary
    ``▁``: these are the ids the released GROVE and GLaMM were trained on (their slow tokenizer,
    from GLaMM's ``legacy: false`` folder). Many LLaMA-2 folders say ``legacy: true``, which
    would shift the tokens after ``[DET]``. A folder holding only ``tokenizer.model`` is
    converted with the ``sentencepiece`` package.
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{key}: {folder} is not a folder (expected a Hugging Face tokenizer folder)")
    has_json, has_model = (folder / "tokenizer.json").is_file(), (folder / "tokenizer.model").is_file()
    if not has_json and not has_model and not (folder / "vocab.json").is_file():
        raise FileNotFoundError(f"{key}: {folder} holds no tokenizer (tokenizer.json, tokenizer.model or "
                                "vocab.json)")
    llama = _is_llama_sentencepiece(folder)
    if llama and not has_json and importlib.util.find_spec("sentencepiece") is None:
        raise ImportError(f"{key}: {folder} holds only tokenizer.model, which needs the sentencepiece package to "
                          "load (pip install -r requirements.txt)")
    if has_json:
        read_json(folder / "tokenizer.json")  # a damaged file is named, not reported as a missing package
    elif has_model and importlib.util.find_spec("sentencepiece") is not None:
        _check_sentencepiece(folder / "tokenizer.model", key)
    try:
        if llama:
            return split_words_as_sentencepiece(LlamaTokenizer.from_pretrained(str(folder), legacy=False))
        return AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    except (OSError, ValueError, ImportError, KeyError, TypeError) as err:
        raise ValueError(f"{key}: cannot load a tokenizer from {folder}: {type(err).__name__}: {err}") from err


def split_words_as_sentencepiece(tokenizer):
    """``tokenizer`` with runs of spaces tokenized as the released stacks' slow LLaMA tokenizer
    (SentencePiece itself) does.

    SentencePiece merges whitespace-only pieces last: in ``two  people`` the run's last ``▁`` joins
    the next word (``▁two``, ``▁``, ``▁people``), while the converted ``tokenizers`` pipeline merges
    the run first (``▁two``, ``▁▁``, ``people``). A pre-tokenizer split before each ``▁`` that the
    vocabulary joins to the next character (a piece ``▁c`` exists; not digits, which LLaMA splits)
    gives SentencePiece's pieces. Text without runs of spaces tokenizes as before. Left over: a run
    before a character that merges with its neighbour before it would with ``▁`` (``  ))``), rare
    outside mixed scripts. Tokenizers without a Metaspace step are returned unchanged."""
    from tokenizers import Regex, pre_tokenizers

    backend = getattr(tokenizer, "backend_tokenizer", None)
    current = getattr(backend, "pre_tokenizer", None)
    if current is None or "Metaspace" not in repr(current) or "Split" in repr(current):
        return tokenizer
    space = "\u2581"
    joined = sorted({p[1] for p in tokenizer.get_vocab() if len(p) == 2 and p[0] == space and p[1] != space})
    if not joined:
        return tokenizer
    char_class = "".join("\\" + c if c in "\\]^-[" else c for c in joined)
    word_start = pre_tokenizers.Split(Regex(f"{space}(?=[{char_class}])"), behavior="merged_with_next")
    backend.pre_tokenizer = pre_tokenizers.Sequence([current, word_start])
    return tokenizer
    word_start = pre_tokenizers.Split(Regex("\u2581(?=[^\u2581\\d])"), behavior="merged_with_next")
    backend.pre_tokenizer = pre_tokenizers.Sequence([current, word_start])
    return tokenizer


def build_causal_lm(config: LanguageModelConfig, tokenizer) -> nn.Module:
    """The pretrained LLM from ``path``, or a random LLaMA from ``llama_config``."""
    if config.torch_dtype not in _DTYPES:
        raise ValueError(f"model.language_model.torch_dtype must be one of {sorted(_DTYPES)}, "
                         f"got {config.torch_dtype!r}")
    dtype = _DTYPES[config.torch_dtype]
    if config.attn_implementation not in (None, *ATTN_IMPLEMENTATIONS):
        raise ValueError(f"model.language_model.attn_implementation must be one of {ATTN_IMPLEMENTATIONS} "
                         f"(or null for transformers' default), got {config.attn_implementation!r}")
    if config.attn_implementation == "flash_attention_2" and importlib.util.find_spec("flash_attn") is None:
        raise ImportError("model.language_model.attn_implementation: 'flash_attention_2' needs the flash-attn "
                          "package (CUDA GPUs only; pip install flash-attn); without it use 'sdpa'")
    extra = {"attn_implementation": config.attn_implementation} if config.attn_implementation else {}
    if config.path is not None:
        location = require_path(config.path, "model.language_model.path")
        if not config.pretrained_weights:  # the weights come from a checkpoint: the architecture only
            from transformers import AutoConfig

            return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(location)), dtype=dtype, **extra)
        return AutoModelForCausalLM.from_pretrained(str(location), dtype=dtype, **extra)
    if config.llama_config is None:
        raise ValueError("model.language_model: set either 'path' (a local Hugging Face folder) or 'llama_config'")
    kwargs = {"vocab_size": len(tokenizer), "bos_token_id": tokenizer.bos_token_id,
              "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id,
              **dict(config.llama_config), **extra}
    model = LlamaForCausalLM(LlamaConfig(**kwargs))
    return model.to(dtype) if dtype != torch.float32 else model


def query_mask(input_ids: Tensor, det_token_id: int, query_token: str = "det") -> Tensor:
    """Boolean mask of the positions whose hidden state is a [DET] query (see ``GroveLanguageModel.query_mask``)."""
    det = input_ids == det_token_id
    if query_token == "det":
        return det
    return torch.cat((det[:, 1:], det.new_zeros(det.shape[0], 1)), dim=1)


class GroveLanguageModel(KeepsBuffersFp32):
    """LLM + tokenizer with GROVE's tokens; ``forward`` returns ``(lm_loss, last_hidden_state)``.

    The rotary position tables stay fp32 when the model is cast to 16 bits (:mod:`models.grove.fp32_buffers`)."""

    fp32_buffers = ROTARY

    def __init__(self, config: LanguageModelConfig, tokenizer=None):
        super().__init__()
        self.config = config
        if config.query_token not in QUERY_TOKENS:
            raise ValueError(f"model.language_model.query_token must be one of {QUERY_TOKENS}, "
                             f"got {config.query_token!r}")
        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(config)
        add_grove_tokens(self.tokenizer, config.special_tokens)
        self.model = build_causal_lm(config, self.tokenizer)
        if len(self.tokenizer) > self.model.get_input_embeddings().num_embeddings:
            # New rows start at the mean embedding (transformers' default), a neutral start for [DET].
            self.model.resize_token_embeddings(len(self.tokenizer))
        if config.lora_r > 0:
            from peft import LoraConfig, inject_adapter_in_model

            lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                              target_modules=list(config.lora_target_modules), bias="none")
            before = {name: p.requires_grad for name, p in self.model.named_parameters()}
            inject_adapter_in_model(lora, self.model)  # in place: parameter names stay the HF ones
            for name, param in self.model.named_parameters():  # freezing is Grove.configure_trainable's job
                param.requires_grad_(before.get(name.replace(".base_layer", ""), True))
        if config.gradient_checkpointing:
            self.model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        # GLaMM's vocabulary (special_tokens=glamm) reads its queries at [SEG]
        self.det_token_id = self.tokenizer.convert_tokens_to_ids(
            "[SEG]" if config.special_tokens == "glamm" else DET_TOKEN)
        self.video_token_id = (OFFICIAL_VIDEO_INDEX if config.special_tokens in ("official", "glamm")
                               else self.tokenizer.convert_tokens_to_ids(VIDEO_TOKEN))

    @property
    def hidden_size(self) -> int:
        return self.model.config.hidden_size

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    def get_output_embeddings(self) -> nn.Module:
        return self.model.get_output_embeddings()

    def embed_tokens(self, input_ids: Tensor) -> Tensor:
        # the official placeholder id is negative: look it up as id 0, it is replaced anyway
        return self.get_input_embeddings()(input_ids.clamp(min=0))

    def query_mask(self, input_ids: Tensor) -> Tensor:
        """Where the [DET] queries are read: at each [DET], or at the token before it (``before_det``).

        The released code builds its mask from ``input_ids[:, 1:] == det`` and reads the hidden
        state one position earlier: the last token of ``</p> [DET]`` before [DET] (``</p>``, or
        the word-boundary token between them, depending on how the tokenizer splits the space).
        """
        return query_mask(input_ids, self.det_token_id, self.config.query_token)

    def build_inputs_embeds(self, input_ids: Tensor, video_embeds: Tensor) -> Tensor:
        """Token embeddings with the video placeholders replaced, in order, by ``video_embeds``."""
        embeds = self.embed_tokens(input_ids)
        is_video = (input_ids == self.video_token_id).unsqueeze(-1)
        expected = video_embeds.shape[0] * video_embeds.shape[1]
        found = int(is_video.sum())
        if found != expected or video_embeds.shape[0] != input_ids.shape[0]:
            raise ValueError(f"prompts hold {found} video placeholder tokens, expected {video_embeds.shape[1]} per "
                             f"sequence for video tokens of shape {tuple(video_embeds.shape)}")
        return embeds.masked_scatter(is_video, video_embeds.to(embeds.dtype))

    def _decoder(self) -> nn.Module:
        """The transformer body (LlamaModel for LLaMA), whose output is post final norm."""
        return self.model.get_decoder()

    def forward(self, input_ids: Tensor, attention_mask: Tensor, video_embeds: Tensor,
                labels: Tensor | None = None) -> tuple[Tensor | None, Tensor]:
        inputs_embeds = self.build_inputs_embeds(input_ids, video_embeds)
        hidden = self._decoder()(inputs_embeds=inputs_embeds, attention_mask=attention_mask,
                                 use_cache=False).last_hidden_state
        loss = None
        if labels is not None:
            # Next-token loss; logits only where a label exists (skips the long video prefix).
            target = labels[:, 1:]
            keep = target != IGNORE_INDEX
            logits = self.get_output_embeddings()(hidden[:, :-1][keep]).float()
            count = keep.sum()
            loss = F.cross_entropy(logits, target[keep], reduction="sum") / count.clamp(min=1)
        return loss, hidden

    @torch.no_grad()
    def generate(self, video_embeds: Tensor, prompt_ids: Tensor, prompt_attention_mask: Tensor,
                 max_new_tokens: int = 64, keep_eos: bool = False) -> list[list[int]]:
        """Greedy decoding with KV cache from left-padded prompts; new token ids up to EOS
        (excluded, or kept with ``keep_eos`` as the released inference keeps it)."""
        inputs_embeds = self.build_inputs_embeds(prompt_ids, video_embeds)
        generation = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                      eos_token_id=self.tokenizer.eos_token_id,
                                      pad_token_id=self.tokenizer.pad_token_id,
                                      bos_token_id=self.tokenizer.bos_token_id)
        out = self.model.generate(inputs_embeds=inputs_embeds, attention_mask=prompt_attention_mask,
                                  generation_config=generation)
        eos = self.tokenizer.eos_token_id
        sequences = []
        for row in out.tolist():
            sequences.append(row[: row.index(eos) + int(keep_eos)] if eos in row else row)
        return sequences
