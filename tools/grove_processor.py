"""The official inference API (``grove_transformers.GroveProcessor.generate``) on this project's predict path.

A user of the released package changes an import and a folder name::

    from models.grove import Grove                      # was: GroveForCausalLM
    from tools.grove_processor import GroveProcessor

    model = Grove.from_pretrained("exported/grove")     # an exported folder or a hub repository id
    processor = GroveProcessor.from_pretrained("exported/grove")
    out = processor.generate(model, "video.mp4", token_embeddings=None, device="cpu")

``generate`` takes the released arguments and returns the released keys (``text``, ``text_tagged``,
``phrases``, ``center_frame_indices``, ``frame_indices``, ``bboxes``, ``labels_per_frame``,
``probs_temp_objectness``, ``original_size``), computed exactly as ``cli.py predict`` computes a
clip: one streaming decode of the clip's 5-fps grid (:class:`datamodules.grounded_dataset.GroundedClipDataset`),
the model's windows and text protocol (:meth:`models.grove.Grove.predict`), the prediction
writer's box conversion and threshold (:func:`lightning_modules.grove_module.format_clip_predictions`).
The deliberate differences from the released package are listed in docs/official_grove.md
("The inference API").
"""
from __future__ import annotations

from core.weights.pretrained_folder import CONFIG_FILE, PREPROCESSOR_FILE, resolve_folder

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from datamodules.grounded_dataset import GroundedClipDataset, GroundedCollate
from datamodules.video_folder import probe_video
from formats.frame_grids import annotation_grid
from formats.records import GroundedRecord
from lightning_modules.grove_module import GroveModule, format_clip_predictions
from models.inference import batch_windows

DEFAULT_PREPROCESSING = {"num_frames": 8, "global_image_size": 336, "global_resize": "squash",
                         "grounding_image_size": 512, "grounding_resize": "float"}
DEFAULT_INFERENCE = {"objectness_threshold": 0.5, "objectness_strict": False, "window_mode": "interleaved",
                     "text_protocol": "project"}


def clip_record(video_path: str | Path, start_frame: int | None = None, end_frame: int | None = None,
                w: int | None = None, h: int | None = None, video_fps: float | None = None) -> GroundedRecord:
    """An unannotated record of source frames ``start_frame .. end_frame`` (inclusive; default the whole
    video), sampled on the video's 5-fps grid as ``cli.py predict`` samples a clip. ``w``, ``h`` and
    ``video_fps``, when given, are checked against the file (an error naming both when they differ)."""
    path = Path(video_path)
    if not path.is_file():
        raise FileNotFoundError(f"video_path {path}: no such file")
    info = probe_video(path, path.stem)
    for name, given, found in (("w", w, info.width), ("h", h, info.height), ("video_fps", video_fps, info.fps)):
        if given is not None and abs(float(given) - float(found)) > 1e-3:
            raise ValueError(f"{name}={given} but {path} has {found}: leave it None (read from the file) or fix it")
    start = 0 if start_frame is None else int(start_frame)
    end = info.num_frames - 1 if end_frame is None else min(int(end_frame), info.num_frames - 1)
    if not 0 <= start <= end:
        raise ValueError(f"start_frame {start_frame} / end_frame {end_frame}: need 0 <= start <= end < "
                         f"{info.num_frames} (the video's frames)")
    n = len(annotation_grid(info.fps, start, end))
    return GroundedRecord(
        video_fname=str(path.resolve()), video_id=info.video_id, clip_id="0", fps=info.fps, clip_start_frame=start,
        clip_end_frame=end, width=info.width, height=info.height, caption="", tagged_caption="", phrases=[],
        bboxes=[np.zeros((0, 4), np.float32)] * n, labels=[[] for _ in range(n)],
        extra={"num_frames": info.num_frames})


