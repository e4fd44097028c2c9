"""The released GROVE's token ids from any LLaMA tokenizer folder, on the real LLaMA vocabulary.

Expected ids come from :mod:`models.grove.official_tokenization` (the released code's rules applied
with SentencePiece itself); the project loads each folder with ``models.grove.language_model``. Skipped,
saying why, where the vocabulary (``../shared/llama_tokenizer`` or $GROVE_LLAMA_TOKENIZER_DIR) is absent.
"""
from __future__ import annotations

import json
import random
import shutil

import pytest
import torch

from models.grove.configuration import LanguageModelConfig
from models.grove.language_model import load_tokenizer, load_tokenizer_folder, query_mask
from models.grove.official_tokenization import OfficialRules, random_caption
from models.grove.prompting import (
    OFFICIAL_QUESTIONS,
    GroundedCaptionPrompter,
    add_grove_tokens,
    official_answer_text,
    official_target_text,
)
from tests.fixtures.llama_vocabulary import llama_tokenizer_root

FOLDERS = ("glamm", "llama_json_legacy_true", "llama_json_legacy_false", "tokenizer_model_only")
NUM_CAPTIONS = 300
SPACE = 29871  # "▁": the token before [DET] in "</p> [DET]", whose hidden state is the query


@pytest.fixture(scope="module")
def rules() -> OfficialRules:
    return OfficialRules(llama_tokenizer_root() / "glamm" / "tokenizer.model")


@pytest.fixture(scope="module", params=FOLDERS)
def folder(request, tmp_path_factory):
    root = llama_tokenizer_root()
    if request.param == "glamm":  # tokenizer.model + legacy: false config + GLaMM's added tokens
        return root / "glamm"
    if request.param == "llama_json_legacy_true":  # tokenizer.json, config says legacy: true
        return root / "llama_json"
    out = tmp_path_factory.mktemp(request.param)
    if request.param == "llama_json_legacy_false":
        shutil.copy(root / "llama_json" / "tokenizer.json", out)
        config = json.loads((root / "llama_json" / "tokenizer_config.json").read_text())
        (out / "tokenizer_config.json").write_text(json.dumps({**config, "legacy": False}))
    else:  # tokenizer.model alone: no config, no tokenizer.json
        shutil.copy(root / "glamm" / "tokenizer.model", out)
    return out


def _prompter(folder, num_video_tokens=1, question=None):
    tokenizer = load_tokenizer(LanguageModelConfig(tokenizer_path=str(folder)))
    add_grove_tokens(tokenizer, "official")
    return GroundedCaptionPrompter(tokenizer, num_video_tokens, template="llava_v1", style="official",
                                   questions=[question] if question else None, sample_question=False)


def test_training_ids_labels_and_query_positions_equal_the_official_rules(folder, rules):
    prompter = _prompter(folder)
    det = prompter.det_token_id
    rng = random.Random(0)
    equal = 0
    for k in range(NUM_CAPTIONS):
        tagged, answer = random_caption(rng)
        question = OFFICIAL_QUESTIONS[k % len(OFFICIAL_QUESTIONS)]
        prompter.questions = (question,)
        enc = prompter.encode_training([tagged])
        ids, labels = rules.training(question, answer)
        ours = enc["input_ids"][0].tolist()
        assert ours == ids, (tagged, answer)
        assert enc["labels"][0].tolist() == labels, (tagged, answer)
        queries = query_mask(enc["input_ids"], det, "before_det")[0].nonzero().flatten().tolist()
        assert queries == [i for i in range(len(ids) - 1) if ids[i + 1] == det]
        assert [ids[i] for i in queries] == [SPACE] * answer.count("[DET]")
        equal += 1
    assert equal == NUM_CAPTIONS


def test_generation_prompts_equal_the_official_rules(folder, rules):
    for question in OFFICIAL_QUESTIONS:
        assert _prompter(folder, question=question).prompt_ids(question) == rules.generation_prompt(question)
    # several video tokens: the released single placeholder id, repeated once per token
    ids = _prompter(folder, num_video_tokens=4).prompt_ids(OFFICIAL_QUESTIONS[0])
    expected = [i for t in rules.generation_prompt(OFFICIAL_QUESTIONS[0]) for i in ([t] * 4 if t == -200 else [t])]
    assert ids == expected


