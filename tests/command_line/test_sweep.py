"""Ablation sweeps (grid, tables, end to end on the demo config) and the objectness-threshold sweep."""
import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from command_line.sweep import main as sweep_main
from formats.records import GroundedRecord, write_records_json
from metrics.commands import threshold_sweep as sweep_command
from metrics.evaluator.evaluation import evaluate_predictions
from metrics.protocols import threshold_sweep as ts
from metrics.text_encoder import ExactMatchEncoder
from sweeps.points import PRESETS, SweepPoint, expand_grid, parse_points
from sweeps.tables import tabulate
from tests.fixtures.paths import ROOT
from tests.fixtures.tiny_cli import tiny_cli_args

NO_ADAPTERS = str(ROOT / "configs" / "ablations" / "no_adapters.yaml")


# ---------------------------------------------------------------- grid and tables

def test_expand_grid_is_the_cartesian_product():
    points = expand_grid([f"config=base,{NO_ADAPTERS}", "model.init_args.objectness_weight=2.0,0.0"])
    assert [p.name for p in points] == ["objectness_weight=2.0", "objectness_weight=0.0",
                                        "no_adapters__objectness_weight=2.0", "no_adapters__objectness_weight=0.0"]
    assert points[0].args == ["--model.init_args.objectness_weight=2.0"]
    assert points[3].args == ["--config", NO_ADAPTERS, "--model.init_args.objectness_weight=0.0"]
    assert [p.name for p in expand_grid(["config=base"])] == ["base"]
    with pytest.raises(ValueError, match="KEY=V1"):
        expand_grid(["no_equals_sign"])


def test_parse_points_and_presets():
    points = parse_points(["full=", "frozen=--config a.yaml --model.init_args.train_vl=false"])
    assert points == [SweepPoint("full", []),
                      SweepPoint("frozen", ["--config", "a.yaml", "--model.init_args.train_vl=false"])]
    for preset in PRESETS.values():
        for args in preset.values():
            configs = [args[i + 1] for i, a in enumerate(args) if a == "--config"]
            assert all(Path(c).is_file() for c in configs), configs
    assert list(PRESETS["table5"]) == ["full", "no_adapters", "frozen_decoder_vl_lq"]


def test_tabulate_markdown_and_csv():
    results = [
        {"name": "full", "args": [], "metrics": {"METEOR": 0.194, "CIDEr": 0.885, "AP50": 0.379, "recall": 0.26}},
        {"name": "no_adapters", "args": ["--config", "configs/ablations/no_adapters.yaml"],
         "metrics": {"METEOR": 0.194, "CIDEr": 0.842, "AP50": 0.317}},
        {"name": "broken", "args": ["--x=1"], "metrics": {}, "error": "Traceback...\nValueError: bad"},
    ]
    md, table = tabulate(results, columns=("METEOR", "CIDEr", "AP50", "recall"))
    lines = md.splitlines()
    assert lines[0] == "| point | arguments | METEOR | CIDEr | AP50 | recall |"
    assert lines[2] == "| full | (base) | 19.4 | 88.5 | 37.9 | 26.0 |"
    assert lines[3] == "| no_adapters | no_adapters | 19.4 | 84.2 | 31.7 | - |"
    assert lines[4].startswith("| broken | --x=1 | failed: ValueError: bad |")
    rows = list(csv.reader(io.StringIO(table)))
    assert rows[0] == ["point", "arguments", "AP50", "CIDEr", "METEOR", "recall", "error"]
    assert rows[1] == ["full", "", "0.379", "0.885", "0.194", "0.26", ""]
    assert rows[2][-2:] == ["", ""] and rows[3][-1] == "ValueError: bad"


# ---------------------------------------------------------------- threshold sweep

def _record(key: str, frames: int, phrases, boxes, labels, fps: float = 5.0) -> GroundedRecord:
    return GroundedRecord(
        video_fname=f"{key}.mp4", video_id=key, clip_id="0", fps=fps, clip_start_frame=0,
        clip_end_frame=frames - 1, width=100, height=100, caption=" ".join(phrases),
        tagged_caption=" ".join(f"<p>{p}</p>" for p in phrases), phrases=list(phrases),
        bboxes=[np.asarray(b, np.float32).reshape(-1, 4) for b in boxes], labels=[list(l) for l in labels])


