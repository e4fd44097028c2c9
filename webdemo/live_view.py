"""What the Live tab shows of a live run: the picture, the rolling story and the counters.

The picture is shown delayed, in step with the predicted frames: once a clip is predicted, its own
grid frames play at the grid rate (5 fps) with the boxes predicted on each of them, so every box
drawn is the model's box on the very frame under it. A box carried over from an earlier frame
onto the current live frame would be wrong whenever the object moves; the price of honest boxes
is a delay of about one clip length plus the model's latency, which the counters show. When the
next clip's prediction is not in yet, the last predicted frame stays; a clip dropped by the skip
policy is never shown (the picture jumps over it, and the story says so).

Boxes are drawn by :mod:`core.drawing` with the long-video renderer's entity colours and labels
(:func:`longvideo.render.entity_colours`, ``#id name``), so an entity looks the same here, in the
timeline page and in the entity-coloured MP4.
"""
from __future__ import annotations

from core.drawing import PALETTE, draw_boxes

import base64
import html
import io
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from PIL import Image

from formats.frame_grids import annotation_step
from longvideo.render import decoded_masks, entity_colours, entity_label

STORY_LINES = 200  # lines of the rolling story kept in the page (the files keep every clip)


def _css(colour) -> str:
    return "rgb({},{},{})".format(*colour)


@dataclass
class ShownClip:
    """A predicted clip on the picture's schedule: its record, its grid frames (source indices, at
    ``fps``) with their pixels, the names of its entities when it was predicted, when its first frame
    is shown and when its last grid frame arrived from the source."""

    record: dict[str, Any]
    frames: np.ndarray
    pixels: list[np.ndarray]
    fps: float
    names: dict[int, str]
    start: float
    arrival: float

    def __post_init__(self):
        self.frames = np.asarray(self.frames, dtype=np.int64).reshape(-1)
        if len(self.frames) == 0 or len(self.pixels) != len(self.frames):
            raise ValueError(f"clip {self.record.get('key')}: {len(self.pixels)} pictures for "
                             f"{len(self.frames)} grid frames (one each, at least one)")
        self.offsets = (self.frames - self.frames[0]) / float(self.fps)  # seconds from its first frame
        self.step = annotation_step(self.fps) / float(self.fps)
        self.entries = {int(e["frame"]): e for e in self.record.get("frames", [])}  # frames with boxes

    @property
    def end(self) -> float:
        """When its last frame has been shown for one grid step."""
        return self.start + float(self.offsets[-1]) + self.step


class LivePlayback:
    """The schedule of the picture: each predicted clip's grid frames at their own pace, starting as its
    prediction comes in, or when the clip before it has been shown (at most ``max_behind_s`` later:
    beyond that the clip before is cut short, so the delay cannot grow)."""

    def __init__(self, max_behind_s: float = 2.0):
        self.max_behind_s = float(max_behind_s)
        self.clips: deque[ShownClip] = deque(maxlen=3)

    def add(self, record: Mapping[str, Any], frames, pixels: list[np.ndarray], fps: float,
            names: Mapping[int, str], arrival: float, now: float) -> ShownClip:
        start = now
        if self.clips and 0.0 < self.clips[-1].end - now <= self.max_behind_s:
            start = self.clips[-1].end
        clip = ShownClip(dict(record), frames, list(pixels), float(fps), dict(names), start, float(arrival))
        self.clips.append(clip)
        return clip

    def at(self, now: float) -> tuple[ShownClip, int] | None:
        """The clip and the frame position shown at ``now`` (the latest frame whose time has come)."""
        for clip in reversed(self.clips):
            if clip.start <= now:
                position = int(np.searchsorted(clip.offsets, now - clip.start, side="right")) - 1
                return clip, max(0, position)
        return None

    def behind_s(self, now: float) -> float | None:
        """How long ago the frame shown at ``now`` arrived from the source."""
        shown = self.at(now)
        if shown is None:
            return None
        clip, position = shown
        return round(now - (clip.arrival - float(clip.offsets[-1] - clip.offsets[position])), 2)


def frame_labels(entry: Mapping[str, Any], names: Mapping[int, str]) -> list[str]:
    """``#id name`` of each box of a frame entry (the phrase itself where a box has no entity)."""
    return [entity_label({"id": e, "name": names.get(e, label)}) if e is not None else label
            for label, e in zip(entry.get("labels", []), entry.get("entities", []))]


