"""Checks an uploaded file before any model work, turning every way it can be unreadable into a
sentence for the page (the server never shows a stack trace and keeps serving)."""
from __future__ import annotations

from pathlib import Path

from datamodules.video_folder import VideoInfo, probe_video
from formats.video_reader import VideoDecodeError


class UploadError(ValueError):
    """An upload the demo cannot use; the message is meant for the page as it is."""


def _reason(err: Exception, path: Path) -> str:
    """The decoder's reason without the server-side temporary path."""
    text = str(err)
    for prefix in (f"{path}: ", str(path)):
        text = text.replace(prefix, "")
    return text.strip() or type(err).__name__


def check_video(path: str | Path | None) -> VideoInfo:
    """The upload's frame count, rate and size, or :class:`UploadError` saying what is wrong with it."""
    if path is None or str(path) == "":
        raise UploadError("No video yet: upload a video file or pick one of the synthetic samples.")
    path = Path(path)
    name = path.name
    if not path.is_file():
        raise UploadError(f"The upload '{name}' did not arrive; please upload it again.")
    if path.stat().st_size == 0:
        raise UploadError(f"'{name}' is an empty file.")
    try:
        info = probe_video(path, path.stem)
    except VideoDecodeError as err:
        reason = _reason(err, path)
        if "no video stream" in reason:
            raise UploadError(f"'{name}' has no video stream (is it an audio file, an image or a document?). "
                              "Please upload a video.") from None
        raise UploadError(f"'{name}' could not be read as a video: {reason}. "
                          "The file may be corrupt or in a format FFmpeg cannot decode.") from None
    except OSError as err:
        raise UploadError(f"'{name}' could not be read: {err.strerror or err}.") from None
    if info.width <= 0 or info.height <= 0:
        raise UploadError(f"'{name}': the video stream has no frame size.")
    return info
