"""Annotated MP4s: every source frame of a stretch of video with the clips' predicted boxes and caption.

A person checks grounded captions by watching them, so a predicted video is re-encoded at its own
size, frame rate and frame count with the boxes (one colour per phrase, labelled), their masks
where the predictions carry them, and the clip's caption drawn in. Boxes exist on the 5-fps grid;
a source frame shows the boxes of the latest grid frame at or before it (they hold for 1/5 s).
Where clips overlap, a grid frame takes the clip whose centre is nearest. Each grid frame's boxes
are drawn with PIL into an RGBA overlay over its clip's caption band (laid out once per caption),
which is alpha-blended onto all the source frames it covers at once, only where it is not
transparent, in the video's own YUV planes (:mod:`core.yuv_compositing`: no colour conversion of
the frames, and the pixels the overlay leaves transparent keep the decoder's values). The drawing
itself lives in :mod:`core.drawing`, shared with the TensorBoard clips and the web demo; the
encoding is :class:`formats.video_writer.VideoWriter`, of the planes as they are.
"""
from __future__ import annotations

from core.drawing import phrase_colours, render_overlay
from core.yuv_compositing import YuvFrame, blend_frames

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from formats.mask_rle import decode_masks
from formats.video_reader import DecodeGap, PyAVVideoSource, VideoDecodeError, stream_frames
from formats.video_writer import VideoWriter
from formats.yuv_frames import RgbToYuv

# libx264's preset: per 8-s 455x256 clip, ultrafast took half the CPU of veryfast for 3x the file size
# (docs/input_pipeline.md, "The annotated MP4")
DEFAULT_PRESET = "ultrafast"

@dataclass
class ClipPrediction:
    """A clip record with its entry of the predictions file (None when the clip was skipped)."""

    record: Any
    prediction: Mapping[str, Any] | None


def grid_owners(clips: Sequence[ClipPrediction]) -> tuple[np.ndarray, np.ndarray]:
    """The sorted grid frames of a video's clips and, for each, the clip (index) drawn there.

    A grid frame inside several clips goes to the clip whose centre is nearest.
    """
    frames = np.concatenate([c.record.frame_indices for c in clips])
    owner = np.concatenate([np.full(len(c.record.frame_indices), i) for i, c in enumerate(clips)])
    centres = np.array([(c.record.clip_start_frame + c.record.clip_end_frame) / 2.0 for c in clips])
    distance = np.abs(frames - centres[owner])
    order = np.lexsort((distance, frames))
    unique, first = np.unique(frames[order], return_index=True)
    return unique, owner[order][first]


def _frame_boxes(prediction: Mapping[str, Any] | None) -> dict[int, tuple[np.ndarray, list[str], list | None]]:
    """Grid frame -> (boxes, labels, the boxes' RLE masks or None where the entry has no ``masks``)."""
    if not prediction:
        return {}
    return {int(f["frame"]): (np.asarray(f.get("boxes") or np.zeros((0, 4)), dtype=np.float64).reshape(-1, 4),
                              list(f.get("labels", [])), f.get("masks")) for f in prediction.get("frames", [])}


def frame_chunks(source, first: int, last: int, chunk_frames: int) -> Iterator[tuple[int, Sequence]]:
    """``(first index, frames)`` of frames ``first..last`` in chunks of ``chunk_frames``: a list of YUV
    frames (:class:`core.yuv_compositing.YuvFrame`) from a video file, an RGB array from a frame folder.

    A video file is decoded in one forward pass with FFmpeg's frame threading
    (:func:`formats.video_reader.stream_frames`), the same frames :meth:`read_frames` gives; a frame
    that cannot be decoded is a :class:`VideoDecodeError`, as when reading. Frame folders are read by index.
    """
    if not isinstance(source, PyAVVideoSource):
        for start in range(first, last + 1, chunk_frames):
            yield start, source.read_frames(range(start, min(start + chunk_frames, last + 1)))
        return
    chunk: list[YuvFrame] = []
    start = first
    for item in stream_frames(source.path, range(first, last + 1), colour="yuv"):
        if isinstance(item, DecodeGap):
            raise VideoDecodeError(item.describe(source.path))
        chunk.append(item[1])
        if len(chunk) == chunk_frames:
            yield start, chunk
            start, chunk = start + len(chunk), []
    if chunk:
        yield start, chunk


