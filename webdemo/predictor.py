"""The predict path of ``cli.py predict``, loaded once and run per upload.

The model, the datamodule class and the trainer come from the same config parsing as the command
line (:class:`core.config_loader.ConfigLoader`: stacked configs, the checkpoint's hyper-parameters under the config),
and the checkpoint's weights are read once, as tensors only. Each request then runs
``trainer.predict`` on one video with a fresh datamodule and the project's own writers
(:class:`callbacks.PredictionWriter`, :class:`callbacks.AnnotatedVideoWriter`) pointed at the
request's folder, so the predictions file is the one ``cli.py predict`` writes for that video with
the same settings: the trainer's ``predict_step`` is :func:`models.grove.processing.predict_clips`,
the one function that runs GROVE on clips and formats its predictions. Requests run one at a time
(a lock), since the model's inference settings are set per request. Long-video mode
(:meth:`DemoPredictor.predict_long`) runs the same model with the datamodule and callbacks of
``configs/overlays/long_video.yaml`` stacked on the configs (:mod:`webdemo.long_video`).
"""
from __future__ import annotations

from core.config_loader import DATA_PATH_SUFFIXES, ConfigLoader, as_dict
from core.json_file import read_json
from core.weights import load_state_dict_file

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import lightning as L

from callbacks.annotated_video_writer import AnnotatedVideoWriter
from callbacks.prediction_writer import PredictionWriter
from longvideo.timeline import read_timeline
from longvideo.timeline_writer import LongVideoTimeline
from models.grove.windows import WINDOW_MODES
from webdemo.long_video import LONG_VIDEO_OVERLAY, LongVideoProgress, LongVideoResult, LongVideoSetup
from webdemo.results import DemoResult, assemble_clips

log = logging.getLogger(__name__)

# progress(done, total, what): clips predicted so far, or a stage name with done == total
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Settings:
    """What the page lets a person change; the defaults come from the config and the checkpoint."""

    objectness_threshold: float
    window_mode: str
    clip_seconds: float | None
    stride_seconds: float | None
    max_new_tokens: int

    def checked(self) -> "Settings":
        """The settings, or a ValueError whose message suits the page."""
        if not 0.0 <= float(self.objectness_threshold) <= 1.0:
            raise ValueError(f"the objectness threshold must be between 0 and 1, got {self.objectness_threshold}")
        if self.window_mode not in WINDOW_MODES:
            raise ValueError(f"the window mode must be one of {', '.join(WINDOW_MODES)}, got {self.window_mode!r}")
        if self.clip_seconds is not None and self.clip_seconds <= 0:
            raise ValueError("the clip length must be positive (or empty for the whole video as one clip)")
        if self.stride_seconds is not None and (self.stride_seconds <= 0 or self.clip_seconds is None
                                                or self.stride_seconds > self.clip_seconds):
            raise ValueError("the clip stride must be positive and at most the clip length, or empty "
                             "(clips then follow each other)")
        if int(self.max_new_tokens) < 1:
            raise ValueError(f"max new tokens must be at least 1, got {self.max_new_tokens}")
        return self


class _LoadingCLI(ConfigLoader):
    """The command line's parsing and instantiation for ``predict``, without running it.

    The demo predicts on uploads only, so the config's annotation files and video roots (the
    dataset it was trained or evaluated on) are not needed and not required to exist.
    """

    def before_instantiate_classes(self) -> None:
        config = self.config[self.config.subcommand]
        for key in as_dict(config.get("data", {}).get("init_args")):
            if key.endswith(DATA_PATH_SUFFIXES):
                config[f"data.init_args.{key}"] = None
        super().before_instantiate_classes()

    def _run_subcommand(self, subcommand: str) -> None:
        return None


class _ParseOnly(_LoadingCLI):
    """The same parsing, nothing built: ``.parsed`` is the ``predict`` section of the config."""

    def instantiate_classes(self) -> None:
        self.parsed = self.config[self.config.subcommand]


class ServerStopping(RuntimeError):
    """The server is shutting down: the prediction in flight ends at its next batch."""


class _Collector(L.Callback):
    """Per-clip objectness and skipped clips of one request, and its progress; ends the prediction
    when the server stops."""

    def __init__(self, total: int, progress: Progress | None, stopping: threading.Event | None = None):
        self.total, self.progress = total, progress
        self.stopping = stopping
        self.done = 0
        self.objectness: dict[str, dict] = {}
        self.skipped: dict[str, str] = {}

    def on_predict_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        if self.stopping is not None and self.stopping.is_set():
            raise ServerStopping("the server is stopping; this prediction was not finished")

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if isinstance(outputs, dict):
            self.objectness.update(outputs.get("objectness") or {})
        for key, reason in batch.get("skipped", []):
            self.skipped.setdefault(key, reason)
        self.done += len(batch["keys"]) + len(batch.get("skipped", []))
        if self.progress is not None:
            self.progress(min(self.done, self.total), self.total, "clips predicted")

    def on_predict_epoch_end(self, trainer, pl_module):
        if self.progress is not None:
            self.progress(self.total, self.total, "drawing the annotated video")


