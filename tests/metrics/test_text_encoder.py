"""Phrase encoders for the grounding recall: MiniLM parity with sentence-transformers, mean pooling
on a tiny random BERT built offline, the exact-match encoder, and the embed-once cache."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from metrics.text_encoder import (
    ExactMatchEncoder,
    HFMeanPoolEncoder,
    MiniLMEncoder,
    TextEncoder,
    build_text_encoder,
    default_text_encoder,
    encode_unique,
    minilm_model_dir,
)

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "man", "knife", "the", "bowl", "woman", "holds", "red"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A randomly initialised 2-layer BERT and a word-level tokenizer, saved like a hub folder."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_bert")
    vocab = {w: i for i, w in enumerate(WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]").save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    BertModel(config).save_pretrained(folder)
    return folder


PHRASES = ["a man", "the red bowl", "a woman holds a knife", "knife", "a man holds the red bowl a knife"]


def test_hf_mean_pool_equals_manual_mean_of_last_hidden_state(tiny_bert):
    enc = HFMeanPoolEncoder(tiny_bert, batch_size=2)
    got = enc.encode(PHRASES)
    assert got.shape == (len(PHRASES), 16) and got.dtype == torch.float32
    torch.testing.assert_close(got.norm(dim=1), torch.ones(len(PHRASES)))
    # Independent reference: each phrase alone (no padding at all), plain mean over its tokens.
    for text, row in zip(PHRASES, got):
        ids = enc.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = enc.model(**ids).last_hidden_state[0]
        want = hidden.mean(0) / hidden.mean(0).norm()
        torch.testing.assert_close(row, want, atol=1e-5, rtol=1e-5)


def test_hf_mean_pool_ignores_padding_batching_and_keeps_order(tiny_bert):
    one_batch = HFMeanPoolEncoder(tiny_bert, batch_size=256).encode(PHRASES)
    small = HFMeanPoolEncoder(tiny_bert, batch_size=1).encode(PHRASES)
    torch.testing.assert_close(one_batch, small, atol=1e-5, rtol=1e-5)
    by_tokens = HFMeanPoolEncoder(tiny_bert, max_batch_tokens=9).encode(PHRASES)  # 1-2 phrases per batch
    torch.testing.assert_close(by_tokens, one_batch, atol=1e-5, rtol=1e-5)
    reversed_ = HFMeanPoolEncoder(tiny_bert, batch_size=2).encode(PHRASES[::-1])
    torch.testing.assert_close(reversed_.flip(0), one_batch, atol=1e-5, rtol=1e-5)
    assert HFMeanPoolEncoder(tiny_bert).encode([]).shape == (0, 16)


def test_hf_mean_pool_truncates_at_max_length(tiny_bert):
    enc = HFMeanPoolEncoder(tiny_bert, max_length=4)
    # [CLS] a man [SEP] once truncated: everything after "man" is dropped.
    torch.testing.assert_close(enc.encode(["a man holds the red bowl"]), enc.encode(["a man"]), atol=1e-5, rtol=1e-5)


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        HFMeanPoolEncoder(tmp_path)


def test_minilm_equals_sentence_transformers(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    texts = ["a man", "a knife on the wooden table", "The Bowl", "a woman holding a red cup " * 12, "x"]
    enc = default_text_encoder()
    assert isinstance(enc, MiniLMEncoder) and default_text_encoder() is enc  # loaded once
    got = enc.encode(texts)
    want = SentenceTransformer(str(minilm_model_dir()), device="cpu").encode(
        texts, normalize_embeddings=True, convert_to_tensor=True)
    assert got.shape == (5, 384)
    torch.testing.assert_close(got, want.float().cpu(), atol=1e-5, rtol=0)
    torch.testing.assert_close(got.norm(dim=1), torch.ones(5))
    # Sanity of the default's semantics: a synonym phrase is closer than an unrelated one.
    sim = enc.encode(["a knife", "a kitchen knife", "a dog"])
    assert sim[0] @ sim[1] > 0.5 > sim[0] @ sim[2]


def test_exact_match_encoder():
    enc = ExactMatchEncoder()
    emb = enc.encode(["a man", "A  Man ", "a knife", "a man"])
    cos = emb @ emb.T
    torch.testing.assert_close(cos, torch.tensor([[1.0, 1, 0, 1], [1, 1, 0, 1], [0, 0, 1, 0], [1, 1, 0, 1]]))
    strict = ExactMatchEncoder(casefold=False).encode(["a man", "A man"])
    assert (strict[0] @ strict[1]).item() == 0.0
    assert enc.encode([]).shape[0] == 0
    assert isinstance(enc, TextEncoder)


def test_build_text_encoder(tiny_bert):
    assert isinstance(build_text_encoder("exact"), ExactMatchEncoder)
    assert isinstance(build_text_encoder(str(tiny_bert)), HFMeanPoolEncoder)
    with pytest.raises(ValueError, match="'minilm', 'exact' or a local"):
        build_text_encoder("bert-base-uncased")


class CountingEncoder:
    def __init__(self):
        self.calls = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return torch.tensor([[float(len(t)), 1.0] for t in texts])  # not unit length on purpose


def test_encode_unique_embeds_each_phrase_once_and_normalises():
    enc = CountingEncoder()
    phrases = ["a man", "a knife", "a man", "a bowl", "a knife", "a man"]
    unique, emb, index = encode_unique(enc, phrases)
    assert len(enc.calls) == 1 and sorted(enc.calls[0]) == sorted(set(phrases)) and len(enc.calls[0]) == 3
    assert [unique[i] for i in index] == phrases
    torch.testing.assert_close(emb.norm(dim=1), torch.ones(3))
    want = torch.nn.functional.normalize(torch.tensor([[float(len(p)), 1.0] for p in unique]), dim=1)
    torch.testing.assert_close(emb, want)
    assert index.dtype == np.int64
    unique, emb, index = encode_unique(enc, [])
    assert unique == [] and len(index) == 0 and len(enc.calls) == 1


def test_encode_unique_rejects_a_wrong_shape():
    class Broken:
        def encode(self, texts):
            return torch.zeros(len(texts) + 1, 4)

    with pytest.raises(ValueError, match="Broken.encode returned"):
        encode_unique(Broken(), ["a", "b"])
