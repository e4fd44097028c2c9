"""CAPTURE's three-stage element matching and its precision / recall / F1 (CAPTURE paper, appendix B).

For one element type (objects ``(o,)``, attribute words ``(a,)`` or pairs ``(o, a)``, relations
``(s, p, o)``):

1. exact: equal (lemmatised) tuples match;
2. synonyms: among the rest, two tuples match when every component is equal or a synonym of the
   other. ``synonyms="wordnet"`` (default): two words are synonyms iff their WordNet synsets'
   lemma-name sets overlap (multi-word phrases are looked up with underscores, "cutting board" ->
   ``cutting_board``). ``"substring"``: the authors' package (``capture-metric`` 0.1.13), which
   also calls two words synonyms when one is a substring of the other ("man" ~ "woman", "red" ~
   "bored"). ``matching="maximum"`` (default) pairs them by a maximum one-to-one matching, so the
   count does not depend on element order; ``"greedy"`` is the package's first-fit in element
   order (its sets' order changes from run to run);
3. soft: the still unmatched candidate and reference phrases are embedded (unit vectors); each
   unmatched candidate adds its best cosine similarity to an unmatched reference to the candidate
   count, and each unmatched reference its best similarity to an unmatched candidate to the
   reference count. As in the package the similarities are not clamped (a best similarity below
   0 subtracts); ``clamp=True`` puts them in [0, 1] as the paper describes soft scores.

``precision = (matched + soft_candidate) / |candidates|``, ``recall = (matched + soft_reference) /
|references|``, ``F1 = 2PR / (P + R)``. Two places where the paper's appendix formulas are read:

* Eq. (5) divides the soft sum by the number of unmatched elements (adding their MEAN similarity),
  while §3.2 says the maxima "are added up" and the package adds the SUM. The sum is the
  default (``soft_reduction="sum"``); ``"mean"`` reproduces Eq. (5) literally.
* The F1 formula there lacks the factor 2 (a perfect caption would score 0.5); we use the usual F1.

Empty sets (``empty_sets``): ``"zero"`` (default; the package): a type with no candidate or no
reference element scores P = R = F1 = 0, also when both sides are empty. ``"one"``: both sides
empty scores 1 (nothing to find and nothing wrong: identical captions always score 1); exactly
one side empty still scores 0. The package divides by ``n + 1e-6``; that epsilon is not copied.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

Element = tuple[str, ...]
SOFT_REDUCTIONS = ("sum", "mean")
SYNONYM_RULES = ("wordnet", "substring")
MATCHINGS = ("maximum", "greedy")
EMPTY_SETS = ("zero", "one")


def element_phrase(element: Element) -> str:
    """Text embedded for soft matching: attributes read "white sheep", relations "man sit on chair"."""
    if len(element) == 2:  # (object, attribute)
        return f"{element[1]} {element[0]}"
    return " ".join(element)


@functools.lru_cache(maxsize=1)
def _wordnet():
    from core.paths import ensure_nltk_data

    ensure_nltk_data()
    from nltk.corpus import wordnet

    wordnet.ensure_loaded()
    return wordnet


@functools.lru_cache(maxsize=65536)
def synonym_set(word: str, casefold: bool = True) -> frozenset[str]:
    """Lemma names of all WordNet synsets of ``word`` (any part of speech); lower-cased with
    ``casefold`` (the package compares them as WordNet spells them)."""
    key = "_".join((word.lower() if casefold else word).split())
    if not key:
        return frozenset()
    names = (lemma.name() for synset in _wordnet().synsets(key) for lemma in synset.lemmas())
    return frozenset(n.lower() for n in names) if casefold else frozenset(names)


def are_synonyms(a: str, b: str) -> bool:
    """Equal, or WordNet synsets whose lemma-name sets overlap ("car" ~ "automobile", "man" !~ "woman")."""
    return a == b or not synonym_set(a).isdisjoint(synonym_set(b))


def synonym_matrix(words_a: Sequence[str], words_b: Sequence[str], rule: str = "wordnet") -> np.ndarray:
    """``M[i, j]``: ``words_a[i]`` and ``words_b[j]`` are synonyms under ``rule`` (one product of
    lemma-name indicators; ``substring`` adds the package's substring test)."""
    if rule not in SYNONYM_RULES:
        raise ValueError(f"synonym rule must be one of {SYNONYM_RULES}, got {rule!r}")
    casefold = rule == "wordnet"
    sets_a = [synonym_set(w, casefold) for w in words_a]
    sets_b = [synonym_set(w, casefold) for w in words_b]
    vocab = {name: k for k, name in enumerate(sorted(set().union(*sets_a, *sets_b)))}
    ind_a = np.zeros((len(words_a), max(1, len(vocab))), dtype=np.float32)
    ind_b = np.zeros((len(words_b), max(1, len(vocab))), dtype=np.float32)
    for i, names in enumerate(sets_a):
        ind_a[i, [vocab[n] for n in names]] = 1.0
    for j, names in enumerate(sets_b):
        ind_b[j, [vocab[n] for n in names]] = 1.0
    equal = np.asarray(words_a, dtype=object)[:, None] == np.asarray(words_b, dtype=object)[None, :]
    out = ((ind_a @ ind_b.T) > 0) | equal
    if rule == "substring":
        out |= np.array([[a in b or b in a for b in words_b] for a in words_a], dtype=bool).reshape(out.shape)
    return out


@dataclass(frozen=True)
class DiscreteMatch:
    """Outcome of the exact and synonym stages for one (candidate, reference) element list pair."""

    num_candidates: int
    num_references: int
    num_exact: int
    num_synonym: int
    remaining_candidates: tuple[Element, ...]
    remaining_references: tuple[Element, ...]

    @property
    def num_matched(self) -> int:
        return self.num_exact + self.num_synonym


def _exact_pairs(cands: list[Element], refs: list[Element]) -> tuple[list[bool], list[bool]]:
    """Equal elements paired one to one in order (multisets: each copy pairs at most once)."""
    free: dict[Element, list[int]] = {}
    for j, r in enumerate(refs):
        free.setdefault(r, []).append(j)
    used_c, used_r = [False] * len(cands), [False] * len(refs)
    for i, c in enumerate(cands):
        if free.get(c):
            used_c[i], used_r[free[c].pop(0)] = True, True
    return used_c, used_r


def match_exact_and_synonyms(candidates: Sequence[Element], references: Sequence[Element],
                             use_synonyms: bool = True, synonyms: str = "wordnet", matching: str = "maximum",
                             deduplicate: bool = True) -> DiscreteMatch:
    """Stages 1 and 2 (tuples of equal length within a list); ``deduplicate=False`` keeps repeated
    elements as separate ones (the package's pooled attribute words)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    if matching not in MATCHINGS:
        raise ValueError(f"matching must be one of {MATCHINGS}, got {matching!r}")
    cands, refs = [tuple(c) for c in candidates], [tuple(r) for r in references]
    if deduplicate:
        cands, refs = list(dict.fromkeys(cands)), list(dict.fromkeys(refs))
    used_c, used_r = _exact_pairs(cands, refs)
    rest_c = [c for c, u in zip(cands, used_c) if not u]
    rest_r = [r for r, u in zip(refs, used_r) if not u]
    num_exact = len(cands) - len(rest_c)
    num_synonym = 0
    if use_synonyms and rest_c and rest_r:
        if len({len(e) for e in rest_c + rest_r}) != 1:
            raise ValueError("candidate and reference elements must all have the same arity, got "
                             f"{sorted({len(e) for e in rest_c + rest_r})}")
        # Component-wise: every field equal or synonymous.
        match = np.ones((len(rest_c), len(rest_r)), dtype=bool)
        for k in range(len(rest_c[0])):
            match &= synonym_matrix([c[k] for c in rest_c], [r[k] for r in rest_r], synonyms)
        if match.any():
            if matching == "maximum":
                pairing = maximum_bipartite_matching(csr_matrix(match), perm_type="column")
            else:  # first fit in candidate order, each to its first free reference
                pairing = np.full(len(rest_c), -1)
                taken = np.zeros(len(rest_r), dtype=bool)
                for i in range(len(rest_c)):
                    free = np.flatnonzero(match[i] & ~taken)
                    if len(free):
                        pairing[i], taken[free[0]] = free[0], True
            matched_c = pairing >= 0
            matched_r = np.zeros(len(rest_r), dtype=bool)
            matched_r[pairing[matched_c]] = True
            num_synonym = int(matched_c.sum())
            rest_c = [c for c, m in zip(rest_c, matched_c) if not m]
            rest_r = [r for r, m in zip(rest_r, matched_r) if not m]
    return DiscreteMatch(len(cands), len(refs), num_exact, num_synonym, tuple(rest_c), tuple(rest_r))


def soft_match_counts(similarity: torch.Tensor, clamp: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per unmatched candidate (rows) and reference (columns): best similarity on the other side
    (raw, as the package; in [0, 1] with ``clamp``)."""
    if similarity.shape[0] == 0 or similarity.shape[1] == 0:  # nothing on one side: nothing to add
        return similarity.new_zeros(similarity.shape[0]), similarity.new_zeros(similarity.shape[1])
    sim = similarity.clamp(0.0, 1.0) if clamp else similarity
    return sim.max(dim=1).values, sim.max(dim=0).values


def precision_recall_f1(num_candidates: int, num_references: int, num_matched: int,
                        soft_candidate: torch.Tensor | None = None, soft_reference: torch.Tensor | None = None,
                        soft_reduction: str = "sum", empty_sets: str = "zero") -> tuple[float, float, float]:
    """Appendix B Eq. (4)/(5) with the conventions in the module docstring."""
    if soft_reduction not in SOFT_REDUCTIONS:
        raise ValueError(f"soft_reduction must be one of {SOFT_REDUCTIONS}, got {soft_reduction!r}")
    if empty_sets not in EMPTY_SETS:
        raise ValueError(f"empty_sets must be one of {EMPTY_SETS}, got {empty_sets!r}")
    if num_candidates == 0 and num_references == 0 and empty_sets == "one":
        return 1.0, 1.0, 1.0
    if num_candidates == 0 or num_references == 0:
        return 0.0, 0.0, 0.0

    def soft(values: torch.Tensor | None) -> float:
        if values is None or values.numel() == 0:
            return 0.0
        return float(values.sum() if soft_reduction == "sum" else values.mean())

    precision = (num_matched + soft(soft_candidate)) / num_candidates
    recall = (num_matched + soft(soft_reference)) / num_references
    # unclamped soft scores can make P + R negative: the package's F1 formula is kept (0 only at P + R = 0)
    f1 = 2.0 * precision * recall / (precision + recall) if precision + recall != 0 else 0.0
    return precision, recall, f1


PhraseEmbedder = Callable[[Sequence[str]], torch.Tensor]


def match_elements(candidates: Sequence[Element], references: Sequence[Element], *,
                   use_synonyms: bool = True, embed: PhraseEmbedder | None = None,
                   soft_reduction: str = "sum", synonyms: str = "wordnet", matching: str = "maximum",
                   clamp: bool = False, empty_sets: str = "zero", deduplicate: bool = True
                   ) -> tuple[float, float, float]:
    """All three stages for one element type of one caption pair -> (precision, recall, F1).

    ``embed`` maps phrases to L2-normalised rows (``None`` skips soft matching).
    """
    discrete = match_exact_and_synonyms(candidates, references, use_synonyms, synonyms, matching, deduplicate)
    soft_c = soft_r = None
    if embed is not None and discrete.remaining_candidates and discrete.remaining_references:
        phrases_c = [element_phrase(e) for e in discrete.remaining_candidates]
        phrases_r = [element_phrase(e) for e in discrete.remaining_references]
        emb = embed(phrases_c + phrases_r)
        soft_c, soft_r = soft_match_counts(emb[:len(phrases_c)] @ emb[len(phrases_c):].T, clamp)
    return precision_recall_f1(discrete.num_candidates, discrete.num_references, discrete.num_matched,
                               soft_c, soft_r, soft_reduction, empty_sets)