class DemoPredictor:
    """A GROVE checkpoint ready to predict on uploads.

    Args:
        configs: the config files the checkpoint was trained with (stacked in order).
        ckpt_path: a checkpoint of ``cli.py fit`` (or a converted official one), or an exported folder.
        placeholder_video: any readable video; ``predict`` parsing checks that ``data.videos`` exists.
        overrides: more command-line overrides (``--model.init_args....=...``).
        long_video_config: the overlay of long-video mode, stacked after ``configs`` (None: no
            long-video mode); if the stack does not parse, the mode is off and ``long_video_error`` says why.
        precision: the trainer's precision, e.g. ``bf16-true`` or ``16-true`` (every weight in 16 bits,
            half the GPU memory; docs/precision.md); None: the config's. Long-video mode runs with it too.
    """

    def __init__(self, configs: Sequence[str | Path], ckpt_path: str | Path, placeholder_video: str | Path,
                 overrides: Sequence[str] = (), long_video_config: str | Path | None = LONG_VIDEO_OVERLAY,
                 precision: str | None = None):
        stacked = [arg for config in configs for arg in ("--config", str(config))]
        rest = [f"--ckpt_path={ckpt_path}", f"--data.init_args.videos={placeholder_video}",
                # decoding in the server process: no worker processes forked from a threaded server
                "--data.init_args.num_workers=0", "--trainer.logger=false", *overrides,
                *([f"--trainer.precision={precision}"] if precision is not None else [])]
        cli = _LoadingCLI(subclass_mode_model=True, subclass_mode_data=True, save_config_callback=None,
                          parser_kwargs={"parser_mode": "omegaconf"}, args=["predict", *stacked, *rest], run=True)
        self.module, self.trainer, self.datamodule = cli.model, cli.trainer, cli.datamodule
        if not hasattr(self.module, "report_objectness") or not hasattr(self.datamodule, "make_video_dataset"):
            raise ValueError(f"{', '.join(map(str, configs))}: the web demo needs a GROVE model "
                             "(lightning_modules.GroveModule) and a grounded-video datamodule")
        if not Path(ckpt_path).is_dir():  # an exported folder's weights were loaded with the module
            state = load_state_dict_file(ckpt_path, "--ckpt-path")
            self.module.load_state_dict(state, strict=self.module.strict_loading)
        self.module.eval()
        hp = self.datamodule.hparams
        self.defaults = Settings(self.module.objectness_threshold, self.module.window_mode, hp.video_clip_seconds,
                                 hp.video_clip_stride_seconds, self.module.max_new_tokens)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.long_video: LongVideoSetup | None = None
        self.long_video_error = "the server was started without a long-video overlay"
        if long_video_config is not None:
            try:  # the command line's parse of --config ... --config OVERLAY, nothing built twice
                parsed = _ParseOnly(subclass_mode_model=True, subclass_mode_data=True, save_config_callback=None,
                                    parser_kwargs={"parser_mode": "omegaconf", "exit_on_error": False},
                                    args=["predict", *stacked, "--config", str(long_video_config), *rest],
                                    run=True).parsed
                self.long_video = LongVideoSetup.from_parsed(parsed, long_video_config)
            except Exception as err:  # noqa: BLE001  (the per-clip page still serves)
                reason = " ".join(str(err).split())
                self.long_video_error = f"{long_video_config} does not stack on the config: {reason}"
                log.warning("long-video mode is off: %s", self.long_video_error)

    @property
    def lock(self) -> threading.Lock:
        """Held while the model runs: one request (a prediction or a query) at a time."""
        return self._lock

    def stop(self, timeout: float) -> bool:
        """Refuse new predictions, end the one in flight at its next batch and wait for it (at most
        ``timeout`` seconds); whether none is left running. Exiting while a prediction runs in
        native code aborts the process (SIGABRT) instead of stopping it."""
        self._stopping.set()
        if not self._lock.acquire(timeout=timeout):
            return False
        self._lock.release()
        return True

    def _check_stop(self) -> None:
        if self._stopping.is_set():
            raise ServerStopping("the server is stopping; this prediction was not finished")

    def _set_inference(self, settings: Settings, report_objectness: bool) -> None:
        module = self.module
        module.objectness_threshold = float(settings.objectness_threshold)
        module.window_mode = settings.window_mode
        module.max_new_tokens = int(settings.max_new_tokens)
        module.report_objectness = report_objectness

    def _datamodule(self, video: Path, settings: Settings):
        """A fresh datamodule of the config's class and settings, predicting on ``video``."""
        hp = {key: value for key, value in self.datamodule.hparams.items() if not key.startswith("_")}
        hp.update(videos=str(video), video_clip_seconds=settings.clip_seconds,
                  video_clip_stride_seconds=settings.stride_seconds)
        return type(self.datamodule)(**hp, prompter=self.datamodule.prompter)

    def _writers(self, out_dir: Path) -> list[L.Callback]:
        """The config's prediction writers (or new ones), pointed at ``out_dir``."""
        found = {}
        for callback in self.trainer.callbacks:
            if isinstance(callback, (PredictionWriter, AnnotatedVideoWriter)):
                found.setdefault(type(callback), callback)
        writers = [found.get(PredictionWriter) or PredictionWriter(),
                   found.get(AnnotatedVideoWriter) or AnnotatedVideoWriter()]
        for writer in writers:
            writer.output_dir = str(out_dir)
        return writers

    def predict(self, video: str | Path, settings: Settings, out_dir: str | Path,
                progress: Progress | None = None, video_name: str | None = None) -> DemoResult:
        """Predict on one (already checked) video; the files go to ``out_dir``."""
        settings = settings.checked()
        video, out_dir = Path(video), Path(out_dir)
        with self._lock:
            if self._stopping.is_set():
                raise ServerStopping("the server is stopping; no new predictions")
            started = time.perf_counter()
            datamodule = self._datamodule(video, settings)
            datamodule.setup("predict")
            dataset = datamodule.datasets["predict"]
            if dataset.unreadable:
                raise ValueError(f"the video could not be read: {dataset.unreadable[0][1]}")
            module = self.module
            self._set_inference(settings, report_objectness=True)
            writers = self._writers(out_dir)
            collector = _Collector(len(dataset.records), progress, self._stopping)
            added = [w for w in writers if w not in self.trainer.callbacks]
            self.trainer.callbacks[:0] = [collector]  # first: says "drawing" before the writers draw
            self.trainer.callbacks.extend(added)
            try:  # GroveModule.predict_step -> models.grove.processing.predict_clips, per batch of clips
                self.trainer.predict(module, datamodule=datamodule, return_predictions=False)
            finally:
                module.report_objectness = False
                for callback in [collector, *added]:
                    self.trainer.callbacks.remove(callback)
            prediction_writer, video_writer = writers
            predictions_path = prediction_writer.last_paths["predict"]
            predictions = read_json(predictions_path)
            info = dataset.videos[0]
            clips = assemble_clips(dataset.records, predictions, collector.objectness, collector.skipped)
            return DemoResult(
                video_name=video_name or video.name, video_path=str(video), fps=info.fps, width=info.width,
                height=info.height, num_frames=info.num_frames, threshold=float(settings.objectness_threshold),
                clips=clips, predictions_path=predictions_path,
                annotated_path=video_writer.written[-1] if video_writer.written else None,
                seconds=time.perf_counter() - started,
                notes=[f"annotated video not written: {r}" for r in video_writer.skipped.values()
                       if "annotated video" in r])

    def predict_long(self, video: str | Path, settings: Settings, out_dir: str | Path,
                     progress: Progress | None = None, video_name: str | None = None) -> LongVideoResult:
        """Long-video mode on one (already checked) video: ``predictions_predict.json``, ``timeline.json``
        and ``annotated/<video>.mp4`` in ``out_dir``, as ``cli.py predict`` with the overlay writes them."""
        settings = settings.checked()
        if self.long_video is None:
            raise ValueError(f"long-video mode is not available on this server: {self.long_video_error}")
        if settings.stride_seconds is not None:
            raise ValueError("long-video mode cuts the video into clips that follow each other: "
                             "set the clip stride to 0")
        video, out_dir = Path(video), Path(out_dir)
        with self._lock:
            if self._stopping.is_set():
                raise ServerStopping("the server is stopping; no new predictions")
            started = time.perf_counter()
            datamodule = self.long_video.datamodule(video, settings.clip_seconds, self.datamodule.prompter)
            datamodule.setup("predict")
            dataset = datamodule.datasets["predict"]
            if dataset.unreadable:
                raise ValueError(f"the video could not be read: {dataset.unreadable[0][1]}")
            info = dataset.videos[0]
            self._set_inference(settings, report_objectness=False)
            prediction_writer = self._writers(out_dir)[0]
            timeline_writers = self.long_video.make_callbacks(out_dir)
            watcher = LongVideoProgress(info.num_frames / info.fps, progress, self._check_stop)
            added = [watcher, *([] if prediction_writer in self.trainer.callbacks else [prediction_writer]),
                     *timeline_writers]
            self.trainer.callbacks.extend(added)
            try:
                self.trainer.predict(self.module, datamodule=datamodule, return_predictions=False)
            finally:
                for callback in added:
                    self.trainer.callbacks.remove(callback)
            timeline = next(c for c in timeline_writers if isinstance(c, LongVideoTimeline))
            document = read_timeline(timeline.path)
            entry = next((v for v in document["videos"] if v["video_id"] == info.video_id), None)
            if entry is None:
                raise ValueError(f"the long-video run wrote no timeline for '{video_name or video.name}': "
                                 "none of its clips could be decoded")
            notes = [] if timeline.videos_written or not timeline.render else \
                ["the entity-coloured video was not written (the server log says why)"]
            return LongVideoResult(video_name=video_name or video.name, timeline=entry, timeline_path=timeline.path,
                                   predictions_path=prediction_writer.last_paths["predict"],
                                   annotated_path=timeline.videos_written[-1] if timeline.videos_written else None,
                                   seconds=time.perf_counter() - started, notes=notes)
