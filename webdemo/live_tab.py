"""The web demo's Live tab: grounded captions of the browser's camera, or of a stream URL, as they happen.

Frames reach the live pipeline of ``grove live`` (:class:`live.session.LiveSession`, built by
:func:`live.command.session_for`), which cuts clips on the 5-fps grid, predicts each clip as its
last grid frame arrives, skips clips by the skip policy and links phrases to entities online:

- **camera**: Gradio's streaming webcam input (``gr.Image(sources=["webcam"], streaming=True)``)
  captures a frame in the browser every 0.2 s (or as fast as the previous one's round trip allows)
  and sends it to :meth:`LiveTab.camera_frame`, which pushes it, with its arrival time, into the
  run's :class:`live.pushed_frames.PushedFrameSource`; that source puts the frames on the grid.
- **stream URL** (rtsp, http(s), HLS, udp, tcp, srt): read on the server by
  :class:`formats.live_source.LiveSource`, reconnecting as ``grove live`` does.

The run predicts with the page's model under the predictor's lock (one model call at a time,
uploads included), on the trainer's device and precision, with long-video mode's linking settings
(the overlay's :class:`longvideo.timeline_writer.LongVideoTimeline`). Each clip's record goes to
``clips.jsonl`` in the run's folder as it comes; when the run ends, ``timeline.json``,
``predictions.json`` and ``live.json`` are written (:func:`live.command.finish`) and offered. The
page asks for the picture (:mod:`webdemo.live_view`), the story and the counters every 0.2 s.
"""
from __future__ import annotations

import html
import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import lightning as L
import numpy as np

from formats.live_source import LiveSource, is_network
from live.command import finish, session_for
from live.pushed_frames import PushedFrameSource
from live.scheduler import POLICIES
from longvideo.timeline_writer import LongVideoTimeline
from webdemo.live_view import (
    STORY_LINES,
    LiveCounters,
    LivePlayback,
    counters_html,
    dropped_line_html,
    picture_html,
    story_html,
    story_line_html,
)
from webdemo.predictor import DemoPredictor, Settings
from webdemo.workspace import Workspace

log = logging.getLogger(__name__)

SOURCES = ("camera", "stream URL")
TICK_S = 0.2  # how often the page asks for the picture: the grid's rate
CAMERA_START_S = 120.0  # a camera run waits this long for its first frame (pressing the webcam's Record)
CAMERA_STALL_S = 10.0  # and ends after this long without one


def message_html(message: str) -> str:
    return f'<div class="grove-error" role="alert">⚠️ {html.escape(message)}</div>'