def test_threshold_sweep_hand_computed():
    """Two frames, each with its GT box found (score 0.9) and one false positive (score 0.2)."""
    gt = {"v_0": _record("v", 2, ["a cup"], [[[10, 10, 50, 50]]] * 2, [["a cup"]] * 2)}
    frame = lambda i: {"frame": i, "boxes": [[10, 10, 50, 50], [60, 60, 90, 90]],  # noqa: E731
                       "labels": ["a cup", "a cup"], "scores": [0.9, 0.2]}
    preds = {"v_0": {"caption": "a cup", "phrases": ["a cup"], "frames": [frame(0), frame(1)]}}
    rows = ts.threshold_sweep(gt, preds, thresholds=(0.0, 0.2, 0.3, 0.9, 0.95), text_encoder="exact")
    # Constant scores rank TP, FP, TP, FP: precision 1 up to recall 0.5 (51 of COCO's 101 recall
    # points), 2/3 above it (50 points).
    with_fp = (51 * 1.0 + 50 * 2 / 3) / 101
    assert [r["AP50"] for r in rows] == pytest.approx([with_fp, with_fp, 1.0, 1.0, 0.0])
    assert [r["recall"] for r in rows] == pytest.approx([1.0, 1.0, 1.0, 1.0, 0.0])
    assert [r["num_pred_boxes"] for r in rows] == [4, 4, 2, 2, 0]  # ">=": a box at 0.2 stays at 0.2


def _random_case(seed: int):
    rng = np.random.default_rng(seed)
    vocab = ["a red circle", "the blue square", "a knife", "a person", "the bowl"]
    records, preds = {}, {}
    for c in range(int(rng.integers(2, 5))):
        key, n = f"clip{c}", int(rng.integers(3, 9))
        phrases = list(rng.choice(vocab, size=int(rng.integers(1, 4)), replace=False))
        boxes, labels = [], []
        for _ in range(n):
            present = [p for p in phrases if rng.random() < 0.7]
            xy = rng.uniform(0, 60, (len(present), 2))
            boxes.append(np.concatenate([xy, xy + rng.uniform(10, 40, (len(present), 2))], 1))
            labels.append(present)
        records[f"{key}_0"] = _record(key, n, phrases, boxes, labels)
        frames = []
        pred_phrases = phrases if rng.random() < 0.8 else phrases + ["a knife"]
        for i in range(n):
            xy = rng.uniform(0, 60, (len(pred_phrases), 2))
            b = np.concatenate([xy, xy + rng.uniform(10, 40, (len(pred_phrases), 2))], 1)
            # scores on the threshold grid too, to pin down ">=" at the boundary
            s = np.where(rng.random(len(pred_phrases)) < 0.3, rng.choice(ts.DEFAULT_THRESHOLDS, len(pred_phrases)),
                         rng.random(len(pred_phrases)))
            frames.append({"frame": i, "boxes": b.round(2).tolist(), "labels": list(pred_phrases),
                           "scores": s.round(4).tolist()})
        if c > 0:  # clip 0 has no prediction (scored as empty)
            preds[f"{key}_0"] = {"caption": "x", "phrases": list(pred_phrases), "frames": frames}
    preds["not_in_gt_0"] = {"caption": "", "phrases": [], "frames": []}
    return records, preds


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("score_source", ["constant", "objectness"])
def test_threshold_sweep_equals_the_evaluator_at_each_threshold(seed, score_source):
    records, preds = _random_case(seed)
    encoder = ExactMatchEncoder()
    thresholds = (0.0, 0.1, 0.25, 0.3, 0.5, 0.77)
    rows = ts.threshold_sweep(records, preds, thresholds, encoder, score_source=score_source)
    for t, row in zip(thresholds, rows):
        expected = evaluate_predictions(records, preds, score_source=score_source, text_encoder=encoder,
                                        caption_metrics=(), capture=False, objectness_threshold=t)["metrics"]
        assert row["threshold"] == t
        assert set(row) - {"threshold"} == set(expected)
        for name, value in expected.items():
            # the evaluator reduces clips in batches (clips without predictions last): equal up to rounding
            assert (math.isnan(value) and math.isnan(row[name])) or row[name] == pytest.approx(value, rel=1e-12), \
                (t, name)
    boxes = [r["num_pred_boxes"] for r in rows]
    assert boxes == sorted(boxes, reverse=True)


def test_under_filtered_clips_detects_predictions_saved_above_zero():
    records, preds = _random_case(0)
    assert ts.under_filtered_clips(records, preds) == []
    key = sorted(k for k in preds if k in records)[0]
    preds[key]["frames"][0] = {**preds[key]["frames"][0], "boxes": [], "labels": [], "scores": []}
    assert ts.under_filtered_clips(records, preds) == [key]


