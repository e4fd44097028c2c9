"""Video decoding, the one place video files are decoded: read just the frames a clip needs
(seeking), or stream a whole video once (:meth:`PyAVVideoSource.stream`); probe a file
(:func:`formats.video_files.probe_video`); frame folders are :mod:`formats.frame_folder`, the one H.264 writer
:mod:`formats.video_writer`.

GROVE samples 8 frames per clip (GROVE paper, supp. C), so decoding every frame of an 8-s clip to keep 8 wastes
most of the work. :class:`PyAVVideoSource` seeks to the keyframe before each wanted frame and
decodes forward only as far as needed. Frame ``i`` is the frame presented at ``i / fps`` seconds
after the stream's first timestamp (``fps`` = the stream's average rate), which is how the
annotation grid (5 fps, in source frames) counts source frames.

Frames come upright: a video whose display matrix rotates it (phone videos filmed in portrait)
is turned by the same quarter turns the player would apply, and ``width``/``height`` describe the
turned frames, so boxes are in the coordinates people see (``autorotate=False`` keeps the stored
orientation). Seeking and streaming share the frame numbering, the rotation rule
(:func:`quarter_turns`) and the end tolerance (:data:`END_TOLERANCE`), so a clip's frames are the same
whichever way it is read.
"""
from __future__ import annotations

from core.yuv_compositing import YuvFrame

import logging
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterator, Sequence

import av
import numpy as np

from formats.yuv_frames import frame_yuv

log = logging.getLogger(__name__)

VIDEO_SUFFIXES = (".mp4", ".webm", ".mkv")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
# Requests up to this many frames past the last frame (or the last decodable one) are served by the
# last frame: headers that overstate a video's length by a frame or two are common. A request
# further out asks for frames that do not exist: an error for that clip, never made-up frames.
END_TOLERANCE = 2
# what a read gives per frame: RGB arrays, YUV planes (core.yuv_compositing.YuvFrame) or the decoded av.VideoFrame
FRAME_COLOURS = ("rgb", "yuv", "frame")
# Frame rates outside this range are taken as a broken header; the rate is then measured from the
# first frames' timestamps, and a video whose timestamps agree with the header is refused.
MIN_FPS, MAX_FPS = 1.0, 1000.0
_RATE_PROBE_PACKETS = 32
# Keyframe gap assumed (in seconds) while neither the index nor decoding has shown one.
_DEFAULT_GAP_S = 2.0
# Streaming: a jump over more than this many seconds between decoded frames, without a decoder
# error, is a gap too.
MAX_SILENT_JUMP_S = 1.0


class VideoDecodeError(RuntimeError):
    """A video (or frame folder) could not be opened or decoded; the message names the file."""


@dataclass(frozen=True)
class DecodeGap:
    """Frames ``first..last`` (source indices) could not be decoded while streaming; ``reason`` names the error."""

    first: int
    last: int
    start_s: float
    end_s: float
    reason: str

    def describe(self, path: str | Path) -> str:
        return (f"{path}: frames {self.first}-{self.last} ({self.start_s:.2f}-{self.end_s:.2f} s) not decoded: "
                f"{self.reason}")


def quarter_turns(degrees: float | None, path: str | Path = "") -> int:
    """Counter-clockwise quarter turns for a display rotation of ``degrees`` (a frame's ``rotation``):
    the nearest quarter turn, with a warning naming the file when the angle is not one."""
    degrees = int(degrees or 0)
    turns = int(round(degrees / 90.0))
    if degrees != 90 * turns:
        log.warning("%s: display rotation of %d degrees is not a quarter turn; frames are turned by %d",
                    path, degrees, 90 * turns)
    return turns % 4


