"""Word lists and WordNet helpers that decide what counts as an object or action and what may replace it."""
from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

ALTERNATIVES_PATH = Path(__file__).with_name("action_alternatives.json")
IN_DOMAIN_MODES = ("prefer", "require", "off")
# Berlin & Kay's basic colour terms; all are co-hyponyms under WordNet's color.n.01.
BASIC_COLOURS = ("black", "white", "red", "green", "yellow", "blue", "brown", "purple", "pink", "orange", "gray",
                 "grey")
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
SENSES_PER_WORD = 3  # only a word's common senses count (WordNet lists senses by frequency)
_FORM_OF_TAG = {"VB": "base", "VBP": "base", "VBZ": "3sg", "VBD": "past", "VBN": "participle", "VBG": "gerund"}
_DETERMINERS = frozenset({"a", "an", "the", "his", "her", "its", "their", "my", "your", "our", "this", "that",
                          "these", "those", "another", "some", "two", "three", "several"})


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


def wordnet_corpus():
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
    wn = wordnet_corpus()
    return bool(set(wn.synsets(a.replace(" ", "_"), pos)) & set(wn.synsets(b.replace(" ", "_"), pos)))
