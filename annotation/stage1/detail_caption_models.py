"""The models of the detail-caption stages (:mod:`annotation.stage1.detail_captions`), each from a local folder.

* ``lvlm``: ``captioner`` (an image-to-text causal LM folder, as Stage 1's captioner: GIT; GIT
  takes no instruction, so the prompts are not shown to it) for Stages I and III;
* ``segmenter``: ``sam`` (``segment_anything``'s automatic mask generator; ``checkpoint`` and
  ``model_type`` of the release, read as tensors only);
* ``scorer``: ``owlv2`` (an ``Owlv2ForObjectDetection`` folder: a phrase's score is its best box
  score on the image, as OWLv2's post-processing computes it: sigmoid of the class logit);
* ``extractor``: ``factual`` (the FACTUAL parser folder of :mod:`metrics.capture`) or ``spacy``
  (its offline rule-based parser); the visual element phrases are the scene graphs' objects;
* ``llm``: the annotation pipeline's chat backends (``transformers`` / ``openai``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from annotation.stage3.trackers.cotracker_tracker import pick_device


def _folder(path: str | Path, what: str) -> str:
    if not Path(path).is_dir():
        raise FileNotFoundError(f"detail captions: {what} folder {path} does not exist (models load from local "
                                "folders written by save_pretrained)")
    return str(path)


class CaptionerLVLM:
    def __init__(self, path: str, max_new_tokens: int = 40, batch_size: int = 8, device: str = "auto"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForCausalLM, AutoProcessor

        self.device = pick_device(device)
        folder = _folder(path, "lvlm")
        self.processor = AutoProcessor.from_pretrained(folder, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).to(self.device).eval()
        self.max_new_tokens, self.batch_size = int(max_new_tokens), int(batch_size)

    @torch.inference_mode()
    def caption(self, images: list[np.ndarray], prompt: str) -> list[str]:
        out = []
        for start in range(0, len(images), self.batch_size):
            batch = self.processor(images=images[start:start + self.batch_size], return_tensors="pt")
            ids = self.model.generate(pixel_values=batch["pixel_values"].to(self.device, self.model.dtype),
                                      max_new_tokens=self.max_new_tokens)
            out.extend(t.strip() for t in self.processor.batch_decode(ids, skip_special_tokens=True))
        return out


class SAMSegmenter:
    """SAM's automatic masks (a grid of point prompts, quality and stability filters, NMS)."""

    def __init__(self, checkpoint: str | None = None, model_type: str = "vit_l", points_per_side: int = 32,
                 pred_iou_thresh: float = 0.88, stability_score_thresh: float = 0.95, device: str = "auto",
                 encoder: dict | None = None, model=None):
        """``model_type``: ``vit_h`` / ``vit_l`` / ``vit_b`` (the releases) or ``custom`` with ``encoder``
        sizes (``embed_dim``, ``depth``, ``num_heads``, ``global_attn_indexes``: small test models)."""
        import core  # noqa: F401  (segment_anything imports torchvision)
        from core.nms import batched_nms

        import segment_anything.automatic_mask_generator as amg
        from segment_anything import SamAutomaticMaskGenerator, sam_model_registry

        amg.batched_nms = batched_nms  # torchvision's compiled NMS is missing on CPU torch here
        self.device = pick_device(device)
        if model is None:
            if checkpoint is None:
                raise ValueError("detail captions: segmenter.checkpoint (SAM's released .pth) is required")
            from core.weights import load_state_dict_file

            if model_type == "custom":
                from segment_anything.build_sam import _build_sam

                e = dict(encoder or {})
                model = _build_sam(int(e["embed_dim"]), int(e["depth"]), int(e["num_heads"]),
                                   list(e.get("global_attn_indexes", [])))
            else:
                model = sam_model_registry[model_type](checkpoint=None)
            model.load_state_dict(load_state_dict_file(checkpoint, "segmenter.checkpoint"))
        self.generator = SamAutomaticMaskGenerator(model.to(self.device).eval(), points_per_side=int(points_per_side),
                                                   pred_iou_thresh=float(pred_iou_thresh),
                                                   stability_score_thresh=float(stability_score_thresh))

    def masks(self, image: np.ndarray) -> np.ndarray:
        found = self.generator.generate(np.ascontiguousarray(image))
        if not found:
            return np.zeros((0, *image.shape[:2]), dtype=bool)
        return np.stack([m["segmentation"] for m in found]).astype(bool)


class OWLv2Scorer:
    def __init__(self, path: str, device: str = "auto"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import Owlv2ForObjectDetection, Owlv2Processor

        self.device = pick_device(device)
        folder = _folder(path, "scorer")
        self.processor = Owlv2Processor.from_pretrained(folder, local_files_only=True)
        self.model = Owlv2ForObjectDetection.from_pretrained(folder, local_files_only=True).to(self.device).eval()
        self.max_tokens = int(self.model.config.text_config.max_position_embeddings)

    @torch.inference_mode()
    def score(self, image: np.ndarray, phrases: Sequence[str]) -> np.ndarray:
        if not phrases:
            return np.zeros(0)
        batch = self.processor(text=[list(phrases)], images=[image], return_tensors="pt", padding="max_length",
                               truncation=True, max_length=self.max_tokens).to(self.device)
        logits = self.model(**batch).logits[0]  # (boxes, queries)
        return torch.sigmoid(logits.max(0).values[:len(phrases)]).float().cpu().numpy()


class SceneGraphExtractor:
    """Visual element phrases: the objects of each caption's scene graph (FACTUAL or the spaCy parser)."""

    def __init__(self, backend: str = "spacy", path: str | None = None, device: str = "cpu"):
        if backend == "factual":
            from metrics.capture.factual_parser import FactualSceneGraphParser

            self.parser = FactualSceneGraphParser(path, device=device)
        elif backend == "spacy":
            from metrics.capture.scene_graph import SpacySceneGraphParser

            self.parser = SpacySceneGraphParser()
        else:
            raise ValueError(f"detail captions: extractor.backend must be 'factual' or 'spacy', got {backend!r}")

    def phrases(self, captions: Sequence[str]) -> list[list[str]]:
        return [list(g.objects) for g in self.parser.parse(list(captions))]


def build_detail_captioner(section: dict, llm: dict | None):
    """A :class:`annotation.stage1.detail_captions.DetailCaptioner` from the ``detail_captions`` config section."""
    from annotation.llm.factory import make_chat
    from annotation.stage1.detail_captions import DetailCaptioner

    section = dict(section)
    parts = {}
    for key, builders in (("lvlm", {"captioner": CaptionerLVLM}), ("segmenter", {"sam": SAMSegmenter}),
                          ("scorer", {"owlv2": OWLv2Scorer})):
        options = dict(section.pop(key, None) or {})
        name = options.pop("backend", None)
        if name not in builders:
            raise ValueError(f"detail_captions.{key}.backend must be one of {sorted(builders)}, got {name!r}")
        parts[key] = builders[name](**options)
    parts["extractor"] = SceneGraphExtractor(**dict(section.pop("extractor", None) or {}))
    if not llm or "backend" not in llm:
        raise ValueError("detail captions: Stage V needs an 'llm' section (backend: transformers or openai)")
    parts["chat"] = make_chat(llm, "llm")
    return DetailCaptioner(parts["lvlm"], parts["segmenter"], parts["scorer"], parts["extractor"], parts["chat"],
                           **section)
