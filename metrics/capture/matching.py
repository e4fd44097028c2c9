"""CAPTURE's three-stage element matching and its precision / recall / F1 (seed 002 appendix B).

For one element type (objects ``(o,)``, attributes ``(o, a)``, relations ``(s, p, o)``):

1. exact: equal (lemmatised) tuples match;
2. synonyms: among the rest, two tuples match when every component is equal or a WordNet synonym
   of the other; two words are synonyms iff their synsets' lemma-name sets overlap (multi-word
   phrases are looked up with underscores, "cutting board" -> ``cutting_board``). This is NOT the
   public code's substring test, which makes "man" a synonym of "woman". Pairs are chosen as a
   maximum one-to-one matching, so the count does not depend on element order;
3. soft: the still unmatched candidate and reference phrases are embedded (unit vectors); each
   unmatched candidate adds its best cosine similarity to an unmatched reference to the candidate
   count, and each unmatched reference its best similarity to an unmatched candidate to the
   reference count (similarities below 0 count as 0: the seed puts soft scores in [0, 1)).

``precision = (matched + soft_candidate) / |candidates|``, ``recall = (matched + soft_reference) /
|references|``, ``F1 = 2PR / (P + R)``. Two places where the seed's appendix formulas are read:

* Eq. (5) divides the soft sum by the number of unmatched elements (adding their MEAN similarity),
  while §3.2 says the maxima "are added up" and the public code adds the SUM. The sum is the
  default (``soft_reduction="sum"``); ``"mean"`` reproduces Eq. (5) literally.
* The F1 formula there lacks the factor 2 (a perfect caption would score 0.5); we use the usual F1.

Empty sets: no candidate and no reference element of a type -> P = R = F1 = 1 (nothing to find and
nothing wrong: identical captions always score 1); exactly one side empty -> P = R = F1 = 0.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

Element = tuple[str, ...]
SOFT_REDUCTIONS = ("sum", "mean")


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
def synonym_set(word: str) -> frozenset[str]:
    """Lower-cased lemma names of all WordNet synsets of ``word`` (any part of speech)."""
    key = "_".join(word.lower().split())
    if not key:
        return frozenset()
    return frozenset(lemma.name().lower() for synset in _wordnet().synsets(key) for lemma in synset.lemmas())


def are_synonyms(a: str, b: str) -> bool:
    """Equal, or WordNet synsets whose lemma-name sets overlap ("car" ~ "automobile", "man" !~ "woman")."""
    return a == b or not synonym_set(a).isdisjoint(synonym_set(b))


def synonym_matrix(words_a: Sequence[str], words_b: Sequence[str]) -> np.ndarray:
    """``M[i, j] = are_synonyms(words_a[i], words_b[j])``, via one product of lemma-name indicators."""
    sets_a = [synonym_set(w) for w in words_a]
    sets_b = [synonym_set(w) for w in words_b]
    vocab = {name: k for k, name in enumerate(sorted(set().union(*sets_a, *sets_b)))}
    ind_a = np.zeros((len(words_a), max(1, len(vocab))), dtype=np.float32)
    ind_b = np.zeros((len(words_b), max(1, len(vocab))), dtype=np.float32)
    for i, names in enumerate(sets_a):
        ind_a[i, [vocab[n] for n in names]] = 1.0
    for j, names in enumerate(sets_b):
        ind_b[j, [vocab[n] for n in names]] = 1.0
    equal = np.asarray(words_a, dtype=object)[:, None] == np.asarray(words_b, dtype=object)[None, :]
    return ((ind_a @ ind_b.T) > 0) | equal


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


def match_exact_and_synonyms(candidates: Sequence[Element], references: Sequence[Element],
                             use_synonyms: bool = True) -> DiscreteMatch:
    """Stages 1 and 2 on de-duplicated element lists (tuples of equal length within a list)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    cands = list(dict.fromkeys(tuple(c) for c in candidates))
    refs = list(dict.fromkeys(tuple(r) for r in references))
    ref_set, cand_set = set(refs), set(cands)
    rest_c = [c for c in cands if c not in ref_set]
    rest_r = [r for r in refs if r not in cand_set]
    num_exact = len(cands) - len(rest_c)
    num_synonym = 0
    if use_synonyms and rest_c and rest_r:
        if len({len(e) for e in rest_c + rest_r}) != 1:
            raise ValueError("candidate and reference elements must all have the same arity, got "
                             f"{sorted({len(e) for e in rest_c + rest_r})}")
        # Component-wise: every field equal or synonymous.
        match = np.ones((len(rest_c), len(rest_r)), dtype=bool)
        for k in range(len(rest_c[0])):
            match &= synonym_matrix([c[k] for c in rest_c], [r[k] for r in rest_r])
        if match.any():
            pairing = maximum_bipartite_matching(csr_matrix(match), perm_type="column")
            matched_c = pairing >= 0
            matched_r = np.zeros(len(rest_r), dtype=bool)
            matched_r[pairing[matched_c]] = True
            num_synonym = int(matched_c.sum())
            rest_c = [c for c, m in zip(rest_c, matched_c) if not m]
            rest_r = [r for r, m in zip(rest_r, matched_r) if not m]
    return DiscreteMatch(len(cands), len(refs), num_exact, num_synonym, tuple(rest_c), tuple(rest_r))