def draw_live_frame(clip: ShownClip, position: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """The clip's grid frame at ``position`` with its boxes (and masks) in entity colours and the clip's
    caption, and each box drawn: ``entity``, ``label``, ``colour`` and ``box``."""
    frame = int(clip.frames[position])
    entry = clip.entries.get(frame, {})
    labels = frame_labels(entry, clip.names)
    entities = [e for e in entry.get("entities", []) if e is not None]
    colours = entity_colours({"entities": [{"id": e, "name": clip.names.get(e, "")} for e in entities]})
    boxes = np.asarray(entry.get("boxes", []), dtype=np.float64).reshape(-1, 4)
    pixels = clip.pixels[position]
    masks = decoded_masks(entry["masks"]) if entry.get("masks") else None
    drawn = draw_boxes(pixels[None], boxes, labels, colours, caption=clip.record.get("caption") or "",
                       masks=masks)[0]
    entity_of = entry.get("entities", [])
    shown = [{"entity": e, "label": label, "colour": colours.get(label, PALETTE[0]),
              "box": [round(float(v), 1) for v in box]} for e, label, box in zip(entity_of, labels, boxes)]
    return drawn, shown


def jpeg_data_url(rgb: np.ndarray, quality: int = 92) -> str:
    """The frame as an inline JPEG (no chroma subsampling, so thin coloured lines keep their colour)."""
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="JPEG", quality=quality, subsampling=0)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def picture_html(clip: ShownClip, position: int) -> str:
    """The shown frame, with a legend naming each box in its colour (what the picture holds, as text)."""
    drawn, shown = draw_live_frame(clip, position)
    key, frame, time_s = html.escape(clip.record["key"]), int(clip.frames[position]), clip.frames[position] / clip.fps
    legend = "".join(
        f'<li class="grove-live-box" data-entity="{"" if b["entity"] is None else b["entity"]}" '
        f'data-box="{",".join(str(v) for v in b["box"])}" style="color:{_css(b["colour"])}">'
        f'{html.escape(b["label"])}</li>' for b in shown)
    return (f'<figure class="grove-live-frame" data-key="{key}" data-frame="{frame}" data-time="{time_s:.2f}">'
            f'<img src="{jpeg_data_url(drawn)}" alt="grid frame {frame} of {key}">'
            f'<figcaption>{time_s:.1f} s, clip {clip.record["clip"]}'
            f'<ul class="grove-live-legend">{legend}</ul></figcaption></figure>')


def story_line_html(record: Mapping[str, Any]) -> str:
    """One clip of the story: its times and its caption with each phrase tagged by its entity."""
    colours = entity_colours({"entities": [{"id": p["entity"], "name": p["phrase"]} for p in record["phrases"]]})
    caption = html.escape(record.get("caption") or "(no caption)")
    for link in record["phrases"]:
        colour = _css(colours[entity_label({"id": link["entity"], "name": link["phrase"]})])
        phrase = html.escape(link["phrase"])
        tag = (f'<span class="grove-entity" data-entity="{link["entity"]}" style="background:{colour}">'
               f'{phrase} #{link["entity"]}</span>')
        caption = caption.replace(phrase, tag, 1) if phrase in caption else f"{caption} {tag}"
    return (f'<li class="grove-live-line" data-key="{html.escape(record["key"])}">'
            f'<span class="grove-live-time">{record["start_s"]:.1f}-{record["end_s"]:.1f} s</span> {caption}</li>')


def dropped_line_html(count: int) -> str:
    return (f'<li class="grove-live-dropped" data-dropped="{count}">{count} clip{"" if count == 1 else "s"} '
            "dropped: the model was busy (skip policy)</li>")


def story_html(lines: list[str]) -> str:
    return f'<ol class="grove-live-story">{"".join(lines)}</ol>' if lines else ""


@dataclass
class LiveCounters:
    """What the counters line says of a run: clips predicted and dropped, latencies, the model's time."""

    clips: int = 0
    dropped: int = 0
    latency_s: float | None = None
    max_latency_s: float = 0.0
    model_s: float = 0.0  # summed over the clips

    def add(self, record: Mapping[str, Any]) -> None:
        self.clips += 1
        self.dropped = max(self.dropped, int(record["dropped"]))
        self.latency_s = float(record["latency_s"])
        self.max_latency_s = max(self.max_latency_s, self.latency_s)
        self.model_s += float(record["model_s"])


def counters_html(counters: LiveCounters, behind_s: float | None, state: str) -> str:
    """The run's state, clips predicted and dropped, the latest and largest latency, the model's mean
    time per clip, and how far behind the source the picture is."""
    c = counters
    latency = "-" if c.latency_s is None else f"{c.latency_s:.2f} s (max {c.max_latency_s:.2f} s)"
    per_clip = f"{c.model_s / c.clips:.2f} s" if c.clips else "-"
    behind = "-" if behind_s is None else f"{behind_s:.1f} s"
    return (f'<div class="grove-live-counters" data-clips="{c.clips}" data-dropped="{c.dropped}" '
            f'data-latency="{"" if c.latency_s is None else c.latency_s}" data-state="{html.escape(state)}">'
            f"<b>{html.escape(state)}</b> · clips <b>{c.clips}</b> · dropped <b>{c.dropped}</b> · "
            f"latency {latency} · model {per_clip} per clip · picture {behind} behind the source</div>")


__all__ = ["LiveCounters", "LivePlayback", "STORY_LINES", "ShownClip", "counters_html", "draw_live_frame",
           "dropped_line_html", "frame_labels", "jpeg_data_url", "picture_html", "story_html", "story_line_html"]
