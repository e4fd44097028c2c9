"""The one path from a clip to predictions: :class:`GroveProcessor` and :func:`predict_clips`.

Decoded frames and a clip record become model inputs (:meth:`GroveProcessor.sample`,
:meth:`GroveProcessor.preprocess`: :mod:`models.grove.clip_processing`); :func:`predict_clips` runs
GROVE on a batch of clips (:meth:`models.grove.modeling.Grove.predict`: its windows and text
protocol) and turns the outputs into the predictions format (:mod:`models.grove.postprocessing`).
``cli.py predict`` (``GroveModule.predict_step``), the web demo (through it), long-video mode
(:meth:`GroveProcessor.sample` on streamed frames) and :meth:`GroveProcessor.generate` all go
through these, so a clip gets the same predictions whichever way it comes in.

:meth:`GroveProcessor.generate` is the official inference API (``grove_transformers.GroveProcessor.generate``).
A user of the released package changes an import and a folder name::

    from models.grove import Grove, GroveProcessor      # was: GroveForCausalLM

    model = Grove.from_pretrained("exported/grove")     # an exported folder or a hub repository id
    processor = GroveProcessor.from_pretrained("exported/grove")
    out = processor.generate(model, "video.mp4", token_embeddings=None, device="cpu")

``generate`` takes the released arguments and returns the released keys (``text``, ``text_tagged``,
``phrases``, ``center_frame_indices``, ``frame_indices``, ``bboxes``, ``labels_per_frame``,
``probs_temp_objectness``, ``original_size``), computed exactly as ``cli.py predict`` computes a
clip: one decode of the clip's 5-fps grid, the same preprocessing, windows, text protocol, box
conversion and threshold. The deliberate differences from the released package are listed in
docs/official_grove.md ("The inference API").
"""
from __future__ import annotations

from core.weights.pretrained_folder import CONFIG_FILE, PREPROCESSOR_FILE, resolve_folder

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from formats.records import GroundedRecord
from formats.unannotated_records import video_clip_record as clip_record  # the one builder of unannotated clips
from formats.video_files import open_video
from models.grove.clip_processing import GroundedCollate, clip_sample, evaluation_positions
from models.grove.postprocessing import format_clip_predictions, objectness_by_clip
from models.grove.prompting import RELEASED_TEXT_PROTOCOLS, package_tagged_text
from models.grove.query_grounding import GroundingQuery, parse_queries, query_samples
from models.grove.windows import batch_windows

DEFAULT_PREPROCESSING = {"num_frames": 8, "global_image_size": 336, "global_resize": "squash",
                         "grounding_image_size": 512, "grounding_resize": "float"}
DEFAULT_INFERENCE = {"objectness_threshold": 0.5, "objectness_strict": False, "window_mode": "interleaved",
                     "text_protocol": "project"}


@torch.no_grad()
def predict_clips(model, batch: dict[str, Any], objectness_threshold: float, objectness_strict: bool = False,
                  window_mode: str = "interleaved", text_protocol: str = "project", max_new_tokens: int = 64,
                  teacher_forced: bool = False, report_objectness: bool = False, masker=None,
                  video_root: str | Path = "/", windows_per_pass: int | None = None) -> dict[str, dict]:
    """Run ``model`` (a :class:`models.grove.modeling.Grove`) on a batch of whole clips and format its predictions.

    Returns ``{"predictions": {key: prediction-format dict}}``; with ``report_objectness``, also
    ``"objectness"``: every phrase's objectness on every frame, whatever the threshold keeps
    (:func:`models.grove.postprocessing.objectness_by_clip`). ``teacher_forced`` grounds the batch's
    own tagged captions instead of generating (VidSTG). The batch's tensors must be on the model's device.
    With a ``masker`` (:mod:`models.masks`) every kept box also gets a mask, computed on the clip's frames
    at the video's size: the batch's ``source_frames`` (one ``(N, H, W, 3)`` array per clip) when it
    carries them, else read again from ``video_root / video_fname``, one clip at a time.
    ``windows_per_pass``: windows through the model at once (:meth:`models.grove.modeling.Grove.predict`;
    default the batch's clip count).
    """
    captions = list(batch["tagged_captions"]) if teacher_forced else None
    if masker is not None:
        masker.follow(batch["global_frames"].device)
    out = model.predict(batch["global_frames"], batch["grounding_frames"], batch["frame_mask"],
                        window=batch["caption_positions"].shape[1], window_mode=window_mode,
                        caption_positions=batch["caption_positions"], captions=captions,
                        max_new_tokens=max_new_tokens, text_protocol=text_protocol,
                        windows_per_pass=windows_per_pass)
    result = {"predictions": format_clip_predictions(batch, out.tagged_captions, out.phrases, out.boxes, out.scores,
                                                     out.captions, float(objectness_threshold),
                                                     bool(objectness_strict), model.objectness_head is not None,
                                                     masker, _clip_frames(batch, video_root))}
    if report_objectness:
        result["objectness"] = objectness_by_clip(batch, out.phrases, out.scores)
    if out.answers is not None:
        result["answers"] = dict(zip(batch["keys"], out.answers))
    return result


