"""The records the caption-corruption pipeline passes between its steps and backends."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from judge.data.targets import SCORES


@dataclass
class CaptionSource:
    """A reference caption and where its video is. Frames (with fps) or seconds locate the clip."""

    key: str
    video: str
    caption: str
    fps: float | None = None
    start_frame: int | None = None
    end_frame: int | None = None
    start_s: float | None = None
    end_s: float | None = None


def sources_from_records(records: Iterable[Any]) -> list[CaptionSource]:
    """One source per :class:`~formats.records.GroundedRecord` (its clip and caption)."""
    return [CaptionSource(key=r.key, video=r.video_fname, caption=r.caption, fps=float(r.fps),
                          start_frame=int(r.clip_start_frame), end_frame=int(r.clip_end_frame)) for r in records]


@dataclass
class FactualElement:
    """An object or action of a caption; ``occurrences`` and ``options`` belong to the backend."""

    kind: str  # "object" or "action"
    text: str  # as written in the caption (first occurrence)
    key: str  # lemma key for alternatives ("circle", "red circle", "pick up")
    occurrences: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, list[tuple[str, float]]] = field(default_factory=dict)


@dataclass
class Extraction:
    caption: str
    objects: list[FactualElement]
    actions: list[FactualElement]
    doc: Any = None  # the rule backend's parse


@dataclass
class Substitution:
    kind: str
    old: str
    new: str


class ImplausibleCorruption(ValueError):
    """No substitutes for the chosen elements give a caption the (closed) domain could contain."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class MalformedLLMOutput(ValueError):
    """The LLM's answer to one of the generation prompts does not have the asked-for form."""

    def __init__(self, prompt: str, reason: str, text: str):
        super().__init__(f"prompt {prompt}: {reason}; answer was {text!r}")
        self.prompt, self.reason, self.text = prompt, reason, text


@dataclass
class GenerationStats:
    """What happened to every caption and corruption, for the printed summary."""

    captions: int = 0
    captions_used: int = 0
    no_elements: int = 0
    corruptions: int = 0
    duplicates_dropped: int = 0
    elements_found: Counter = field(default_factory=Counter)
    elements_without_alternative: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    scores: Counter = field(default_factory=Counter)
    balanced_scores: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        def dist(counter: Counter) -> str:
            total = sum(counter.values()) or 1
            return "  ".join(f"{s}: {counter.get(s, 0)} ({100 * counter.get(s, 0) / total:.1f}%)" for s in SCORES)

        lines = [
            f"captions: {self.captions} read, {self.captions_used} used, {self.no_elements} without a replaceable "
            f"object or action",
            f"elements: objects {self.elements_found['object']} ({self.elements_without_alternative['object']} "
            f"dropped: no alternative), actions {self.elements_found['action']} "
            f"({self.elements_without_alternative['action']} dropped: no alternative)",
            f"corruptions: {self.corruptions} kept, {self.duplicates_dropped} duplicates dropped",
            f"score distribution: {dist(self.scores)}",
        ]
        if self.balanced_scores:
            lines.append(f"after balancing ({sum(self.balanced_scores.values())}): {dist(self.balanced_scores)}")
        if self.failures:
            lines.append("failures: " + ", ".join(f"{k}: {v}" for k, v in sorted(self.failures.items())))
        return "\n".join(lines)
