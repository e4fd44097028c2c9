"""Annotated MP4s of ``predict`` runs: every frame of the input with its predicted boxes and caption.

A person checks grounded captions by watching them, so each predicted video is re-encoded at its
own size, frame rate and frame count with the boxes (one colour per phrase, labelled), their masks
where the predictions carry them, and the clip's caption drawn in. Boxes exist on the 5-fps grid;
a source frame shows the boxes of the latest grid frame at or before it (they hold for 1/5 s).
Where clips overlap, a grid frame takes the clip whose centre is nearest. Each grid frame's boxes
are drawn with PIL into an RGBA overlay over its clip's caption band (laid out once per caption),
which is alpha-blended onto all the source frames it covers at once, only where it is not
transparent; the video is decoded in one threaded pass and drawn and encoded in chunks, so any
length fits in memory. A video is rendered in a writer thread while later videos are predicted.

The drawing itself lives in :mod:`core.drawing`, shared with the TensorBoard clips and the web demo;
the encoding is :class:`formats.video_writer.VideoWriter`.
"""
from __future__ import annotations

from core.drawing import composite, phrase_colours, render_overlay
from core.safe_names import safe_file_name

from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import av
import lightning as L
import numpy as np

from callbacks.prediction_writer import PredictionWriter, run_dir
from formats.mask_rle import decode_masks
from formats.video_files import open_video
from formats.video_reader import DecodeGap, PyAVVideoSource, VideoDecodeError, stream_frames
from formats.video_writer import VideoWriter

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


def _frame_boxes(prediction: Mapping[str, Any] | None) -> dict[int, tuple[np.ndarray, list[str], list | None]]:
    """Grid frame -> (boxes, labels, the boxes' RLE masks or None where the entry has no ``masks``)."""
    if not prediction:
        return {}
    return {int(f["frame"]): (np.asarray(f.get("boxes") or np.zeros((0, 4)), dtype=np.float64).reshape(-1, 4),
                              list(f.get("labels", [])), f.get("masks")) for f in prediction.get("frames", [])}