def processor_text_protocol(inference: dict) -> str:
    """The text protocol :meth:`GroveProcessor.generate` uses unless told: ``processor_text_protocol``
    of the inference settings when given; the official inference package's (``package``) for a model
    that grounds with a released protocol, since ``generate`` is that package's API; else the model's own."""
    chosen = inference.get("processor_text_protocol")
    if chosen is not None:
        return chosen
    protocol = inference.get("text_protocol", DEFAULT_INFERENCE["text_protocol"])
    return "package" if protocol in RELEASED_TEXT_PROTOCOLS else protocol


def _clip_frames(batch: dict[str, Any], video_root: str | Path):
    """Clip ``i``'s real frames at its record's frame size, from the batch or read again (for a masker)."""
    from models.masks.clip_frames import fit_frames, read_clip_frames

    def frames_of(i: int) -> np.ndarray:
        width, height = (int(v) for v in batch["size"][i].tolist())
        if batch.get("source_frames") is not None:
            return fit_frames(np.asarray(batch["source_frames"][i]), width, height)
        indices = batch["frame_indices"][i][batch["frame_mask"][i]].tolist()
        return read_clip_frames(video_root, batch["video_fnames"][i], indices, width, height)

    return frames_of


class GroveProcessor:
    """Preprocessing and inference settings of a GROVE, and ``generate`` (see the module docstring).

    Args:
        preprocessing: frames per window and image sizes / resize modes (preprocessor_config.json).
        inference: objectness threshold and strictness, window mode, text protocol (config.json).
        prompt: chat template and target text the model was trained with (config.json).
        text_protocol: how :meth:`generate` decodes the caption for the later windows and reports
            ``text_tagged`` (``project``, ``official``: the training repository's inference scripts,
            ``package``: the official inference package); default :func:`processor_text_protocol`.
        masker: a box masker (:mod:`models.masks`): ``generate`` then also returns ``masks``, one COCO
            RLE per box of ``bboxes`` (docs/inputs_and_outputs.md, "Masks").
    """

    def __init__(self, preprocessing: dict | None = None, inference: dict | None = None, prompt: dict | None = None,
                 text_protocol: str | None = None, masker=None):
        self.masker = masker
        self.preprocessing = {**DEFAULT_PREPROCESSING, **{k: v for k, v in (preprocessing or {}).items()
                                                          if k in DEFAULT_PREPROCESSING}}
        self.inference = {**DEFAULT_INFERENCE, **(inference or {})}
        self.inference["text_protocol"] = text_protocol or processor_text_protocol(self.inference)
        if self.inference["text_protocol"] not in ("project", *RELEASED_TEXT_PROTOCOLS):
            raise ValueError(f"GroveProcessor text_protocol must be one of {('project', *RELEASED_TEXT_PROTOCOLS)}, "
                             f"got {self.inference['text_protocol']!r}")
        self.prompt = dict(prompt or {})

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, text_protocol: str | None = None,
                        **hub_kwargs: Any) -> "GroveProcessor":
        """The processor of an exported folder (or hub repository id, from the local cache when offline);
        ``text_protocol`` as in the class."""
        folder = resolve_folder(name_or_path, **hub_kwargs)
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        preprocessing = config.get("preprocessing") or {}
        if (folder / PREPROCESSOR_FILE).is_file():
            preprocessing = json.loads((folder / PREPROCESSOR_FILE).read_text(encoding="utf-8"))
        return cls(preprocessing, config.get("inference"), config.get("prompt"), text_protocol)

    # -- frames -> model inputs --------------------------------------------------------------------
    def sample(self, frames: np.ndarray, record: GroundedRecord) -> dict[str, Any]:
        """One clip's evaluation sample from its decoded frames: ``frames (N, H, W, 3)`` uint8 are the
        record's N grid frames (``record.frame_indices``), all of which get predictions."""
        p = self.preprocessing
        positions, caption_positions = evaluation_positions(len(record.frame_indices), p["num_frames"])
        return clip_sample(record, frames, positions, caption_positions, p["global_image_size"], p["global_resize"],
                           p["grounding_image_size"], p["grounding_resize"])

    def preprocess(self, frames: np.ndarray, record: GroundedRecord, prompter=None) -> dict[str, Any]:
        """A batch of one clip (:meth:`sample`), its captions tokenised with ``prompter`` (the model's)."""
        return GroundedCollate(prompter, train=False)([self.sample(frames, record)])

    # -- model outputs -> predictions ----------------------------------------------------------------
    def postprocess(self, batch: dict[str, Any], outputs, has_objectness: bool = True,
                    threshold: float | None = None) -> dict[str, dict]:
        """A :class:`models.grove.modeling.GrovePrediction` of ``batch`` -> prediction-format dicts, at this
        processor's threshold (or ``threshold``)."""
        threshold = self.inference["objectness_threshold"] if threshold is None else threshold
        return format_clip_predictions(batch, outputs.tagged_captions, outputs.phrases, outputs.boxes, outputs.scores,
                                       outputs.captions, float(threshold), bool(self.inference["objectness_strict"]),
                                       has_objectness)

    # -- the released API ----------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, model, video_path: str, token_embeddings: torch.Tensor | None = None, device="cpu",
                 instruction: str | None = None, max_new_tokens: int = 64,
                 temp_objectness_threshold: float | None = None, start_frame: int | None = None,
                 end_frame: int | None = None, w: int | None = None, h: int | None = None,
                 video_fps: float | None = None) -> dict[str, Any]:
        """Caption ``video_path`` (frames ``start_frame .. end_frame``) and box its phrases on every frame.

        ``model`` is a :class:`models.grove.modeling.Grove` already on ``device``. ``token_embeddings`` is accepted
        for the released signature; the model's own embedding table is used (a tensor of another shape is
        an error). ``temp_objectness_threshold`` defaults to the exported one; boxes and labels are kept
        by the same threshold."""
        if token_embeddings is not None:
            table = model.language_model.get_input_embeddings().weight
            if tuple(token_embeddings.shape) != tuple(table.shape):
                raise ValueError(f"token_embeddings has shape {tuple(token_embeddings.shape)}, the model's embedding "
                                 f"table {tuple(table.shape)}: pass None (the model's own table is used)")
        record = clip_record(video_path, start_frame, end_frame, w, h, video_fps)
        prompter = model.prompter
        if instruction is not None:
            prompter = model.make_prompter(questions=[instruction], sample_question=False,
                                           template=prompter.template, target_text=prompter.target_text)
        with open_video(Path("/"), record.video_fname) as video:
            frames = video.read_frames(record.frame_indices.tolist())
        batch = self.preprocess(frames, record, prompter)
        inference = self.inference
        threshold = (inference["objectness_threshold"] if temp_objectness_threshold is None
                     else temp_objectness_threshold)
        on_device = {**batch, **{k: batch[k].to(device) for k in ("global_frames", "grounding_frames", "frame_mask",
                                                                 "caption_positions")}}
        if self.masker is not None:
            on_device["source_frames"] = [frames]  # already decoded at the video's size: not read again
        previous = model.prompter
        model.prompter = prompter
        try:
            result = predict_clips(model, on_device, threshold, inference["objectness_strict"],
                                   inference["window_mode"], inference["text_protocol"], max_new_tokens,
                                   report_objectness=True, masker=self.masker)
        finally:
            model.prompter = previous
        key = batch["keys"][0]
        clip, probs = result["predictions"][key], result["objectness"][key]
        kept = {f["frame"]: f for f in clip["frames"]}
        frames = probs["frames"]
        window = batch["caption_positions"].shape[1]
        _, _, official_caption, _ = batch_windows(batch["frame_mask"].sum(dim=1), window, inference["window_mode"])
        caption_at = official_caption if official_caption is not None else batch["caption_positions"]
        frame_indices = batch["frame_indices"][0]
        answer = result.get("answers", {}).get(key)
        tagged = (package_tagged_text(answer) if inference["text_protocol"] == "package"
                  else " ".join(clip["tagged_caption"].replace("[DET]", " ").split()))
        masks = {"masks": [list(kept[f]["masks"]) if f in kept else [] for f in frames]} if self.masker else {}
        return {
            "text": clip["caption"],
            "text_tagged": tagged,
            "phrases": clip["phrases"],
            "center_frame_indices": [int(frame_indices[p]) for p in caption_at[0].tolist()],
            "frame_indices": frames,
            "bboxes": [torch.tensor(kept[f]["boxes"] if f in kept else [], dtype=torch.float32).reshape(-1, 4)
                       for f in frames],
            "labels_per_frame": [list(kept[f]["labels"]) if f in kept else [] for f in frames],
            "probs_temp_objectness": [torch.tensor(row, dtype=torch.float32) for row in probs["scores"]],
            "original_size": (record.width, record.height),
            **masks,
        }

    # -- grounding what a user asks ------------------------------------------------------------------
    @torch.no_grad()
    def ground(self, model, video_path: str, queries, start_frame: int | None = None,
               end_frame: int | None = None, objectness_threshold: float | None = None) -> dict[str, dict]:
        """Ground ``queries`` (phrases, or sentences with ``<p>...</p>`` marked) on frames ``start_frame ..
        end_frame`` of ``video_path``: per query key its boxes on every grid frame where the objectness
        keeps them (:mod:`models.grove.query_grounding`); a QueryError names a query that cannot be grounded."""
        checked = parse_queries(model, queries)
        record = clip_record(video_path, start_frame, end_frame)
        with open_video(Path("/"), record.video_fname) as video:
            frames = video.read_frames(record.frame_indices.tolist())
        threshold = self.inference["objectness_threshold"] if objectness_threshold is None else objectness_threshold
        return ground_queries(model, self.sample(frames, record), checked, threshold,
                              self.inference["objectness_strict"], self.inference["window_mode"], self.masker,
                              frames if self.masker is not None else None)



