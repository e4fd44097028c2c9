"""Factual-error generation for the VC-Inspector judge: scores, explanations, substitutes, balance,
determinism, the LLM backend's error reporting, and the judge data readers."""
import json
import math
import pickle
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from datamodules.judge_data import (
    BASIC_COLOURS, EXPLANATION_CORRECT, CaptionSource, LLMBackend, MalformedLLMOutput, RuleBackend,
    balance_by_score, explain, factual_score, generate_corruptions, indefinite_article, inflect_verb,
    likert_score, load_action_lexicon, parse_llm_caption, parse_llm_list, parse_llm_phrase, pluralize,
    share_synset, write_jsonl,
)
from datamodules.judge_datamodule import (JudgeDataError, read_activitynet_captions, read_judge_jsonl, read_vatex_eval,
                                          shuffle_videos, uniform_frame_indices)

SYNTHETIC_COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "white")
SYNTHETIC_SHAPES = ("circle", "square", "triangle", "diamond", "cross")
SYNTHETIC_CLAUSES = ("enters from the left", "leaves to the right", "moves up", "stays still",
                     "bounces up and down", "hides behind the wall", "emerges from behind the wall",
                     "passes behind the wall")
ACTIVITY_CAPTIONS = [
    "A man is playing guitar in a field.", "A little girl is sitting on the floor playing with her shoes.",
    "The woman picks up the knife and cuts an onion.", "Two children are running on the beach.",
    "A man in a red shirt throws a ball to a dog.", "She puts on her shoes and walks out of the room.",
    "A boy rides a bike down the street.", "The dog catches the frisbee in the park.",
    "A woman is washing dishes in a sink.", "A girl jumped into the pool and swam to the other side.",
    "A man is mowing the lawn with a lawn mower.", "Several men are standing around a table holding cards.",
]


