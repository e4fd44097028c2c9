"""Stage 1 stand-in for the synthetic dataset: frame captions and boxes derived from the truth, with noise.

The paper's Stage 1 (GLaMM, or a captioner plus an open-vocabulary detector) makes the errors
this backend imitates, each with its own rate so that their effect on the final annotations can
be measured: objects missed in a frame, paraphrased ("a red disc") and generic ("an object")
phrases, a wrong action read from a still frame, jittered boxes, spurious detections of things
that are not objects of interest, and extraneous details in the caption. With every rate at 0 it
is a noise-free oracle: each frame caption names exactly the visible objects and their actions.

Frame captions are still-image style ("A red circle is entering from the left."), one sentence
per object in a random order. Draws are seeded by ``(seed, clip key)``, so any engine, batch size
or worker count writes the same output.
"""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

from annotation.stage1.decoding import DecodedClip
from annotation.stage1.frame_annotations import FrameAnnotation
from formats.records import GroundedRecord, read_records

PARAPHRASES = {
    "circle": ("disc", "round shape", "ball"),
    "square": ("block", "square shape", "box"),
    "triangle": ("triangular shape", "wedge", "pyramid"),
    "diamond": ("rhombus", "diamond shape", "lozenge"),
    "cross": ("plus sign", "cross shape", "plus"),
}
GENERIC = ("an object", "a shape", "a {colour} object", "a {colour} shape")
# What a still frame suggests the object is doing (progressive, as image captioners write).
PROGRESSIVE = {
    "enters": "is entering from the {side}",
    "leaves": "is leaving to the {side}",
    "moves": "is moving {direction}",
    "stays_still": "is staying still",
    "bounces": "is bouncing up and down",
    "hides": "is hiding behind the wall",
    "emerges": "is emerging from behind the wall",
    "passes": "is passing behind the wall",
}
DETAILS = ("left", "right", "top", "bottom")
DIRECTIONS = ("left", "right", "up", "down")
# Extraneous sentences (with the phrase they ground, if any; None: no box).
EXTRA_DETAILS = (
    ("The background is a grey gradient.", None),
    ("A dark grey wall runs across the image.", "a dark grey wall"),
    ("The image is slightly blurry.", None),
    ("The wall has light mortar stripes.", "the wall"),
)
SPURIOUS = ("a shadow", "a dark stripe", "a small mark")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


