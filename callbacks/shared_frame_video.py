"""An annotated MP4 drawn from the frames prediction already decoded, clip by clip as clips are predicted.

``cli.py predict`` on a video folder decodes each clip's whole span of source frames once
(:class:`datamodules.video_folder.VideoFolderDataset` with ``video_frames``): the model takes its
5-fps grid frames, a masker the same grid frames at the video's size, and this class the rest. A
source frame is drawn as soon as the clip whose boxes it shows is predicted, so at most about one
clip's frames wait here, and the file is the one :func:`callbacks.annotated_video.render_annotated_video`
writes from a second decode (the same frames through the same encoder).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from callbacks.annotated_video import AnnotatedVideoEncoder, ClipPrediction


class SharedFramesError(RuntimeError):
    """The clips' frames cannot make the whole video (a clip missing, or frames out of order)."""


class SharedFrameVideo:
    """One video's annotated MP4, fed each clip's prediction and decoded frames in clip order.

    Args:
        records: the video's clip records, in order (their grid frames and spans).
        out_path: the MP4 to write.
        first, last: the source frames the MP4 holds.
        width, height, fps: the video's.
        encoder_kwargs: ``crf``, ``line_width``, ``font_size``, ``preset`` of the encoder.
    """

    def __init__(self, records: Sequence[Any], out_path: str | Path, first: int, last: int, width: int, height: int,
                 fps: float, **encoder_kwargs: Any):
        self.index = {r.key: i for i, r in enumerate(records)}
        self.arrived = np.zeros(len(records), dtype=bool)
        self.last = last
        self.encoder = AnnotatedVideoEncoder(out_path, [ClipPrediction(r, None) for r in records], first, width,
                                             height, fps, **encoder_kwargs)
        self._buffer: list = []  # decoded frames (YuvFrame, or RGB arrays) from encoder.next_frame on, not drawn yet
        self._buffered = 0
        self.finished = False

    @property
    def complete(self) -> bool:
        return bool(self.arrived.all())

    def add(self, key: str, prediction: Mapping[str, Any] | None, first_frame: int, frames: Sequence) -> None:
        """Clip ``key``'s prediction and its decoded source frames from ``first_frame`` on (YUV frames,
        :meth:`datamodules.grounded_dataset.GroundedClipDataset.decode_span`, or RGB frames); draws
        every frame whose boxes are now known."""
        clip = self.index[key]
        self.encoder.set_prediction(clip, prediction)
        self.arrived[clip] = True
        have = self.encoder.next_frame + self._buffered  # frames before this are drawn or waiting
        if first_frame > have:
            raise SharedFramesError(f"clip {key} starts at frame {first_frame}, frames {have}.. were never decoded")
        new = frames[have - first_frame:self.last + 1 - first_frame]  # a list or an array: never copied
        self._buffer.extend(new)
        self._buffered = len(self._buffer)
        self._drain()

    def _drain(self) -> None:
        start = self.encoder.next_frame
        if not self._buffered:
            return
        ready = self.arrived[self.encoder.owners(start, start + self._buffered)]
        count = self._buffered if ready.all() else int(np.argmin(ready))
        if count == 0:
            return
        self.encoder.draw(start, self._buffer[:count])
        del self._buffer[:count]
        self._buffered = len(self._buffer)

    def close(self) -> Path:
        """The finished MP4; every clip must have come and every frame up to ``last`` been drawn."""
        missing = [key for key, i in self.index.items() if not self.arrived[i]]
        if missing:
            raise SharedFramesError(f"clips {missing} never came")
        if self.encoder.next_frame <= self.last:
            raise SharedFramesError(f"frames {self.encoder.next_frame}..{self.last} were never decoded")
        self.finished = True
        return self.encoder.close()

    def abort(self) -> None:
        """Stop without a file (the partial one removed); nothing once closed or aborted."""
        if not self.finished:
            self.finished = True
            self.encoder.abort()
        self._buffer, self._buffered = [], 0


__all__ = ["SharedFrameVideo", "SharedFramesError"]