def synthetic_captions(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        clauses = []
        for _ in range(int(rng.integers(1, 4))):
            colour, shape = rng.choice(SYNTHETIC_COLOURS), rng.choice(SYNTHETIC_SHAPES)
            clauses.append(f"{indefinite_article(colour)} {colour} {shape} {rng.choice(SYNTHETIC_CLAUSES)}")
        out.append(", then ".join(clauses) + ".")
    return out


def sources(captions, prefix="c"):
    return [CaptionSource(key=f"{prefix}{i}", video=f"{prefix}{i}.mp4", caption=c, fps=25.0, start_frame=0,
                          end_frame=199) for i, c in enumerate(captions)]


@pytest.fixture(scope="module")
def synthetic_rows():
    backend = RuleBackend(in_domain="require", max_climb=4, climb_decay=1.0)
    rows, stats = generate_corruptions(sources(synthetic_captions(60)), backend, per_caption=10, seed=3)
    return rows, stats


@pytest.fixture(scope="module")
def activity_rows():
    rows, stats = generate_corruptions(sources(ACTIVITY_CAPTIONS, "a"), RuleBackend(in_domain="prefer"),
                                       per_caption=10, seed=1)
    return rows, stats


# ----------------------------------------------------------------------------- score and explanation

def test_likert_score_is_half_up_rounding_of_the_exact_fraction():
    for n in range(1, 16):
        for r in range(n + 1):
            exact = 4 * (1 - Fraction(r, n)) + 1
            expected = math.floor(exact + Fraction(1, 2))  # ordinary rounding, computed exactly
            assert likert_score(r, n) == expected
            assert factual_score(r, n) == pytest.approx(float(1 - Fraction(r, n)))


def test_0375_maps_to_3_not_to_bankers_2():
    # 5 of 8 elements changed: score 0.375 -> 4 * 0.375 + 1 = 2.5; the paper's scale means 3,
    # Python's round() (half to even) would give 2.
    assert factual_score(5, 8) == 0.375
    assert round(4 * 0.375 + 1) == 2
    assert likert_score(5, 8) == 3
    assert likert_score(0, 3) == 5 and likert_score(3, 3) == 1 and likert_score(1, 3) == 4  # 3.67 -> 4


def test_likert_score_rejects_impossible_counts():
    for r, n in ((1, 0), (-1, 3), (4, 3)):
        with pytest.raises(ValueError):
            likert_score(r, n)


def test_explanation_follows_the_seed_template_exactly():
    assert explain([], []) == "The caption is helpful, relevant, accurate, and informative to the video content."
    assert explain(["girl", "shoes"], []) == ("The caption does not accurately capture the video content. "
                                              "For example, the objects (girl, shoes) are incorrect.")
    assert explain([], ["jumping"]) == ("The caption does not accurately capture the video content. "
                                        "For example, the actions (jumping) are incorrect.")
    assert explain(["blue circle"], ["hides", "hides"]) == (
        "The caption does not accurately capture the video content. "
        "For example, the objects (blue circle) and actions (hides) are incorrect.")


# ----------------------------------------------------------------------------- inflection

def test_inflection_helpers():
    cases = {("run", "gerund"): "running", ("run", "past"): "ran", ("make", "gerund"): "making",
             ("tie", "gerund"): "tying", ("see", "gerund"): "seeing", ("stop", "past"): "stopped",
             ("carry", "3sg"): "carries", ("catch", "3sg"): "catches", ("pick up", "3sg"): "picks up",
             ("throw", "participle"): "thrown", ("jump", "past"): "jumped", ("bounce", "3sg"): "bounces",
             ("swim", "gerund"): "swimming", ("open", "gerund"): "opening", ("play", "past"): "played"}
    irregular = load_action_lexicon()["irregular"]
    for (verb, form), expected in cases.items():
        assert inflect_verb(verb, form, irregular) == expected, (verb, form)
    assert [pluralize(w) for w in ("boot", "box", "knife", "lady", "man", "toy")] == \
        ["boots", "boxes", "knives", "ladies", "men", "toys"]
    assert [indefinite_article(w) for w in ("orange", "red", "hour", "unicorn", "apple")] == ["an", "a", "an", "a", "an"]


# ----------------------------------------------------------------------------- substitutes

def test_curated_actions_have_no_synonyms_and_valid_entries():
    lexicon = load_action_lexicon()
    assert not set(lexicon["actions"]) & set(lexicon["non_actions"])
    for verb, alternatives in lexicon["actions"].items():
        assert len(alternatives) == len(set(alternatives)) and verb not in alternatives
        for alternative in alternatives:
            assert not share_synset(verb, alternative, "v"), (verb, alternative)


def _check_rows(rows):
    for row in rows:
        subs = row["substitutions"]
        total = row["num_objects"] + row["num_actions"]
        assert row["score"] == likert_score(len(subs), total)
        assert row["explanation"] == explain([s["new"] for s in subs if s["kind"] == "object"],
                                             [s["new"] for s in subs if s["kind"] == "action"])
        assert (row["caption"] == row["original_caption"]) == (not subs)
        for s in subs:
            assert s["new"].lower() != s["old"].lower()
            assert s["new"].lower() in row["caption"].lower()


def _head_words(old, new):
    """The words that were swapped (noun or colour) in an object phrase."""
    changed = [(a, b) for a, b in zip(old.lower().split(), new.lower().split()) if a != b]
    assert len(changed) == 1, (old, new)
    return changed[0]


def test_no_substitute_shares_a_synset_with_the_original(synthetic_rows, activity_rows):
    for rows in (synthetic_rows[0], activity_rows[0]):
        _check_rows(rows)
        for row in rows:
            for s in row["substitutions"]:
                if s["kind"] == "object":
                    a, b = _head_words(s["old"], s["new"])
                    assert not share_synset(a.rstrip("s"), b.rstrip("s"), "n") or a in BASIC_COLOURS, (a, b)
                else:
                    assert not share_synset(s["old"].split()[0], s["new"].split()[0], "v"), s


def test_synthetic_substitutions_stay_within_the_palette(synthetic_rows):
    rows, stats = synthetic_rows
    assert stats.captions_used == 60 and stats.failures == Counter()
    kinds = Counter()
    for row in rows:
        for s in row["substitutions"]:
            if s["kind"] != "object" or s["old"] == "wall":
                continue
            (old_colour, old_shape), (new_colour, new_shape) = s["old"].split(), s["new"].split()
            assert {old_colour, new_colour} <= set(SYNTHETIC_COLOURS)
            assert {old_shape, new_shape} <= set(SYNTHETIC_SHAPES)
            kinds["colour" if old_colour != new_colour else "shape"] += 1
    assert kinds["colour"] > 20 and kinds["shape"] > 20  # both kinds of swap occur
    # a/an agreement after colour swaps: never "a orange" / "an red"
    for row in rows:
        text = row["caption"]
        for colour in SYNTHETIC_COLOURS:
            assert f" {'a' if indefinite_article(colour) == 'an' else 'an'} {colour} " not in f" {text} "


def test_every_score_occurs_and_counts_add_up(synthetic_rows):
    rows, stats = synthetic_rows
    assert set(r["score"] for r in rows) == {1, 2, 3, 4, 5}
    assert stats.corruptions == len(rows) and stats.corruptions + stats.duplicates_dropped == 600
    assert "score distribution" in stats.summary()


def test_same_seed_same_output_and_other_seed_differs():
    caps = sources(synthetic_captions(12, seed=5))
    first, _ = generate_corruptions(caps, RuleBackend(in_domain="require", max_climb=4), per_caption=5, seed=7)
    again, _ = generate_corruptions(caps, RuleBackend(in_domain="require", max_climb=4), per_caption=5, seed=7)
    other, _ = generate_corruptions(caps, RuleBackend(in_domain="require", max_climb=4), per_caption=5, seed=8)
    assert first == again
    assert [r["caption"] for r in first] != [r["caption"] for r in other]


# ----------------------------------------------------------------------------- balance and files

def test_balance_gives_equal_counts_of_a_subset_and_is_deterministic(synthetic_rows):
    rows = synthetic_rows[0]
    smallest = min(Counter(r["score"] for r in rows).values())
    balanced = balance_by_score(rows, seed=0)
    counts = Counter(r["score"] for r in balanced)
    assert set(counts) == {1, 2, 3, 4, 5} and set(counts.values()) == {smallest}
    keys = [r["key"] for r in rows]
    positions = [keys.index(r["key"]) for r in balanced]
    assert positions == sorted(positions)  # a subset, in the original order
    assert balance_by_score(rows, seed=0) == balanced
    assert balance_by_score(rows, seed=1) != balanced
    capped = balance_by_score(rows, seed=0, per_score=3)
    assert Counter(r["score"] for r in capped) == Counter({s: 3 for s in range(1, 6)})
    with pytest.raises(ValueError, match=r"no corruption has score \[5\]"):
        balance_by_score([r for r in rows if r["score"] != 5])


def test_jsonl_round_trip_and_errors_name_file_and_line(tmp_path, synthetic_rows):
    rows = synthetic_rows[0][:20]
    path = write_jsonl(rows, tmp_path / "x.jsonl")
    assert read_judge_jsonl(path) == rows
    bad = dict(rows[0], score=7)
    (tmp_path / "bad.jsonl").write_text(json.dumps(rows[1]) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(JudgeDataError, match=r"bad.jsonl, line 2 .*'score' must be an integer 1..5"):
        read_judge_jsonl(tmp_path / "bad.jsonl")
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    with pytest.raises(JudgeDataError, match=r"broken.jsonl, line 1: not valid JSON"):
        read_judge_jsonl(tmp_path / "broken.jsonl")


def test_activitynet_reader_and_generation(tmp_path):
    data = {"v_abc": {"duration": 20.0, "timestamps": [[0.0, 5.5], [4.0, 21.3]],
                      "sentences": ["A man is playing guitar in a field.", " The dog catches the frisbee. "]},
            "v_def": {"duration": 9.0, "timestamps": [[1.0, 8.0]], "sentences": ["Two children are running."]}}
    path = tmp_path / "train.json"
    path.write_text(json.dumps(data))
    got = read_activitynet_captions(path, video_template="{video_id}.mkv")
    assert [(s.key, s.video, s.caption, s.start_s, s.end_s) for s in got] == [
        ("v_abc_0", "v_abc.mkv", "A man is playing guitar in a field.", 0.0, 5.5),
        ("v_abc_1", "v_abc.mkv", "The dog catches the frisbee.", 4.0, 20.0),  # clipped to the duration
        ("v_def_0", "v_def.mkv", "Two children are running.", 1.0, 8.0)]
    rows, _ = generate_corruptions(got, RuleBackend(), per_caption=4, seed=0)
    assert rows and all(r["start_s"] is not None and r["start_frame"] is None for r in rows)
    data["v_def"]["sentences"].append("extra")
    path.write_text(json.dumps(data))
    with pytest.raises(JudgeDataError, match=r"train.json, video 'v_def': 'timestamps' and 'sentences'"):
        read_activitynet_captions(path)


def test_vatex_eval_readers_project_json_and_public_pickles(tmp_path):
    entries = [{"video_id": "vid1", "caption": "a man plays", "human_scores": [3, 4, 5]},
               {"video_id": "vid2", "caption": "a dog runs", "human_scores": [1, 2, 2]}]
    (tmp_path / "vatex.json").write_text(json.dumps(entries))
    rows = read_vatex_eval(tmp_path / "vatex.json")
    assert [r["human_scores"] for r in rows] == [[3, 4, 5], [1, 2, 2]] and rows[0]["video"] == "vid1.mp4"
    folder = tmp_path / "public"
    folder.mkdir()
    # public layout: the three annotators' scores stacked as one (3 * N,) array
    with (folder / "candidates_list.pkl").open("wb") as f:
        pickle.dump(np.array(["a man plays", "a dog runs"], dtype=object), f)
    with (folder / "video_ids.pkl").open("wb") as f:
        pickle.dump(["vid1", "vid2"], f)
    with (folder / "human_scores.pkl").open("wb") as f:
        pickle.dump(np.array([3, 1, 4, 2, 5, 2], dtype=np.float64), f)
    public = read_vatex_eval(folder)
    assert [r["human_scores"] for r in public] == [[3.0, 4.0, 5.0], [1.0, 2.0, 2.0]]
    assert [r["caption"] for r in public] == ["a man plays", "a dog runs"]


def test_shuffle_videos_permutes_clips_and_keeps_captions(synthetic_rows):
    rows = [dict(r, start_frame=i, end_frame=i + 10) for i, r in enumerate(synthetic_rows[0][:50])]
    shuffled = shuffle_videos(rows, seed=0)
    assert [r["caption"] for r in shuffled] == [r["caption"] for r in rows]
    clips = lambda rs: sorted((r["video"], r["start_frame"], r["end_frame"]) for r in rs)  # noqa: E731
    assert clips(shuffled) == clips(rows)  # a permutation of the same clips
    assert sum(a["start_frame"] != b["start_frame"] for a, b in zip(rows, shuffled)) > 40
    assert shuffle_videos(rows, seed=0) == shuffled


def test_uniform_frame_indices_are_segment_centres():
    assert uniform_frame_indices(0, 199, 8).tolist() == [12, 37, 62, 87, 112, 137, 162, 187]
    assert uniform_frame_indices(10, 12, 6).tolist() == [10, 10, 11, 11, 12, 12]


# ----------------------------------------------------------------------------- LLM backend

def test_llm_answer_parsers():
    assert parse_llm_list('["man", "guitar", "field"]\nmore', "D.1") == ["man", "guitar", "field"]
    assert parse_llm_list("Objects: ['a', 'b', 'a']", "D.1") == ["a", "b"]
    for bad in ("man, guitar", "[man, guitar]", '["man", 3]', '["man"', '[""]'):
        with pytest.raises(MalformedLLMOutput):
            parse_llm_list(bad, "D.1")
    assert parse_llm_phrase(' "truck".\nbecause', "D.3", "car") == "truck"
    for bad, reason in (("", "empty"), ("car", "repeats"), ("automobile", "synonym"),
                        ("a long answer with many words here", "short phrase"), ("truck123", "short phrase")):
        with pytest.raises(MalformedLLMOutput, match=reason):
            parse_llm_phrase(bad, "D.3", "car")
    assert parse_llm_caption("A man drives a truck.", "A man drives a car.", "truck") == "A man drives a truck."
    with pytest.raises(MalformedLLMOutput, match="does not contain"):
        parse_llm_caption("A man drives a bus.", "A man drives a car.", "truck")
    with pytest.raises(MalformedLLMOutput, match="did not change"):
        parse_llm_caption("A man drives a car.", "A man drives a car.", "truck")


def test_llm_backend_runs_on_a_tiny_random_llama_and_reports_malformed_output():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from models.judge import build_tiny_judge_tokenizer

    tokenizer = build_tiny_judge_tokenizer(vocab_size=512)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    backend = LLMBackend(model=LlamaForCausalLM(config), tokenizer=tokenizer, max_new_tokens=12)
    rows, stats = generate_corruptions(sources(ACTIVITY_CAPTIONS[:3], "l"), backend, per_caption=2, seed=0)
    # a random model does not answer D.1 with a list: every caption is dropped and the reason counted
    assert rows == [] and stats.captions == 3
    assert sum(stats.failures.values()) == 3 and all(k.startswith("D.1") for k in stats.failures)
    assert "failures: D.1" in stats.summary()
    assert backend.answers == 3  # one D.1 call per caption, then it stopped