@dataclass(frozen=True)
class LiveSettings:
    """What the tab lets a person set for a run."""

    source: str
    clip_seconds: float
    policy: str
    objectness_threshold: float

    def checked(self) -> "LiveSettings":
        """The settings, or a ValueError whose message suits the page."""
        if self.source not in SOURCES:
            raise ValueError(f"the source must be one of {', '.join(SOURCES)}, got {self.source!r}")
        if not 0.4 <= float(self.clip_seconds) <= 60.0:
            raise ValueError(f"the clip length must be 0.4-60 s (2 grid frames or more), got {self.clip_seconds}")
        if self.policy not in POLICIES:
            raise ValueError(f"the skip policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if not 0.0 <= float(self.objectness_threshold) <= 1.0:
            raise ValueError(f"the objectness threshold must be between 0 and 1, got {self.objectness_threshold}")
        return self


def linking_writer(predictor: DemoPredictor) -> LongVideoTimeline:
    """Long-video mode's linking settings: the overlay's timeline writer (its defaults without an overlay)."""
    from core.class_paths import instantiate_class_path, resolve_class_path

    for i, spec in enumerate(predictor.long_video.callbacks if predictor.long_video is not None else []):
        if issubclass(resolve_class_path(spec["class_path"], object, "class_path"), LongVideoTimeline):
            return instantiate_class_path(spec, L.Callback, f"the long-video overlay's trainer.callbacks[{i}]")
    return LongVideoTimeline()


class ModelCalls:
    """The page's model for a live run: one call at a time under the predictor's lock (uploads wait for
    it and it for them), at the run's threshold, on the trainer's device and precision (the trainer
    leaves the module on the CPU after each upload's prediction)."""

    def __init__(self, predictor: DemoPredictor, threshold: float):
        self.predictor = predictor
        defaults = predictor.defaults
        self.settings = Settings(float(threshold), defaults.window_mode, None, None, defaults.max_new_tokens)
        strategy = predictor.trainer.strategy
        self.device, self.precision = strategy.root_device, strategy.precision_plugin

    def batch(self, batch):
        from lightning.pytorch.utilities import move_data_to_device

        return move_data_to_device(self.precision.convert_input(batch), self.device)

    def __call__(self, fn, *args):
        predictor = self.predictor
        with predictor.lock:
            predictor._check_stop()
            predictor._set_inference(self.settings, report_objectness=False)
            self.precision.convert_module(predictor.module).to(self.device)
            with self.precision.predict_step_context():
                return fn(*args)


class LiveRun:
    """One live run of the tab: its source, the session on the page's model, its files, and what the
    page shows of it (read by :meth:`view` from the page's thread while the run's thread predicts)."""

    def __init__(self, predictor: DemoPredictor, source: LiveSource | PushedFrameSource, settings: LiveSettings,
                 out_dir: Path, video_id: str):
        self.source, self.settings, self.out_dir = source, settings, Path(out_dir)
        writer = linking_writer(predictor)
        self.session = session_for(predictor.module, predictor.datamodule, source, settings.clip_seconds, None,
                                   settings.policy, writer.text_encoder, writer.appearance, video_id)
        self.session.weights = dict(writer.weights)
        calls = ModelCalls(predictor, settings.objectness_threshold)
        collate, predict, appearance = self.session.collate, self.session.predict, self.session.appearance
        self.session.collate = lambda samples: calls.batch(collate(samples))
        self.session.predict = lambda batch: calls(predict, batch)
        if appearance is not None:
            self.session.appearance = lambda batch, predictions: calls(appearance, batch, predictions)
        self.playback = LivePlayback()
        self.counters = LiveCounters()
        self.lines: deque[str] = deque(maxlen=STORY_LINES)
        self.version = 0  # changes with every clip and with the run's end: the story is redrawn then
        self._dropped_told = 0  # clips dropped that the story has said
        self.error: str | None = None
        self.summary: dict | None = None
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._consume, name="live-tab-run", daemon=True)
        self._thread.start()

    def _consume(self) -> None:
        try:
            with open(self.out_dir / "clips.jsonl", "w") as lines:
                for record, clip in self.session.clips():
                    lines.write(json.dumps(record) + "\n")
                    lines.flush()
                    self._show(record, clip)
        except Exception as err:  # noqa: BLE001  (the page says why the run ended, the log has the traceback)
            log.exception("the live run on %s failed", self.source.source)
            self.error = f"{type(err).__name__}: {err}"
            self.session.stop()
        finally:
            try:
                self.summary = finish(self.session, self.out_dir, render=False)
            except Exception as err:  # noqa: BLE001
                log.exception("the live run's files could not be written")
                self.error = self.error or f"the run's files were not written ({type(err).__name__}: {err})"
            with self._lock:
                self.version += 1
            self.done.set()

    def _show(self, record: dict, clip) -> None:
        ids = {p["entity"] for p in record["phrases"]}
        names = {e.id: e.name for e in self.session.linker.entities if e.id in ids}
        with self._lock:
            if record["dropped"] > self._dropped_told:
                self.lines.append(dropped_line_html(record["dropped"] - self._dropped_told))
                self._dropped_told = record["dropped"]
            self.counters.add(record)
            self.lines.append(story_line_html(record))
            self.playback.add(record, clip.clip.frames, clip.clip.pixels, self.session.video["fps"], names,
                              clip.arrival, time.monotonic())
            self.version += 1

    def stop(self) -> None:
        """End the run: the source stops; the clips already handed over are still predicted."""
        if isinstance(self.source, PushedFrameSource):
            self.source.close()
        self.session.stop()

    def state(self) -> str:
        """Running (with the camera's frames received so far) or ended, and why."""
        if self.done.is_set():
            return f"ended: {self.error or (self.summary or {}).get('ended') or 'stopped'}"
        if not isinstance(self.source, PushedFrameSource):
            return "running"
        got = self.source.received
        return f"running ({got} frames from the camera)" if got else "waiting for the camera (press Record)"

    def view(self, now: float) -> tuple[tuple | None, str, int]:
        """The (clip, position) of the picture at ``now``, the counters, and the story's version."""
        with self._lock:
            self.counters.dropped = len(self.session.queue.dropped)  # as they are pushed out, not at the next clip
            shown = self.playback.at(now)
            return shown, counters_html(self.counters, self.playback.behind_s(now), self.state()), self.version

    def story(self) -> str:
        with self._lock:
            return story_html(list(self.lines))

    def finished(self, now: float) -> bool:
        """Ended, and its last clip shown to the end."""
        with self._lock:
            last = self.playback.clips[-1] if self.playback.clips else None
        return self.done.is_set() and (last is None or last.end <= now)


