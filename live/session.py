"""One live run: a source's grid frames cut into clips as they arrive, each clip predicted as soon as
its last grid frame is in, its phrases linked online to the entities seen so far, one record per clip.

Two threads, so that decoding never waits for the model (the pattern of torchcodec's and decord's
benchmarks: decode ahead, predict behind): the source thread reads frames, cuts clips
(:class:`longvideo.segments.ClipPlanner`, the long-video mode's planner), preprocesses them
(:class:`models.grove.processing.GroveProcessor`) and hands them over through a
:class:`live.scheduler.ClipQueue`; the caller's thread predicts, links
(:class:`longvideo.linking.OnlineLinker`) and emits. At the end (the stream ended, or :meth:`stop`)
the clips already handed over are predicted, then the timeline is built from the same predictions
and cues in the same order, so its entity ids are the ids emitted.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from formats.frame_grids import annotation_step
from formats.live_source import LiveFrame, LiveGap, LiveSource
from formats.video_files import VideoInfo
from live.pushed_frames import PushedFrameSource
from live.scheduler import ClipQueue
from longvideo.linking import LinkingWeights, OnlineLinker
from longvideo.segments import ClipPlanner, PlannedClip, clip_record
from longvideo.timeline import build_timeline, clip_tubes

# predict(batch) -> {clip key: prediction-format dict}; appearance(batch, predictions) -> {key: (P, D)}
Predict = Callable[[dict[str, Any]], dict[str, dict]]
Appearance = Callable[[dict[str, Any], dict[str, dict]], dict[str, np.ndarray]]
TextVectors = Callable[[list[str]], dict[str, np.ndarray]]


@dataclasses.dataclass
class LiveClip:
    """A clip handed to the model: its place, its preprocessed sample and when its last frame arrived."""

    key: str
    clip: PlannedClip
    place: dict[str, Any]
    sample: dict[str, Any]
    arrival: float


class LiveSession:
    """Args:
        source: the frames (:class:`formats.live_source.LiveSource`, or
            :class:`live.pushed_frames.PushedFrameSource` for frames handed in one at a time).
        processor: the clip preprocessing (``GroveProcessor``); ``collate``: the batch builder.
        predict: the model on a one-clip batch; ``appearance``: the appearance cue (None: not used);
            ``text_vectors``: phrase -> unit embedding for new phrases (None: no meaning cue).
        clip_seconds / stride_seconds: clip length and the step between clip starts (None: tiled).
        policy / capacity: what happens when the model falls behind (:mod:`live.scheduler`).
        weights: the linking (:class:`longvideo.linking.LinkingWeights`; the box cue reaches one grid step).
        video_id: the clips' key prefix.
    """

    def __init__(self, source: LiveSource | PushedFrameSource, processor, collate, predict: Predict,
                 appearance: Appearance | None = None, text_vectors: TextVectors | None = None,
                 clip_seconds: float = 8.0, stride_seconds: float | None = None, policy: str = "drop-oldest",
                 capacity: int = 1, weights: dict[str, Any] | None = None, video_id: str = "live"):
        self.source, self.processor, self.collate = source, processor, collate
        self.predict, self.appearance, self.encode_text = predict, appearance, text_vectors
        self.clip_seconds, self.stride_seconds = float(clip_seconds), stride_seconds
        self.queue = ClipQueue(policy, capacity)
        self.weights = dict(weights or {})
        self.video_id = video_id
        self.video: dict[str, Any] | None = None
        self.places: list[dict[str, Any]] = []
        self.predictions: dict[str, dict] = {}
        self.vectors: dict[str, np.ndarray] = {}
        self.text: dict[str, np.ndarray] = {}
        self.gaps: list[dict[str, Any]] = []
        self.linker: OnlineLinker | None = None
        self.started = time.monotonic()
        self.last_time_s = 0.0
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._finished = threading.Event()  # the run is over: the source thread may end

    # ---------------------------------------------------------------- the source thread
    def _meta(self, fps: float, width: int, height: int) -> dict[str, Any]:
        return {"video_id": self.video_id, "path": self.source.source, "fps": fps, "num_frames": 0,
                "width": width, "height": height}

    def _info(self, last_frame: int) -> VideoInfo:
        v = self.video
        return VideoInfo(Path(v["path"]), v["video_id"], last_frame + 1, v["fps"], v["width"], v["height"])

    def _hand_over(self, clip: PlannedClip, arrival: float) -> None:
        step = annotation_step(self.video["fps"])
        info = self._info(int(clip.frames[-1]) + step - 1)
        record = clip_record(info, clip)
        place = {"key": record.key, "clip": clip.index, "shot": clip.shot, "frames": clip.frames.tolist(),
                 "start_frame": record.clip_start_frame, "end_frame": record.clip_end_frame}
        sample = self.processor.sample(np.stack(clip.pixels), record)
        sample["skipped"] = []
        self.queue.put(LiveClip(record.key, clip, place, sample, arrival))

    def _read(self) -> None:
        planner: ClipPlanner | None = None
        arrival = time.monotonic()
        try:
            for item in self.source.grid_frames():
                if isinstance(item, LiveGap):
                    fps = self.video["fps"] if self.video else 25.0
                    end_s = item.end_s if item.end_s is not None else item.start_s
                    self.gaps.append({"first_frame": int(round(item.start_s * fps)),
                                      "last_frame": int(round(end_s * fps)), "start_s": round(item.start_s, 3),
                                      "end_s": round(end_s, 3), "reason": item.reason})
                    for clip in planner.gap() if planner is not None else []:
                        self._hand_over(clip, arrival)
                    continue
                assert isinstance(item, LiveFrame)
                if planner is None:
                    fps = float(self.source.fps)
                    self.video = self._meta(fps, item.pixels.shape[1], item.pixels.shape[0])
                    grid_fps = fps / annotation_step(fps)
                    clip_frames = max(1, int(round(self.clip_seconds * grid_fps)))
                    stride = None if self.stride_seconds is None else max(1, int(round(self.stride_seconds * grid_fps)))
                    planner = ClipPlanner(clip_frames, stride_frames=stride)
                arrival, self.last_time_s = item.arrival, item.time_s
                for clip in planner.push(item.index, item.pixels):
                    self._hand_over(clip, arrival)
            if planner is not None:
                for clip in planner.close():
                    self._hand_over(clip, arrival)
        except BaseException as err:  # noqa: BLE001  (the run ends with what was predicted, and says why)
            self.error = err
        finally:
            self.queue.close()
            # This thread preprocesses with torch. Once a thread that ran torch's parallel CPU ops
            # exits, GNU OpenMP ran the model thread's ones 20-50x slower (measured on 2 cores: 0.8 s
            # a clip before, 20-45 s for the clips still queued), so it ends with the run.
            self._finished.wait()

    # ---------------------------------------------------------------- the model's thread
    def _weights(self) -> LinkingWeights:
        return LinkingWeights(adjacent_frames=annotation_step(self.video["fps"]), **self.weights)

    def _text(self, phrases: list[str]) -> np.ndarray | None:
        if self.encode_text is None or not phrases:
            return None
        new = [p for p in phrases if p not in self.text]
        if new:
            self.text.update(self.encode_text(new))
        return np.stack([self.text[p] for p in phrases])

    def _emit(self, item: LiveClip, prediction: dict, ids: list[int], model_s: float) -> dict[str, Any]:
        phrases = list(dict.fromkeys(prediction.get("phrases", [])))
        entity = dict(zip(phrases, ids))
        fps = self.video["fps"]
        frames = []
        for entry in prediction.get("frames", []):
            out = {"frame": int(entry["frame"]), "time_s": round(int(entry["frame"]) / fps, 3),
                   "boxes": entry.get("boxes", []), "labels": entry.get("labels", []),
                   "entities": [entity.get(label) for label in entry.get("labels", [])]}
            for extra in ("scores", "masks"):
                if extra in entry:
                    out[extra] = entry[extra]
            frames.append(out)
        now = time.monotonic()
        return {"key": item.key, "clip": item.clip.index, "start_frame": item.place["start_frame"],
                "end_frame": item.place["end_frame"], "start_s": round(item.place["start_frame"] / fps, 3),
                "end_s": round((item.place["end_frame"] + 1) / fps, 3), "caption": prediction.get("caption"),
                "tagged_caption": prediction.get("tagged_caption"),
                "phrases": [{"phrase": p, "entity": e} for p, e in entity.items()], "frames": frames,
                "latency_s": round(now - item.arrival, 3), "model_s": round(model_s, 3),
                "dropped": len(self.queue.dropped),
                "wall_s": round(now - self.started, 3)}

    def _predict(self, item: LiveClip) -> dict[str, Any] | None:
        """The clip predicted, linked and made a record (None: the model gave nothing for it)."""
        began = time.monotonic()
        batch = self.collate([item.sample])
        predictions = self.predict(batch)
        if item.key not in predictions:
            return None
        prediction = predictions[item.key]
        if self.appearance is not None:
            self.vectors.update(self.appearance(batch, {item.key: prediction}))
        if self.linker is None:
            self.linker = OnlineLinker(self._weights())
        phrases = list(dict.fromkeys(prediction.get("phrases", [])))
        app = self.vectors.get(item.key)
        tubes = clip_tubes(item.place["frames"], prediction, self._text(phrases),
                           app if app is not None and len(app) == len(phrases) else None)
        ids = self.linker.add(tubes)
        self.places.append(item.place)
        self.predictions[item.key] = prediction
        return self._emit(item, prediction, ids, time.monotonic() - began)

    def run(self) -> Iterator[dict[str, Any]]:
        """The clips' records, as each one is predicted, until the source ends or :meth:`stop`."""
        for record, _ in self.clips():
            yield record

    def clips(self) -> Iterator[tuple[dict[str, Any], LiveClip]]:
        """:meth:`run`'s records, each with the clip it was predicted on (its grid frames' pixels in
        ``clip.clip.pixels``, for a picture of what was predicted)."""
        self.started = time.monotonic()
        self._finished.clear()
        self._thread = threading.Thread(target=self._read, name="live-source", daemon=True)
        self._thread.start()
        try:
            while (item := self.queue.get()) is not None:
                record = self._predict(item)
                if record is not None:
                    yield record, item
        finally:
            self._finished.set()

    def stop(self) -> None:
        """End the run: the source stops at its next frame; clips already handed over are still predicted."""
        self.source.stop.set()
        self.queue.close()

    # ---------------------------------------------------------------- the end
    def dropped_keys(self) -> list[str]:
        return [item.key for item in self.queue.dropped]

    def timeline(self) -> dict[str, Any] | None:
        """The timeline of what was predicted (None: no frame arrived); its ids are those emitted."""
        if self.video is None:
            return None
        video = {**self.video, "num_frames": max(self.source.last_index + 1, 1)}
        return build_timeline(video, self.places, self.predictions, self.gaps,
                              self.text if self.encode_text is not None else None,
                              self.vectors if self.appearance is not None else None, self._weights())

    def summary(self) -> dict[str, Any]:
        """How the run went: why it ended, clips predicted and dropped, reopenings, gaps."""
        return {"source": self.source.source, "ended": self.source.ended or "stopped",
                "error": None if self.error is None else f"{type(self.error).__name__}: {self.error}",
                "clips": len(self.predictions), "dropped_clips": self.dropped_keys(),
                "reopened": self.source.reopened, "gaps": self.gaps}
