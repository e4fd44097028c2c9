"""Grounding user queries: checks on the queries, and the same boxes as the VidSTG teacher-forced path."""
import core  # noqa: F401

import numpy as np
import pytest
import torch

from formats.video_writer import write_video
from models.grove import Grove
from models.grove.clip_processing import GroundedCollate
from models.grove.configuration import tiny_configs
from models.grove.processing import GroveProcessor, clip_record, predict_clips
from models.grove.query_grounding import QueryError, parse_queries, parse_query, query_key, referent_tube
from models.tiny_tokenizer import build_tiny_tokenizer

SETTINGS = {"num_frames": 4, "global_image_size": 64, "global_resize": "squash", "grounding_image_size": 128,
            "grounding_resize": "float"}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    torch.manual_seed(0)
    grove = Grove(**tiny_configs(), tokenizer=build_tiny_tokenizer(tmp_path_factory.mktemp("tok") / "tiny"))
    return grove.eval()


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    frames = np.random.default_rng(0).integers(0, 256, (30, 48, 64, 3), dtype=np.uint8)
    return write_video(tmp_path_factory.mktemp("query") / "clip.mp4", frames, fps=25)


def test_a_plain_phrase_is_one_phrase_and_a_tagged_sentence_keeps_its_phrases():
    assert parse_query("  the red   circle ").tagged_caption == "<p>the red circle</p>"
    q = parse_query("<p>the person</p> who opens <p>the fridge</p>")
    assert q.phrases == ("the person", "the fridge") and q.referent == "the person"


@pytest.mark.parametrize("text, message", [("", "empty query"), ("   ", "empty query"),
                                           ("<p>a</p> and <p>b", "never closed"),
                                           ("<p><p>a</p></p>", "alternate"), ("a <p> </p> b", "must hold")])
def test_malformed_queries_are_refused_by_name(text, message):
    with pytest.raises(QueryError, match=message):
        parse_query(text)


def test_queries_the_model_cannot_ground_are_refused(model):
    with pytest.raises(QueryError, match="reserved token"):
        parse_queries(model, ["the [DET] circle"])
    with pytest.raises(QueryError, match="too long"):
        parse_queries(model, [" ".join(["circle"] * 600)])
    with pytest.raises(QueryError, match="no query"):
        parse_queries(model, [])
    # the tiny tokenizer's byte-level BPE gives back any text; one that normalises it does not
    class Lowering:
        def __init__(self, tok):
            self.tok = tok

        def __getattr__(self, name):
            return getattr(self.tok, name)

        def __call__(self, text, **kw):
            return self.tok(text.lower(), **kw)

    prompter = model.make_prompter()
    prompter.tokenizer = Lowering(prompter.tokenizer)
    with pytest.raises(QueryError, match="splits the phrase 'The Red Circle' oddly"):
        parse_queries(model, ["The Red Circle"], prompter)
    assert [q.phrases for q in parse_queries(model, ["the red circle"])] == [("the red circle",)]


def _teacher_forced(model, video, tagged):
    record = clip_record(video, 0, 29)
    from dataclasses import replace

    from formats.records import strip_tags, tagged_phrases
    record = replace(record, tagged_caption=tagged, caption=strip_tags(tagged), phrases=tagged_phrases(tagged))
    processor = GroveProcessor(preprocessing=SETTINGS)
    from formats.video_files import open_video
    with open_video("/", record.video_fname) as source:
        frames = source.read_frames(record.frame_indices.tolist())
    batch = GroundedCollate(model.prompter)([processor.sample(frames, record)])
    return record, predict_clips(model, batch, 0.0, teacher_forced=True, report_objectness=True)


def test_the_query_path_gives_the_boxes_of_the_vidstg_teacher_forced_path(model, video):
    tagged = "<p>a red circle</p> moves left past <p>a blue square</p>."
    record, expected = _teacher_forced(model, video, tagged)
    processor = GroveProcessor(preprocessing=SETTINGS, inference={"objectness_threshold": 0.0})
    got = processor.ground(model, str(video), [tagged, "a green star"], start_frame=0, end_frame=29)
    assert set(got) == {query_key(record.key, 0), query_key(record.key, 1)}
    mine, theirs = got[query_key(record.key, 0)], expected["predictions"][record.key]
    assert mine["phrases"] == theirs["phrases"] == ["a red circle", "a blue square"]
    assert mine["referent"] == "a red circle" and mine["query"] == tagged
    assert [f["frame"] for f in mine["frames"]] == [f["frame"] for f in theirs["frames"]] == [0, 5, 10, 15, 20, 25]
    for a, b in zip(mine["frames"], theirs["frames"]):
        assert a["labels"] == b["labels"]
        np.testing.assert_allclose(a["boxes"], b["boxes"], atol=0.02)  # batched with another query: rounding
        np.testing.assert_allclose(a["scores"], b["scores"], atol=1e-4)
    np.testing.assert_allclose(mine["objectness"]["scores"], expected["objectness"][record.key]["scores"], atol=1e-4)
    tube = referent_tube(mine)
    assert sorted(tube) == [0, 5, 10, 15, 20, 25]
    assert tube[5]["box"] == mine["frames"][1]["boxes"][0]
    # alone, the query gives exactly the teacher-forced boxes
    alone = processor.ground(model, str(video), [tagged], start_frame=0, end_frame=29)[query_key(record.key, 0)]
    assert [f["boxes"] for f in alone["frames"]] == [f["boxes"] for f in theirs["frames"]]


def test_the_threshold_makes_a_query_absent(model, video):
    processor = GroveProcessor(preprocessing=SETTINGS, inference={"objectness_threshold": 1.01})
    got = processor.ground(model, str(video), ["a green star"], start_frame=0, end_frame=29)
    (entry,) = got.values()
    assert entry["frames"] == [] and referent_tube(entry) == {}
    assert len(entry["objectness"]["scores"]) == 6 and all(len(row) == 1 for row in entry["objectness"]["scores"])
