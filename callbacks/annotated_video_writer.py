"""Annotated MP4s of ``predict`` runs: every frame of the input with its predicted boxes and caption.

A person checks grounded captions by watching them, so each predicted video is re-encoded at its
own size, frame rate and frame count with the boxes (one colour per phrase, labelled) and the clip's
caption drawn in. Boxes exist on the 5-fps grid; a source frame shows the boxes of the latest grid
frame at or before it (they hold for 1/5 s). Where clips overlap, a grid frame takes the clip whose
centre is nearest. Drawing is done once per grid frame with PIL into an RGBA overlay, which is then
alpha-blended onto all the source frames it covers at once; frames are decoded and encoded in
chunks, so any length fits in memory.

The drawing helpers (:func:`phrase_colours`, :func:`render_overlay`, :func:`composite`) are shared
with :class:`callbacks.tensorboard_visualizer.ValidationClipVisualizer`.
"""
from __future__ import annotations

from core.safe_names import safe_file_name

from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import av
import lightning as L
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from callbacks.prediction_writer import PredictionWriter, run_dir
from datamodules.video import VideoDecodeError, open_video

# Distinct, saturated colours (a phrase's colour is its order of first appearance in the caption).
PALETTE = (
    (230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 240, 240),
    (240, 50, 230), (210, 245, 60), (255, 225, 25), (0, 128, 128), (170, 110, 40), (128, 0, 0),
)
LABEL_ALPHA = 210
CAPTION_ALPHA = 160


# ---------------------------------------------------------------- drawing

def phrase_colours(phrases: Sequence[str]) -> dict[str, tuple[int, int, int]]:
    """One palette colour per distinct phrase, in order of first appearance."""
    distinct = list(OrderedDict.fromkeys(phrases))
    return {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(distinct)}


@lru_cache(maxsize=16)
def load_font(size: int) -> ImageFont.ImageFont:
    """PIL's built-in scalable font at ``size`` px (its bitmap font where FreeType is missing)."""
    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ValueError, OSError):
        return ImageFont.load_default()


def default_sizes(width: int, height: int) -> tuple[int, int]:
    """Line width and font size that stay readable from thumbnails to 4K."""
    short = min(width, height)
    return max(1, round(short / 160)), max(9, round(short / 26))


def _text_size(font, text: str) -> tuple[int, int]:
    left, top, right, bottom = font.getbbox(text or " ")
    return right - left, bottom - top


def wrap_caption(text: str, font, max_width: int) -> list[str]:
    """Greedy word wrap to ``max_width`` pixels (a single over-long word is cut by characters)."""
    lines: list[str] = []
    for word in text.split():
        candidate = f"{lines[-1]} {word}" if lines else word
        if lines and _text_size(font, candidate)[0] <= max_width:
            lines[-1] = candidate
            continue
        while _text_size(font, word)[0] > max_width and len(word) > 1:
            cut = max(1, int(len(word) * max_width / max(1, _text_size(font, word)[0])))
            lines.append(word[:cut])
            word = word[cut:]
        lines.append(word)
    return lines


def _ink(colour: tuple[int, int, int]) -> tuple[int, int, int, int]:
    """Black or white text, whichever reads better on ``colour``."""
    luma = 0.299 * colour[0] + 0.587 * colour[1] + 0.114 * colour[2]
    return (0, 0, 0, 255) if luma > 140 else (255, 255, 255, 255)


