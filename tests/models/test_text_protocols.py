"""The two released text protocols: how a generated caption is decoded, re-tokenised for the windows
other than the caption window, and reported as ``text_tagged``.

``official``: the training repository's inference scripts (slow tokenizer: ``[DET] ;``); ``package``: the
official inference package (fast tokenizer: ``[DET];``). The expected ids are written out by hand from the
real LLaMA vocabulary (``llama_json/tokenizer.json``: ``;`` 29936, ``▁;`` 2056, ``,`` 29892, ``▁,`` 1919,
``.`` 29889, ``▁.`` 869, ``▁and`` 322, ``▁then`` 769, ``▁man`` 767, ``▁`` 29871, ``</s>`` 2), plus the
released ids of the added tokens (``<p>`` 32005, ``</p>`` 32006, ``[DET]`` 32009).
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.grove.configuration import LanguageModelConfig, model_configs_from_yaml
from models.grove.language_model import load_tokenizer
from models.grove.processing import GroveProcessor, processor_text_protocol
from models.grove.prompting import (
    OFFICIAL_QUESTIONS,
    GroundedCaptionPrompter,
    add_grove_tokens,
    official_answer_text,
    package_tagged_text,
)
from tests.fixtures.llama_vocabulary import llama_tokenizer_root

SPACE, P_OPEN, P_CLOSE, DET, EOS = 29871, 32005, 32006, 32009, 2
MAN, THEN, AND = 767, 769, 322
# what follows [DET] in the generated ids -> (re-tokenised by the package, by the training scripts)
AFTER_DET = {
    ";": ([29936], [29936], [2056]),
    ",": ([29892], [29892], [1919]),
    ".": ([29889], [29889], [869]),
    " and": ([AND], [AND], [AND]),
}


@pytest.fixture(scope="module", params=("glamm", "llama_json"))
def prompter(request) -> GroundedCaptionPrompter:
    tokenizer = load_tokenizer(LanguageModelConfig(tokenizer_path=str(llama_tokenizer_root() / request.param)))
    add_grove_tokens(tokenizer, "official")
    return GroundedCaptionPrompter(tokenizer, 1, template="llava_v1", style="official", sample_question=False)


def _generated(after_det: list[int], eos: bool = True) -> list[int]:
    """``<p> man </p> [DET]`` + what follows + `` then`` (+ EOS), as the model generates it."""
    return [SPACE, P_OPEN, MAN, SPACE, P_CLOSE, SPACE, DET, *after_det, THEN, *([EOS] if eos else [])]


@pytest.mark.parametrize("text", list(AFTER_DET))
def test_later_windows_see_the_generated_id_in_the_package_and_a_spaced_one_in_the_scripts(prompter, text):
    generated_tail, package_tail, training_tail = AFTER_DET[text]
    generated = _generated(generated_tail)
    prompt = prompter.prompt_ids(OFFICIAL_QUESTIONS[0])
    head = [SPACE, P_OPEN, MAN, SPACE, P_CLOSE, SPACE, DET]
    package = prompter.released_answer("package", prompt, generated)
    training = prompter.released_answer("official", prompt, generated)
    assert package == f"<p> man </p> [DET]{text} then</s>"
    assert training == f"<p> man </p> [DET] {text.strip()} then</s>"
    # the answer ids the later windows see: the text re-tokenised, then the EOS the conversation appends
    assert prompter.answer_ids([package], formatted=True)[0] == [*head, *package_tail, THEN, EOS, EOS]
    assert prompter.answer_ids([training], formatted=True)[0] == [*head, *training_tail, THEN, EOS, EOS]
    # the prompt in front is the same for both, and the caption window is the generated ids themselves
    for answer in (package, training):
        ids = prompter.encode_training([answer], formatted=True)["input_ids"][0].tolist()
        assert ids[:len(prompt)] == prompt


def test_text_tagged_keeps_the_eos_in_the_package_only(prompter):
    prompt = prompter.prompt_ids(OFFICIAL_QUESTIONS[0])
    with_eos = prompter.released_answer("package", prompt, _generated([29936]))
    assert package_tagged_text(with_eos) == "<p> man </p> ; then</s>"
    without = prompter.released_answer("package", prompt, _generated([29936], eos=False))  # budget ran out
    assert package_tagged_text(without) == "<p> man </p> ; then"
    training = prompter.released_answer("official", prompt, _generated([29936]))
    tagged, caption, phrases = official_answer_text(training)
    assert tagged == "<p> man </p> ; then"
    # text and phrases are the same in both
    assert official_answer_text(with_eos)[1:] == (caption, phrases) == ("man ; then", ["man"])


def test_unknown_released_protocol_is_named(prompter):
    with pytest.raises(ValueError, match="'paper'"):
        prompter.released_answer("paper", [], [])


def test_processor_defaults():
    # a model grounded with a released protocol: generate is the package's API, so the package's protocol
    assert processor_text_protocol({"text_protocol": "official"}) == "package"
    assert processor_text_protocol({"text_protocol": "package"}) == "package"
    assert processor_text_protocol({"text_protocol": "project"}) == "project"
    assert processor_text_protocol({}) == "project"
    assert processor_text_protocol({"text_protocol": "official", "processor_text_protocol": "official"}) == "official"
    assert GroveProcessor(inference={"text_protocol": "official"}).inference["text_protocol"] == "package"
    chosen = GroveProcessor(inference={"text_protocol": "official"}, text_protocol="official")
    assert chosen.inference["text_protocol"] == "official"
    with pytest.raises(ValueError, match="'released'"):
        GroveProcessor(text_protocol="released")


def test_package_protocol_grounds_later_windows_on_the_package_decode(monkeypatch):
    """Grove.predict: the caption window on the generated ids, the others on the package's decode
    re-tokenised; ``answers`` carries the decoded answer (EOS kept)."""
    from pathlib import Path

    from models.grove import Grove

    config = Path(__file__).resolve().parents[2] / "configs" / "official" / "tiny.yaml"
    model = Grove(**model_configs_from_yaml([config])).eval()
    prompter = model.make_prompter(template="llava_v1", sample_question=False)
    monkeypatch.setattr(model, "_prompter", prompter)
    tok = model.tokenizer
    generated = tok(" a man wipes <p> the floor </p> [DET]; he <p> a cloth </p> [DET]",
                    add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    monkeypatch.setattr(model.language_model, "generate", lambda video, ids, mask, max_new_tokens, keep_eos: (
        [list(generated) for _ in range(video.shape[0])]))
    seen = []
    original = model.det_queries

    def spy(input_ids, attention_mask, video_embeds, labels=None, num_slots=None):
        seen.append([row[m.bool()].tolist() for row, m in zip(input_ids, attention_mask)])
        return original(input_ids, attention_mask, video_embeds, labels, num_slots)

    monkeypatch.setattr(model, "det_queries", spy)
    gen = torch.Generator().manual_seed(0)
    n = 17  # two windows of 8 and a tail window; the caption window is window 0
    inputs = (torch.randn(1, n, 3, 56, 56, generator=gen), torch.randn(1, n, 3, 64, 64, generator=gen),
              torch.ones(1, n, dtype=torch.bool))
    out = model.predict(*inputs, window=8, window_mode="official", text_protocol="package")
    prompt = prompter.prompt_ids(prompter.questions[0])
    text = prompter.released_answer("package", prompt, generated)
    assert out.answers == [text] and text.endswith("</s>") and "[DET];" in text
    assert seen[0] == [prompt + generated]
    retokenised = prompter.encode_training([text], formatted=True)["input_ids"][0].tolist()
    assert seen[1] == seen[2] == [retokenised] and len(seen) == 3
    assert retokenised == prompt + generated + [tok.eos_token_id]  # the package's round trip keeps the ids
    assert out.phrases == [["the floor", "a cloth"]] and out.captions == ["a man wipes the floor ; he a cloth"]
    seen.clear()
    official = model.predict(*inputs, window=8, window_mode="official", text_protocol="official")
    assert official.answers == [prompter.released_answer("official", prompt, generated)] != out.answers
    with pytest.raises(ValueError, match="text_protocol='package'.*window_mode='official'"):
        model.predict(*inputs, window=8, window_mode="interleaved", caption_positions=torch.zeros(1, 8).long(),
                      text_protocol="package")


def test_generate_reports_the_package_s_text_tagged_by_default(tmp_path, monkeypatch):
    """GroveProcessor.generate on a model exported with the released protocol: the package's protocol unless
    told otherwise; its text_tagged keeps the generated EOS, the training scripts' does not."""
    import numpy as np

    from formats.video_writer import write_video
    from models.grove import Grove

    config = Path(__file__).resolve().parents[2] / "configs" / "official" / "tiny.yaml"
    model = Grove(**model_configs_from_yaml([config])).eval()
    model.settings = {"prompt": {"chat_template": "llava_v1", "target_text": "official", "sample_question": False},
                      "inference": {"objectness_threshold": 0.5, "objectness_strict": True, "window_mode": "official",
                                    "text_protocol": "official"},
                      "preprocessing": {"num_frames": 8, "global_image_size": 56, "global_resize": "squash",
                                        "grounding_image_size": 64, "grounding_resize": "float"}}
    model.save_pretrained(tmp_path / "grove")
    model = Grove.from_pretrained(tmp_path / "grove")
    tok = model.tokenizer
    generated = tok(" a man wipes <p> the floor </p> [DET]; he <p> a cloth </p> [DET]",
                    add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(model.language_model, "generate", lambda video, ids, mask, max_new_tokens, keep_eos: (
        [[*generated, tok.eos_token_id] for _ in range(video.shape[0])]))
    frames = np.random.default_rng(0).integers(0, 256, (100, 48, 64, 3), dtype=np.uint8)
    video = str(write_video(tmp_path / "clip.mp4", frames, fps=25))  # 20 frames on the 5-fps grid
    package = GroveProcessor.from_pretrained(tmp_path / "grove")
    assert package.inference["text_protocol"] == "package"
    out = package.generate(model, video, token_embeddings=None)
    assert out["text_tagged"] == "a man wipes <p> the floor </p> ; he <p> a cloth </p> </s>"
    assert out["text"] == "a man wipes the floor ; he a cloth" and out["phrases"] == ["the floor", "a cloth"]
    scripts = GroveProcessor.from_pretrained(tmp_path / "grove", text_protocol="official").generate(
        model, video, token_embeddings=None)
    assert scripts["text_tagged"] == "a man wipes <p> the floor </p> ; he <p> a cloth </p>"
    assert scripts["text"] == out["text"] and len(scripts["frame_indices"]) == len(out["frame_indices"]) == 20
    center = [out["frame_indices"].index(f) for f in out["center_frame_indices"]]
    # float tolerance: the two protocols pad their windows' ids to different lengths, which moves the
    # float rounding of the same computation (measured: up to 1.2e-7 apart, the moved query 1e-5 and more)
    diff = torch.stack([(a - b).abs() for a, b in zip(out["probs_temp_objectness"], scripts["probs_temp_objectness"])])
    assert diff[center].max() <= 1e-6  # the caption window is grounded on the generated ids in both
    # the other windows see "[DET];" in one and "[DET] ;" in the other: the second phrase's query moves
    assert diff[:, 1].max() > 5e-6
    assert diff[:, 0].max() <= 1e-6