@dataclass
class _Page:
    """What one browser page was last sent, so that a tick sends only what changed."""

    run: LiveRun
    picture: tuple | None = None
    version: int = -1
    counters: str = ""


class LiveTab:
    """The tab's handlers: one run per browser page (Gradio's session hash); plain functions of their
    inputs, so that tests call them directly."""

    def __init__(self, predictor: DemoPredictor, workspace: Workspace):
        self.predictor, self.workspace = predictor, workspace
        self.pages: dict[str, _Page] = {}
        self._lock = threading.Lock()

    def _page(self, request: gr.Request | None) -> _Page | None:
        with self._lock:
            return self.pages.get(getattr(request, "session_hash", None) or "")

    def start(self, source: str, url: str, clip_seconds, policy: str, threshold, request: gr.Request = None):
        """Start a run (ending the page's run before it): the camera's frames as they come, or the URL.
        Fills the status and the timer, and empties the picture, counters, story and downloads."""
        key = getattr(request, "session_hash", None) or ""
        try:
            settings = LiveSettings(source, float(clip_seconds or 0), policy, float(threshold)).checked()
            if settings.source == "camera":
                frames = PushedFrameSource("camera", stall_timeout=CAMERA_STALL_S, start_timeout=CAMERA_START_S)
                video_id = "camera"
            else:
                url = (url or "").strip()
                if not is_network(url):
                    raise ValueError(f"{url or 'an empty URL'}: give a stream URL (rtsp://, http(s)://, udp://, "
                                     "tcp://, srt://); the server reads it")
                frames = LiveSource(url, stall_timeout=5.0, reconnects=3)
                video_id = Path(url.split("?")[0]).stem or "live"
            self.stop(request)
            run = LiveRun(self.predictor, frames, settings, self.workspace.new_run(), video_id)
        except ValueError as err:
            return message_html(str(err)), *(gr.skip(),) * 6
        except Exception as err:  # noqa: BLE001  (a sentence in the page, the traceback in the log)
            log.exception("the live run could not start")
            return message_html(f"the live run could not start ({type(err).__name__}: {err})"), *(gr.skip(),) * 6
        with self._lock:
            self.pages[key] = _Page(run)
        what = "the camera: press Record on it if it is not streaming yet" if settings.source == "camera" else url
        hidden = gr.update(value=None, visible=False)
        return (f'<p class="grove-live-started">live: {html.escape(what)}</p>', gr.Timer(active=True), "", "", "",
                hidden, hidden)

    def camera_frame(self, frame: np.ndarray | None, request: gr.Request = None):
        """A frame from the browser's camera: into the page's camera run (none running: ignored)."""
        page = self._page(request)
        if frame is None or page is None or not isinstance(page.run.source, PushedFrameSource) \
                or page.run.done.is_set():
            return gr.skip()
        try:
            page.run.source.push(frame)
        except ValueError as err:
            page.run.stop()
            return message_html(str(err))
        return gr.skip()

    def stop(self, request: gr.Request = None):
        page = self._page(request)
        if page is not None:
            page.run.stop()
        return gr.skip()

    def forget(self, request: gr.Request = None) -> None:
        """The page was closed: its run ends."""
        self.stop(request)
        with self._lock:
            self.pages.pop(getattr(request, "session_hash", None) or "", None)

    def tick(self, request: gr.Request = None):
        """What changed since the page's last tick: picture, counters, story, downloads, and the timer
        (off once the run has ended and its last clip has been shown)."""
        page = self._page(request)
        if page is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.Timer(active=False)
        now = time.monotonic()
        run = page.run
        shown, counters, version = run.view(now)
        place = None if shown is None else (shown[0].record["key"], shown[1])
        picture = gr.skip() if place == page.picture or shown is None else picture_html(*shown)
        page.picture = place
        counters_out = gr.skip() if counters == page.counters else counters
        page.counters = counters
        story_out, files = gr.skip(), (gr.skip(), gr.skip())
        if version != page.version:
            page.version = version
            story_out = run.story()
            if run.done.is_set():
                files = tuple(gr.update(value=str(run.out_dir / name), visible=(run.out_dir / name).is_file())
                              for name in ("clips.jsonl", "timeline.json"))
        timer = gr.Timer(active=False) if run.finished(now) else gr.skip()
        return picture, counters_out, story_out, *files, timer


