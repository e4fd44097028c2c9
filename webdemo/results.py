"""What the page shows of one predicted video, assembled from the predict path's outputs.

The predictions (the entries of ``predictions_predict.json``, boxes kept at the chosen objectness
threshold) and every phrase's objectness on every grid frame (before the threshold) become one
:class:`ClipResult` per clip of the video, in time order. From there: the caption as HTML with
each phrase in its drawing colour, a clip's grid frame at full size with its boxes, scores and masks, and
the one-line labels of the clip list.
"""
from __future__ import annotations

from core.drawing import draw_boxes, ink, phrase_colours

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from formats.mask_rle import decode_masks
from formats.records import PHRASE_TAG


@dataclass
class ClipResult:
    """One clip of the video: its grid frames (source-frame indices) and what was predicted on them.

    ``prediction`` is the clip's entry of the predictions file (None when the clip could not be
    decoded: ``skipped`` says why); ``objectness`` is ``{"frames", "scores"}`` before the threshold.
    """

    key: str
    start_frame: int
    end_frame: int
    grid: list[int]
    prediction: dict | None
    objectness: dict | None = None
    skipped: str | None = None
    judge: dict | None = None


@dataclass
class DemoResult:
    """A whole request's result: the video, its clips and the files offered for download."""

    video_name: str
    video_path: str
    fps: float
    width: int
    height: int
    num_frames: int
    threshold: float
    clips: list[ClipResult]
    predictions_path: Path
    annotated_path: Path | None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def assemble_clips(records: Sequence[Any], predictions: Mapping[str, dict], objectness: Mapping[str, dict],
                   skipped: Mapping[str, str]) -> list[ClipResult]:
    """One :class:`ClipResult` per record (a clip of the video), in the records' order."""
    clips = []
    for record in records:
        key = record.key
        clips.append(ClipResult(
            key=key, start_frame=int(record.clip_start_frame), end_frame=int(record.clip_end_frame),
            grid=[int(f) for f in record.frame_indices], prediction=predictions.get(key),
            objectness=objectness.get(key),
            skipped=None if key in predictions else skipped.get(key, "no prediction came back for this clip")))
    return clips


def clip_label(index: int, clip: ClipResult, fps: float) -> str:
    """``clip 1 · 0.0-8.0 s · a red circle enters ...`` for the clip list."""
    span = f"{clip.start_frame / fps:.1f}-{(clip.end_frame + 1) / fps:.1f} s"
    text = clip.prediction["caption"] if clip.prediction else f"not predicted: {clip.skipped}"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"clip {index + 1} · {span} · {text}"


def _css_colour(colour: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*colour)


def caption_html(prediction: Mapping[str, Any] | None) -> str:
    """The tagged caption as HTML: each ``<p>phrase</p>`` a span in its drawing colour (escaped text)."""
    if not prediction:
        return '<div class="grove-caption grove-empty">No caption for this clip.</div>'
    tagged = prediction.get("tagged_caption") or prediction.get("caption") or ""
    colours = phrase_colours(prediction.get("phrases", []))
    parts, last = [], 0
    for match in PHRASE_TAG.finditer(tagged):
        parts.append(html.escape(_plain(tagged[last:match.start()])))
        phrase = match.group(1).strip()
        colour = colours.get(phrase)
        if colour is None:  # a tag the parser did not count as a phrase: plain text
            parts.append(html.escape(phrase))
        else:
            text_colour = _css_colour(ink(colour)[:3])
            parts.append(f'<span class="grove-phrase" data-phrase="{html.escape(phrase, quote=True)}" '
                         f'style="background-color:{_css_colour(colour)};color:{text_colour};'
                         f'padding:0 0.25em;border-radius:0.25em">{html.escape(phrase)}</span>')
        last = match.end()
    parts.append(html.escape(_plain(tagged[last:])))
    text = " ".join(p.strip() for p in parts if p.strip())
    return f'<div class="grove-caption">{text}</div>'


def _plain(text: str) -> str:
    """Text between phrases without GROVE's [DET] tokens and stray tags."""
    return " ".join(text.replace("[DET]", " ").replace("<p>", " ").replace("</p>", " ").split())


def frame_boxes(prediction: Mapping[str, Any] | None, frame: int) -> tuple[np.ndarray, list[str], list[float]]:
    """The boxes (pixel xyxy), labels and scores the predictions file keeps on source frame ``frame``."""
    for entry in (prediction or {}).get("frames", []):
        if int(entry["frame"]) == int(frame):
            boxes = np.asarray(entry.get("boxes") or np.zeros((0, 4)), dtype=np.float64).reshape(-1, 4)
            return boxes, list(entry.get("labels", [])), [float(s) for s in entry.get("scores", [])]
    return np.zeros((0, 4)), [], []


def frame_masks(prediction: Mapping[str, Any] | None, frame: int) -> list[np.ndarray | None] | None:
    """The masks of the boxes on source frame ``frame`` (boolean, the frame's size; None for a box without
    one), or None when the predictions carry no masks there."""
    for entry in (prediction or {}).get("frames", []):
        if int(entry["frame"]) == int(frame):
            rles = entry.get("masks")
            return [decode_masks([m])[0] if m else None for m in rles] if rles else None
    return None


def draw_frame(image: np.ndarray, prediction: Mapping[str, Any] | None, frame: int) -> np.ndarray:
    """One ``(H, W, 3)`` source frame at full size with the clip's kept boxes, labels, scores and masks."""
    boxes, labels, scores = frame_boxes(prediction, frame)
    colours = phrase_colours((prediction or {}).get("phrases", []))
    return draw_boxes(image[None], boxes, labels, colours, scores=scores or None,
                      masks=frame_masks(prediction, frame))[0]


def summary_markdown(result: DemoResult) -> str:
    """The status line above the result."""
    done = sum(c.prediction is not None for c in result.clips)
    lines = [f"**{result.video_name}**: {result.width}×{result.height}, {result.fps:.2f} fps, "
             f"{result.num_frames / result.fps:.1f} s; {done} of {len(result.clips)} clip(s) predicted in "
             f"{result.seconds:.1f} s (objectness threshold {result.threshold:.2f})."]
    lines += [f"- {c.key}: not predicted ({c.skipped})" for c in result.clips if c.prediction is None]
    lines += [f"- {note}" for note in result.notes]
    return "\n".join(lines)
