"""Stage 2, video-level caption aggregation (GROVE paper, sec. 3): frame captions -> one tagged caption.

Two aggregators share one interface (:meth:`aggregate` on a batch of clips):

* :class:`LLMCaptionAggregator` prompts an LLM with Figure 11 (SVO triplets, or the full frame
  captions in the "Alt. Stage 2" variant) and parses ``{'CAPTION': ...}``, retrying bad answers;
* :class:`RuleCaptionAggregator`, the offline backend: the salient subjects are those named in
  enough frames. Names that never occur in the same frame and may denote one object (a generic
  name like "an object", or a shared word, but not the same noun with other modifiers) are
  merged as one object seen under several names. Each object gets its most frequent action, and
  clauses follow first appearance ("<p>a red circle</p> enters from the left, then ..."); an
  action's object is tagged when Stage 1 grounds it in enough frames. With ``input: captions`` it
  keeps the most frequent frame caption among those naming a grounded phrase, and tags them.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from annotation.llm.chat import ChatBackend, ChatBackendError, ask_with_retries
from annotation.llm.prompts import parse_caption_answer, stage2_messages
from annotation.outcomes import Rejection
from annotation.stage1.frame_annotations import ClipFrameAnnotations
from annotation.stage2.svo import SVOParser, SVOTriplet, strip_article
from formats.records import tagged_phrases

SCENE_WORDS = {"image", "picture", "photo", "photograph", "frame", "scene", "view", "shot", "screen", "video",
               "background", "foreground", "camera", "there"}
GENERIC_WORDS = {"object", "objects", "thing", "things", "item", "items", "shape", "shapes", "stuff", "something"}


@dataclass(frozen=True)
class VideoCaption:
    """Stage 2 output: the tagged caption and its distinct tagged phrases in order."""

    tagged_caption: str
    phrases: tuple[str, ...]


def _indefinite(phrase: str) -> str:
    words = phrase.split()
    if words and words[0].lower() in ("a", "an", "the"):
        rest = words[1:]
        if rest:
            return ("an " if rest[0][0].lower() in "aeiou" else "a ") + " ".join(rest)
    return phrase


def _may_be_one_object(name: str, other: str) -> bool:
    """Can two names (articles stripped) denote one object? A generic name can be anything; the same
    noun with different modifiers ("yellow cross", "blue cross") cannot; otherwise a shared word
    ("red disc", "red circle") suggests one object named two ways."""
    words, other_words = name.split(), other.split()
    content = set(words) - GENERIC_WORDS
    if not content:
        return True
    head, other_head = words[-1], other_words[-1]
    if head == other_head and head not in GENERIC_WORDS:
        mods, other_mods = set(words[:-1]), set(other_words[:-1])
        return not (mods and other_mods and mods != other_mods)
    return bool(content & (set(other_words) - GENERIC_WORDS))


class _FrameCaptionInput:
    """What Stage 2 reads from the frame captions: SVO triplets (the paper) or the captions whole
    (its "full captions instead of SVO" variant). The parser loads on first use."""

    def _set_input(self, input: str, parser: SVOParser | None) -> None:
        if input not in ("svo", "captions"):
            raise ValueError(f"stage2.input must be 'svo' or 'captions', got {input!r}")
        self.input = input
        self._parser = parser if parser is not None or input == "captions" else SVOParser()

    @property
    def parser(self) -> SVOParser:
        if self._parser is None:
            self._parser = SVOParser()
        return self._parser


class RuleCaptionAggregator(_FrameCaptionInput):
    """Offline Stage 2. ``min_share``: fewest frames (share of the clip's sampled frames) naming an
    object for it to be salient; ``max_subjects``: most objects per caption; ``merge_overlap``:
    largest share of frames two names may share and still be merged as one object."""

    name = "rule"

    def __init__(self, input: str = "svo", min_share: float = 0.2, max_subjects: int = 3,
                 merge_overlap: float = 0.1, parser: SVOParser | None = None):
        self._set_input(input, parser)
        self.min_share, self.max_subjects = float(min_share), int(max_subjects)
        self.merge_overlap = float(merge_overlap)

    def aggregate(self, clips: list[ClipFrameAnnotations]) -> list[VideoCaption | Rejection]:
        if self.input == "captions":
            return [self._from_captions(c) for c in clips]
        captions = [f.caption for c in clips for f in c.frames]
        parsed = self.parser.parse(captions)
        out, start = [], 0
        for clip in clips:
            frames = parsed[start:start + len(clip.frames)]
            start += len(clip.frames)
            out.append(self._from_triplets(clip, frames))
        return out

    def _grounded_often(self, clip: ClipFrameAnnotations, phrase: str) -> bool:
        """Is ``phrase`` (articles aside) grounded by Stage 1 in at least ``min_share`` of the frames?"""
        wanted = strip_article(phrase.lower())
        hits = sum(any(strip_article(p.lower()) == wanted for p in f.phrases) for f in clip.frames)
        return hits >= self.min_share * max(1, len(clip.frames))

    def _from_triplets(self, clip: ClipFrameAnnotations, frames: list[list[SVOTriplet]]) -> VideoCaption | Rejection:
        key = clip.key
        mentions: dict[str, set[int]] = defaultdict(set)
        surfaces: dict[str, Counter] = defaultdict(Counter)
        clauses: dict[str, Counter] = defaultdict(Counter)
        examples: dict[tuple[str, str], SVOTriplet] = {}
        first: dict[str, int] = {}
        for f, triplets in enumerate(frames):
            for t in triplets:
                subject = strip_article(t.subject.lower())
                if not subject or subject.split()[-1] in SCENE_WORDS:
                    continue
                mentions[subject].add(f)
                surfaces[subject][t.subject.lower()] += 1
                clause = t.clause()
                clauses[subject][clause] += 1
                examples.setdefault((subject, clause), t)
                first.setdefault(subject, f)
        if not mentions:
            return Rejection(key, "stage2", "no subject in the frame captions")
        num_frames = max(1, len(frames))
        # most-named first; a name joins an earlier cluster if they (almost) never share a frame and
        # may denote one object (_may_be_one_object)
        names = sorted(mentions, key=lambda s: (-len(mentions[s]), first[s], s))
        clusters: list[dict] = []
        for name in names:
            for cluster in clusters:
                overlap = len(mentions[name] & cluster["frames"]) / num_frames
                if overlap <= self.merge_overlap and _may_be_one_object(name, cluster["names"][0]):
                    cluster["names"].append(name)
                    cluster["frames"] |= mentions[name]
                    break
            else:
                clusters.append({"names": [name], "frames": set(mentions[name])})
        salient = [c for c in clusters if len(c["frames"]) / num_frames >= self.min_share][:self.max_subjects]
        if not salient:
            return Rejection(key, "stage2", f"no object is named in at least {self.min_share:.0%} of the frames")
        salient.sort(key=lambda c: (min(c["frames"]), c["names"][0]))
        parts = []
        for cluster in salient:
            top = cluster["names"][0]
            phrase = _indefinite(surfaces[top].most_common(1)[0][0])
            votes = Counter()
            for name in cluster["names"]:
                votes.update(clauses[name])
            clause = min(votes, key=lambda c: (-votes[c], c))
            owner = next(n for n in cluster["names"] if (n, clause) in examples)
            triplet = examples[(owner, clause)]
            obj = triplet.object
            # the object is tagged too when it is an object of interest: grounded in enough frames
            if obj and obj in clause and self._grounded_often(clip, obj):
                clause = clause.replace(obj, f"<p>{obj}</p>", 1)
            parts.append(f"<p>{phrase}</p> {clause}")
        tagged = ", then ".join(parts) + "."
        return VideoCaption(tagged, tuple(dict.fromkeys(tagged_phrases(tagged))))

    def _from_captions(self, clip: ClipFrameAnnotations) -> VideoCaption | Rejection:
        # candidates: frames whose caption contains one of their grounded phrases
        grounded = [i for i, f in enumerate(clip.frames) if any(p.lower() in f.caption.lower() for p in f.phrases)]
        if not grounded:
            return Rejection(clip.key, "stage2", "no frame caption contains a grounded phrase")
        counts = Counter(" ".join(clip.frames[i].caption.lower().split()) for i in grounded)
        best = max(grounded, key=lambda i: (counts[" ".join(clip.frames[i].caption.lower().split())], -i))
        frame = clip.frames[best]
        caption, phrases = frame.caption, []
        for phrase in dict.fromkeys(frame.phrases):
            at = caption.lower().find(phrase.lower())
            if at < 0 or "<p>" in caption[max(0, at - 3):at]:
                continue
            surface = caption[at:at + len(phrase)]
            caption = caption[:at] + f"<p>{surface}</p>" + caption[at + len(phrase):]
            phrases.append(surface)
        if not phrases:
            return Rejection(clip.key, "stage2", "the most frequent frame caption grounds no phrase")
        return VideoCaption(caption, tuple(dict.fromkeys(tagged_phrases(caption))))


class LLMCaptionAggregator(_FrameCaptionInput):
    """Stage 2 with an LLM and the Figure 11 prompt; ``input``: ``svo`` (the paper) or ``captions``."""

    name = "llm"

    def __init__(self, chat: ChatBackend, input: str = "svo", max_retries: int = 2, parser: SVOParser | None = None):
        self._set_input(input, parser)
        self.chat, self.max_retries = chat, int(max_retries)

    def conversations(self, clips: list[ClipFrameAnnotations]) -> list[list[dict]]:
        if self.input == "captions":
            return [stage2_messages([f.caption for f in c.frames], "captions") for c in clips]
        parsed = self.parser.parse([f.caption for c in clips for f in c.frames])
        out, start = [], 0
        for clip in clips:
            frames = parsed[start:start + len(clip.frames)]
            start += len(clip.frames)
            out.append(stage2_messages([[t.as_prompt_list() for t in frame] for frame in frames], "svo"))
        return out

    def aggregate(self, clips: list[ClipFrameAnnotations]) -> list[VideoCaption | Rejection]:
        if not clips:
            return []
        try:
            answers = ask_with_retries(self.chat, self.conversations(clips), lambda _, text: parse_caption_answer(text),
                                       self.max_retries)
        except ChatBackendError as err:
            return [Rejection(c.key, "stage2", f"LLM backend failed: {err}", retryable=True) for c in clips]
        return [VideoCaption(value[0], tuple(value[1])) if value is not None
                else Rejection(clip.key, "stage2", f"LLM caption: {reason}")
                for clip, (value, reason) in zip(clips, answers)]
