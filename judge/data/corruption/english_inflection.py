"""English inflection for caption rewriting: plurals, verb forms, a/an, capitalisation.

Rule-based and dependency-free: when a caption's word is replaced, the new word takes the old
one's form ("bounces" -> "rolls", "circles" -> "squares", "a square" -> "an oval").
"""
from __future__ import annotations

import re
from typing import Sequence

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
