"""The Stage 2 and Stage 3 prompts (GROVE paper, supp. F, Figures 11 and 12) and the parsers of their answers.

Prompts are chat conversations: the figure's system instructions, its in-context examples as
user/assistant turns, then the new input. The examples are transcribed from the figures with
typography normalised (straight quotes, balanced brackets). Answers must contain a Python
dictionary (``{'CAPTION': ...}`` / ``{'CATEGORY': ...}``); :class:`AnswerError` says why one
does not parse, which becomes the rejection reason once the retries are spent.
"""
from __future__ import annotations

import ast
import re
from typing import Sequence

from formats.records import tagged_phrases

STAGE2_SYSTEM = (
    "Generate a dynamic, video-level description based on frame-level inputs. The inputs include actions "
    "performed in individual frames in the form of Subject-Verb-Object (SVO) triplets along with prepositions "
    "and prepositional objects. The SVO triplets describe how actions are performed and how objects interact. "
    "Your output should be a concise narrative in 1 sentence, focusing on the most salient actions depicted "
    "across the frames. Enclose the exact text of relevant objects within <p></p> tags.\n\n"
    "Input format:\n"
    "[[['subject': 'subject_text', 'verb': 'action_text', 'object': 'object_text', "
    "'prepositions_objects': [('preposition', 'prepositional_object')]],],]\n\n"
    "Output format:\n"
    "A Python dictionary with a key 'CAPTION', and as a value a dynamic description of the video content.\n\n"
    "Infer motion from static descriptions. E.g. 'image shows a person holding a spoon and a bowl' implies "
    "'person is stirring food in a bowl'. Enclose the human and the most frequent object that is used to "
    "perform the action within <p></p> tags. If there is no human, enclose the two most frequent objects "
    "within <p></p> tags."
)
# The "full captions instead of SVO" variant (paper, sec. 6.2, "Alt. Stage 2"): same task, the
# inputs are the frame captions themselves; the figure's SVO examples do not apply.
STAGE2_CAPTIONS_SYSTEM = (
    "Generate a dynamic, video-level description based on frame-level inputs. The inputs are the captions of "
    "individual frames, in temporal order. Your output should be a concise narrative in 1 sentence, focusing "
    "on the most salient actions depicted across the frames. Enclose the exact text of relevant objects within "
    "<p></p> tags.\n\n"
    "Output format:\n"
    "A Python dictionary with a key 'CAPTION', and as a value a dynamic description of the video content.\n\n"
    "Infer motion from static descriptions. Enclose the human and the most frequent object that is used to "
    "perform the action within <p></p> tags. If there is no human, enclose the two most frequent objects "
    "within <p></p> tags."
)
STAGE2_EXAMPLES = (
    ([[["image", "shows", "cup"], ["bowl", "is"]],
      [["person", "holding", "spoon"], ["spoon", "is", "bowl"]],
      [["image", "shows", "spoon", ("inside", "bowl")]],
      [["person", "seen"], ["person", "holding", "spoon"], ["spoon", "used"],
       ["spoon", "stir", "food", ("in", "bowl")]],
      [["person", "holding", "spoon"], ["spoon", "is", "bowl"]],
      [["person", "holding", "spoon"], ["spoon", "is", "bowl"]],
      [["person", "holding", "spoon"], ["spoon", "is", "bowl"]],
      [["image", "shows", "spoon", ("in", "bowl")]],
      [["image", "shows", "bottle"], ["bottle", "positioned", ("beside", "bowl")]],
      [["image", "shows", "bottle"], ["bottle", "positioned", ("beside", "cup")]],
      [["image", "shows", "bottle"], ["image", "placed", ("on", "counter")],
       ["bottle", "positioned", ("beside", "bowl")]]],
     "{'CAPTION': '<p>A person</p> is stirring <p>food in a bowl</p> using a spoon'}"),
    ([[["hand", "using", "cutting board"]],
      [["woman", "using", "cutting board"], ["woman", "make", "craft project"]],
      [["child", "using", "craft cutter"], ["child", "cut", "object"]],
      [["child", "using", "craft cutter"], ["child", "cut", "paper"]],
      [["woman", "using", "craft cutter"], ["woman", "cut", "object"]],
      [["woman", "using", "scissors pair"], ["woman", "cut", "piece", ("of", "paper")]],
      [["hand", "using", "scissors pair"], ["hand", "cut", "piece", ("of", "paper")]],
      [["woman", "using", "scissors pair"], ["woman", "cut", "piece", ("of", "paper")]],
      [["woman", "using", "craft cutter"], ["woman", "cut", "object"]],
      [["woman", "using", "craft cutter"], ["woman", "cut", "plate"]]],
     "{'CAPTION': '<p>A woman</p> is cutting <p>an object</p> using a craft cutter'}"),
)

