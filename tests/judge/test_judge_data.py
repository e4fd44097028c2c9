"""Factual-error generation for the VC-Inspector judge: scores, explanations, substitutes, balance,
determinism, the LLM backend's error reporting, and the judge data readers."""
import json
import math
import pickle
import re
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import scipy.stats

from datamodules.synthetic_scenes import COLOURS, DIRECTIONS, SHAPES, SIDES
from judge.data.corruption.data_types import CaptionSource, MalformedLLMOutput
from judge.data.corruption.english_inflection import indefinite_article, inflect_verb, pluralize
from judge.data.corruption.generator import balance_by_score, generate_corruptions, write_jsonl
from judge.data.corruption.lexicon import BASIC_COLOURS, load_action_lexicon, share_synset
from judge.data.corruption.llm_backend import LLMBackend, parse_llm_caption, parse_llm_list, parse_llm_phrase
from judge.data.corruption.rule_backend import RuleBackend
from judge.data.dataset import shuffle_videos, uniform_frame_indices
from judge.data.readers import JudgeDataError, read_activitynet_captions, read_judge_jsonl, read_vatex_eval
from judge.data.targets import explain, factual_score, likert_score, substituted_spans

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


# The synthetic captions' grammar (datamodules/synthetic_scenes.py): distinct colour x shape objects, one
# clause per object in order of first appearance, so objects in view from the start come first
# (those behind the wall drawn first), then those that enter, then those that emerge.
CLAUSE_ORDER = {"hides": 0, "passes": 0, "leaves": 1, "moves": 1, "stays": 1, "bounces": 1, "enters": 2, "emerges": 3}
SYNTHETIC_CLAUSE_RE = re.compile(
    r"^(a|an) (\w+) (\w+) (enters from the (?:left|right|top|bottom)|leaves to the (?:left|right|top|bottom)|"
    r"moves (?:left|right|up|down)|stays still|bounces up and down|hides behind the wall|"
    r"emerges from behind the wall|passes behind the wall)$")


def grammar_captions(n, seed=0):
    """Captions as the synthetic generator writes them (its vocabulary, distinct objects, clause order)."""
    rng = np.random.default_rng(seed)
    identities = [(c, s) for c in COLOURS for s in SHAPES]
    clauses = {"enters": lambda: f"enters from the {rng.choice(SIDES)}",
               "leaves": lambda: f"leaves to the {rng.choice(SIDES)}",
               "moves": lambda: f"moves {rng.choice(DIRECTIONS)}", "stays": lambda: "stays still",
               "bounces": lambda: "bounces up and down", "hides": lambda: "hides behind the wall",
               "emerges": lambda: "emerges from behind the wall", "passes": lambda: "passes behind the wall"}
    out = []
    for _ in range(n):
        k = int(rng.integers(1, 4))
        objects = [identities[i] for i in rng.choice(len(identities), k, replace=False)]
        actions = sorted(rng.choice(list(CLAUSE_ORDER), k), key=lambda a: (CLAUSE_ORDER[a], rng.random()))
        out.append(", then ".join(f"{indefinite_article(c)} {c} {s} {clauses[a]()}"
                                  for (c, s), a in zip(objects, actions)) + ".")
    return out


def parse_synthetic_caption(caption):
    """[(colour, shape, clause)] of a caption in the synthetic grammar, or None if it breaks the grammar."""
    out = []
    for part in caption.rstrip(".").split(", then "):
        match = SYNTHETIC_CLAUSE_RE.match(part)
        if match is None or match.group(1) != indefinite_article(match.group(2)):
            return None
        out.append((match.group(2), match.group(3), match.group(4)))
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
def closed_rows():
    backend = RuleBackend(in_domain="require", closed_domain=True)
    captions = grammar_captions(200, seed=4)
    rows, stats = generate_corruptions(sources(captions), backend, per_caption=10, seed=2)
    return rows, stats, backend, captions


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
    assert [indefinite_article(w) for w in ("orange", "red", "hour", "unicorn", "apple")] == [
        "an", "a", "an", "a", "an"]


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

    from judge.model.vc_inspector import build_tiny_judge_tokenizer

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


