"""The annotated MP4 of each video a ``predict`` run predicts (:mod:`callbacks.annotated_video` draws it).

Drawing and encoding stay off the model's path. On a video folder the frames come from the
prediction's own decode: each clip's whole span of source frames is decoded once by the dataset
(``VideoFolderDataset(video_frames=True)``, switched on here at set-up), its grid frames go to the
model (and a masker) and the whole span to a writer thread that draws and encodes it as soon as the
clips whose boxes it shows are predicted (:class:`callbacks.shared_frame_video.SharedFrameVideo`).
Otherwise (an annotated split, several ranks, or a clip that could not be decoded) a video is
decoded again, in one threaded pass, once its clips are predicted or at the epoch's end.
"""
from __future__ import annotations

from core.safe_names import safe_file_name

from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path

import av
import lightning as L

from callbacks.annotated_video import DEFAULT_PRESET, ClipPrediction, render_annotated_video
from callbacks.prediction_writer import PredictionWriter, run_dir
from callbacks.shared_frame_video import SharedFramesError, SharedFrameVideo
from formats.video_files import open_video
from formats.video_reader import VideoDecodeError

# ---------------------------------------------------------------- the callback

class AnnotatedVideoWriter(L.Callback):
    """Writes ``<run>/annotated/<video_id>.mp4`` for each video predicted, and a summary at the end.

    Drawing and encoding are kept off the model's path: with ``background`` (single process), a
    writer thread draws and encodes while later clips are predicted. With ``share_frames`` on a
    video folder it takes each clip's frames from the prediction's decode as the clip is predicted;
    otherwise it renders a video, decoded again, once the last of its clips is predicted. At most
    ``max_queued`` clips (or videos) wait for the writer before prediction waits for it. Videos not
    complete before the epoch's end (and every video under DDP, whose ranks share videos) are
    rendered at the end.

    Args:
        output_dir: where to write (default: the run folder, as :class:`PredictionWriter`).
        subdir: sub-folder of ``output_dir`` for the MP4s.
        only_videos: render only predictions on ``data.videos`` (whole videos). False also renders
            predictions on an annotated split, each video over the span of its clips.
        chunk_frames: frames decoded, drawn and encoded at a time (bounds memory).
        crf: H.264 quality (lower = better, bigger).
        line_width / font_size: drawing sizes in pixels (default: from the frame size).
        background: render in a writer thread during prediction (False: all at the epoch's end).
        max_queued: clips (or whole videos) waiting for the writer thread before prediction waits.
        share_frames: on a video folder, draw on the frames the prediction decoded (no second decode;
            each waiting clip holds its decoded frames: about 70 MB for 8 s of 455x256 at 25 fps).
        preset: libx264's speed preset (``veryfast`` for files a third the size, at twice the CPU).
        enabled: False writes no MP4 and keeps no predictions (predictions only: ``--video=false``,
            configs/overlays/no_video.yaml).
    """

    def __init__(self, output_dir: str | None = None, subdir: str = "annotated", only_videos: bool = True,
                 chunk_frames: int = 64, crf: int = 20, line_width: int | None = None,
                 font_size: int | None = None, background: bool = True, max_queued: int = 2,
                 enabled: bool = True, share_frames: bool = True, preset: str = DEFAULT_PRESET):
        self.enabled = enabled
        self.share_frames = share_frames
        self.preset = preset
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
        self._shared: dict[str, SharedFrameVideo | None] = {}  # video -> its MP4 from shared frames (None: given up)
        self._pending: list[Future] = []  # clips handed to the writer thread

    def setup(self, trainer, pl_module, stage: str) -> None:
        """Ask a video folder's dataset for each clip's whole span of frames (before its workers start)."""
        datamodule = getattr(trainer, "datamodule", None)
        dataset = getattr(datamodule, "datasets", {}).get("predict") if datamodule is not None else None
        if stage == "predict" and hasattr(dataset, "video_frames"):
            dataset.video_frames = bool(self.enabled and self.share_frames and self.background
                                        and trainer.world_size == 1)

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
        skipped = batch.get("skipped", []) if isinstance(batch, dict) else []
        for key, reason in skipped:
            self.skipped.setdefault(key, reason)
            done.append(key)
        if self._executor is None:
            return
        for key, _ in skipped:
            self._give_up_shared(self._video_of.get(key))
        if isinstance(batch, dict) and batch.get("video_frames") is not None:
            for key, first, frames in zip(batch["keys"], batch["video_first"], batch["video_frames"]):
                self._share_clip(key, int(first), frames)
        self._queue_complete_videos(done)

    def _share_clip(self, key: str, first: int, frames) -> None:
        """Hand a predicted clip's decoded frames to the writer thread (waiting while it is behind)."""
        video_fname = self._video_of.get(key)
        if video_fname is None or self._shared.get(video_fname, True) is None:
            return
        if video_fname not in self._shared:
            self._shared[video_fname] = self._open_shared(video_fname)
        self._pending = [f for f in self._pending if not f.done()]
        if len(self._pending) >= self.max_queued:
            wait(self._pending, return_when=FIRST_COMPLETED)
        self._pending.append(self._executor.submit(self._add_shared, video_fname, key, first, frames))

    def _open_shared(self, video_fname: str) -> SharedFrameVideo:
        dataset, _, folder, by_video = self._plan
        records = by_video[video_fname]
        first = records[0]
        last = int(first.extra.get("num_frames", max(r.clip_end_frame for r in records) + 1)) - 1
        return SharedFrameVideo(records, self.output_path(folder, first.video_id), 0, last, first.width,
                                first.height, first.fps, crf=self.crf, line_width=self.line_width,
                                font_size=self.font_size, preset=self.preset)

    def _add_shared(self, video_fname: str, key: str, first: int, frames) -> None:
        """(Writer thread.) One clip into its video's MP4; a video that cannot be made so is decoded again."""
        video = self._shared.get(video_fname)
        if video is None:
            return
        try:
            video.add(key, self.predictions.get(key), first, frames)
        except (SharedFramesError, OSError, av.FFmpegError, ValueError):
            self._shared[video_fname] = None
            video.abort()

    def _give_up_shared(self, video_fname: str | None) -> None:
        """(Prediction thread.) A clip of ``video_fname`` could not be decoded: its MP4 is rendered from a
        second decode once its clips are done (the skipped clip captioned as such)."""
        if video_fname is None:
            return
        video = self._shared.get(video_fname)
        self._shared[video_fname] = None
        if video is not None:
            self._executor.submit(video.abort)  # before the video's render, queued later

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
            shared = self._shared.get(video_fname)
            if shared is not None:
                self._futures[video_fname] = self._executor.submit(self._close_shared, video_fname, shared)
                continue
            queued = [f for f in self._futures.values() if not f.done()]
            if len(queued) >= self.max_queued:
                wait(queued, return_when=FIRST_COMPLETED)  # bounded: prediction waits for the writer
            dataset, whole_videos, folder, by_video = self._plan
            clips = self._clips(by_video[video_fname])
            if clips is not None:
                self._futures[video_fname] = self._executor.submit(
                    self._render_or_reason, dataset, video_fname, clips, folder, whole_videos, False)

    def _close_shared(self, video_fname: str, video: SharedFrameVideo) -> Path | str:
        if self._shared.get(video_fname) is not video:  # given up after it was queued: decode again
            dataset, whole_videos, folder, by_video = self._plan
            return self._render_or_reason(dataset, video_fname, self._clips(by_video[video_fname]), folder,
                                          whole_videos, False)
        try:
            return video.close()
        except (SharedFramesError, OSError, av.FFmpegError) as err:
            video.abort()
            return f"annotated video not written: {type(err).__name__}: {err}"

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
            wait(self._pending)
            for video_fname, shared in self._shared.items():
                if shared is not None and video_fname not in self._futures:  # not all its clips came
                    shared.abort()
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
        for shared in self._shared.values():  # an MP4 left unfinished leaves no partial file
            if shared is not None:
                shared.abort()
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
                                              self.line_width, self.font_size, progress, self.preset)
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
