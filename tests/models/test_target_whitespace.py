"""GROVE's training targets keep the caption's whitespace runs, as the released datasets build them;
checked on the real LLaMA vocabulary against the released rules (models.grove.official_tokenization)."""
from __future__ import annotations

import random
import re

import pytest

from models.grove.configuration import LanguageModelConfig
from models.grove.language_model import load_tokenizer
from models.grove.official_tokenization import WORDS, OfficialRules
from models.grove.prompting import OFFICIAL_QUESTIONS, GroundedCaptionPrompter, add_grove_tokens, format_target
from tests.fixtures.llama_vocabulary import llama_tokenizer_root

NUM_CAPTIONS = 200


def released_answer(tagged: str) -> str:
    """The released HowTo100M dataset's answer: each phrase's span located in the caption (tags
    removed before it), then ``<p> `` / `` </p> [DET]`` inserted around the spans, last first."""
    caption = re.sub(r"<.*?>", "", tagged).strip()
    spans = []
    for phrase in re.findall(r"<p>(.*?)</p>", tagged):
        match = re.search("<p>" + re.escape(phrase) + "</p>", tagged)
        start = len(re.sub(r"<.*?>", "", tagged[:match.start()]).lstrip())
        spans.append((start, start + len(phrase)))
    for start, end in sorted(spans, reverse=True):
        caption = f"{caption[:start]}<p> {caption[start:end]} </p> [DET]{caption[end:]}"
    return caption


def spaced_caption(rng: random.Random) -> str:
    """A tagged caption whose words are apart by one to three spaces, inside phrases and out."""
    def words(n: int) -> str:
        out = rng.choice(WORDS)
        for _ in range(n - 1):
            out += " " * rng.choice((1, 1, 2, 3)) + rng.choice(WORDS)
        return out

    parts, seen = [], set()
    for k in range(rng.randint(1, 3)):
        if k or rng.random() < 0.5:
            parts.append(words(rng.randint(1, 3)) + " " * rng.choice((1, 2)))
        phrase = words(rng.randint(1, 3))
        while phrase in seen:  # the released span search finds a repeated phrase's first copy only
            phrase = words(rng.randint(1, 3))
        seen.add(phrase)
        parts.append(f"<p>{phrase}</p>" + rng.choice(("", ",", ".", " ", "  ", "   ")))
    return "".join(parts).strip()


@pytest.fixture(scope="module")
def rules() -> OfficialRules:
    return OfficialRules(llama_tokenizer_root() / "glamm" / "tokenizer.model")


@pytest.fixture(scope="module")
def prompter():
    tokenizer = load_tokenizer(LanguageModelConfig(tokenizer_path=str(llama_tokenizer_root() / "glamm")))
    add_grove_tokens(tokenizer, "official")
    return GroundedCaptionPrompter(tokenizer, 1, template="llava_v1", style="official", sample_question=False)


def test_the_issue_case_keeps_both_double_spaces():
    tagged = "<p>two  people</p>  wash the dishes"
    assert format_target(tagged) == released_answer(tagged) == "<p> two  people </p> [DET]  wash the dishes"


def test_targets_with_whitespace_runs_equal_the_released_ids(rules, prompter):
    rng = random.Random(3)
    runs = 0
    for k in range(NUM_CAPTIONS):
        tagged = spaced_caption(rng)
        runs += "  " in tagged
        answer = released_answer(tagged)
        assert format_target(tagged) == answer
        question = OFFICIAL_QUESTIONS[k % len(OFFICIAL_QUESTIONS)]
        prompter.questions = (question,)
        enc = prompter.encode_training([tagged])
        ids, labels = rules.training(question, answer)
        assert enc["input_ids"][0].tolist() == ids, (tagged, answer)
        assert enc["labels"][0].tolist() == labels, (tagged, answer)
    assert runs > NUM_CAPTIONS // 2  # most cases hold a run of spaces