def frame_chunks(source, first: int, last: int, chunk_frames: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(first index, frames)`` of frames ``first..last`` in chunks of ``chunk_frames``.

    A video file is decoded in one forward pass with FFmpeg's frame threading
    (:func:`formats.video_reader.stream_frames`), the same frames :meth:`read_frames` gives; a frame
    that cannot be decoded is a :class:`VideoDecodeError`, as when reading. Frame folders are read by index.
    """
    if not isinstance(source, PyAVVideoSource):
        for start in range(first, last + 1, chunk_frames):
            yield start, source.read_frames(range(start, min(start + chunk_frames, last + 1)))
        return
    chunk: list[np.ndarray] = []
    start = first
    for item in stream_frames(source.path, range(first, last + 1)):
        if isinstance(item, DecodeGap):
            raise VideoDecodeError(item.describe(source.path))
        chunk.append(item[1])
        if len(chunk) == chunk_frames:
            yield start, np.stack(chunk)
            start, chunk = start + len(chunk), []
    if chunk:
        yield start, np.stack(chunk)


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
    encoder = VideoWriter(out_path, fps, width, height, crf=crf)
    try:
        for start, frames in frame_chunks(source, first, last, chunk_frames):
            stop = start + len(frames)
            # the latest grid frame at or before each source frame (frames before the grid: the first)
            slot = np.maximum(np.searchsorted(grid, np.arange(start, stop), side="right") - 1, 0)
            for s in np.unique(slot):
                clip = int(owner[s])
                boxes, labels, rles = boxes_of[clip].get(int(grid[s]), (np.zeros((0, 4)), [], None))
                masks = [decode_masks([m])[0] if m else None for m in rles] if rles else None
                overlay = render_overlay(width, height, boxes, labels, colours[clip], captions[clip],
                                         line_width=line_width, font_size=font_size, masks=masks)
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

    Drawing and encoding are kept off the model's path: with ``background`` (single process), a
    video is rendered in a writer thread as soon as the last of its clips is predicted, while the
    next videos' clips are predicted; at most ``max_queued`` videos wait for the writer before
    prediction waits for it. Videos not complete before the epoch's end (and every video under
    DDP, whose ranks share videos) are rendered at the end.

    Args:
        output_dir: where to write (default: the run folder, as :class:`PredictionWriter`).
        subdir: sub-folder of ``output_dir`` for the MP4s.
        only_videos: render only predictions on ``data.videos`` (whole videos). False also renders
            predictions on an annotated split, each video over the span of its clips.
        chunk_frames: frames decoded, drawn and encoded at a time (bounds memory).
        crf: H.264 quality (lower = better, bigger).
        line_width / font_size: drawing sizes in pixels (default: from the frame size).
        background: render in a writer thread during prediction (False: all at the epoch's end).
        max_queued: videos waiting for the writer thread before prediction waits.
        enabled: False writes no MP4 and keeps no predictions (predictions only: ``--video=false``,
            configs/overlays/no_video.yaml).
    """

    def __init__(self, output_dir: str | None = None, subdir: str = "annotated", only_videos: bool = True,
                 chunk_frames: int = 64, crf: int = 20, line_width: int | None = None,
                 font_size: int | None = None, background: bool = True, max_queued: int = 2,
                 enabled: bool = True):
        self.enabled = enabled
        self.output_dir = output_dir
        self.subdir = subdir
        self.only_videos = only_videos
        self.chunk_frames = chunk_frames
        self.crf = crf
        self.line_width = line_width
        self.font_size = font_size
        self.background = background
        self.max_queued = max(1, max_queued)
        self.predictions: dict[str, dict] = {}
        self.skipped: dict[str, str] = {}
        self.written: list[Path] = []
        self._reset_writer()

    def _reset_writer(self) -> None:
        self._executor = None
        self._futures: dict[str, Future] = {}
        self._waiting: dict[str, set] = {}  # video -> keys of its clips not predicted yet
        self._video_of: dict[str, str] = {}  # clip key -> video
        self._plan = None

    def on_predict_epoch_start(self, trainer, pl_module):
        self.predictions, self.skipped, self.written = {}, {}, []
        self._shutdown_writer()
        if not self.enabled or not self.background or trainer.world_size > 1:
            return
        plan = self._render_plan(trainer)
        if plan is None:
            return
        self._plan = plan
        for video_fname, records in plan[3].items():
            self._waiting[video_fname] = {r.key for r in records}
            self._video_of.update((r.key, video_fname) for r in records)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="annotated-mp4")

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if not self.enabled:
            return
        done = []
        if isinstance(outputs, dict) and outputs.get("predictions"):
            self.predictions.update(outputs["predictions"])
            done += list(outputs["predictions"])
        for key, reason in batch.get("skipped", []) if isinstance(batch, dict) else []:
            self.skipped.setdefault(key, reason)
            done.append(key)
        if self._executor is not None:
            self._queue_complete_videos(done)

    def _queue_complete_videos(self, keys) -> None:
        """Hand each video whose every clip is now predicted (or skipped) to the writer thread."""
        for key in keys:
            video_fname = self._video_of.get(key)
            waiting = self._waiting.get(video_fname)
            if waiting is None:
                continue
            waiting.discard(key)
            if waiting:
                continue
            del self._waiting[video_fname]
            queued = [f for f in self._futures.values() if not f.done()]
            if len(queued) >= self.max_queued:
                wait(queued, return_when=FIRST_COMPLETED)  # bounded: prediction waits for the writer
            dataset, whole_videos, folder, by_video = self._plan
            clips = self._clips(by_video[video_fname])
            if clips is not None:
                self._futures[video_fname] = self._executor.submit(
                    self._render_or_reason, dataset, video_fname, clips, folder, whole_videos, False)

    def _dataset(self, trainer):
        loaders = trainer.predict_dataloaders
        loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders
        return getattr(loader, "dataset", None)

    def _render_plan(self, trainer):
        """``(dataset, whole_videos, folder, records by video)``, or None when nothing is to be rendered."""
        from datamodules.video_folder import VideoFolderDataset

        dataset = self._dataset(trainer)
        whole_videos = isinstance(dataset, VideoFolderDataset)
        if not trainer.is_global_zero or dataset is None or not hasattr(dataset, "records"):
            return None
        if self.only_videos and not whole_videos:
            return None
        folder = (Path(self.output_dir) if self.output_dir else run_dir(trainer)) / self.subdir
        by_video: dict[str, list] = defaultdict(list)
        for record in dataset.records:
            by_video[record.video_fname].append(record)
        return dataset, whole_videos, folder, by_video

    def _clips(self, records) -> list[ClipPrediction] | None:
        clips = [ClipPrediction(r, self.predictions.get(r.key)) for r in records]
        return None if all(c.prediction is None for c in clips) else clips

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
        if not self.enabled:  # the same on every rank: no rank enters the gather
            return
        self._gather(trainer)
        try:
            plan = self._plan or self._render_plan(trainer)
            if plan is None:
                return
            dataset, whole_videos, folder, by_video = plan
            show_progress = getattr(trainer, "progress_bar_callback", None) is not None
            for video_fname, records in by_video.items():
                if video_fname in self._futures:
                    outcome = self._futures[video_fname].result()
                else:
                    clips = self._clips(records)
                    if clips is None:
                        continue  # every clip of it was skipped: listed below with the reason
                    outcome = self._render_or_reason(dataset, video_fname, clips, folder, whole_videos, show_progress)
                if isinstance(outcome, Path):
                    self.written.append(outcome)
                else:
                    self.skipped.setdefault(video_fname, outcome)
            self._print_summary(trainer, folder)
        finally:
            self._shutdown_writer()

    def on_exception(self, trainer, pl_module, exception):
        self._shutdown_writer()

    def _shutdown_writer(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        self._reset_writer()

    def _render_or_reason(self, dataset, video_fname, clips, folder, whole_videos, show_progress) -> Path | str:
        """The written MP4, or why it could not be written."""
        try:
            return self._render(dataset, video_fname, clips, folder, whole_videos, show_progress)
        except (VideoDecodeError, FileNotFoundError, OSError, av.FFmpegError) as err:
            return f"annotated video not written: {type(err).__name__}: {err}"

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
