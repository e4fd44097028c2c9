"""Finding and probing the video of a record: a file under any of the usual suffixes or a frame folder
(:func:`open_video`, :func:`find_video`), and a file's frame count, rate and size (:func:`probe_video`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from formats.frame_folder import FrameFolderSource
from formats.video_reader import VIDEO_SUFFIXES, PyAVVideoSource, VideoDecodeError


def video_candidates(root: str | Path, video_fname: str) -> list[Path]:
    """Where ``video_fname`` may be, in the order :func:`open_video` tries: ``root/video_fname``, the same
    stem as .mp4/.webm/.mkv, the folder ``root/<stem>/``."""
    path = Path(root) / video_fname
    stem = path.with_suffix("") if path.suffix.lower() in VIDEO_SUFFIXES else path
    others = [stem.with_name(stem.name + suffix) for suffix in VIDEO_SUFFIXES]
    return [path, *[c for c in others if c != path], stem]


def find_video(root: str | Path, video_fname: str) -> Path | None:
    """The file or frame folder :func:`open_video` would open, or None when there is none."""
    return next((c for c in video_candidates(root, video_fname) if c.exists()), None)


def open_video(root: str | Path, video_fname: str, **folder_kwargs) -> PyAVVideoSource | FrameFolderSource:
    """Open ``root/video_fname``; else the same stem as .mp4/.webm/.mkv; else the folder ``root/<stem>/``.

    Public annotations name videos whose container differs from what was downloaded (``.mp4`` vs
    ``.webm``) or that were extracted to frames; ``folder_kwargs`` go to :class:`FrameFolderSource`.
    """
    candidates = video_candidates(root, video_fname)
    path, stem = candidates[0], candidates[-1]
    if path.is_file():
        return PyAVVideoSource(path)
    if path.is_dir():
        return FrameFolderSource(path, **folder_kwargs)
    for candidate in candidates[1:-1]:
        if candidate.is_file():
            return PyAVVideoSource(candidate)
    if stem.is_dir():
        return FrameFolderSource(stem, **folder_kwargs)
    raise FileNotFoundError(f"video '{video_fname}' not found; tried: {', '.join(str(p) for p in candidates)}")


@dataclass(frozen=True)
class VideoInfo:
    """What clip planning and prediction need to know about one video file."""

    path: Path
    video_id: str
    num_frames: int
    fps: float
    width: int
    height: int


def probe_video(path: str | Path, video_id: str | None = None) -> VideoInfo:
    """Open a file and read its frame count, rate and (upright) size: headers, or a demux for some
    containers. ``video_id`` defaults to the file's stem."""
    path = Path(path)
    with PyAVVideoSource(path) as video:
        num_frames = video.num_frames
        if num_frames <= 0:
            raise VideoDecodeError(f"{path}: the video has no frames")
        return VideoInfo(path, path.stem if video_id is None else video_id, num_frames, video.fps, video.width,
                         video.height)