# ----------------------------------------------------------------------------- closed domain (synthetic data)

def test_closed_domain_needs_in_domain_require():
    with pytest.raises(ValueError, match="closed_domain=True .* in_domain='require'"):
        RuleBackend(closed_domain=True)


def test_closed_domain_predicates_take_the_whole_complement():
    backend = RuleBackend(in_domain="require", closed_domain=True)
    captions = ["a red circle moves left, then a blue square bounces up and down.",
                "an orange cross emerges from behind the wall, then a white diamond enters from the top.",
                "a green triangle passes behind the wall, then a purple circle moves left."]
    extractions = backend.prepare(captions)
    assert [[a.text for a in e.actions] for e in extractions] == [
        ["moves left", "bounces up and down"], ["emerges from behind the wall", "enters from the top"],
        ["passes behind the wall", "moves left"]]
    # a predicate stops where a replaceable object starts ("a horse")
    other = RuleBackend(in_domain="require", closed_domain=True).prepare(
        ["A man rides a horse along the beach.", "A woman walks a dog on the beach."])
    assert [[a.text for a in e.actions] for e in other] == [["rides"], ["walks"]]
    assert [[o.key for o in e.objects if o.options] for e in extractions[:3]] == [
        ["red circle", "blue square"], ["orange cross", "white diamond"], ["green triangle", "purple circle"]]
    # the wall is never coloured in these captions: no shape of the palette can stand in for it
    assert not [o for o in extractions[1].objects if o.key == "wall"][0].options
    # an object's category is the nouns used in its slot; every action may become any other
    shapes = {w for w, _ in extractions[0].objects[0].options["noun"]}
    assert shapes == {"cross", "diamond", "square", "triangle"}
    predicates = {w for w, _ in extractions[0].actions[0].options["predicate"]}
    assert "move right" not in predicates and {"bounce up and down", "emerge from behind the wall",
                                               "enter from the top", "pass behind the wall"} <= predicates


def test_closed_domain_corruptions_are_captions_some_clip_could_have(closed_rows):
    rows, stats, backend, captions = closed_rows
    _check_rows(rows)
    seen_pairs = set()
    for caption in captions:
        verbs = [clause.split()[0] for _, _, clause in parse_synthetic_caption(caption)]
        seen_pairs.update(zip(verbs, verbs[1:]))
    kinds = Counter()
    for row in rows:
        parsed = parse_synthetic_caption(row["caption"])
        assert parsed is not None, row["caption"]  # the dataset's vocabulary and grammar, a/an included
        assert len({(c, s) for c, s, _ in parsed}) == len(parsed), row["caption"]  # objects stay distinct
        verbs = [clause.split()[0] for _, _, clause in parsed]
        assert set(zip(verbs, verbs[1:])) <= seen_pairs, row["caption"]  # clause order the captions show
        original = parse_synthetic_caption(row["original_caption"])
        assert len(original) == len(parsed) and row["num_objects"] == row["num_actions"] == len(parsed)
        changed_objects = sum((c, s) != (oc, os) for (c, s, _), (oc, os, _) in zip(parsed, original))
        changed_actions = sum(a.split()[0] != oa.split()[0] for (_, _, a), (_, _, oa) in zip(parsed, original))
        assert changed_objects + changed_actions == len(row["substitutions"])  # every change is a counted error
        for (c, s, _), (oc, os, _) in zip(parsed, original):
            assert (c, s) == (oc, os) or (c == oc) != (s == os)  # colour or shape swapped, never both
            kinds["colour" if c != oc else "shape" if s != os else "same"] += 1
    assert kinds["colour"] > 100 and kinds["shape"] > 100
    assert stats.captions_used == len(captions)


