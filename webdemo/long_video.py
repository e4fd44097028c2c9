"""Long-video mode on the upload page, set up as ``configs/overlays/long_video.yaml`` stacks on the demo's config.

The overlay file is read, never copied: the server's configs, the overlay and the server's
overrides are parsed together as ``cli.py predict --config ... --config configs/overlays/long_video.yaml``
parses them (:meth:`webdemo.predictor.DemoPredictor`), and :class:`LongVideoSetup` keeps from
that parse the datamodule class with its settings and the callbacks the overlay adds. The page's
loaded model runs them; nothing of the model is built twice. A request streams the upload once
(:class:`longvideo.datamodule.LongVideoDataModule`) and the overlay's
:class:`longvideo.timeline_writer.LongVideoTimeline` writes ``timeline.json`` and the
entity-coloured MP4 into the request's folder.
"""
from __future__ import annotations

from core.config_loader import as_dict

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import lightning as L
import yaml

from longvideo.timeline_writer import LongVideoTimeline

# The overlay the command line documents (configs/overlays/long_video.yaml), next to this package.
LONG_VIDEO_OVERLAY = Path(__file__).resolve().parent.parent / "configs" / "overlays" / "long_video.yaml"


def overlay_callback_paths(overlay: str | Path) -> list[str]:
    """The class paths of the callbacks ``overlay`` adds (``trainer.callbacks+``, or ``trainer.callbacks``)."""
    overlay = Path(overlay)
    try:
        document = yaml.safe_load(overlay.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"{overlay}: not a readable YAML config ({type(err).__name__}: {err})") from None
    if not isinstance(document, dict) or not isinstance(document.get("data"), dict) \
            or not document["data"].get("class_path"):
        raise ValueError(f"{overlay}: data.class_path is missing (a long-video overlay names its datamodule)")
    trainer = document.get("trainer") or {}
    callbacks = trainer.get("callbacks+", trainer.get("callbacks")) or []
    callbacks = callbacks if isinstance(callbacks, list) else [callbacks]
    paths = [c.get("class_path") if isinstance(c, dict) else c for c in callbacks]
    if not all(isinstance(p, str) and p for p in paths):
        raise ValueError(f"{overlay}: trainer.callbacks+: every entry needs a class_path, got {callbacks!r}")
    return paths


def _class(path: str) -> type:
    from core.class_paths import resolve_class_path

    return resolve_class_path(path, object, "class_path")


def _instantiate_callbacks(specs: list[dict]) -> list[L.Callback]:
    """Callbacks from their parsed ``class_path``/``init_args`` (already typed by the config parse)."""
    from core.class_paths import instantiate_class_path

    return [instantiate_class_path(spec, L.Callback, f"trainer.callbacks[{i}]") for i, spec in enumerate(specs)]


@dataclass
class LongVideoSetup:
    """The datamodule and callbacks of long-video mode, from the parse of the stacked configs.

    ``data_args`` are the datamodule's parsed settings (every key, defaults included) without
    ``videos`` and the prompter, which each request gives; ``callbacks`` are the parsed specs of
    the callbacks the overlay adds, instantiated fresh for every request.
    """

    overlay: Path
    data_class: type
    data_args: dict[str, Any]
    callbacks: list[dict] = field(default_factory=list)

    @classmethod
    def from_parsed(cls, config: Mapping[str, Any], overlay: str | Path) -> "LongVideoSetup":
        """From the parsed ``predict`` section of ``--config ... --config overlay``."""
        overlay = Path(overlay)
        wanted = overlay_callback_paths(overlay)
        data = as_dict(config["data"])
        args = {k: v for k, v in as_dict(data.get("init_args")).items() if k not in ("videos", "prompter")}
        parsed = [as_dict(c) for c in (as_dict(config["trainer"]).get("callbacks") or [])]
        callbacks = [c for c in parsed if c.get("class_path") in wanted]
        setup = cls(overlay, _class(data["class_path"]), args, callbacks)
        if not any(issubclass(_class(c["class_path"]), LongVideoTimeline) for c in callbacks):
            raise ValueError(f"{overlay}: trainer.callbacks+ has no longvideo.timeline_writer.LongVideoTimeline, "
                             "which writes the timeline the page shows")
        return setup

    def datamodule(self, video: str | Path, clip_seconds: float | None, prompter) -> L.LightningDataModule:
        """A fresh datamodule streaming ``video``, cut into clips of ``clip_seconds``."""
        return self.data_class(**{**self.data_args, "videos": str(video), "video_clip_seconds": clip_seconds,
                                  "video_clip_stride_seconds": None}, prompter=prompter)

    def make_callbacks(self, out_dir: str | Path) -> list[L.Callback]:
        """The overlay's callbacks, new, writing into ``out_dir``."""
        callbacks = _instantiate_callbacks(self.callbacks)
        for callback in callbacks:
            if hasattr(callback, "output_dir"):
                callback.output_dir = str(out_dir)
        return callbacks


class LongVideoProgress(L.Callback):
    """Seconds of the video captioned so far, from the batches' clip places; ``check()`` may end the run."""

    def __init__(self, duration_s: float, progress: Callable[[int, int, str], None] | None,
                 check: Callable[[], None] = lambda: None):
        self.total = max(1, math.ceil(duration_s))
        self.progress, self.check = progress, check
        self.done_s = 0.0

    def on_predict_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self.check()

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        for event in batch.get("long_video", []) if isinstance(batch, dict) else []:
            if event["kind"] == "clip":
                self.done_s = max(self.done_s, (event["end_frame"] + 1) / float(event["fps"]))
            elif event["kind"] == "gap":
                self.done_s = max(self.done_s, float(event["end_s"]))
        if self.progress is not None:
            self.progress(min(int(self.done_s), self.total), self.total, "seconds of the video captioned")

    def on_predict_epoch_end(self, trainer, pl_module):
        if self.progress is not None:
            self.progress(self.total, self.total, "linking the entities and drawing the timeline video")


@dataclass
class LongVideoResult:
    """A long-video request's result: the video's entry of ``timeline.json`` and the files offered."""

    video_name: str
    timeline: dict
    timeline_path: Path
    predictions_path: Path
    annotated_path: Path | None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def long_video_summary(result: LongVideoResult) -> str:
    """The status line above a timeline."""
    video = result.timeline
    lines = [f"**{result.video_name}** (long-video mode): {video['width']}×{video['height']}, {video['fps']:.2f} fps, "
             f"{video['duration_s']:.1f} s; {len(video['segments'])} segment(s), {len(video['entities'])} "
             f"entit{'y' if len(video['entities']) == 1 else 'ies'}, {len(video['gaps'])} gap(s) in "
             f"{result.seconds:.1f} s."]
    if video["story"].get("summary"):
        lines.append(f"\nsummary: {video['story']['summary']}\n")
    lines += [f"- not decoded {g['start_s']:.2f}-{g['end_s']:.2f} s: {g['reason']}" for g in video["gaps"]]
    lines += [f"- {note}" for note in result.notes]
    return "\n".join(lines)


__all__ = ["LONG_VIDEO_OVERLAY", "LongVideoProgress", "LongVideoResult", "LongVideoSetup", "long_video_summary",
           "overlay_callback_paths"]