def build_live_tab(predictor: DemoPredictor, workspace: Workspace, demo: gr.Blocks) -> LiveTab:
    """The Live tab's components and events (inside a ``gr.Tab``)."""
    handlers = LiveTab(predictor, workspace)
    defaults = predictor.defaults
    gr.Markdown("Live grounded captions of your camera (allow it, press **Record**, then **Start**) or of a stream "
                "the server reads. Clips are predicted as their last frame arrives; the picture plays each "
                "predicted clip's own frames with their boxes, so it runs about one clip behind.")
    with gr.Row():
        with gr.Column(scale=1):
            camera = gr.Image(sources=["webcam"], streaming=True, type="numpy", label="camera",
                              webcam_options=gr.WebcamOptions(mirror=False), elem_id="grove-live-camera")
            source = gr.Radio(list(SOURCES), value="camera", label="source", elem_id="grove-live-source")
            url = gr.Textbox(label="stream URL (read by the server: rtsp://, http(s)://, udp://, tcp://, srt://)",
                             elem_id="grove-live-url")
            clip_seconds = gr.Number(value=defaults.clip_seconds or 8.0, minimum=0.4, maximum=60.0,
                                     label="clip length in seconds", elem_id="grove-live-clip-seconds")
            policy = gr.Radio(list(POLICIES), value="drop-oldest", label="when the model falls behind",
                              elem_id="grove-live-policy")
            threshold = gr.Slider(0.0, 1.0, value=defaults.objectness_threshold, step=0.01,
                                  label="objectness threshold", elem_id="grove-live-threshold")
            with gr.Row():
                start = gr.Button("Start", variant="primary", elem_id="grove-live-start")
                stop = gr.Button("Stop", elem_id="grove-live-stop")
            status = gr.HTML(elem_id="grove-live-status")
            with gr.Row():
                clips_file = gr.DownloadButton("clips (JSON lines)", visible=False, elem_id="grove-live-clips")
                timeline_file = gr.DownloadButton("timeline (JSON)", visible=False, elem_id="grove-live-timeline")
        with gr.Column(scale=2):
            picture = gr.HTML(elem_id="grove-live-picture")
            counters = gr.HTML(elem_id="grove-live-counters")
            story = gr.HTML(elem_id="grove-live-story")
    timer = gr.Timer(TICK_S, active=False)
    start.click(handlers.start, inputs=[source, url, clip_seconds, policy, threshold],
                outputs=[status, timer, picture, counters, story, clips_file, timeline_file], concurrency_limit=None,
                concurrency_id="live")
    stop.click(handlers.stop, outputs=[status], concurrency_limit=None, concurrency_id="live")
    camera.stream(handlers.camera_frame, inputs=[camera], outputs=[status], stream_every=TICK_S,
                  concurrency_limit=None, concurrency_id="live-camera")
    timer.tick(handlers.tick, outputs=[picture, counters, story, clips_file, timeline_file, timer],
               concurrency_limit=None, concurrency_id="live-view", show_progress="hidden")
    demo.unload(handlers.forget)
    return handlers


__all__ = ["LiveRun", "LiveSettings", "LiveTab", "ModelCalls", "build_live_tab", "linking_writer"]