def test_closed_domain_leaves_no_text_only_cue(closed_rows):
    """A text-only predictor (mean score of each caption word and word pair, fitted on half the clips)
    ranks the other half's corruptions: near zero on closed-domain data, clearly positive on the
    open-vocabulary rules' corruptions of the same captions, which leave wording cues."""
    rows, _, _, captions = closed_rows
    backend = RuleBackend(in_domain="require", max_climb=4, climb_decay=1.0)
    open_rows, _ = generate_corruptions(sources(captions), backend, per_caption=10, seed=2)
    closed_tau = _text_only_tau(balance_by_score(rows, seed=0, by_size=True))
    open_tau = _text_only_tau(balance_by_score(open_rows, seed=0))
    assert abs(closed_tau) < 0.1 and open_tau > 0.25, (closed_tau, open_tau)  # held-out n ~ 350: sd ~ 0.035


def _text_only_tau(rows):
    def grams(caption):
        words = caption.lower().rstrip(".").replace(",", " ,").split()
        return set(words) | {" ".join(pair) for pair in zip(words, words[1:])}

    fit = [r for r in rows if int(r["source_key"][1:]) % 2 == 0]
    held = [r for r in rows if int(r["source_key"][1:]) % 2 == 1]
    sums, counts = Counter(), Counter()
    for row in fit:
        for g in grams(row["caption"]):
            sums[g] += row["score"]
            counts[g] += 1
    prior = np.mean([r["score"] for r in fit])
    predicted = [np.mean([(sums[g] + 3 * prior) / (counts[g] + 3) for g in grams(r["caption"])]) for r in held]
    return scipy.stats.kendalltau(predicted, [r["score"] for r in held]).statistic


