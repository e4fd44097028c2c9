"""Finding a caption's objects and actions in its spaCy parse (the rule backend's extraction step).

Objects are nouns of the caption in WordNet's concrete categories, with their colour word and
compound nouns ("red circle", "lawn mower"); an object is one fact however often it is
mentioned. Actions are verbs (not copulas, light or aspectual verbs) with their particle
("picks up"); every verb occurrence is its own fact. Lexicon repairs cover the small parser's
slips ("a square bounces" read as a plural noun).
"""
from __future__ import annotations

from typing import Any

from judge.data.corruption.data_types import Extraction, FactualElement
from judge.data.corruption.lexicon import (
    _DETERMINERS,
    _FORM_OF_TAG,
    BASIC_COLOURS,
    CONCRETE_LEXNAMES,
    NON_OBJECT_NOUNS,
    SENSES_PER_WORD,
    category,
)


class CaptionElementExtractor:
    """Extraction half of :class:`~judge.data.corruption.rule_backend.RuleBackend`.

    Expects the attributes the backend sets: ``wn`` (WordNet), ``actions`` / ``non_actions`` (the
    curated lexicon), ``action_forms`` (-s form -> (verb, "3sg")), ``spacy_model`` and ``_nlp``.
    """

    @property
    def nlp(self):
        if self._nlp is None:
            import spacy

            self._nlp = spacy.load(self.spacy_model)
        return self._nlp

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
                if (tok.tag_ in ("VBN", "VBD") and not children
                        and tok.dep_ in ("acl", "amod", "advmod", "npadvmod", "dep", "oprd")):
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
