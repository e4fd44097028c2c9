"""Stage 1 from a captioner and an open-vocabulary detector (the paper's "Alt. Stage 1": GIT + OWLv2).

Per sampled frame the captioner (any ``transformers`` image-to-text causal LM folder, e.g. GIT,
loaded with ``AutoProcessor`` + ``AutoModelForCausalLM``) writes a caption; its noun phrases
(spaCy noun chunks) become the text queries of the detector (an OWLv2 folder, ``Owlv2Processor``
+ ``Owlv2ForObjectDetection``), and each detection above ``box_threshold`` grounds its query.
So every frame gets a caption and (phrase, box) pairs whose phrases occur in the caption, like a
grounded captioner (GLaMM) gives. Both models load once per worker; frames go through in batches.
"""
from __future__ import annotations

import core  # noqa: F401  (transformers imports torchvision: the shim must run first)

import os
from pathlib import Path

import numpy as np
import torch

from annotation.stage1.decoding import DecodedClip
from annotation.stage1.frame_annotations import FrameAnnotation
from annotation.stage2.svo import SPACY_MODEL

# noun chunks that name the picture, not something in it
_NON_OBJECTS = {"image", "picture", "photo", "photograph", "frame", "scene", "view", "shot", "screen", "video"}


def _model_folder(path: str, what: str) -> str:
    folder = Path(path)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"stage1.{what} {folder}: no config.json (expected a local model folder "
                                "written by save_pretrained)")
    return str(folder)


class CaptionerDetectorFrameAnnotator:
    """``captioner`` / ``detector``: local model folders. ``max_phrases``: most queries per frame."""

    name = "captioner_detector"

    def __init__(self, captioner: str, detector: str, max_new_tokens: int = 30, box_threshold: float = 0.1,
                 max_phrases: int = 8, batch_size: int = 8, device: str = "auto", spacy_model: str = SPACY_MODEL):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForCausalLM, AutoProcessor, Owlv2ForObjectDetection, Owlv2Processor

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        path = _model_folder(captioner, "captioner")
        self.caption_processor = AutoProcessor.from_pretrained(path, local_files_only=True)
        self.captioner = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(self.device).eval()
        path = _model_folder(detector, "detector")
        self.detect_processor = Owlv2Processor.from_pretrained(path, local_files_only=True)
        self.detector = Owlv2ForObjectDetection.from_pretrained(path, local_files_only=True).to(self.device).eval()
        self.max_query_tokens = int(self.detector.config.text_config.max_position_embeddings)  # 16 for OWLv2
        import spacy

        self.nlp = spacy.load(spacy_model, disable=["ner", "lemmatizer"])
        self.max_new_tokens, self.box_threshold = int(max_new_tokens), float(box_threshold)
        self.max_phrases, self.batch_size = int(max_phrases), int(batch_size)

    @torch.inference_mode()
    def caption(self, images: list[np.ndarray]) -> list[str]:
        out = []
        for start in range(0, len(images), self.batch_size):
            batch = self.caption_processor(images=images[start:start + self.batch_size], return_tensors="pt")
            pixel_values = batch["pixel_values"].to(self.device, self.captioner.dtype)
            ids = self.captioner.generate(pixel_values=pixel_values, max_new_tokens=self.max_new_tokens)
            out.extend(t.strip() for t in self.caption_processor.batch_decode(ids, skip_special_tokens=True))
        return out

    def queries(self, captions: list[str]) -> list[list[str]]:
        """Distinct noun phrases of each caption (at most ``max_phrases``), as written in it."""
        out = []
        for doc in self.nlp.pipe(captions):
            chunks = [c.text.strip() for c in doc.noun_chunks
                      if c.root.pos_ != "PRON" and c.root.text.lower() not in _NON_OBJECTS]
            out.append(list(dict.fromkeys(c for c in chunks if c))[:self.max_phrases])
        return out

    @torch.inference_mode()
    def detect(self, images: list[np.ndarray],
               queries: list[list[str]]) -> list[tuple[list[str], np.ndarray, np.ndarray]]:
        """Per image ``(phrases, boxes (n, 4) pixel xyxy, scores (n,))`` of the detections above threshold."""
        results: list = [([], np.zeros((0, 4), np.float32), np.zeros(0, np.float32)) for _ in images]
        todo = [i for i, q in enumerate(queries) if q]
        for start in range(0, len(todo), self.batch_size):
            idx = todo[start:start + self.batch_size]
            batch = self.detect_processor(text=[queries[i] for i in idx], images=[images[i] for i in idx],
                                          return_tensors="pt", padding="max_length", truncation=True,
                                          max_length=self.max_query_tokens).to(self.device)
            outputs = self.detector(**batch)
            # OWLv2 pads each image to a square (bottom/right) before resizing: boxes are relative to it
            sides = [max(images[i].shape[:2]) for i in idx]
            found = self.detect_processor.post_process_grounded_object_detection(
                outputs, threshold=self.box_threshold, target_sizes=[(s, s) for s in sides])
            for i, det in zip(idx, found):
                labels = det["labels"].cpu().numpy()
                valid = labels < len(queries[i])  # padded " " queries of shorter lists
                h, w = images[i].shape[:2]
                boxes = det["boxes"].float().cpu().numpy()[valid]
                boxes = np.clip(boxes, 0.0, np.array([w, h, w, h], dtype=np.float32))
                results[i] = ([queries[i][l] for l in labels[valid]], boxes.astype(np.float32),
                              det["scores"].float().cpu().numpy()[valid].astype(np.float32))
        return results

    def annotate(self, clips: list[DecodedClip]) -> list[list[FrameAnnotation]]:
        images = [frame for clip in clips for frame in clip.frames]
        if not images:
            return [[] for _ in clips]
        captions = self.caption(images)
        queries = self.queries(captions)
        detections = self.detect(images, queries)
        out, k = [], 0
        for clip in clips:
            frames = []
            for index in clip.frame_indices:
                phrases, boxes, scores = detections[k]
                frames.append(FrameAnnotation(int(index), captions[k], phrases, boxes, scores))
                k += 1
            out.append(frames)
        return out