STAGE3_SYSTEM = (
    "You are tasked with classifying humans and objects to a set of given categories.\n"
    "Input format:\n"
    "Human/Object (string), set of categories (lists of strings).\n"
    "Output format:\n"
    "A Python dictionary with a key 'CATEGORY', and as a value the predicted category of the human/object.\n\n"
    "Use 'None' if the human/object doesn't belong to any of the categories. DO NEVER classify a human as the "
    "object category and vice versa."
)
STAGE3_EXAMPLES = (
    ("person", ["a woman", "her hair"], "a woman"),
    ("table", ["a person", "a bowl"], "None"),
    ("a piece of food on a plate", ["a woman", "a meal"], "a meal"),
    ("a hand", ["a person", "food on a plate"], "a person"),
    ("a man in a white shirt and black apron is also present", ["a person", "food"], "a person"),
)
NONE_CLASS = "None"


class AnswerError(ValueError):
    """An LLM answer that does not parse; the message is the rejection reason."""


def _svo_user(frames: Sequence[Sequence[Sequence]]) -> str:
    return "SVO: " + repr([[list(t) for t in frame] for frame in frames])


def stage2_messages(frames: Sequence, variant: str = "svo") -> list[dict]:
    """Figure 11 conversation for one clip. ``frames``: per frame, its SVO lists (``variant="svo"``)
    or its caption (``variant="captions"``)."""
    if variant == "svo":
        messages = [{"role": "system", "content": STAGE2_SYSTEM}]
        for example, answer in STAGE2_EXAMPLES:
            messages += [{"role": "user", "content": _svo_user(example)}, {"role": "assistant", "content": answer}]
        messages.append({"role": "user", "content": _svo_user(frames)})
        return messages
    if variant == "captions":
        listing = "\n".join(f"Frame {i + 1}: {c}" for i, c in enumerate(frames))
        return [{"role": "system", "content": STAGE2_CAPTIONS_SYSTEM},
                {"role": "user", "content": f"Captions:\n{listing}"}]
    raise ValueError(f"stage2.input must be 'svo' or 'captions', got {variant!r}")


def _stage3_user(phrase: str, categories: Sequence[str]) -> str:
    return f"Input: {phrase!r}\nCategories: {list(categories)!r}"


def stage3_messages(phrase: str, categories: Sequence[str]) -> list[dict]:
    """Figure 12 conversation classifying one frame-level phrase into the video-level phrases."""
    messages = [{"role": "system", "content": STAGE3_SYSTEM}]
    for example, cats, answer in STAGE3_EXAMPLES:
        messages += [{"role": "user", "content": _stage3_user(example, cats)},
                     {"role": "assistant", "content": repr({"CATEGORY": answer})}]
    messages.append({"role": "user", "content": _stage3_user(phrase, categories)})
    return messages


_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def answer_dict(text: str, key: str) -> str:
    """The string value of ``key`` in the first Python/JSON dictionary of ``text``."""
    text = str(text).translate(_QUOTES)
    for match in re.finditer(r"\{[^{}]*\}", text, flags=re.DOTALL):
        try:
            value = ast.literal_eval(match.group(0))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            found = {str(k).strip().upper(): v for k, v in value.items()}
            if key in found:
                if not isinstance(found[key], str):
                    raise AnswerError(f"key '{key}' holds {type(found[key]).__name__}, not a string")
                return found[key].strip()
            raise AnswerError(f"dictionary without the key '{key}': {match.group(0)[:120]!r}")
    raise AnswerError(f"no dictionary in the answer: {text[:120]!r}")


def parse_caption_answer(text: str) -> tuple[str, list[str]]:
    """Stage 2 answer -> ``(tagged caption, unique phrases in order)``; needs at least one tag."""
    caption = answer_dict(text, "CAPTION")
    if caption.count("<p>") != caption.count("</p>"):
        raise AnswerError(f"unbalanced <p></p> tags in the caption {caption[:120]!r}")
    phrases = list(dict.fromkeys(p for p in tagged_phrases(caption) if p))
    if not phrases:
        raise AnswerError(f"no <p></p>-tagged phrase in the caption {caption[:120]!r}")
    return caption, phrases


def parse_category_answer(text: str, categories: Sequence[str]) -> str | None:
    """Stage 3 answer -> one of ``categories`` (case-insensitive) or None for the "None" class."""
    value = answer_dict(text, "CATEGORY").strip().strip("'\"").strip()
    if value.lower() in ("none", "null", "") :
        return None
    lowered = {c.lower(): c for c in categories}
    if value.lower() not in lowered:
        raise AnswerError(f"unknown class {value!r} (categories: {list(categories)})")
    return lowered[value.lower()]