def test_balance_by_size_hand_computed():
    # size 2: scores 1 x4, 3 x5, 5 x2; size 4: 1, 2 x3, 3 x2, 4, 5 x3. Symmetric capacity per size:
    # pair (1, 5): 2 + 1 = 3; pair (2, 4): 0 + 1 = 1; score 3: 5 + 2 = 7 -> one row per score, shared
    # by largest remainder: (1, 5) and 3 from size 2, (2, 4) from size 4.
    counts = {(2, 1): 4, (2, 3): 5, (2, 5): 2, (4, 1): 1, (4, 2): 3, (4, 3): 2, (4, 4): 1, (4, 5): 3}
    rows = [{"key": f"{n}-{s}-{i}", "score": s, "num_objects": n // 2, "num_actions": n // 2}
            for (n, s), k in counts.items() for i in range(k)]
    kept = balance_by_score(rows, seed=0, by_size=True)
    assert sorted((r["num_objects"] * 2, r["score"]) for r in kept) == [(2, 1), (2, 3), (2, 5), (4, 2), (4, 4)]
    assert balance_by_score(rows, seed=0, by_size=True) == kept
    assert [rows.index(r) for r in kept] == sorted(rows.index(r) for r in kept)


def test_balance_by_size_is_symmetric_per_size_and_uniform(closed_rows):
    rows = closed_rows[0]
    kept = balance_by_score(rows, seed=0, by_size=True)
    totals = Counter(r["score"] for r in kept)
    assert set(totals) == {1, 2, 3, 4, 5} and len(set(totals.values())) == 1
    per_size = Counter((r["num_objects"] + r["num_actions"], r["score"]) for r in kept)
    for (size, score), count in per_size.items():
        assert per_size[size, 6 - score] == count  # so no function of the size ranks the scores
    for size in {n for n, _ in per_size}:
        assert np.mean([r["score"] for r in kept if r["num_objects"] + r["num_actions"] == size]) == 3.0
    assert Counter(r["score"] for r in balance_by_score(rows, seed=0, by_size=True, per_score=7)) == \
        Counter({s: 7 for s in range(1, 6)})


# ----------------------------------------------------------------------------- substituted spans

def _sub(kind, old, new):
    return {"kind": kind, "old": old, "new": new}


def _spans_text(row):
    spans = substituted_spans(row)
    return None if spans is None else [row["caption"][a:b] for a, b in spans]


def test_substituted_spans_hand_cases():
    # an unchanged caption has no wrong words
    same = {"caption": "a red circle moves left.", "original_caption": "a red circle moves left.", "substitutions": []}
    assert substituted_spans(same) == []
    # the article agrees with the substitute: "an orange" -> "a white" shifts every later offset by one
    row = {"original_caption": "an orange square stays still, then a red circle moves left.",
           "caption": "a white square stays still, then a red circle moves up.",
           "substitutions": [_sub("object", "orange square", "white square"), _sub("action", "moves left", "moves up")]}
    assert substituted_spans(row) == [(2, 14), (46, 54)]
    # the same clause twice, only the second replaced: the first occurrence stays unmarked
    row = {"original_caption": "a red circle hides behind the wall, then an orange circle hides behind the wall.",
           "caption": "a red circle hides behind the wall, then an orange circle passes behind the wall.",
           "substitutions": [_sub("action", "hides behind the wall", "passes behind the wall")]}
    assert substituted_spans(row) == [(58, 80)]
    # a substitute that is another clause's original phrase: only the replaced place is marked
    row = {"original_caption": "a white diamond bounces up and down, then a red diamond moves left.",
           "caption": "a yellow diamond bounces up and down, then a white diamond moves left.",
           "substitutions": [_sub("object", "white diamond", "yellow diamond"),
                             _sub("object", "red diamond", "white diamond")]}
    assert _spans_text(row) == ["yellow diamond", "white diamond"]
    assert substituted_spans(row)[1][0] == row["caption"].index("white diamond")
    # swapped objects: both places are wrong
    row = {"original_caption": "a red circle stays still, then a blue square moves up.",
           "caption": "a blue square stays still, then a red circle moves up.",
           "substitutions": [_sub("object", "red circle", "blue square"), _sub("object", "blue square", "red circle")]}
    assert _spans_text(row) == ["blue square", "red circle"]


def test_substituted_spans_none_when_the_record_cannot_rebuild_the_caption():
    assert substituted_spans({"caption": "a red circle moves left."}) is None  # a human-rated row
    rewritten = {"original_caption": "a man rides a horse.", "caption": "a woman is riding a big horse.",
                 "substitutions": [_sub("object", "man", "woman")]}
    assert substituted_spans(rewritten) is None  # an LLM rewrite: the words moved
    changed_without_record = {"original_caption": "a red circle.", "caption": "a blue circle.", "substitutions": []}
    assert substituted_spans(changed_without_record) is None


def test_substituted_spans_locate_every_closed_domain_substitution(closed_rows):
    rows = closed_rows[0]
    for row in rows:
        spans = substituted_spans(row)
        assert spans is not None and len(spans) == len(row["substitutions"]), row
        assert sorted(row["caption"][a:b] for a, b in spans) == sorted(s["new"] for s in row["substitutions"])
        assert all(b <= a2 for (_, b), (a2, _) in zip(spans, spans[1:]))  # ordered, disjoint


def test_split_files_are_named_as_grove_names_them(tmp_path):
    from judge.data.datamodule import JudgeDataModule

    module = JudgeDataModule(train_annotations="t.jsonl", val_annotations="v.jsonl")
    assert (module.split_file("train"), module.split_file("val"), module.split_file("test")) == \
        ("t.jsonl", "v.jsonl", None)


def test_split_files_generated_on_first_use_are_not_missing_paths():
    from core.config_loader import missing_paths

    data = {"class_path": "judge.data.datamodule.JudgeDataModule",
            "init_args": {"train_annotations": "no/such/train.jsonl", "test_annotations": "no/such/test.jsonl",
                          "generate_from": {"train": "records.json"}}}
    assert missing_paths({"data": data}) == ["data.test_annotations: 'no/such/test.jsonl' (README section "
                                             "'Datasets')"]