# -- queries: the clip repeated once per query, teacher-forced through predict_clips ------------------------
DEVICE_KEYS = ("global_frames", "grounding_frames", "frame_mask", "caption_positions")


@torch.no_grad()
def ground_queries(model, sample: dict[str, Any], queries: Sequence[GroundingQuery], objectness_threshold: float,
                   objectness_strict: bool = False, window_mode: str = "interleaved", masker=None,
                   source_frames: np.ndarray | None = None, queries_per_batch: int = 8) -> dict[str, dict]:
    """Ground checked ``queries`` on one clip's evaluation ``sample`` -> per query key (:func:`query_key`) its
    prediction-format entry (``caption`` the query's plain text, ``phrases``, ``frames``) plus ``query``,
    ``referent`` and ``objectness`` (every phrase's probability on every frame, before the threshold).

    ``source_frames`` (the clip's decoded frames at the video's size) are needed with a ``masker``."""
    if masker is not None and source_frames is None:
        raise ValueError("ground_queries: a masker needs the clip's source_frames")
    device = next(model.parameters()).device
    results: dict[str, dict] = {}
    for start in range(0, len(queries), max(1, int(queries_per_batch))):
        chunk = list(queries[start:start + queries_per_batch])
        batch = GroundedCollate(None)(query_samples(sample, chunk, first=start))
        batch.update({k: batch[k].to(device) for k in DEVICE_KEYS})
        if masker is not None:
            batch["source_frames"] = [source_frames] * len(chunk)
        out = predict_clips(model, batch, objectness_threshold, objectness_strict, window_mode, "project",
                            teacher_forced=True, report_objectness=True, masker=masker)
        for key, query in zip(batch["keys"], chunk):
            entry = out["predictions"][key]
            # the referent as the model's parser writes it (what the frames' labels hold)
            referent = entry["phrases"][0] if entry["phrases"] else query.referent
            results[key] = {**entry, "query": query.text, "referent": referent,
                            "objectness": out["objectness"][key]}
    return results


def module_processor(module, data_hparams: dict | None = None):
    """The :class:`GroveProcessor` a trained GroveModule predicts with: its data module's
    preprocessing (``data_hparams``), its inference settings and its masker (read by attribute: no Lightning)."""
    inference = {"objectness_threshold": module.objectness_threshold, "objectness_strict": module.objectness_strict,
                 "window_mode": module.window_mode}
    return GroveProcessor(dict(data_hparams or {}), inference, masker=getattr(module, "masker", None))


__all__ = ["GroveProcessor", "clip_record", "predict_clips", "ground_queries", "module_processor",
           "processor_text_protocol", "DEFAULT_PREPROCESSING", "DEFAULT_INFERENCE"]
