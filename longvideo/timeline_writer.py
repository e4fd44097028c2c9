"""Writes ``timeline.json`` (and the entity-coloured MP4s) at the end of a long-video ``predict``.

Added by ``configs/overlays/long_video.yaml``. While the clips stream through the model it keeps, per
clip, its place (from the batches' ``long_video`` entries), its prediction, and one appearance
vector per phrase: the grounding encoder's features pooled inside the predicted boxes
(:mod:`longvideo.appearance`), computed on at most ``appearance_frames`` frames with boxes per
clip (the model's own pass encodes frames window by window and keeps no features, so they are
encoded again: 4 of a clip's 40 grid frames add a tenth of the grounding encoder's cost).
At the end it embeds the phrases with the project's sentence
encoder, links them into entities (:mod:`longvideo.linking`, or the annotation pipeline's
language steps with ``language_config``), and writes the timeline (:mod:`longvideo.timeline`).
The per-clip ``predictions_predict.json`` is written as without this callback.
"""
from __future__ import annotations

from core.output_files import write_json_atomic
from core.output_folder import output_file

from collections import defaultdict
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch

from callbacks.prediction_writer import RunFolderHold, run_dir
from formats.frame_grids import annotation_step
from longvideo.appearance import phrase_appearance
from longvideo.linking import LinkingWeights


