"""Random grounded records and matching predictions (the format predict writes) for metric tests."""
from __future__ import annotations

import numpy as np

from datamodules.records import GroundedRecord, annotation_grid

PHRASES = ["a red circle", "a blue square", "a green (triangle)?", "a white cross"]


def random_record(rng: np.random.Generator, index: int, empty: bool = False) -> GroundedRecord:
    fps, start, end, w, h = 25.0, 0, 49, 160, 120
    grid = annotation_grid(fps, start, end)
    phrases = list(rng.choice(PHRASES, size=rng.integers(1, 4), replace=False))
    bboxes, labels = [], []
    for _ in grid:
        frame_boxes, frame_labels = [], []
        for p in phrases:
            if empty or rng.random() < 0.3:
                continue
            x1, y1 = rng.uniform(0, w - 20), rng.uniform(0, h - 20)
            frame_boxes.append([x1, y1, x1 + rng.uniform(5, w - x1), y1 + rng.uniform(5, h - y1)])
            frame_labels.append(p)
        bboxes.append(np.asarray(frame_boxes, dtype=np.float32).reshape(-1, 4))
        labels.append(frame_labels)
    tagged = " and ".join(f"<p>{p}</p> moves" for p in phrases)
    return GroundedRecord(
        video_fname=f"v{index}.mp4", video_id=f"v{index}", clip_id="0", fps=fps, clip_start_frame=start,
        clip_end_frame=end, width=w, height=h, caption=tagged.replace("<p>", "").replace("</p>", ""),
        tagged_caption=tagged, phrases=phrases, bboxes=bboxes, labels=labels)


def noisy_prediction(rng: np.random.Generator, record: GroundedRecord) -> dict:
    frames = []
    for f, boxes, labels in zip(record.frame_indices, record.bboxes, record.labels):
        out_boxes, out_labels, scores = [], [], []
        for box, label in zip(boxes, labels):
            if rng.random() < 0.8:
                b = box + rng.normal(0, 6, 4)
                b = np.concatenate([np.minimum(b[:2], b[2:]), np.maximum(b[:2], b[2:])])  # a valid box
                out_boxes.append(b.round(2).tolist())
                out_labels.append(label if rng.random() < 0.9 else PHRASES[0])
                scores.append(float(rng.uniform(0.2, 1)))
        if rng.random() < 0.2:  # a false positive
            out_boxes.append([1.0, 2.0, 30.0, 40.0])
            out_labels.append(record.phrases[0])
            scores.append(float(rng.uniform(0, 1)))
        if out_boxes:
            frames.append({"frame": int(f), "boxes": out_boxes, "labels": out_labels, "scores": scores})
    return {"caption": record.caption, "tagged_caption": record.tagged_caption,
            "phrases": list(dict.fromkeys([*record.phrases, PHRASES[0]])), "frames": frames}


def random_dataset(seed: int, n: int, n_empty: int = 1):
    rng = np.random.default_rng(seed)
    records = [random_record(rng, i, empty=i < n_empty) for i in range(n)]
    preds = {r.key: noisy_prediction(rng, r) for r in records}
    return records, preds
