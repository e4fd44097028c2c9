"""Grounding what a user asks: one or more queries in, per query its boxes (and masks) on every grid frame out.

A query is a phrase (``the red circle``: the whole text is the one phrase to ground) or a sentence with
its phrases marked in the tagged-caption format (``<p>the person</p> who opens <p>the fridge</p>``).
Each query is grounded teacher-forced, exactly as GROVE grounds a given caption on VidSTG (GROVE paper,
supp. C): the query becomes the target ``<p> phrase </p> [DET]`` text, and the box decoder and the
temporal objectness head run on every frame of the clip. The clip is repeated once per query, so the
queries are batched through :func:`models.grove.processing.predict_clips` with ``teacher_forced=True``:
a query's boxes are the ones that path gives for the same tagged caption.

A query's *referent* is its first marked phrase (the whole text for a plain phrase): what a referring
benchmark (MeViS, Ref-YouTube-VOS) scores. Every other marked phrase is grounded too.
"""
from __future__ import annotations

from core.user_errors import UserInputError

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from formats.records import PHRASE_TAG, TAG, strip_tags
from models.grove.prompting import GROVE_SPECIAL_TOKENS, OFFICIAL_ADDED_TOKENS, format_target


class QueryError(UserInputError):
    """A query GROVE cannot ground as written; the message names the query and what to change."""


@dataclass(frozen=True)
class GroundingQuery:
    """A checked query: its text as given, its tagged form and its marked phrases (the first is the referent)."""

    text: str
    tagged_caption: str
    phrases: tuple[str, ...]

    @property
    def referent(self) -> str:
        return self.phrases[0]


def parse_query(text: str) -> GroundingQuery:
    """A user's query -> :class:`GroundingQuery`; a :class:`QueryError` for an empty query, unbalanced or
    nested ``<p>`` tags, or an empty marked phrase."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("an empty query: give a phrase (\"the red circle\") or a sentence with its phrases "
                         "marked (\"<p>the person</p> who opens <p>the fridge</p>\")")
    text = " ".join(text.split())
    if not TAG.search(text):
        return GroundingQuery(text, f"<p>{text}</p>", (text,))
    depth = 0
    for piece in TAG.split(text):
        if piece in ("<p>", "</p>"):
            depth += 1 if piece == "<p>" else -1
            if depth not in (0, 1):
                raise QueryError(f"query {text!r}: its <p> and </p> tags must alternate, one phrase at a time")
    if depth != 0:
        raise QueryError(f"query {text!r}: a <p> is never closed by </p>")
    phrases = tuple(" ".join(m.group(1).split()) for m in PHRASE_TAG.finditer(text))
    if not phrases or not all(phrases):
        raise QueryError(f"query {text!r}: every <p>...</p> must hold a phrase")
    return GroundingQuery(text, text, phrases)


def context_length(model) -> int | None:
    """The language model's context (positions), or None when its config does not say."""
    config = getattr(getattr(model.language_model, "model", None), "config", None)
    return getattr(config, "max_position_embeddings", None)


def check_query(model, query: GroundingQuery, prompter=None) -> GroundingQuery:
    """Refuse a query the model would ground wrongly: a reserved token inside it, a phrase the tokenizer
    does not give back as written (bytes it cannot encode, text its normaliser changes), a [DET] count
    that differs from the phrase count, or a prompt plus answer longer than the model's context."""
    prompter = prompter if prompter is not None else model.prompter
    tokenizer = prompter.tokenizer
    reserved = [t for t in (*GROVE_SPECIAL_TOKENS, *OFFICIAL_ADDED_TOKENS, tokenizer.eos_token, tokenizer.bos_token,
                            tokenizer.pad_token, tokenizer.unk_token)
                if t and t not in ("<p>", "</p>") and t in TAG.sub(" ", query.tagged_caption)]
    if reserved:
        raise QueryError(f"query {query.text!r} holds the model's reserved token(s) {sorted(set(reserved))}")
    for phrase in query.phrases:
        ids = tokenizer(" " + phrase, add_special_tokens=False)["input_ids"]
        back = " ".join(tokenizer.decode(ids, skip_special_tokens=False).split())
        if back != phrase:
            raise QueryError(f"query {query.text!r}: the tokenizer splits the phrase {phrase!r} oddly (it reads "
                             f"back as {back!r}); rewrite it in plain words the model's vocabulary holds")
    answer = prompter.answer_ids([query.tagged_caption])[0]
    dets = sum(1 for t in answer if t == prompter.det_token_id)
    if dets != len(query.phrases):
        raise QueryError(f"query {query.text!r}: {len(query.phrases)} phrase(s) but {dets} [DET] token(s) after "
                         f"tokenisation ({format_target(query.tagged_caption)!r})")
    limit = context_length(model)
    length = len(prompter.prompt_ids(prompter.questions[0])) + len(answer)
    if limit is not None and length > limit:
        raise QueryError(f"query {query.text!r} is too long: prompt and query take {length} tokens, the model's "
                         f"context holds {limit}; shorten it by {length - limit} tokens")
    return query