class GroveProcessor:
    """Preprocessing and inference settings of an exported GROVE, and ``generate`` (see the module docstring).

    Args:
        preprocessing: frames per window and image sizes / resize modes (preprocessor_config.json).
        inference: objectness threshold and strictness, window mode, text protocol (config.json).
        prompt: chat template and target text the model was trained with (config.json).
    """

    def __init__(self, preprocessing: dict | None = None, inference: dict | None = None, prompt: dict | None = None):
        self.preprocessing = {**DEFAULT_PREPROCESSING, **{k: v for k, v in (preprocessing or {}).items()
                                                          if k in DEFAULT_PREPROCESSING}}
        self.inference = {**DEFAULT_INFERENCE, **(inference or {})}
        self.prompt = dict(prompt or {})

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path, **hub_kwargs: Any) -> "GroveProcessor":
        """The processor of an exported folder (or hub repository id, from the local cache when offline)."""
        folder = resolve_folder(name_or_path, **hub_kwargs)
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        preprocessing = config.get("preprocessing") or {}
        if (folder / PREPROCESSOR_FILE).is_file():
            preprocessing = json.loads((folder / PREPROCESSOR_FILE).read_text(encoding="utf-8"))
        return cls(preprocessing, config.get("inference"), config.get("prompt"))

    def dataset(self, record: GroundedRecord) -> GroundedClipDataset:
        p = self.preprocessing
        return GroundedClipDataset([record], Path("/"), num_frames=p["num_frames"], train=False, all_frames=True,
                                   global_image_size=p["global_image_size"], global_resize=p["global_resize"],
                                   grounding_image_size=p["grounding_image_size"],
                                   grounding_resize=p["grounding_resize"], on_error="raise")

    @torch.no_grad()
    def generate(self, model, video_path: str, token_embeddings: torch.Tensor | None = None, device="cpu",
                 instruction: str | None = None, max_new_tokens: int = 64,
                 temp_objectness_threshold: float | None = None, start_frame: int | None = None,
                 end_frame: int | None = None, w: int | None = None, h: int | None = None,
                 video_fps: float | None = None) -> dict[str, Any]:
        """Caption ``video_path`` (frames ``start_frame .. end_frame``) and box its phrases on every frame.

        ``model`` is a :class:`models.grove.Grove` already on ``device``. ``token_embeddings`` is accepted
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
        item = self.dataset(record)[0]
        batch = GroundedCollate(prompter, train=False)([item])
        if not batch["keys"]:
            raise ValueError(f"{video_path}: could not be read ({batch.get('skipped')})")
        inference = self.inference
        threshold = (inference["objectness_threshold"] if temp_objectness_threshold is None
                     else temp_objectness_threshold)
        window = batch["caption_positions"].shape[1]
        tensors = {k: batch[k].to(device) for k in ("global_frames", "grounding_frames", "frame_mask",
                                                   "caption_positions")}
        previous = model.prompter
        model.prompter = prompter
        try:
            out = model.predict(tensors["global_frames"], tensors["grounding_frames"], tensors["frame_mask"],
                                window=window, window_mode=inference["window_mode"],
                                caption_positions=tensors["caption_positions"], max_new_tokens=max_new_tokens,
                                text_protocol=inference["text_protocol"])
        finally:
            model.prompter = previous
        key = batch["keys"][0]
        clip = format_clip_predictions(batch, out.tagged_captions, out.phrases, out.boxes, out.scores, out.captions,
                                       float(threshold), bool(inference["objectness_strict"]),
                                       model.objectness_head is not None)[key]
        probs = GroveModule.objectness_by_clip(batch, out.phrases, out.scores)[key]
        kept = {f["frame"]: f for f in clip["frames"]}
        frames = probs["frames"]
        _, _, official_caption, _ = batch_windows(batch["frame_mask"].sum(dim=1), window, inference["window_mode"])
        caption_at = official_caption if official_caption is not None else batch["caption_positions"]
        frame_indices = batch["frame_indices"][0]
        return {
            "text": clip["caption"],
            "text_tagged": " ".join(clip["tagged_caption"].replace("[DET]", " ").split()),
            "phrases": clip["phrases"],
            "center_frame_indices": [int(frame_indices[p]) for p in caption_at[0].tolist()],
            "frame_indices": frames,
            "bboxes": [torch.tensor(kept[f]["boxes"] if f in kept else [], dtype=torch.float32).reshape(-1, 4)
                       for f in frames],
            "labels_per_frame": [list(kept[f]["labels"]) if f in kept else [] for f in frames],
            "probs_temp_objectness": [torch.tensor(row, dtype=torch.float32) for row in probs["scores"]],
            "original_size": (record.width, record.height),
        }