def test_threshold_sweep_command_writes_csv_json_and_plot(tmp_path):
    records, preds = _random_case(1)
    gt_path = write_records_json(records.values(), tmp_path / "gt.json")
    pred_path = tmp_path / "run_a" / "predictions_test.json"
    pred_path.parent.mkdir()
    pred_path.write_text(json.dumps(preds))
    curves = sweep_command.main(["--gt", str(gt_path), "--pred", str(pred_path), "--pred", f"again={pred_path}",
                      "--out", str(tmp_path / "out"), "--text-encoder", "exact"])
    assert list(curves) == ["run_a", "again"] and curves["run_a"] == curves["again"]
    expected = ts.threshold_sweep(records, preds, ts.DEFAULT_THRESHOLDS, ExactMatchEncoder())
    assert [r["AP50"] for r in curves["run_a"]] == [r["AP50"] for r in expected]
    rows = list(csv.DictReader((tmp_path / "out" / "threshold_sweep.csv").open()))
    assert len(rows) == 12 and rows[0]["run"] == "run_a"
    assert [float(r["recall"]) for r in rows[:6]] == [r["recall"] for r in expected]
    with Image.open(tmp_path / "out" / "threshold_sweep.png") as png:
        assert png.format == "PNG" and png.width > png.height  # two panels side by side
    assert json.loads((tmp_path / "out" / "threshold_sweep.json").read_text())["again"][0]["threshold"] == 0.0


# ---------------------------------------------------------------- end to end

@pytest.mark.slow
def test_two_point_sweep_on_the_demo_config(tiny_synthetic_root, tmp_path, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from formats.records import read_records, tagged_phrases
    from lightning_modules.grove_module import GroveModule

    # A 3-step model writes no phrase yet; oracle captions (the GT, tagged) give the box decoder
    # phrases to ground, so the threshold sweep has boxes to drop.
    grounded = GroveModule.predict_clips

    def oracle(self, batch, **kwargs):  # ground the GT caption (teacher forcing) instead of a generated one
        self.hparams.teacher_forced = True
        return grounded(self, batch, **kwargs)

    monkeypatch.setattr(GroveModule, "predict_clips", oracle)
    out = tmp_path / "sweep"
    tiny = tiny_cli_args(tiny_synthetic_root, tmp_path)
    assert tiny[:2] == ["--config", str(ROOT / "configs" / "demo.yaml")]
    results = sweep_main(["--config", tiny[1], "--axis", f"config=base,{NO_ADAPTERS}", "--out", str(out),
                          "--", *tiny[2:], "--trainer.log_every_n_steps=1"])
    assert [r["name"] for r in results] == ["base", "no_adapters"] and not any(r.get("error") for r in results)

    md = (out / "results.md").read_text().splitlines()
    assert md[0] == "| point | arguments | METEOR | CIDEr | AP50 | recall | mIoU | CAPTURE |"
    assert md[2].startswith("| base | (base) | ") and md[3].startswith("| no_adapters | no_adapters | ")
    table = list(csv.DictReader((out / "results.csv").open()))
    for row, result in zip(table, results):
        saved = json.loads((out / result["name"] / "result.json").read_text())
        assert float(row["AP50"]) == saved["metrics"]["AP50"] and float(row["METEOR"]) == saved["metrics"]["METEOR"]
        for sub in ("fit", "test", "scores"):
            assert (out / result["name"] / sub).is_dir()
        # the threshold sweep starts from every box (threshold 0) and drops boxes as it rises
        boxes = [r["num_pred_boxes"] for r in saved["threshold_sweep"]]
        slots = sum(len(tagged_phrases(r.tagged_caption)) * len(r.bboxes)
                    for r in read_records(tiny_synthetic_root / "annotations" / "test.json"))
        assert boxes[0] == slots and boxes == sorted(boxes, reverse=True)
        assert saved["metrics"]["METEOR"] > 0.9  # the oracle captions were used

    with Image.open(out / "threshold_sweep.png") as png:
        assert png.format == "PNG"
    curves = list(csv.DictReader((out / "threshold_sweep.csv").open()))
    assert [r["run"] for r in curves] == ["base"] * 6 + ["no_adapters"] * 6

    # TensorBoard of a fit: the validation clips were drawn as images
    events = EventAccumulator(str(out / "base" / "fit"), size_guidance={"images": 0}).Reload()
    tags = events.Tags()["images"]
    assert tags and all(t.startswith("val_clips/") for t in tags)
    assert "lr-AdamW" in events.Tags()["scalars"] and "val/AP50" in events.Tags()["scalars"]