class LongVideoTimeline(L.Callback):
    """Args:
        output_dir: where ``timeline.json`` goes (default: the run folder).
        text_encoder: the meaning cue's encoder (``minilm``, ``exact``, a local HF folder; None: no
            meaning cue).
        appearance: use the appearance cue; ``appearance_frames``: frames per clip it is pooled on.
        box_weight / text_weight / appearance_weight / min_score / min_box_iou / full_box_iou: the linking
            (:class:`longvideo.linking.LinkingWeights`).
        language_config: an annotation config file: link by its Stages 2-3 on the clip captions
            (and take its Stage 2 caption as the story's summary) instead of by the cues.
        render: write ``<subdir>/<video_id>.mp4`` with one colour per entity.
    """

    def __init__(self, output_dir: str | None = None, text_encoder: str | None = "minilm", appearance: bool = True,
                 appearance_frames: int = 4, box_weight: float = 2.0, text_weight: float = 1.0,
                 appearance_weight: float = 1.0,
                 min_score: float = 0.6, min_box_iou: float | None = 0.01,
                 full_box_iou: float = 0.5, language_config: str | None = None,
                 render: bool = True, subdir: str = "annotated", crf: int = 23):
        self.output_dir = output_dir
        self.text_encoder = text_encoder
        self.appearance = appearance
        self.appearance_frames = int(appearance_frames)
        self.weights = dict(box=box_weight, text=text_weight, appearance=appearance_weight, min_score=min_score,
                            min_box_iou=min_box_iou, full_box_iou=full_box_iou)
        self.language_config = language_config
        self.render = render
        self.subdir = subdir
        self.crf = crf
        self.path: Path | None = None
        self.videos_written: list[Path] = []
        self._hold = RunFolderHold()
        self._reset()

    def folder(self, trainer) -> Path:
        """Where ``timeline.json`` goes: ``output_dir``, else the run folder."""
        return Path(self.output_dir) if self.output_dir else run_dir(trainer)

    def setup(self, trainer, pl_module, stage):
        if stage == "predict":  # a second run into this folder is refused before it predicts anything
            self._hold.take(trainer, self.folder(trainer), "cli.py predict (long-video timeline)")

    def teardown(self, trainer, pl_module, stage):
        self._hold.release()

    def on_exception(self, trainer, pl_module, exception):
        self._hold.release()

    def _reset(self) -> None:
        self.videos: dict[str, dict] = {}
        self.clips: dict[str, list[dict]] = defaultdict(list)
        self.gaps: dict[str, list[dict]] = defaultdict(list)
        self.problems: dict[str, list[str]] = defaultdict(list)
        self.predictions: dict[str, dict] = {}
        self.vectors: dict[str, np.ndarray] = {}

    # ---------------------------------------------------------------- collecting
    def on_predict_epoch_start(self, trainer, pl_module):
        self._reset()
        self.videos_written = []

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if not isinstance(batch, dict):
            return
        for event in batch.get("long_video", []):
            kind = event["kind"]
            if kind in ("clip", "gap", "end"):
                self.videos.setdefault(event["video_id"], {k: event[k] for k in
                                                           ("video_id", "path", "fps", "num_frames", "width",
                                                            "height")})
            if kind == "clip":
                self.clips[event["video_id"]].append(event)
                self.videos[event["video_id"]]["segmenter"] = event["segmenter"]
            elif kind == "gap":
                self.gaps[event["video_id"]].append(event)
            elif kind == "unreadable":
                self.problems[event["path"]].append(event["reason"])
        predictions = outputs.get("predictions", {}) if isinstance(outputs, dict) else {}
        self.predictions.update(predictions)
        encode = getattr(getattr(pl_module, "model", None), "encode_grounding", None)
        if self.appearance and encode is not None and predictions:
            self.vectors.update(self.appearance_vectors(encode, batch, predictions))

    @torch.no_grad()
    def appearance_vectors(self, encode, batch, predictions) -> dict[str, np.ndarray]:
        """Per predicted clip of the batch, ``(P, C)`` appearance vectors (one grounding-encoder call)."""
        picks = []  # (clip row in the batch, frame rows)
        for i, key in enumerate(batch["keys"]):
            if key not in predictions:
                continue
            frame_indices = batch["frame_indices"][i].cpu().numpy()
            with_boxes = {int(f["frame"]) for f in predictions[key]["frames"] if f.get("boxes")}
            rows = np.flatnonzero(np.isin(frame_indices, list(with_boxes)))
            if len(rows) > self.appearance_frames:
                rows = rows[np.linspace(0, len(rows) - 1, self.appearance_frames).round().astype(int)]
            picks.append((i, key, rows))
        if not any(len(r) for _, _, r in picks):
            return {}
        clip_rows = torch.as_tensor(np.concatenate([np.full(len(r), i) for i, _, r in picks]))
        frame_rows = torch.as_tensor(np.concatenate([r for _, _, r in picks]))
        frames = batch["grounding_frames"][clip_rows, frame_rows]
        features = encode(frames.unsqueeze(0))[0].float().cpu()  # (N, C, h, w)
        out, start = {}, 0
        for i, key, rows in picks:
            width, height = (int(v) for v in batch["size"][i].tolist())
            frame_indices = batch["frame_indices"][i].cpu().numpy()[rows]
            out[key] = phrase_appearance(features[start:start + len(rows)], frame_indices, predictions[key],
                                         width, height)
            start += len(rows)
        return out

    # ---------------------------------------------------------------- writing
    def on_predict_epoch_end(self, trainer, pl_module):
        if not trainer.is_global_zero:
            return
        document = self.build()
        folder = self.folder(trainer)
        self.path = write_json_atomic(output_file(folder, "timeline.json"), document, indent=None)
        lines = [f"Long-video timeline: {self.path} ({len(document['videos'])} video(s))"]
        for video in document["videos"]:
            lines.append(f"  {video['video_id']}: {len(video['segments'])} segment(s), "
                         f"{len(video['entities'])} entit(y/ies), {len(video['gaps'])} gap(s)")
            for gap in video["gaps"]:
                lines.append(f"    not decoded {gap['start_s']:.2f}-{gap['end_s']:.2f} s: {gap['reason']}")
        if self.render:
            from core.safe_names import safe_file_name

            from longvideo.render import render_timeline_video

            for video in document["videos"]:
                if not video["segments"]:
                    continue
                try:
                    out = output_file(folder, Path(self.subdir) / safe_file_name(video["video_id"], ".mp4"))
                    self.videos_written.append(render_timeline_video(video, out, crf=self.crf))
                    lines.append(f"  entity-coloured video: {out}")
                except Exception as err:  # the timeline stands without its video
                    lines.append(f"  {video['video_id']}: annotated video not written: {type(err).__name__}: {err}")
        for path, reasons in self.problems.items():
            lines.append(f"  not read: {path}: {'; '.join(reasons)}")
        print("\n".join(lines))

    def text_vectors(self) -> dict[str, np.ndarray] | None:
        if self.text_encoder is None:
            return None
        from longvideo.timeline import text_vectors

        return text_vectors(self.predictions, self.text_encoder)

    def build(self) -> dict[str, Any]:
        from longvideo.timeline import build_timeline, timeline_document

        text = self.text_vectors()
        linker = None
        if self.language_config is not None:
            from longvideo.language import LanguageLinker

            linker = LanguageLinker(self.language_config)
        timelines = []
        for video_id, video in self.videos.items():
            clips = sorted(self.clips[video_id], key=lambda c: c["start_frame"])
            step = annotation_step(video["fps"])
            weights = LinkingWeights(adjacent_frames=step, **self.weights)
            names = summary = None
            if linker is not None:
                segments = [{"key": c["key"], "start_frame": c["start_frame"],
                             "caption": self.predictions[c["key"]].get("caption"),
                             "phrases": list(dict.fromkeys(self.predictions[c["key"]].get("phrases", [])))}
                            for c in clips if c["key"] in self.predictions]
                summary, names, problem = linker.story(video_id, float(video["fps"]), segments)
                if problem:
                    print(f"{video_id}: language linking: {problem}")
            timelines.append(build_timeline(video, clips, self.predictions, self.gaps[video_id], text,
                                            self.vectors if self.appearance else None, weights, names, summary,
                                            video.get("segmenter", "grid")))
        return timeline_document(timelines)
