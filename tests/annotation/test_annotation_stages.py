"""Each annotation stage on small hand-made inputs: SVO parsing, caption aggregation, prompts and
their parsers, phrase classification, tracks, and the noisy-oracle Stage 1."""
import numpy as np
import pytest
import torch

from annotation.clips import ClipSpec
from annotation.llm.chat import ChatBackendError, ask_with_retries
from annotation.llm.prompts import (
    STAGE2_SYSTEM,
    STAGE3_SYSTEM,
    AnswerError,
    parse_caption_answer,
    parse_category_answer,
    stage2_messages,
    stage3_messages,
)
from annotation.outcomes import Rejection
from annotation.stage1.decoding import DecodedClip
from annotation.stage1.frame_annotations import ClipFrameAnnotations, FrameAnnotation
from annotation.stage1.noisy_oracle import SPURIOUS, NoisyOracleFrameAnnotator
from annotation.stage2.caption_aggregation import LLMCaptionAggregator, RuleCaptionAggregator, VideoCaption
from annotation.stage2.svo import SVOParser, third_person
from annotation.stage3.phrase_classification import (
    ClassificationTask,
    EmbeddingPhraseClassifier,
    LLMPhraseClassifier,
    is_human,
)
from annotation.stage3.tracks import build_record
from datamodules.synthetic_scenes import SyntheticConfig, clip_rng, generate_clip


@pytest.fixture(scope="module")
def parser():
    return SVOParser()