def test_released_decode_and_re_tokenisation(folder, rules):
    """The text the released inference re-tokenises for the non-central windows, and its ids."""
    prompter = _prompter(folder, num_video_tokens=3)
    question = OFFICIAL_QUESTIONS[0]
    prompt = prompter.prompt_ids(question)
    rng = random.Random(1)
    for _ in range(NUM_CAPTIONS // 2):
        _, answer = random_caption(rng)
        generated = rules.encode(answer, bos=False) + ([rules.eos] if rng.random() < 0.7 else [])
        full = [i for i in rules.generation_prompt(question) + generated if i >= 0]
        expected = rules.decode(full).replace("\n", "").replace("  ", " ").split("ASSISTANT: ")[-1]
        text = prompter.official_answer(prompt, generated)
        assert text == expected
        ids = prompter.encode_training([text], formatted=True)["input_ids"][0].tolist()
        expanded = [i for t in rules.training(question, text)[0] for i in ([t] * 3 if t == -200 else [t])]
        assert ids == expanded


def test_hand_written_round_trip(rules):
    """Ids recorded from the released stack (transformers 4.46.3, slow tokenizer, GLaMM folder)."""
    answer = "a man wipes <p> the floor </p> [DET]; he smiles"
    released = [263, 767, 281, 29488, 29871, 32005, 278, 11904, 29871, 32006, 29871, 32009, 29936, 540, 1560, 5475]
    assert rules.encode(answer, bos=False) == released
    prompter = _prompter(llama_tokenizer_root() / "llama_json")
    assert prompter.answer_ids(["a man wipes <p>the floor</p>; he smiles"])[0] == [*released, rules.eos]
    # "[DET];" is generated as ";" (29936); the released decode writes "[DET] ;", which
    # re-tokenises to "▁;" (2056); the scored caption keeps "floor ;"
    text = "a man wipes  <p> the floor  </p> [DET] ; he smiles</s>"
    assert rules.decode([*released, rules.eos]) == text
    prompt = prompter.prompt_ids(OFFICIAL_QUESTIONS[0])
    assert prompter.official_answer(prompt, [*released, rules.eos]) == text.replace("  ", " ")
    assert rules.encode(" [DET] ;", bos=False) == [259, 32009, 2056]
    tagged, caption, phrases = official_answer_text(text.replace("  ", " "))
    assert caption == "a man wipes the floor ; he smiles"
    assert tagged == "a man wipes <p> the floor </p> ; he smiles" and phrases == ["the floor"]


def test_a_legacy_true_folder_loaded_as_it_says_gives_other_ids(rules):
    """Why the loader overrides the folder's flag: its own setting shifts the tokens after [DET]."""
    from transformers import AutoTokenizer

    own = AutoTokenizer.from_pretrained(str(llama_tokenizer_root() / "llama_json"))
    add_grove_tokens(own, "official")
    ids = own(" <p> a pan </p> [DET].", add_special_tokens=False)["input_ids"]
    assert ids[-1] == 869  # "▁."
    assert rules.encode(" <p> a pan </p> [DET].", bos=False)[-1] == 29889  # "."
    fixed = load_tokenizer_folder(llama_tokenizer_root() / "llama_json")
    add_grove_tokens(fixed, "official")
    assert fixed(" <p> a pan </p> [DET].", add_special_tokens=False)["input_ids"][-1] == 29889


def test_unloadable_folders_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        load_tokenizer_folder(tmp_path / "missing", "model.language_model.tokenizer_path")
    with pytest.raises(FileNotFoundError, match=f"{tmp_path}.*holds no tokenizer"):
        load_tokenizer_folder(tmp_path)
    (tmp_path / "tokenizer.model").write_bytes(b"not a sentencepiece model")
    with pytest.raises(ValueError, match=f"tokenizer_path: {tmp_path}/tokenizer.model is not a SentencePiece model"):
        load_tokenizer_folder(tmp_path, "model.language_model.tokenizer_path")
    (tmp_path / "tokenizer_config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="tokenizer_config.json is not a JSON object"):
        load_tokenizer_folder(tmp_path)


def test_official_target_text():
    assert official_target_text('"A Man <p>The Knife</p> cuts."') == "a man <p>the knife</p> cuts."
    # quotes first, then whitespace, as released: a quote behind a trailing space stays
    assert official_target_text('"Cuts." ') == 'cuts."'
    assert official_target_text("It's <p>Bob</p>") == "it's <p>bob</p>"
    assert official_target_text('say "hi" to <p>Ann</p>') == 'say "hi" to <p>ann</p>'


def test_query_mask_reads_the_token_before_det():
    ids = torch.tensor([[5, 7, 9, 7, 9, 1]])
    assert query_mask(ids, 9, "det")[0].tolist() == [False, False, True, False, True, False]
    assert query_mask(ids, 9, "before_det")[0].tolist() == [False, True, False, True, False, False]


def test_project_round_trip_keeps_the_ids():
    """text_protocol=project: decode, parse, re-format and re-tokenise gives the generated ids back,
    so the token before each [DET] (``- ) ' "`` right after it included) does not move."""
    prompter = _prompter(llama_tokenizer_root() / "glamm")
    rng = random.Random(5)
    for _ in range(NUM_CAPTIONS):
        tagged, answer = random_caption(rng)
        ids = prompter.answer_ids([tagged])[0]
        parsed = prompter.parse_generated(prompter.decode(ids))[0]
        assert prompter.answer_ids([parsed])[0] == ids, (tagged, parsed)