def clamp_wanted_frames(indices: Sequence[int], num_frames: int, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Requested indices clamped to the last frame, and their sorted unique values.

    Indices more than :data:`END_TOLERANCE` past the last frame are a :class:`VideoDecodeError`
    (the clip's frame range runs past the video's end), which datasets skip and report under
    their ``on_corrupt`` policy.
    """
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    if idx.size and idx.min() < 0:
        raise IndexError(f"{source}: negative frame index {int(idx.min())} requested")
    if num_frames <= 0:
        raise VideoDecodeError(f"{source}: the video has no frames")
    if idx.size and idx.max() > num_frames - 1 + END_TOLERANCE:
        beyond = int(np.count_nonzero(idx > num_frames - 1))
        raise VideoDecodeError(
            f"{source}: frame {int(idx.max())} requested but the video has {num_frames} frames "
            f"(0..{num_frames - 1}); {beyond} of the {idx.size} requested frames do not exist (does the clip's "
            "frame range or fps match this video?)")
    clamped = np.minimum(idx, num_frames - 1)
    return clamped, np.unique(clamped)


class PyAVVideoSource:
    """A video file decoded with PyAV (FFmpeg), reading frames by index with keyframe seeking.

    ``autorotate``: apply the display matrix's rotation (a multiple of 90 degrees; other angles
    are rounded to the nearest quarter turn with a warning). ``thread_type``: FFmpeg's decoder
    threading (``"AUTO"`` decodes several frames at once: worth it for :meth:`stream`, a cost for
    sparse seeks, which must flush the threads' frames at every seek).
    """

    def __init__(self, path: str | Path, autorotate: bool = True, thread_type: str | None = None):
        self.path = Path(path)
        self.autorotate = autorotate
        self._moved = False  # whether the container was ever seeked (it starts at the stream's start)
        self._quarter_turns: int | None = None  # counter-clockwise quarter turns; None: not known yet
        try:
            self._container = av.open(str(self.path))
        except (av.FFmpegError, OSError, ValueError) as err:
            raise VideoDecodeError(f"{self.path}: cannot open video ({err})") from None
        if not self._container.streams.video:
            self._container.close()
            raise VideoDecodeError(f"{self.path}: the file has no video stream")
        self._stream = self._container.streams.video[0]
        if thread_type is not None:
            self._stream.thread_type = thread_type
        rate = self._stream.average_rate or self._stream.guessed_rate or self._stream.base_rate
        if not rate or rate <= 0:
            self._container.close()
            raise VideoDecodeError(f"{self.path}: the video stream has no frame rate")
        self._time_base = Fraction(self._stream.time_base)
        self._start_pts = self._stream.start_time
        self._rate = self._plausible_rate(Fraction(rate))
        self._num_frames: int | None = None
        self._gap_seen = 0  # largest keyframe distance known so far (a lower bound of the true one)
        self._keyframes: np.ndarray | None | bool = False  # False: not looked up yet
        self._skip_below = 0  # seeking: unreferenced frames before this index are not decoded
        self._skipping = False

    def _seek(self, *args, **kwargs) -> None:
        self._moved = True
        self._container.seek(*args, **kwargs)

    def _plausible_rate(self, rate: Fraction) -> Fraction:
        """The header's rate when within ``MIN_FPS..MAX_FPS``; else the rate the first packets'
        timestamps show, when that is plausible; else a :class:`VideoDecodeError` naming the rate
        (cut at 5 fps, a 0.002-fps stream would give one-frame clips that read as corrupt)."""
        if MIN_FPS <= rate <= MAX_FPS:
            return rate
        measured = self._rate_from_timestamps()
        if measured is not None and MIN_FPS <= measured <= MAX_FPS:
            log.warning("%s: the stream declares %.4g fps; its timestamps show %.4g fps, which is used",
                        self.path, float(rate), float(measured))
            return measured
        self._container.close()
        shown = f"; its timestamps show {float(measured):.4g} fps" if measured is not None else ""
        raise VideoDecodeError(f"{self.path}: the video stream declares {float(rate):.4g} fps{shown}, outside the "
                               f"plausible {MIN_FPS:g}-{MAX_FPS:g} fps: a broken header or not a video; skipped")

    def _rate_from_timestamps(self) -> Fraction | None:
        """Frames per second from the median gap of the first packets' presentation timestamps."""
        try:
            self._seek(0)
            stamps = []
            for packet in self._container.demux(self._stream):
                if packet.pts is not None and packet.size > 0:
                    stamps.append(packet.pts)
                if len(stamps) >= _RATE_PROBE_PACKETS:
                    break
        except av.FFmpegError:
            return None
        gaps = np.diff(np.sort(np.asarray(stamps, dtype=np.int64)))
        gaps = gaps[gaps > 0]
        if gaps.size == 0:
            return None
        return Fraction(1) / (int(np.median(gaps)) * self._time_base)

    # ------------------------------------------------------------------ properties
    @property
    def fps(self) -> float:
        return float(self._rate)

    @property
    def width(self) -> int:
        stored = self._stream.codec_context
        return int(stored.height if self.quarter_turns % 2 else stored.width)

    @property
    def height(self) -> int:
        stored = self._stream.codec_context
        return int(stored.width if self.quarter_turns % 2 else stored.height)

    @property
    def quarter_turns(self) -> int:
        """Counter-clockwise quarter turns applied to every frame (0 without rotation or autorotate).

        The rotation is side data of the decoded frames, so it is read from the first frame a
        read decodes; asked before any read, one frame is decoded to find it.
        """
        if self._quarter_turns is None:
            if not self.autorotate:
                self._quarter_turns = 0
            else:
                try:
                    self._seek(0)
                    first = next(self._container.decode(self._stream), None)
                except av.FFmpegError as err:
                    raise VideoDecodeError(f"{self.path}: decoding failed ({err})") from None
                self._note_rotation(first)
        return self._quarter_turns

    def _note_rotation(self, frame: av.VideoFrame | None) -> None:
        if self._quarter_turns is not None:
            return
        degrees = getattr(frame, "rotation", 0) if (frame is not None and self.autorotate) else 0
        self._quarter_turns = quarter_turns(degrees, self.path)

    def _upright(self, frame: av.VideoFrame) -> np.ndarray:
        self._note_rotation(frame)
        array = frame.to_ndarray(format="rgb24")
        if self._quarter_turns:
            array = np.ascontiguousarray(np.rot90(array, self._quarter_turns))
        return array

    def upright_rgb(self, frame: av.VideoFrame) -> np.ndarray:
        """A frame this reader decoded (``colour="frame"``) as the ``(H, W, 3)`` RGB array the other reads give."""
        return self._upright(frame)

    def upright_yuv(self, frame: av.VideoFrame) -> YuvFrame:
        """A frame this reader decoded as upright YUV planes (:func:`formats.yuv_frames.frame_yuv`)."""
        self._note_rotation(frame)
        return frame_yuv(frame, self._quarter_turns)

    def _converter(self, colour: str):
        if colour not in FRAME_COLOURS:
            raise ValueError(f"colour must be one of {FRAME_COLOURS}, got {colour!r}")
        if colour == "rgb":
            return self._upright
        if colour == "yuv":
            return self.upright_yuv
        return lambda frame: (self._note_rotation(frame), frame)[1]

    @property
    def num_frames(self) -> int:
        """Frame count from the container header, or by demuxing (no decoding) when it has none.

        A demuxed count well short of what the header's duration implies means a truncated file
        (Matroska/WebM headers keep the duration but not the frame count).
        """
        if self._num_frames is None:
            count = int(self._stream.frames or 0)
            if count <= 0:
                count = self._count_packets()
                implied = self._frames_from_duration()
                if implied is not None and count < implied - max(END_TOLERANCE, 0.02 * implied):
                    raise VideoDecodeError(
                        f"{self.path}: the header's duration implies {implied} frames but only {count} "
                        "could be demuxed (truncated file?)")
            self._num_frames = count
        return self._num_frames

    def _frames_from_duration(self) -> int | None:
        """Frames implied by the header duration (container durations may include the start offset)."""
        start_s = float((self._start_pts or 0) * self._time_base)
        if self._stream.duration:
            seconds = float(self._stream.duration * self._time_base)
        elif self._container.duration:
            seconds = self._container.duration / 1_000_000 - start_s
        else:
            return None
        return int(round(seconds * float(self._rate)))

    def _count_packets(self) -> int:
        try:
            self._seek(0)
            count = sum(1 for p in self._container.demux(self._stream) if p.size > 0)
        except av.FFmpegError as err:
            raise VideoDecodeError(f"{self.path}: cannot demux the video stream ({err})") from None
        return count

    # ------------------------------------------------------------------ timestamps
    def _index_of(self, pts: int) -> int:
        return int(round((pts - (self._start_pts or 0)) * self._time_base * self._rate))

    def _pts_of(self, index: int) -> int:
        return (self._start_pts or 0) + int(Fraction(index) / self._rate / self._time_base)

    def _keyframe_positions(self) -> np.ndarray | None:
        """Frame indices of all keyframes when the demuxer's index lists every frame (MP4), else None.

        Index timestamps are decode times; counted from the first (key)frame they give exact
        positions for closed GOPs. A wrong guess here only costs speed: seeking re-checks where it lands.
        """
        if self._keyframes is False:
            self._keyframes = None
            try:
                entries = self._stream.index_entries
                if len(entries) >= self.num_frames > 0 and entries[0].is_keyframe:
                    first = entries[0].timestamp
                    stamps = np.array([e.timestamp - first for e in entries if e.is_keyframe], dtype=np.float64)
                    self._keyframes = np.unique(np.round(stamps * float(self._time_base * self._rate)).astype(np.int64))
            except (AttributeError, av.FFmpegError):
                pass
        return self._keyframes

    def _should_seek(self, target: int, pos: int | None, last_key: int | None) -> bool:
        """Seek only when a keyframe lies in ``(pos, target]``: decoding on from ``pos`` is cheaper otherwise."""
        if pos is None:
            return True
        keyframes = self._keyframe_positions()
        if keyframes is not None:
            before = np.searchsorted(keyframes, target, side="right") - 1
            return before >= 0 and keyframes[before] > pos
        if self._gap_seen and last_key is not None:  # the next keyframe is at most one gap after the last
            return last_key + self._gap_seen <= target
        run = pos - last_key if last_key is not None else 0  # no keyframe seen for this long
        return target - pos > max(run, int(round(_DEFAULT_GAP_S * float(self._rate))))

    def _decode_packets(self) -> Iterator[av.VideoFrame]:
        """Frames decoded from the current position on. A packet presented before ``_skip_below``
        (the frame being sought) is decoded only when other frames refer to it: the decoder drops
        unreferenced frames unseen, which changes no other frame's pixels (nothing refers to them)."""
        context = self._stream.codec_context
        for packet in self._container.demux(self._stream):
            skip = packet.pts is not None and self._index_of(packet.pts) < self._skip_below
            if skip != self._skipping:
                context.skip_frame = "NONREF" if skip else "DEFAULT"
                self._skipping = skip
            yield from packet.decode()

    def _decode_from(self, target: int) -> Iterator[tuple[int, av.VideoFrame]]:
        """Seek to a keyframe at or before ``target`` and yield ``(index, frame)`` from there.

        Containers seek by decode timestamp, so with B-frames the landing keyframe can lie just
        past the target; then it seeks again from further back, down to the stream start.
        """
        if self._start_pts is None:  # header without a start time: take the first frame's
            self._seek(0)
            first = next(self._container.decode(self._stream), None)
            self._start_pts = first.pts if first is not None and first.pts is not None else 0
        back = 0
        while True:
            seek_to = max(0, target - back)
            self._seek(self._pts_of(seek_to), stream=self._stream, backward=True)
            frames = self._decode_packets()
            first = next(frames, None)
            if first is None:
                return
            first_index = self._index_of(first.pts) if first.pts is not None else seek_to
            if first_index <= target or seek_to == 0:
                break
            back = max(2 * back, first_index - target + 1, 4)
        yield first_index, first
        index = first_index
        for frame in frames:
            index = self._index_of(frame.pts) if frame.pts is not None else index + 1
            yield index, frame

    # ------------------------------------------------------------------ reading
    def read_frames(self, indices: Sequence[int]) -> np.ndarray:
        """Frames at ``indices`` (any order, repeats allowed) as ``(N, H, W, 3)`` uint8 RGB.

        Indices up to :data:`END_TOLERANCE` past the end are served by the last frame (headers
        and annotations sometimes overstate the length by a frame); further ones are an error.
        Only the GOPs holding wanted frames are decoded.
        """
        frames = self.read_frame_list(indices)
        if not frames:
            return np.zeros((0, self.height, self.width, 3), dtype=np.uint8)
        return np.stack(frames)

    def read_frame_list(self, indices: Sequence[int], colour: str = "rgb") -> list:
        """The frames of :meth:`read_frames`, not stacked (a repeated index repeats the same object): a
        clip's whole span is hundreds of MB at 720p, and stacking it costs a copy into a fresh mapping
        that every page of it faults in. ``colour``: ``rgb`` (``(H, W, 3)`` arrays), ``yuv``
        (:meth:`upright_yuv`) or ``frame`` (the decoded ``av.VideoFrame``, for :meth:`upright_rgb` and
        :meth:`upright_yuv` of the same decode)."""
        convert = self._converter(colour)
        requested, wanted = clamp_wanted_frames(indices, self.num_frames, str(self.path))
        if wanted.size == 0:
            return []
        got: dict[int, np.ndarray] = {}
        frames_iter = None
        pos = last_key = None  # last decoded index and last keyframe index of the current run
        last_frame = last_index = pursuing = seek_from = None
        w = 0
        try:
            while w < len(wanted):
                target = int(wanted[w])
                if target != pursuing:  # decide once per target: decode on, or seek ahead
                    pursuing = self._skip_below = target
                    if self._should_seek(target, pos, last_key):
                        frames_iter = self._decode_from(target)
                        seek_from, pos, last_key = pos, None, None
                item = next(frames_iter, None)
                if item is None:  # end of stream before the target
                    if last_frame is None or target - last_index > END_TOLERANCE:
                        reached = "none" if last_index is None else f"frame {last_index}"
                        raise VideoDecodeError(
                            f"{self.path}: the stream ends before frame {target} of the {self.num_frames} "
                            f"its header declares (last decoded: {reached}); truncated or corrupt file?")
                    while w < len(wanted):
                        got[int(wanted[w])] = last_frame
                        w += 1
                    break
                index, frame = item
                if pos is None and seek_from is not None and index <= seek_from:
                    # the seek fell back to a keyframe already passed, so gaps are longer than
                    # thought: grow the estimate geometrically to bound such wasted seeks
                    self._gap_seen = max(2 * self._gap_seen, target - index + 1)
                if frame.key_frame:
                    if last_key is not None and index > last_key:
                        self._gap_seen = max(self._gap_seen, index - last_key)
                    last_key = index
                pos = index
                if index < target:
                    continue
                last_frame, last_index = convert(frame), index
                while w < len(wanted) and wanted[w] <= index:
                    got[int(wanted[w])] = last_frame
                    w += 1
        except av.FFmpegError as err:
            raise VideoDecodeError(f"{self.path}: decoding failed ({err})") from None
        finally:  # every other way of reading decodes every frame
            self._skip_below = 0
            if self._skipping:
                self._stream.codec_context.skip_frame = "DEFAULT"
                self._skipping = False
        return [got[int(i)] for i in requested]

    def stream(self, wanted: Sequence[int], colour: str = "rgb") -> Iterator[tuple[int, np.ndarray] | DecodeGap]:
        """Yield ``(index, frame)`` for every index of ``wanted`` (sorted, unique), in order, and a
        :class:`DecodeGap` where wanted frames could not be decoded: one forward pass, no seek.

        Long videos are read once, packet by packet, and no frame is kept after it is handed on, so
        memory does not grow with the video's length. A packet the decoder rejects does not end the
        pass: the frames it would have produced become a gap (its time and the decoder's message)
        and decoding resumes at the next packet that decodes. Frames are numbered as
        :meth:`read_frames` numbers them, so a variable-frame-rate video is read on its nominal
        grid: a wanted index is served by the first frame presented at or after it. ``colour``: as
        :meth:`read_frame_list`'s.
        """
        convert = self._converter(colour)
        wanted = np.asarray(wanted, dtype=np.int64).reshape(-1)
        if wanted.size == 0:
            return
        if wanted.min() < 0 or np.any(np.diff(wanted) <= 0):
            raise ValueError(f"{self.path}: streamed frame indices must be sorted, unique and >= 0")
        rate = self._rate
        w = 0
        last_index = -1  # index of the last frame decoded
        error: str | None = None  # a decoder error since the last good frame
        last_frame = None

        def gap_until(index: int, reason: str) -> Iterator[DecodeGap]:
            nonlocal w
            first = w
            while w < len(wanted) and wanted[w] < index:
                w += 1
            if w > first:
                lo, hi = int(wanted[first]), int(wanted[w - 1])
                yield DecodeGap(lo, hi, lo / float(rate), (hi + 1) / float(rate), reason)

        try:
            if self._moved:  # a fresh container is at the start already (no seek: nothing to flush)
                self._seek(0)
            for packet in self._container.demux(self._stream):
                if w >= len(wanted):
                    break
                try:
                    frames = packet.decode()
                except av.FFmpegError as err:
                    error = f"{type(err).__name__}: {err}"
                    continue
                for frame in frames:
                    if frame.pts is None:
                        index = last_index + 1
                    else:
                        if self._start_pts is None:
                            self._start_pts = frame.pts
                        index = self._index_of(frame.pts)
                    # two frames rounding to one slot (variable rate): the first serves it
                    index = max(index, last_index)
                    jump = index - last_index
                    if error is not None or jump > MAX_SILENT_JUMP_S * float(rate):
                        yield from gap_until(index, error or f"no frame for {jump / float(rate):.2f} s")
                    error = None
                    last_index, last_frame = index, frame
                    if w >= len(wanted) or wanted[w] > index:
                        continue
                    array = convert(frame)
                    while w < len(wanted) and wanted[w] <= index:
                        yield int(wanted[w]), array
                        w += 1
        except av.FFmpegError as err:
            raise VideoDecodeError(f"{self.path}: decoding failed ({err})") from None
        # the end: frames wanted past the last decoded one (a header overstating the length by a frame or two)
        near_end = last_frame is not None and int(wanted[-1]) - last_index <= END_TOLERANCE
        if w < len(wanted) and error is None and near_end:
            array = convert(last_frame)
            while w < len(wanted):
                yield int(wanted[w]), array
                w += 1
        if w < len(wanted):
            reason = error or (f"the stream ends at frame {last_index} of the {self._declared_frames()} "
                               "its header declares")
            yield from gap_until(int(wanted[-1]) + 1, reason)

    def _declared_frames(self) -> str:
        try:
            return str(self.num_frames)
        except VideoDecodeError:
            return "?"

    def read_all(self) -> np.ndarray:
        """Every frame in presentation order, ``(N, H, W, 3)`` uint8 RGB (for baselines and tests)."""
        try:
            self._seek(0)
            frames = [self._upright(f) for f in self._container.decode(self._stream)]
        except av.FFmpegError as err:
            raise VideoDecodeError(f"{self.path}: decoding failed ({err})") from None
        if not frames:
            raise VideoDecodeError(f"{self.path}: no frame could be decoded")
        return np.stack(frames)

    def close(self) -> None:
        self._container.close()

    def __enter__(self) -> "PyAVVideoSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def stream_frames(path: str | Path, wanted: Sequence[int], colour: str = "rgb"
                  ) -> Iterator[tuple[int, np.ndarray] | DecodeGap]:
    """:meth:`PyAVVideoSource.stream` of the file at ``path``, with frame threading (one pass, no seek)."""
    with PyAVVideoSource(path, thread_type="AUTO") as video:
        yield from video.stream(wanted, colour)