def parse_queries(model, queries: Sequence[str], prompter=None) -> list[GroundingQuery]:
    """Every query parsed and checked (:func:`parse_query`, :func:`check_query`); at least one is needed."""
    if isinstance(queries, str):
        queries = [queries]
    if not queries:
        raise QueryError("no query given: give at least one phrase or tagged sentence")
    return [check_query(model, parse_query(q), prompter) for q in queries]


def query_key(clip_key: str, index: int) -> str:
    """The predictions-file key of a clip's ``index``-th query."""
    return f"{clip_key}#query{index}"


def query_samples(sample: dict[str, Any], queries: Sequence[GroundingQuery], first: int = 0) -> list[dict[str, Any]]:
    """One evaluation sample of a clip (:meth:`models.grove.processing.GroveProcessor.sample`) repeated per
    query, each with the query as its tagged caption (no ground truth: empty boxes)."""
    out = []
    num_frames = sample["global_frames"].shape[0]
    for i, query in enumerate(queries):
        n_p = len(query.phrases)
        out.append({**sample, "key": query_key(sample["key"], first + i), "tagged_caption": query.tagged_caption,
                    "caption": strip_tags(query.tagged_caption), "phrases": list(query.phrases),
                    "boxes": torch.zeros(num_frames, n_p, 4),
                    "present": torch.zeros(num_frames, n_p, dtype=torch.bool)})
    return out


def referent_tube(entry: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """A query's referent on the frames where it is kept: source frame -> ``{"box", "score"[, "mask"]}``
    (the first box labelled with the referent; a repeated phrase keeps its first slot)."""
    tube = {}
    for frame in entry["frames"]:
        if entry["referent"] in frame["labels"]:
            j = frame["labels"].index(entry["referent"])
            item = {"box": frame["boxes"][j], "score": frame["scores"][j]}
            if frame.get("masks"):
                item["mask"] = frame["masks"][j]
            tube[int(frame["frame"])] = item
    return tube


def queries_as_prediction(entries: dict[str, dict]) -> dict[str, Any]:
    """Several queries' answers on one clip as one prediction-format entry to draw: each query's referent
    tube labelled with the query's text (its own colour), the caption listing the queries."""
    frames: dict[int, dict[str, list]] = {}
    labels = [entry["query"] for entry in entries.values()]
    for entry, label in zip(entries.values(), labels):
        for frame, item in sorted(referent_tube(entry).items()):
            slot = frames.setdefault(frame, {"frame": frame, "boxes": [], "labels": [], "scores": [], "masks": []})
            slot["boxes"].append(item["box"])
            slot["labels"].append(label)
            slot["scores"].append(item["score"])
            slot["masks"].append(item.get("mask"))
    for slot in frames.values():
        if not any(slot["masks"]):
            del slot["masks"]
    return {"caption": "asked: " + "; ".join(labels), "tagged_caption": "", "phrases": labels,
            "frames": [frames[f] for f in sorted(frames)]}


__all__ = ["GroundingQuery", "QueryError", "check_query", "context_length",
           "parse_queries", "parse_query", "queries_as_prediction", "query_key", "query_samples", "referent_tube"]