class NoisyOracleFrameAnnotator:
    """Stage 1 backend reading the synthetic truth (``--truth``) instead of the pixels.

    Rates (probabilities per visible object and frame unless noted): ``miss`` (the object is not
    mentioned), ``paraphrase`` (another name for its shape), ``generic`` (a generic name),
    ``wrong_action`` (another action's clause), ``spurious`` and ``extra_details`` (per frame: a
    detection of a non-object / an extraneous sentence). ``box_jitter``: std of each coordinate's
    noise as a fraction of the box's width or height.
    """

    name = "noisy_oracle"

    def __init__(self, truth: str | Path | None = None, records: dict[str, GroundedRecord] | None = None,
                 seed: int = 0, miss: float = 0.0, paraphrase: float = 0.0, generic: float = 0.0,
                 wrong_action: float = 0.0, box_jitter: float = 0.0, spurious: float = 0.0,
                 extra_details: float = 0.0):
        if records is None:
            if truth is None:
                raise ValueError("stage1 backend 'noisy_oracle' needs the ground truth: pass --truth ANNOTATIONS")
            records = {r.key: r for r in read_records(truth)}
        self.records = records
        self.seed = int(seed)
        self.rates = {"miss": miss, "paraphrase": paraphrase, "generic": generic, "wrong_action": wrong_action,
                      "spurious": spurious, "extra_details": extra_details}
        for name, value in self.rates.items():
            if not 0.0 <= float(value) <= 1.0:
                raise ValueError(f"stage1.{name} must be a probability in [0, 1], got {value}")
        if box_jitter < 0:
            raise ValueError(f"stage1.box_jitter must be >= 0, got {box_jitter}")
        self.box_jitter = float(box_jitter)

    def annotate(self, clips: list[DecodedClip]) -> list[list[FrameAnnotation]]:
        return [self._annotate_clip(c) for c in clips]

    def _truth(self, key: str) -> tuple[GroundedRecord, list[dict]]:
        record = self.records.get(key)
        if record is None:
            raise KeyError(f"noisy_oracle: clip '{key}' is not in the ground truth")
        objects = record.extra.get("synthetic", {}).get("objects")
        if objects is None or [o["phrase"] for o in objects] != list(record.phrases):
            raise ValueError(f"noisy_oracle: ground-truth record '{key}' has no synthetic object list matching its "
                             "phrases (field 'synthetic.objects'); the backend reads synthetic-dataset truth only")
        return record, objects

    def _annotate_clip(self, clip: DecodedClip) -> list[FrameAnnotation]:
        record, objects = self._truth(clip.spec.key)
        rng = np.random.default_rng([self.seed, zlib.crc32(clip.spec.key.encode())])
        boxes_grid, present_grid = record.phrase_boxes()
        rows = np.searchsorted(record.frame_indices, clip.frame_indices)
        rows = np.clip(rows, 0, len(record.frame_indices) - 1)
        on_grid = record.frame_indices[rows] == clip.frame_indices
        boxes = boxes_grid[rows]  # (F, K, 4)
        present = present_grid[rows] & on_grid[:, None]
        num_frames, num_objects = present.shape
        r = self.rates
        # every random draw of the clip at once, (F, K) or (F,)
        mentioned = present & (rng.random((num_frames, num_objects)) >= r["miss"])
        style = rng.random((num_frames, num_objects))
        pick = rng.integers(0, 1 << 30, size=(num_frames, num_objects))
        wrong = rng.random((num_frames, num_objects)) < r["wrong_action"]
        wrong_pick = rng.integers(0, 1 << 30, size=(num_frames, num_objects, 2))
        order = np.argsort(rng.random((num_frames, num_objects)), axis=1)
        sizes = np.array([record.width, record.height, record.width, record.height], dtype=np.float32)
        wh = np.concatenate([boxes[..., 2:] - boxes[..., :2]] * 2, axis=-1)
        noisy = boxes + self.box_jitter * wh * rng.standard_normal(boxes.shape).astype(np.float32)
        noisy = np.clip(noisy, 0.0, sizes)
        valid = (noisy[..., 2] - noisy[..., 0] >= 1.0) & (noisy[..., 3] - noisy[..., 1] >= 1.0)
        mentioned &= valid
        scores = rng.uniform(0.5, 1.0, size=(num_frames, num_objects)).astype(np.float32)
        spurious = rng.random(num_frames) < r["spurious"]
        spurious_pick = rng.integers(0, len(SPURIOUS), size=num_frames)
        spurious_xy = rng.random((num_frames, 4)).astype(np.float32)
        detail = rng.random(num_frames) < r["extra_details"]
        detail_pick = rng.integers(0, len(EXTRA_DETAILS), size=num_frames)
        wall = record.extra.get("synthetic", {}).get("wall")
        wall_box = None
        if wall is not None:
            a, b = float(wall["start"]), float(wall["end"])
            wall_box = ([a, 0.0, b, float(record.height)] if wall["orientation"] == "vertical"
                        else [0.0, a, float(record.width), b])
        paraphrase_cut, generic_cut = r["generic"] + r["paraphrase"], r["generic"]

        out = []
        for f in range(num_frames):
            sentences, phrases, frame_boxes, frame_scores = [], [], [], []
            for k in order[f]:
                if not mentioned[f, k]:
                    continue
                obj = objects[k]
                if style[f, k] < generic_cut:
                    phrase = GENERIC[pick[f, k] % len(GENERIC)].format(colour=obj["colour"])
                elif style[f, k] < paraphrase_cut:
                    noun = PARAPHRASES.get(obj["shape"], (obj["shape"],))
                    noun = noun[pick[f, k] % len(noun)]
                    phrase = f"{_article(obj['colour'])} {obj['colour']} {noun}"
                else:
                    phrase = obj["phrase"]
                if wrong[f, k]:
                    others = [a for a in PROGRESSIVE if a != obj["action"]]
                    action = others[wrong_pick[f, k, 0] % len(others)]
                    clause = PROGRESSIVE[action].format(side=DETAILS[wrong_pick[f, k, 1] % 4],
                                                        direction=DIRECTIONS[wrong_pick[f, k, 1] % 4])
                else:
                    clause = PROGRESSIVE[obj["action"]].format(side=obj["detail"], direction=obj["detail"])
                sentences.append(f"{phrase[0].upper()}{phrase[1:]} {clause}.")
                phrases.append(phrase)
                frame_boxes.append(noisy[f, k])
                frame_scores.append(scores[f, k])
            if detail[f]:
                sentence, grounded = EXTRA_DETAILS[detail_pick[f]]
                sentences.append(sentence)
                if grounded is not None and wall_box is not None:
                    phrases.append(grounded)
                    frame_boxes.append(np.asarray(wall_box, dtype=np.float32))
                    frame_scores.append(np.float32(0.4))
            if spurious[f]:
                phrase = SPURIOUS[spurious_pick[f]]
                sentences.append(f"{phrase[0].upper()}{phrase[1:]} is visible near the wall.")
                xy = spurious_xy[f]
                x1, y1 = xy[0] * 0.8 * record.width, xy[1] * 0.8 * record.height
                w, h = (0.05 + 0.15 * xy[2]) * record.width, (0.05 + 0.15 * xy[3]) * record.height
                phrases.append(phrase)
                frame_boxes.append(np.array([x1, y1, x1 + w, y1 + h], dtype=np.float32))
                frame_scores.append(np.float32(0.3 + 0.3 * xy[2]))
            out.append(FrameAnnotation(int(clip.frame_indices[f]), " ".join(sentences), phrases,
                                       np.asarray(frame_boxes, dtype=np.float32).reshape(-1, 4),
                                       np.asarray(frame_scores, dtype=np.float32)))
        return out