class ScriptedChat:
    """A chat backend answering from a script: ``answer(conversation, attempt) -> str``; logs every call."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def complete(self, conversations, attempt=0):
        self.calls.append((attempt, len(conversations)))
        return [self.answer(c, attempt) for c in conversations]


def clip_of(captions, phrases=None, boxes=None, key="vid_0"):
    """A Stage 1 output at 5 fps (one grid frame per source frame) from per-frame captions."""
    frames = []
    for i, caption in enumerate(captions):
        p = (phrases or {}).get(i, [])
        b = (boxes or {}).get(i, np.tile([[1.0, 1.0, 5.0, 5.0]], (len(p), 1)))
        frames.append(FrameAnnotation(i, caption, p, b, np.linspace(1.0, 0.5, len(p))))
    vid, cid = key.rsplit("_", 1)
    return ClipFrameAnnotations(ClipSpec(f"{vid}.mp4", vid, cid, 0, len(captions) - 1, 5.0), 5.0, 0,
                                len(captions) - 1, 64, 48, frames)


# ---------------------------------------------------------------- SVO


def test_svo_triplets_of_hand_written_sentences(parser):
    cases = parser.parse(["A red circle is entering from the left.",
                          "A person is stirring food in a bowl. The image is slightly blurry.",
                          "A white cross is emerging from behind the wall.",
                          "A white circle is passing behind the wall."])  # parsed with 'the wall' as object
    (circle,), (person, image), (cross,), (passing,) = cases
    assert circle.subject == "A red circle" and circle.clause() == "enters from the left"
    assert circle.as_prompt_list() == ["red circle", "entering", ("from", "left")]
    assert person.subject == "A person" and person.object == "food" and person.preps == (("in", "a bowl"),)
    assert person.as_prompt_list() == ["person", "stirring", "food", ("in", "bowl")]
    assert person.clause() == "stirs food in a bowl"
    assert image.subject == "The image"
    assert cross.clause() == "emerges from behind the wall"
    assert passing.clause() == "passes behind the wall"
    # parsed once: the memo holds each sentence
    assert "The image is slightly blurry." in parser.memo


@pytest.mark.parametrize("lemma,expected", [("enter", "enters"), ("pass", "passes"), ("carry", "carries"),
                                            ("stay", "stays"), ("be", "is"), ("watch", "watches")])
def test_third_person(lemma, expected):
    assert third_person(lemma) == expected


# ---------------------------------------------------------------- Stage 2, rule


def test_rule_aggregation_merges_names_votes_actions_and_orders_by_first_appearance(parser):
    captions = []
    for i in range(10):
        parts = []
        name = "A red disc" if i in (2, 3) else "A red circle"  # another name for the same object
        action = "is staying still" if i == 4 else "is moving up"  # one frame reads a wrong action
        parts.append(f"{name} {action}.")
        if i >= 5:
            parts.append("A blue square is entering from the left.")
        if i == 7:
            parts.append("A shadow is visible near the wall.")  # named in 1 of 10 frames: not salient
        if i in (1, 2, 3):
            parts.append("The image is slightly blurry.")  # the picture, not an object
        captions.append(" ".join(parts))
    out, = RuleCaptionAggregator(parser=parser).aggregate([clip_of(captions)])
    assert out == VideoCaption("<p>a red circle</p> moves up, then <p>a blue square</p> enters from the left.",
                               ("a red circle", "a blue square"))


def test_rule_aggregation_keeps_objects_seen_together_apart_and_rejects_empty(parser):
    captions = ["A red circle is moving up. A red square is staying still."] * 4
    out, = RuleCaptionAggregator(parser=parser).aggregate([clip_of(captions)])
    assert set(out.phrases) == {"a red circle", "a red square"}
    # one after the other (never in the same frame): the same noun with other colours stays two objects
    captions = (["A yellow cross is hiding behind the wall."] * 4
                + ["A blue cross is emerging from behind the wall."] * 4)
    out, = RuleCaptionAggregator(parser=parser).aggregate([clip_of(captions)])
    assert out.phrases == ("a yellow cross", "a blue cross")
    nothing, = RuleCaptionAggregator(parser=parser).aggregate([clip_of(["The image is slightly blurry."] * 3,
                                                                        key="dull_0")])
    assert isinstance(nothing, Rejection) and nothing.key == "dull_0" and "no subject" in nothing.reason


def test_rule_aggregation_tags_an_object_only_when_it_is_grounded_often(parser):
    captions = ["A man is cutting an onion."] * 5
    grounded = clip_of(captions, phrases={i: ["a man", "an onion"] for i in range(5)})
    ungrounded = clip_of(captions, phrases={i: ["a man"] for i in range(5)})
    agg = RuleCaptionAggregator(parser=parser)
    assert agg.aggregate([grounded])[0].tagged_caption == "<p>a man</p> cuts <p>an onion</p>."
    assert agg.aggregate([ungrounded])[0].tagged_caption == "<p>a man</p> cuts an onion."


def test_rule_full_caption_variant_tags_the_most_frequent_caption():
    captions = ["", "", "", "A red circle is moving up.", "A red circle is moving up.", "A red disc is moving up."]
    phrases = {3: ["a red circle"], 4: ["a red circle"], 5: ["a red disc"]}
    out, = RuleCaptionAggregator(input="captions").aggregate([clip_of(captions, phrases)])
    assert out == VideoCaption("<p>A red circle</p> is moving up.", ("A red circle",))
    nothing, = RuleCaptionAggregator(input="captions").aggregate([clip_of(["", "The image is blurry."])])
    assert isinstance(nothing, Rejection) and "no frame caption contains a grounded phrase" in nothing.reason


# ---------------------------------------------------------------- prompts and parsers


def test_prompts_follow_figures_11_and_12():
    frames = [[["red circle", "moving up"]], [["red circle", "entering", ("from", "left")]]]
    messages = stage2_messages(frames)
    assert messages[0] == {"role": "system", "content": STAGE2_SYSTEM}
    assert [m["role"] for m in messages[1:]] == ["user", "assistant"] * 2 + ["user"]
    assert messages[-1]["content"] == ("SVO: [[['red circle', 'moving up']], "
                                       "[['red circle', 'entering', ('from', 'left')]]]")
    assert "<p>A woman</p> is cutting <p>an object</p>" in messages[4]["content"]
    messages = stage3_messages("a red disc", ["a red circle", "a blue square"])
    assert messages[0]["content"] == STAGE3_SYSTEM and len(messages) == 12
    assert messages[-1]["content"] == "Input: 'a red disc'\nCategories: ['a red circle', 'a blue square']"
    assert messages[4]["content"] == "{'CATEGORY': 'None'}"
    captions = stage2_messages(["A red circle.", "A blue square."], variant="captions")
    assert captions[-1]["content"] == "Captions:\nFrame 1: A red circle.\nFrame 2: A blue square."


def test_caption_answers_parse_or_say_why_not():
    smart = "Sure! {\u2018CAPTION\u2019: \u2018<p>A person</p> is stirring <p>food</p> in a bowl\u2019} Hope it helps."
    assert parse_caption_answer(smart) == ("<p>A person</p> is stirring <p>food</p> in a bowl", ["A person", "food"])
    assert parse_caption_answer('{"caption": "<p>a cat</p> sleeps, <p>a cat</p> wakes"}')[1] == ["a cat"]
    for bad, why in [("A person stirs food.", "no dictionary"), ("{'TEXT': '<p>a</p>'}", "without the key 'CAPTION'"),
                     ("{'CAPTION': 'a person stirs food'}", "no <p></p>-tagged phrase"),
                     ("{'CAPTION': '<p>a person stirs food'}", "unbalanced"),
                     ("{'CAPTION': 3}", "holds int")]:
        with pytest.raises(AnswerError, match=why):
            parse_caption_answer(bad)


def test_category_answers_parse_or_say_why_not():
    cats = ["a woman", "a beverage"]
    assert parse_category_answer("{'CATEGORY': 'A Beverage'}", cats) == "a beverage"
    assert parse_category_answer("{ 'CATEGORY' : 'None'}", cats) is None
    with pytest.raises(AnswerError, match="unknown class 'a glass'"):
        parse_category_answer("{'CATEGORY': 'a glass'}", cats)


def test_retries_reask_only_failed_conversations_within_the_budget():
    def answer(conversation, attempt):
        text = conversation[-1]["content"]
        if "good" in text:
            return "{'CAPTION': '<p>a dog</p> runs'}"
        if "late" in text and attempt == 2:
            return "{'CAPTION': '<p>a cat</p> sits'}"
        return "no idea"

    chat = ScriptedChat(answer)
    conversations = [[{"role": "user", "content": c}] for c in ("good", "late", "never")]
    results = ask_with_retries(chat, conversations, lambda _, t: parse_caption_answer(t), max_retries=2)
    assert chat.calls == [(0, 3), (1, 2), (2, 2)]
    assert results[0][0][1] == ["a dog"] and results[1][0][1] == ["a cat"]
    assert results[2][0] is None and "no dictionary" in results[2][1] and "after 3 tries" in results[2][1]


def test_llm_aggregator_rejects_unparsable_clips_and_marks_backend_failures_retryable(parser):
    good, bad = clip_of(["A red circle is moving up."] * 2, key="good_0"), clip_of(["A dog runs."] * 2, key="bad_0")
    chat = ScriptedChat(lambda c, a: "{'CAPTION': '<p>a red circle</p> moves up'}" if "red circle" in c[-1]["content"]
                        else "{'CAPTION': 'a dog runs'}")
    ok, rejected = LLMCaptionAggregator(chat, max_retries=1, parser=parser).aggregate([good, bad])
    assert ok == VideoCaption("<p>a red circle</p> moves up", ("a red circle",))
    assert rejected.key == "bad_0" and rejected.stage == "stage2" and not rejected.retryable
    assert "no <p></p>-tagged phrase" in rejected.reason and "after 2 tries" in rejected.reason

    class Down:
        def complete(self, conversations, attempt=0):
            raise ChatBackendError("connection refused")

    out = LLMCaptionAggregator(Down(), parser=parser).aggregate([good])
    assert out[0].retryable and "connection refused" in out[0].reason


# ---------------------------------------------------------------- Stage 3


def test_llm_classifier_maps_phrases_and_rejects_unknown_classes():
    def answer(conversation, attempt):
        phrase = conversation[-1]["content"].split("'")[1]
        return {"a red disc": "{'CATEGORY': 'a red circle'}", "a shadow": "{'CATEGORY': 'None'}"}.get(
            phrase, "{'CATEGORY': 'a green cube'}")

    chat = ScriptedChat(answer)
    tasks = [ClassificationTask("a_0", ("a red disc", "a shadow"), ("a red circle",)),
             ClassificationTask("b_0", ("a red disc", "a thing"), ("a red circle",))]
    first, second = LLMPhraseClassifier(chat, max_retries=1).classify(tasks)
    assert first == {"a red disc": "a red circle", "a shadow": None}
    assert isinstance(second, Rejection) and second.key == "b_0" and "unknown class 'a green cube'" in second.reason
    assert chat.calls == [(0, 4), (1, 1)]


class TableEncoder:
    """Text encoder with hand-set embeddings (unit vectors), for exact similarity checks."""

    def __init__(self, table):
        self.table = table

    def encode(self, texts):
        return torch.tensor([self.table[t] for t in texts], dtype=torch.float32)


def test_embedding_classifier_thresholds_and_keeps_humans_apart():
    s = np.sqrt(0.5)
    table = {"a red circle": [1, 0, 0], "a person": [0, 1, 0], "a red disc": [0.8, 0.6, 0],
             "a hand": [s, 0, s],  # closer to the circle (0.71) than to the person (0), but a hand is human
             "a shadow": [0.4, 0, np.sqrt(1 - 0.16)]}
    classifier = EmbeddingPhraseClassifier(threshold=0.5, text_encoder=TableEncoder(table))
    out, = classifier.classify([ClassificationTask("k_0", ("a red disc", "a hand", "a shadow"),
                                                   ("a red circle", "a person"))])
    assert out == {"a red disc": "a red circle", "a hand": None, "a shadow": None}
    loose = EmbeddingPhraseClassifier(threshold=0.5, keep_humans_apart=False, text_encoder=TableEncoder(table))
    assert loose.classify([ClassificationTask("k_0", ("a hand",), ("a red circle", "a person"))])[0] == \
        {"a hand": "a red circle"}
    assert is_human("a man in a white shirt") and is_human("her hands") and not is_human("a knife in a hand")


# ---------------------------------------------------------------- tracks


def test_build_record_best_and_union_of_boxes_in_one_class():
    frames = {0: ["a red disc", "a shadow", "a red circle", "a red circle"]}
    boxes = {0: np.array([[0, 0, 10, 10], [5, 5, 8, 8], [1, 1, 11, 11], [70, 1, 90, 9]], dtype=np.float32)}
    clip = clip_of(["x", "y"], frames, boxes, key="t_0")
    clip.frames[0].scores = np.array([0.9, 0.5, 0.95, 0.99], dtype=np.float32)  # the last lies outside the 64-px frame
    caption = VideoCaption("<p>a red circle</p> moves.", ("a red circle",))
    classes = {"a red disc": "a red circle", "a shadow": None, "a red circle": "a red circle"}
    best = build_record(clip, caption, classes, "best")
    assert best.key == "t_0" and best.caption == "a red circle moves." and best.labels == [["a red circle"], []]
    np.testing.assert_array_equal(best.bboxes[0], [[1, 1, 11, 11]])
    union = build_record(clip, caption, classes, "union")
    np.testing.assert_array_equal(union.bboxes[0], [[0, 0, 11, 11]])
    assert union.frame_indices.tolist() == [0, 1] and len(union.bboxes[1]) == 0
    too_few = build_record(clip, caption, classes, "best", min_boxes=4)
    assert isinstance(too_few, Rejection) and "2 box(es)" in too_few.reason  # disc + circle; the outside box is dropped


# ---------------------------------------------------------------- Stage 1, noisy oracle


@pytest.fixture(scope="module")
def synthetic_clips():
    config = SyntheticConfig(duration_s=2.0, num_train=0, num_val=0, num_test=6)
    records = [generate_clip(clip_rng(0, "test", i), config, "test", i)[1] for i in range(6)]
    decoded = [DecodedClip(ClipSpec(r.video_fname, r.video_id, r.clip_id, 0, r.clip_end_frame, r.fps), r.fps, 0,
                           r.clip_end_frame, r.width, r.height, r.frame_indices,
                           np.zeros((len(r.frame_indices), 1, 1, 3), np.uint8)) for r in records]
    return {r.key: r for r in records}, decoded


def test_noise_free_oracle_reproduces_the_truth(synthetic_clips):
    records, decoded = synthetic_clips
    out = NoisyOracleFrameAnnotator(records=records).annotate(decoded)
    for clip, frames in zip(decoded, out):
        truth = records[clip.spec.key]
        assert [f.frame for f in frames] == truth.frame_indices.tolist()
        for frame, boxes, labels in zip(frames, truth.bboxes, truth.labels):
            got = dict(zip(frame.phrases, frame.boxes.tolist()))
            assert got == dict(zip(labels, boxes.tolist()))
            assert frame.caption.count(".") == len(labels)
            assert all(p.capitalize()[:1] + p[1:] in frame.caption for p in labels)


def test_oracle_noise_is_seeded_per_clip_and_follows_its_rates(synthetic_clips):
    records, decoded = synthetic_clips
    noisy = NoisyOracleFrameAnnotator(records=records, miss=0.5, spurious=1.0, seed=3)
    a = noisy.annotate(decoded)
    visible = sum(len(l) for r in records.values() for l in r.labels)
    kept = sum(sum(p not in SPURIOUS for p in f.phrases) for frames in a for f in frames)
    assert visible > 80 and 0.3 < kept / visible < 0.7  # about 4 binomial standard deviations
    assert all(any(p in SPURIOUS for p in f.phrases) for frames in a for f in frames)
    jittered = NoisyOracleFrameAnnotator(records=records, box_jitter=0.2, paraphrase=0.5, seed=3)
    a, b = jittered.annotate(decoded), jittered.annotate(decoded[::-1])[::-1]  # batch order does not matter
    assert all(x.caption == y.caption and np.array_equal(x.boxes, y.boxes)
               for ca, cb in zip(a, b) for x, y in zip(ca, cb))
    exact = NoisyOracleFrameAnnotator(records=records).annotate(decoded)
    assert not all(np.array_equal(x.boxes, y.boxes) for ca, cb in zip(a, exact) for x, y in zip(ca, cb))
    for clip, frames in zip(decoded, a):
        for f in frames:
            assert (f.boxes[:, :2] >= 0).all()
            assert (f.boxes[:, 2] <= clip.width).all() and (f.boxes[:, 3] <= clip.height).all()
    with pytest.raises(ValueError, match="stage1.miss must be a probability"):
        NoisyOracleFrameAnnotator(records=records, miss=1.5)