def render_overlay(width: int, height: int, boxes: np.ndarray, labels: Sequence[str],
                   colours: Mapping[str, tuple[int, int, int]], caption: str | None = None,
                   line_width: int | None = None, font_size: int | None = None,
                   max_caption_lines: int = 3) -> np.ndarray:
    """RGBA ``(height, width, 4)`` uint8 overlay: labelled pixel-xyxy boxes and a caption band."""
    auto_line, auto_font = default_sizes(width, height)
    line_width = line_width or auto_line
    font = load_font(font_size or auto_font)
    image = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    if caption:  # first, so that boxes reaching into the band stay whole
        _, th = _text_size(font, "Ag")
        pad = max(2, th // 3)
        lines = wrap_caption(caption, font, width - 2 * pad)
        if len(lines) > max_caption_lines:
            lines = lines[:max_caption_lines - 1] + [lines[max_caption_lines - 1] + " ..."]
        band = len(lines) * (th + pad) + pad
        draw.rectangle([0, height - band, width, height], fill=(0, 0, 0, CAPTION_ALPHA))
        for i, line in enumerate(lines):
            top = font.getbbox(line)[1]
            draw.text((pad, height - band + pad + i * (th + pad) - top), line, fill=(255, 255, 255, 255), font=font)
    for box, label in zip(np.asarray(boxes, dtype=np.float64).reshape(-1, 4), labels):
        colour = colours.get(label, PALETTE[0])
        x1, y1, x2, y2 = (float(v) for v in box)
        draw.rectangle([x1, y1, max(x1, x2 - 1), max(y1, y2 - 1)], outline=(*colour, 255), width=line_width)
        tw, th = _text_size(font, label)
        pad = max(1, th // 4)
        ty = y1 - th - 2 * pad if y1 - th - 2 * pad >= 0 else y1  # above the box, or inside at the top
        tx = min(max(0.0, x1), max(0.0, width - tw - 2 * pad))
        # PIL rectangles include their end pixels: stop one short so the label ends where the box begins
        draw.rectangle([tx, ty, tx + tw + 2 * pad - 1, ty + th + 2 * pad - 1], fill=(*colour, LABEL_ALPHA))
        left, top = font.getbbox(label)[:2]
        draw.text((tx + pad - left, ty + pad - top), label, fill=_ink(colour), font=font)
    return np.asarray(image)


def composite(frames: np.ndarray, overlay: np.ndarray) -> np.ndarray:
    """Alpha-blend one RGBA overlay onto ``(N, H, W, 3)`` uint8 frames (all at once)."""
    alpha = overlay[..., 3:4].astype(np.uint16)
    blended = (frames.astype(np.uint16) * (255 - alpha) + overlay[..., :3].astype(np.uint16) * alpha + 127) // 255
    return blended.astype(np.uint8)


# ---------------------------------------------------------------- encoding

class StreamingVideoEncoder:
    """H.264 MP4 written chunk by chunk (frames never all in memory), renamed into place on close."""

    def __init__(self, path: str | Path, fps: float, width: int, height: int, crf: int = 20,
                 preset: str = "veryfast"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(f".{self.path.stem}.partial{self.path.suffix}")
        self.container = av.open(str(self.tmp), "w")
        rate = Fraction(fps).limit_denominator(1001)
        self.stream = self.container.add_stream("libx264", rate=rate)
        self.stream.width, self.stream.height = width, height
        # yuv420p needs even sizes; odd ones keep their exact size in yuv444p
        self.stream.pix_fmt = "yuv420p" if width % 2 == 0 and height % 2 == 0 else "yuv444p"
        self.stream.options = {"crf": str(crf), "preset": preset}
        self.count = 0

    def write(self, frames: np.ndarray) -> None:
        for array in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(array), format="rgb24")
            frame.pts = self.count
            self.count += 1
            self.container.mux(self.stream.encode(frame))

    def close(self) -> Path:
        self.container.mux(self.stream.encode())
        self.container.close()
        self.tmp.replace(self.path)
        return self.path

    def abort(self) -> None:
        self.container.close()
        self.tmp.unlink(missing_ok=True)


# ---------------------------------------------------------------- one video

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


def _frame_boxes(prediction: Mapping[str, Any] | None) -> dict[int, tuple[np.ndarray, list[str]]]:
    if not prediction:
        return {}
    return {int(f["frame"]): (np.asarray(f.get("boxes") or np.zeros((0, 4)), dtype=np.float64).reshape(-1, 4),
                              list(f.get("labels", []))) for f in prediction.get("frames", [])}


def render_annotated_video(source, out_path: str | Path, clips: Sequence[ClipPrediction], first: int, last: int,
                           fps: float, chunk_frames: int = 64, crf: int = 20, line_width: int | None = None,
                           font_size: int | None = None, progress=None) -> Path:
    """Write frames ``first..last`` of ``source`` with the clips' predictions drawn on them."""
    grid, owner = grid_owners(clips)
    boxes_of = [_frame_boxes(c.prediction) for c in clips]
    colours = [phrase_colours((c.prediction or {}).get("phrases", [])) for c in clips]
    captions = [(c.prediction or {}).get("caption") or ("(no prediction: clip skipped)" if c.prediction is None else "")
                for c in clips]
    width, height = source.width, source.height
    encoder = StreamingVideoEncoder(out_path, fps, width, height, crf=crf)
    try:
        for start in range(first, last + 1, chunk_frames):
            stop = min(start + chunk_frames, last + 1)
            frames = source.read_frames(range(start, stop))
            # the latest grid frame at or before each source frame (frames before the grid: the first)
            slot = np.maximum(np.searchsorted(grid, np.arange(start, stop), side="right") - 1, 0)
            for s in np.unique(slot):
                clip = int(owner[s])
                boxes, labels = boxes_of[clip].get(int(grid[s]), (np.zeros((0, 4)), []))
                overlay = render_overlay(width, height, boxes, labels, colours[clip], captions[clip],
                                         line_width=line_width, font_size=font_size)
                mask = slot == s
                frames[mask] = composite(frames[mask], overlay)
            encoder.write(frames)
            if progress is not None:
                progress.update(stop - start)
    except BaseException:
        encoder.abort()
        raise
    return encoder.close()


# ---------------------------------------------------------------- the callback

class AnnotatedVideoWriter(L.Callback):
    """Writes ``<run>/annotated/<video_id>.mp4`` for each video predicted, and a summary at the end.

    Args:
        output_dir: where to write (default: the run folder, as :class:`PredictionWriter`).
        subdir: sub-folder of ``output_dir`` for the MP4s.
        only_videos: render only predictions on ``data.videos`` (whole videos). False also renders
            predictions on an annotated split, each video over the span of its clips.
        chunk_frames: frames decoded, drawn and encoded at a time (bounds memory).
        crf: H.264 quality (lower = better, bigger).
        line_width / font_size: drawing sizes in pixels (default: from the frame size).
    """

    def __init__(self, output_dir: str | None = None, subdir: str = "annotated", only_videos: bool = True,
                 chunk_frames: int = 64, crf: int = 20, line_width: int | None = None,
                 font_size: int | None = None):
        self.output_dir = output_dir
        self.subdir = subdir
        self.only_videos = only_videos
        self.chunk_frames = chunk_frames
        self.crf = crf
        self.line_width = line_width
        self.font_size = font_size
        self.predictions: dict[str, dict] = {}
        self.skipped: dict[str, str] = {}
        self.written: list[Path] = []

    def on_predict_epoch_start(self, trainer, pl_module):
        self.predictions, self.skipped, self.written = {}, {}, []

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if isinstance(outputs, dict) and outputs.get("predictions"):
            self.predictions.update(outputs["predictions"])
        for key, reason in batch.get("skipped", []) if isinstance(batch, dict) else []:
            self.skipped.setdefault(key, reason)

    def _dataset(self, trainer):
        loaders = trainer.predict_dataloaders
        loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders
        return getattr(loader, "dataset", None)

    def _gather(self, trainer) -> None:
        """Under DDP the clips of one video may be predicted on several ranks: rank 0 gets them all."""
        if trainer.world_size <= 1:
            return
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return
        parts: list = [None] * trainer.world_size
        dist.all_gather_object(parts, (self.predictions, self.skipped))
        for predictions, skipped in parts:
            self.predictions.update(predictions)
            for key, reason in skipped.items():
                self.skipped.setdefault(key, reason)

    def on_predict_epoch_end(self, trainer, pl_module):
        from datamodules.video_folder import VideoFolderDataset

        self._gather(trainer)
        dataset = self._dataset(trainer)
        whole_videos = isinstance(dataset, VideoFolderDataset)
        if not trainer.is_global_zero or dataset is None or not hasattr(dataset, "records"):
            return
        if self.only_videos and not whole_videos:
            return
        folder = (Path(self.output_dir) if self.output_dir else run_dir(trainer)) / self.subdir
        by_video: dict[str, list] = defaultdict(list)
        for record in dataset.records:
            by_video[record.video_fname].append(record)
        show_progress = getattr(trainer, "progress_bar_callback", None) is not None
        for video_fname, records in by_video.items():
            clips = [ClipPrediction(r, self.predictions.get(r.key)) for r in records]
            if all(c.prediction is None for c in clips):
                continue  # every clip of it was skipped: listed below with the reason
            try:
                self.written.append(self._render(dataset, video_fname, clips, folder, whole_videos, show_progress))
            except (VideoDecodeError, FileNotFoundError, OSError, av.FFmpegError) as err:
                self.skipped.setdefault(video_fname, f"annotated video not written: {type(err).__name__}: {err}")
        self._print_summary(trainer, folder)

    @staticmethod
    def output_path(folder: Path, video_id: str) -> Path:
        """``folder/<video_id>.mp4``, the id made one distinct, readable file name (:mod:`core.safe_names`)."""
        return folder / safe_file_name(video_id, ".mp4")

    def _render(self, dataset, video_fname: str, clips, folder: Path, whole_video: bool, show_progress: bool) -> Path:
        first_record = clips[0].record
        with open_video(dataset.video_root, video_fname) as source:
            if whole_video:
                first, last = 0, int(first_record.extra.get("num_frames", source.num_frames)) - 1
            else:
                first = min(c.record.clip_start_frame for c in clips)
                last = min(max(c.record.clip_end_frame for c in clips), source.num_frames - 1)
            fps = source.fps or first_record.fps
            out = self.output_path(folder, first_record.video_id)
            progress = None
            if show_progress:
                from tqdm.auto import tqdm

                progress = tqdm(total=last - first + 1, desc=f"annotating {out.name}", unit="frame", leave=False)
            try:
                return render_annotated_video(source, out, clips, first, last, fps, self.chunk_frames, self.crf,
                                              self.line_width, self.font_size, progress)
            finally:
                if progress is not None:
                    progress.close()

    def _print_summary(self, trainer, folder: Path) -> None:
        lines = []
        if self.written:
            lines.append(f"Annotated videos: {len(self.written)} written to {folder}")
            lines += [f"  {p.name}" for p in self.written]
        writer = next((c for c in trainer.callbacks if isinstance(c, PredictionWriter)), None)
        if writer is not None and "predict" in writer.last_paths:
            lines.append(f"Predictions (JSON): {writer.last_paths['predict']}")
        if self.skipped:
            lines.append(f"Skipped {len(self.skipped)} video(s)/clip(s) that could not be read:")
            lines += [f"  {key}: {reason}" for key, reason in self.skipped.items()]
        if lines:
            print("\n" + "\n".join(lines), flush=True)
