"""Prompt/target formatting, tokenisation masks, parsing of generated text, and the tiny tokenizer."""
import os
import pickle
import random

import pytest
import torch

from models.grove.prompting import (
    DEFAULT_QUESTIONS,
    DET_TOKEN,
    IGNORE_INDEX,
    GroundedCaptionPrompter,
    add_grove_tokens,
    format_target,
    parse_tagged_text,
)
from models.tiny_tokenizer import build_tiny_tokenizer

CAPTIONS = [
    "<p>A man</p> cuts <p>the bread</p> with <p>a knife</p> on a board.",
    "<p>a red circle</p> moves to the left",
    "nothing is grounded here",
    "<p>a (big) box [x] *+? $1 \\1 {2}</p> slides down",
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    tok = build_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tiny")
    add_grove_tokens(tok)
    return tok


@pytest.fixture()
def prompter(tokenizer):
    return GroundedCaptionPrompter(tokenizer, num_video_tokens=12)


def test_format_target_keeps_regex_metacharacters_verbatim():
    assert format_target("<p>a red circle</p>") == "<p> a red circle </p> [DET]"
    assert format_target(CAPTIONS[3]) == "<p> a (big) box [x] *+? $1 \\1 {2} </p> [DET] slides down"
    assert format_target("a <p>  x  </p>, then <p>y</p>.") == "a <p> x </p> [DET], then <p> y </p> [DET]."


def test_format_target_is_idempotent():
    for caption in CAPTIONS:
        once = format_target(caption)
        assert format_target(once) == once
        assert once.count(DET_TOKEN) == caption.count("<p>")


def test_training_labels_mask_prompt_and_padding(prompter, tokenizer):
    enc = prompter.encode_training(CAPTIONS)
    ids, mask, labels = enc["input_ids"], enc["attention_mask"], enc["labels"]
    assert ids.shape == mask.shape == labels.shape and ids.dtype == torch.long
    prompt = prompter.prompt_ids(DEFAULT_QUESTIONS[0])
    for i, caption in enumerate(CAPTIONS):
        n = int(mask[i].sum())
        assert mask[i, :n].all() and not mask[i, n:].any()          # right padding
        assert (ids[i, n:] == tokenizer.pad_token_id).all()
        assert ids[i, : len(prompt)].tolist() == prompt              # same prompt in every row
        assert (labels[i, : len(prompt)] == IGNORE_INDEX).all()      # no loss on the prompt
        assert (labels[i, n:] == IGNORE_INDEX).all()                 # nor on padding
        answer = labels[i, len(prompt):n]
        assert (answer == ids[i, len(prompt):n]).all()
        assert answer[-1].item() == tokenizer.eos_token_id
        text = tokenizer.decode(answer[:-1].tolist(), skip_special_tokens=False)
        assert " ".join(text.split()) == format_target(caption)
        assert int(prompter.det_positions(ids[i]).sum()) == caption.count("<p>")
        assert int((ids[i] == prompter.video_token_id).sum()) == 12
    assert ids[0, 0].item() == tokenizer.bos_token_id


def test_video_placeholders_sit_in_the_preamble(prompter, tokenizer):
    prompt = prompter.prompt_ids(DEFAULT_QUESTIONS[0])
    first = prompt.index(prompter.video_token_id)
    assert prompt[first: first + 12] == [prompter.video_token_id] * 12
    text = tokenizer.decode(prompt[first + 12:])
    assert text.startswith(" provides an overview of the video.\n" + DEFAULT_QUESTIONS[0])
    assert text.endswith("ASSISTANT:")
    assert tokenizer.decode(prompt[1:first]).endswith("USER: The ")


def test_question_sampling(prompter):
    no_rng = {tuple(prompter.encode_training(CAPTIONS[:1])["input_ids"][0].tolist()) for _ in range(3)}
    assert len(no_rng) == 1                                              # deterministic without rng
    seen = set()
    for seed in range(40):
        enc = prompter.encode_training(CAPTIONS[:1], rng=random.Random(seed))
        seen.add(tuple(enc["input_ids"][0].tolist()))
    assert len(seen) == len(DEFAULT_QUESTIONS)
    a = prompter.encode_training(CAPTIONS, rng=random.Random(7))["input_ids"]
    b = prompter.encode_training(CAPTIONS, rng=random.Random(7))["input_ids"]
    assert torch.equal(a, b)
    fixed = GroundedCaptionPrompter(prompter.tokenizer, 12, sample_question=False)
    assert len({tuple(fixed.encode_training(CAPTIONS[:1], rng=random.Random(s))["input_ids"][0].tolist())
                for s in range(10)}) == 1


def test_generation_prompts_and_left_padding(prompter, tokenizer):
    prompts = prompter.encode_prompts(3)
    expected = prompter.prompt_ids(DEFAULT_QUESTIONS[0])
    assert prompts["input_ids"].shape == (3, len(expected))
    assert all(row == expected for row in prompts["input_ids"].tolist())
    assert prompts["attention_mask"].all()
    padded = GroundedCaptionPrompter.left_pad([[5, 6, 7], [8]], pad_id=tokenizer.pad_token_id)
    assert padded["input_ids"].tolist() == [[5, 6, 7], [tokenizer.pad_token_id] * 2 + [8]]
    assert padded["attention_mask"].tolist() == [[1, 1, 1], [0, 0, 1]]


def test_parse_generated_messy_text(prompter):
    text = ("  a man <p>  a knife</p>[DET] cuts<p>the  bread </p> [DET] [DET] on </p> the table ,"
            " <p></p> near <p> a board </s><pad>")
    tagged, caption, phrases = prompter.parse_generated(text)
    assert phrases == ["a knife", "the bread", "a board"]
    assert tagged == "a man <p>a knife</p> cuts <p>the bread</p> on the table, near <p>a board</p>"
    assert caption == "a man a knife cuts the bread on the table, near a board"
    # A <p> opened inside a phrase closes the previous one.
    assert parse_tagged_text("<p>a cat <p>a dog</p> run")[2] == ["a cat", "a dog"]
    assert parse_tagged_text("no tags at all.") == ("no tags at all.", "no tags at all.", [])


def test_parse_round_trips_generated_targets(prompter, tokenizer):
    for caption in CAPTIONS:
        ids = prompter.answer_ids([caption])[0]
        tagged, plain, phrases = prompter.parse_generated(prompter.decode(ids + [tokenizer.pad_token_id] * 2))
        expected_phrases = [p.split("</p>")[0].strip() for p in caption.split("<p>")[1:]]
        assert phrases == expected_phrases
        assert format_target(tagged) == format_target(caption).replace(" .", ".")


def test_prompter_pickles(prompter):
    clone = pickle.loads(pickle.dumps(prompter))
    assert torch.equal(clone.encode_training(CAPTIONS)["input_ids"], prompter.encode_training(CAPTIONS)["input_ids"])


def test_prompter_requires_grove_tokens(tmp_path):
    bare = build_tiny_tokenizer(tmp_path / "bare")
    with pytest.raises(ValueError, match=r"\[DET\]"):
        GroundedCaptionPrompter(bare, num_video_tokens=4)
    assert add_grove_tokens(bare) == ["[DET]", "<p>", "</p>", "<vid>"]
    assert add_grove_tokens(bare) == []                          # idempotent
    GroundedCaptionPrompter(bare, num_video_tokens=4)


def test_tiny_tokenizer_is_deterministic_and_reused(tmp_path):
    a = build_tiny_tokenizer(tmp_path / "a")
    b = build_tiny_tokenizer(tmp_path / "b")
    assert (tmp_path / "a" / "tokenizer.json").read_text() == (tmp_path / "b" / "tokenizer.json").read_text()
    assert 1000 <= len(a) <= 2048
    stamp = os.stat(tmp_path / "a" / "tokenizer.json").st_mtime_ns
    again = build_tiny_tokenizer(tmp_path / "a")
    assert os.stat(tmp_path / "a" / "tokenizer.json").st_mtime_ns == stamp
    assert again.get_vocab() == a.get_vocab() == b.get_vocab()
    for name in ("bos_token", "eos_token", "pad_token", "unk_token"):
        assert getattr(a, name) is not None
    text = "Ünïcode 東京, emoji 🙂 and a red circle moves left."
    assert a.decode(a(text, add_special_tokens=False)["input_ids"]) == text
    # Frequent scene words are single tokens.
    assert len(a.tokenize(" circle")) == 1 and len(a.tokenize(" moves")) == 1


def test_official_target_text_option(tokenizer):
    official = GroundedCaptionPrompter(tokenizer, num_video_tokens=12, target_text="official")
    as_is = GroundedCaptionPrompter(tokenizer, num_video_tokens=12)
    assert official.answer_ids(['"The Man cuts <p>A Knife</p>."']) == as_is.answer_ids(["the man cuts <p>a knife</p>."])
    assert as_is.answer_ids(["The Man"]) != as_is.answer_ids(["the man"])
    # already formatted answers (the released re-tokenisation) are encoded as they are
    assert official.answer_ids(["The <p> X </p> [DET]"], formatted=True) == as_is.answer_ids(
        ["The <p> X </p> [DET]"], formatted=True)
    with pytest.raises(ValueError, match="target_text"):
        GroundedCaptionPrompter(tokenizer, num_video_tokens=12, target_text="lower")
