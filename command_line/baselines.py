"""Reference points for the demo's test metrics: what you get without looking at the video.

* constant caption: one caption for every clip, the training caption with the highest CIDEr
  consensus against (a sample of) the other training captions; its phrases are boxed with the
  mean training box on every annotated frame.
* fixed box per phrase: the ground-truth caption and phrases (oracle text), each phrase boxed
  with its mean training box (over all frames where it is present) on every annotated frame.
* always present: share of (frame, phrase) slots that are present, i.e. the temporal-objectness
  accuracy of predicting "present" everywhere.

``grove baselines --root data/synthetic [--split test] [--capture-stop-words authors|project]
[--out baselines.json]``
"""
from __future__ import annotations

import core  # noqa: F401
from core.cli_args import existing_folder
from core.command_parser import CommandParser

import argparse
from pathlib import Path

import numpy as np

from formats.records import read_records
from metrics.evaluator.evaluation import evaluate_predictions, format_table


def normalised_boxes(record):
    boxes, present = record.phrase_boxes()
    scale = np.array([record.width, record.height, record.width, record.height], dtype=np.float32)
    return boxes / scale, present


def mean_boxes(records) -> tuple[dict[str, np.ndarray], np.ndarray]:
    per_phrase: dict[str, list[np.ndarray]] = {}
    for r in records:
        boxes, present = normalised_boxes(r)
        for j, p in enumerate(r.phrases):
            if present[:, j].any():
                per_phrase.setdefault(p, []).append(boxes[present[:, j], j])
    means = {p: np.concatenate(v).mean(0) for p, v in per_phrase.items()}
    overall = np.concatenate([np.concatenate(v) for v in per_phrase.values()]).mean(0)
    return means, overall


def consensus_caption(records, sample: int = 300, seed: int = 0) -> str:
    from metrics.functional.captioning import evaluate_captions

    rng = np.random.default_rng(seed)
    pool = [records[i] for i in rng.choice(len(records), size=min(sample, len(records)), replace=False)]
    refs = [r.caption for r in pool]
    _, per_sample = evaluate_captions({i: refs for i in range(len(pool))}, {i: r.caption for i, r in enumerate(pool)},
                                      metrics=("CIDEr",), return_per_sample=True)
    best = max(per_sample["CIDEr"], key=per_sample["CIDEr"].get)
    return pool[best].tagged_caption


def boxed_prediction(record, tagged: str, phrases: list[str], boxes: list[np.ndarray]) -> dict:
    from formats.records import strip_tags

    scale = np.array([record.width, record.height, record.width, record.height], dtype=np.float32)
    px = [np.clip(b * scale, 0, scale).round(2).tolist() for b in boxes]
    frames = [{"frame": int(f), "boxes": px, "labels": list(phrases), "scores": [1.0] * len(phrases)}
              for f in record.frame_indices] if phrases else []
    return {"caption": strip_tags(tagged), "tagged_caption": tagged, "phrases": list(phrases), "frames": frames}


def run(root: Path, split: str, text_encoder: str = "minilm", capture_stop_words: str = "authors") -> dict:
    from formats.records import tagged_phrases

    train = read_records(root / "annotations" / "train.json")
    test = {r.key: r for r in read_records(root / "annotations" / f"{split}.json")}
    means, overall = mean_boxes(train)
    constant = consensus_caption(train)
    constant_phrases = tagged_phrases(constant)
    constant_boxes = [means.get(p, overall) for p in constant_phrases]
    constant_preds = {k: boxed_prediction(r, constant, constant_phrases, constant_boxes) for k, r in test.items()}
    fixed_preds = {k: boxed_prediction(r, r.tagged_caption, r.phrases, [means.get(p, overall) for p in r.phrases])
                   for k, r in test.items()}
    present = np.concatenate([normalised_boxes(r)[1].ravel() for r in test.values()])
    reports = {
        "constant_caption": evaluate_predictions(test, constant_preds, text_encoder=text_encoder,
                                                 capture_stop_words=capture_stop_words),
        "fixed_box_per_phrase": evaluate_predictions(test, fixed_preds, text_encoder=text_encoder,
                                                     capture_stop_words=capture_stop_words),
    }
    return {"constant_caption": constant, "always_present_objectness_acc": float(present.mean()), "reports": reports}


def main(argv=None) -> dict:
    parser = CommandParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", role="input", type=existing_folder, default="data/synthetic")
    parser.add_argument("--split", default="test")
    parser.add_argument("--text-encoder", default="minilm")
    parser.add_argument("--capture-stop-words", default="authors", choices=("authors", "project"))
    parser.add_argument("--out", role="output", default=None)
    args = parser.parse_args(argv)
    result = run(Path(args.root), args.split, args.text_encoder, args.capture_stop_words)
    print(f"constant caption: {result['constant_caption']}")
    print(f"objectness accuracy of 'always present': {result['always_present_objectness_acc']:.4f}")
    for name, report in result["reports"].items():
        print(f"\n== {name} ==\n{format_table(report)}")
    if args.out:
        from core.output_files import write_json_atomic

        write_json_atomic(args.out, result)
    return result