def soft_match_counts(similarity: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per unmatched candidate (rows) and reference (columns): best similarity on the other side, in [0, 1]."""
    if similarity.shape[0] == 0 or similarity.shape[1] == 0:  # nothing on one side: nothing to add
        return similarity.new_zeros(similarity.shape[0]), similarity.new_zeros(similarity.shape[1])
    sim = similarity.clamp(0.0, 1.0)
    return sim.max(dim=1).values, sim.max(dim=0).values


def precision_recall_f1(num_candidates: int, num_references: int, num_matched: int,
                        soft_candidate: torch.Tensor | None = None, soft_reference: torch.Tensor | None = None,
                        soft_reduction: str = "sum") -> tuple[float, float, float]:
    """Appendix B Eq. (4)/(5) with the conventions in the module docstring."""
    if soft_reduction not in SOFT_REDUCTIONS:
        raise ValueError(f"soft_reduction must be one of {SOFT_REDUCTIONS}, got {soft_reduction!r}")
    if num_candidates == 0 and num_references == 0:
        return 1.0, 1.0, 1.0
    if num_candidates == 0 or num_references == 0:
        return 0.0, 0.0, 0.0

    def soft(values: torch.Tensor | None) -> float:
        if values is None or values.numel() == 0:
            return 0.0
        return float(values.sum() if soft_reduction == "sum" else values.mean())

    precision = (num_matched + soft(soft_candidate)) / num_candidates
    recall = (num_matched + soft(soft_reference)) / num_references
    f1 = 2.0 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1


PhraseEmbedder = Callable[[Sequence[str]], torch.Tensor]


def match_elements(candidates: Sequence[Element], references: Sequence[Element], *,
                   use_synonyms: bool = True, embed: PhraseEmbedder | None = None,
                   soft_reduction: str = "sum") -> tuple[float, float, float]:
    """All three stages for one element type of one caption pair -> (precision, recall, F1).

    ``embed`` maps phrases to L2-normalised rows (``None`` skips soft matching).
    """
    discrete = match_exact_and_synonyms(candidates, references, use_synonyms)
    soft_c = soft_r = None
    if embed is not None and discrete.remaining_candidates and discrete.remaining_references:
        phrases_c = [element_phrase(e) for e in discrete.remaining_candidates]
        phrases_r = [element_phrase(e) for e in discrete.remaining_references]
        emb = embed(phrases_c + phrases_r)
        soft_c, soft_r = soft_match_counts(emb[:len(phrases_c)] @ emb[len(phrases_c):].T)
    return precision_recall_f1(discrete.num_candidates, discrete.num_references, discrete.num_matched,
                               soft_c, soft_r, soft_reduction)