class AnnotatedVideoEncoder:
    """Draws the clips' predictions on consecutive source frames and encodes them as they come.

    Frames are handed over in order (:meth:`draw`), in chunks of any size: the file is the same
    whichever way the frames are cut. A frame shows the boxes of the latest grid frame at or before
    it, drawn by the clip that owns that grid frame (:func:`grid_owners`); that clip's prediction must
    be known (:meth:`set_prediction`) before such a frame is drawn (:meth:`owners`)."""

    def __init__(self, out_path: str | Path, clips: Sequence[ClipPrediction], first: int, width: int, height: int,
                 fps: float, crf: int = 20, line_width: int | None = None, font_size: int | None = None,
                 preset: str = DEFAULT_PRESET):
        self.clips = list(clips)
        self.grid, self.owner = grid_owners(self.clips)
        self.width, self.height = width, height
        self.line_width, self.font_size = line_width, font_size
        self.next_frame = first
        self._boxes: dict[int, dict] = {}
        self._frames: tuple | None = None  # the planes being drawn, reused run after run
        self._to_yuv: RgbToYuv | None = None
        self.encoder = VideoWriter(out_path, fps, width, height, crf=crf, preset=preset)

    def set_prediction(self, clip: int, prediction: Mapping[str, Any] | None) -> None:
        self.clips[clip] = ClipPrediction(self.clips[clip].record, prediction)
        self._boxes.pop(clip, None)

    def owners(self, start: int, stop: int) -> np.ndarray:
        """The clip (index) whose boxes each of the frames ``start..stop - 1`` shows."""
        return self.owner[self._slots(start, stop)]

    def _slots(self, start: int, stop: int) -> np.ndarray:
        # the latest grid frame at or before each source frame (frames before the grid: the first)
        return np.maximum(np.searchsorted(self.grid, np.arange(start, stop), side="right") - 1, 0)

    def draw(self, start: int, frames: Sequence[YuvFrame] | Sequence[np.ndarray] | np.ndarray) -> None:
        """Draw and encode ``frames``, the source frames from ``start`` on (the next ones expected): YUV
        planes (:class:`core.yuv_compositing.YuvFrame`, as the readers give them with ``colour="yuv"``),
        or ``(H, W, 3)`` RGB frames, converted as the H.264 writer converts RGB. The frames are not changed."""
        if start != self.next_frame:
            raise ValueError(f"annotated video: frames from {start} given, frame {self.next_frame} expected next")
        if len(frames) and isinstance(frames[0], np.ndarray):
            if self._to_yuv is None:
                self._to_yuv = RgbToYuv(self.width, self.height)
            frames = [self._to_yuv(f) for f in frames]
        stop = start + len(frames)
        slot = self._slots(start, stop)
        # slots are non-decreasing over consecutive frames: each is one run of frames, copied into
        # this encoder's own planes and blended there (no fresh memory per run)
        bounds = np.flatnonzero(np.diff(slot)) + 1
        for lo, hi in zip(np.concatenate([[0], bounds]), np.concatenate([bounds, [len(slot)]])):
            s = int(slot[lo])
            run = frames[lo:hi]
            planes = blend_frames(run, self._overlay(int(self.owner[s]), int(self.grid[s])),
                                  out=self._planes(run[0], len(run)))
            self.encoder.write_yuv(*planes, run[0].tags)
        self.next_frame = stop

    def _planes(self, like: YuvFrame, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if like.y.shape != (self.height, self.width):
            raise ValueError(f"annotated video: a {like.y.shape[1]}x{like.y.shape[0]} frame given for a "
                             f"{self.width}x{self.height} video")
        if self._frames is None or len(self._frames[0]) < count or self._frames[1].shape[1:] != like.u.shape:
            self._frames = tuple(np.empty((count, *p.shape), dtype=np.uint8) for p in (like.y, like.u, like.v))
        return tuple(p[:count] for p in self._frames)

    def _overlay(self, clip: int, grid_frame: int) -> np.ndarray:
        if clip not in self._boxes:
            prediction = self.clips[clip].prediction
            self._boxes[clip] = {"boxes": _frame_boxes(prediction),
                                 "colours": phrase_colours((prediction or {}).get("phrases", [])),
                                 "caption": (prediction or {}).get("caption")
                                 or ("(no prediction: clip skipped)" if prediction is None else "")}
        drawn = self._boxes[clip]
        boxes, labels, rles = drawn["boxes"].get(grid_frame, (np.zeros((0, 4)), [], None))
        masks = [decode_masks([m])[0] if m else None for m in rles] if rles else None
        return render_overlay(self.width, self.height, boxes, labels, drawn["colours"], drawn["caption"],
                              line_width=self.line_width, font_size=self.font_size, masks=masks)

    def close(self) -> Path:
        return self.encoder.close()

    def abort(self) -> None:
        self.encoder.abort()


def render_annotated_video(source, out_path: str | Path, clips: Sequence[ClipPrediction], first: int, last: int,
                           fps: float, chunk_frames: int = 64, crf: int = 20, line_width: int | None = None,
                           font_size: int | None = None, progress=None, preset: str = DEFAULT_PRESET) -> Path:
    """Write frames ``first..last`` of ``source`` with the clips' predictions drawn on them."""
    encoder = AnnotatedVideoEncoder(out_path, clips, first, source.width, source.height, fps, crf, line_width,
                                    font_size, preset)
    try:
        for start, frames in frame_chunks(source, first, last, chunk_frames):
            encoder.draw(start, frames)
            if progress is not None:
                progress.update(len(frames))
    except BaseException:
        encoder.abort()
        raise
    return encoder.close()
