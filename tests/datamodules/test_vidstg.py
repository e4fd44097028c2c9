"""VidSTG: both public layouts, sentence records, and m_vIoU / vIoU@R against hand-computed values
and a brute-force reference on random cases."""
import json

import numpy as np
import pytest

from datamodules.vidstg import VidSTGDataModule, read_vidstg
from formats.records import GroundedRecord, RecordError
from metrics.commands.vidstg import main
from metrics.protocols.vidstg import (
    evaluate_vidstg,
    evaluate_vidstg_sentences,
    sentence_vious,
    tubedetr_frame_grid,
)
from metrics.protocols.vidstg_annotations import VidSTGSentence
from metrics.protocols.vidstg_metric import VidSTGMetric
from tests.fixtures.public_datasets import VIDSTG_TUBE, _vidor_box, write_vidstg_public


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    return write_vidstg_public(tmp_path_factory.mktemp("vidstg"), write_videos=False)


def _boxes(records):
    return [(r.key, r.extra["sentence_type"], r.caption, r.frame_indices.tolist(),
             [b.tolist() for b in r.bboxes], r.labels, r.video_fname) for r in records]


def test_all_layouts_give_the_same_sentences(public):
    original = read_vidstg(public["original"], public["vidor"])
    assert _boxes(original) == _boxes(read_vidstg(public["tubedetr"]))
    inline = read_vidstg(public["inline"])
    assert [b[:-1] for b in _boxes(inline)] == [b[:-1] for b in _boxes(original)]
    # without VidOR's video_path the video is named after the vid (any container, see open_video)
    assert inline[0].video_fname == "2401075277.mp4" and original[0].video_fname == "0000/2401075277.mp4"
    # TubeDETR numbering: per entry, questions first
    assert [(r.key, r.extra["sentence_type"]) for r in original] == [
        ("2401075277_s0", "interrogative"), ("2401075277_s1", "declarative"),
        ("3201234567_s2", "interrogative"), ("3201234567_s3", "declarative")]


def test_sentence_record_tube_grid_and_boxes(public):
    r = read_vidstg(public["original"], public["vidor"])[1]  # "An adult in red [clothes] walks.", target 0
    assert r.tagged_caption == "<p>An adult in red [clothes] walks.</p>" and r.phrases == [r.caption]
    # end_fid is exclusive; 10 fps -> every 2nd frame
    assert r.frame_indices.tolist() == list(range(VIDSTG_TUBE[0], VIDSTG_TUBE[1], 2))
    assert r.extra["tube"] == list(VIDSTG_TUBE) and r.video_fname == "0000/2401075277.mp4"
    b = _vidor_box(0, 8)
    assert r.bboxes[2].tolist() == [[b["xmin"], b["ymin"], b["xmax"], b["ymax"]]]
    assert len(r.bboxes[4]) == 0  # frame 12: a gap in the trajectory
    question = read_vidstg(public["original"], public["vidor"])[0]  # target 1 starts at frame 6
    assert len(question.bboxes[0]) == 0 and len(question.bboxes[1]) == 1


def test_used_segment_spans_the_whole_segment(public):
    r = read_vidstg(public["tubedetr"], segment="used")[1]
    assert r.frame_indices.tolist() == list(range(0, 30, 2))
    has_box = [len(b) > 0 for b in r.bboxes]
    assert has_box == [4 <= f < 24 and f != 12 for f in range(0, 30, 2)]


def test_errors_name_file_entry_and_key(public, tmp_path):
    entries = json.loads(public["original"].read_text())
    entries[1]["temporal_gt"] = {"begin_fid": 20, "end_fid": 40}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(entries))
    with pytest.raises(RecordError, match=r"bad.json, entry #1 \(vid 3201234567\).*outside used_segment"):
        read_vidstg(bad, public["vidor"])
    with pytest.raises(RecordError, match="data.init_args.vidor_annotations"):
        read_vidstg(public["original"])
    with pytest.raises(RecordError, match="no VidOR annotation 3201234567.json"):
        read_vidstg(public["original"], public["vidor"] / "training" / "0000")
    dm = VidSTGDataModule(train_annotations=str(public["original"]), vidor_annotations=str(tmp_path / "nope"),
                          video_root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"data.init_args.vidor_annotations.*README section 'Datasets'"):
        dm.setup("fit")


# ---------------------------------------------------------------- metrics

def _record(key, sentence_type, gt_frames, box=(0, 0, 10, 10)):
    grid_len = 10
    bboxes = [np.array([box] if f in gt_frames else [], dtype=np.float32).reshape(-1, 4) for f in range(grid_len)]
    labels = [["s"] if f in gt_frames else [] for f in range(grid_len)]
    return GroundedRecord(video_fname="v.mp4", video_id=key, clip_id="s0", fps=5.0, clip_start_frame=0,
                          clip_end_frame=grid_len - 1, width=100, height=100, caption="s", tagged_caption="<p>s</p>",
                          phrases=["s"], bboxes=bboxes, labels=labels, extra={"sentence_type": sentence_type})


def _pred(frames):
    return {"caption": "s", "phrases": ["s"], "frames": [
        {"frame": f, "boxes": boxes, "labels": ["s"] * len(boxes), **({"scores": s} if s else {})}
        for f, boxes, s in frames]}


def hand_case():
    records = [_record("a", "declarative", {2, 3, 4, 5}), _record("b", "declarative", {0, 1, 2, 3}),
               _record("c", "interrogative", {1, 2}), _record("d", "interrogative", set(range(10)))]
    preds = {
        # frames 4..7 (and 11, off the grid): IoU 1 on 4, 0.5 on 5 -> vIoU 1.5 / |{2..7}| = 0.25
        "a_s0": _pred([(4, [[0, 0, 10, 10]], None), (5, [[0, 0, 10, 5]], None), (6, [[1, 1, 2, 2]], None),
                       (7, [[1, 1, 2, 2]], None), (11, [[0, 0, 10, 10]], None)]),
        # IoU 1, 1, 1, 1/3 on the tube -> 10/12
        "b_s0": _pred([(0, [[0, 0, 10, 10]], None), (1, [[0, 0, 10, 10]], None), (2, [[0, 0, 10, 10]], None),
                       (3, [[5, 0, 15, 10]], None)]),
        # "c" has no prediction -> 0; "d": the best-scored box has IoU 0.5 everywhere -> 0.5 (not > 0.5)
        "d_s0": _pred([(f, [[0, 0, 10, 10], [0, 0, 5, 10]], [0.2, 0.9]) for f in range(10)]),
    }
    return records, preds


def test_hand_computed_vious():
    records, preds = hand_case()
    viou, gt_viou = sentence_vious(records, preds)
    assert viou == pytest.approx([0.25, 10 / 12, 0.0, 0.5])
    assert gt_viou == pytest.approx([1.5 / 4, 10 / 12, 0.0, 0.5])
    out = evaluate_vidstg(records, preds)
    assert out["declarative_m_vIoU"] == pytest.approx((0.25 + 10 / 12) / 2)
    assert out["declarative_vIoU@0.3"] == 0.5 and out["declarative_vIoU@0.5"] == 0.5
    assert out["declarative_m_vIoU_gt_temporal"] == pytest.approx((0.375 + 10 / 12) / 2)
    assert out["declarative_vIoU@0.3_gt_temporal"] == 1.0 and out["declarative_vIoU@0.5_gt_temporal"] == 0.5
    assert out["interrogative_m_vIoU"] == pytest.approx(0.25)
    assert out["interrogative_vIoU@0.3"] == 0.5 and out["interrogative_vIoU@0.5"] == 0.0  # strict >
    assert out["all_m_vIoU"] == pytest.approx((0.25 + 10 / 12 + 0 + 0.5) / 4)
    assert out["num_declarative"] == 2 and out["num_all"] == 4


def _iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def reference_viou(record, pred):
    """The definition, frame by frame: the predicted span is the hull of the predicted grid frames."""
    gt = {int(f): b[0].tolist() for f, b in zip(record.frame_indices, record.bboxes) if len(b)}
    grid = record.frame_indices.tolist()
    pr = {}
    for fr in (pred or {}).get("frames", []):
        if fr["frame"] in grid and fr["boxes"]:
            scores = fr.get("scores") or [1.0] * len(fr["boxes"])
            pr[fr["frame"]] = fr["boxes"][max(range(len(scores)), key=lambda i: (scores[i], -i))]
    t0, t1 = min(gt), max(gt) + 1
    gt_viou = sum(_iou(pr[f], gt[f]) for f in gt if f in pr) / len(gt)
    if not pr:
        return 0.0, gt_viou
    s, e = min(pr), max(pr) + 1
    union = [f for f in grid if min(s, t0) <= f < max(e, t1)]
    total = sum(_iou(pr[f], gt[f]) for f in gt if f in pr and max(s, t0) <= f < min(e, t1))
    return total / len(union), gt_viou


@pytest.mark.parametrize("seed", range(5))
def test_random_cases_match_the_definition(seed):
    rng = np.random.default_rng(seed)
    records, preds = [], {}
    for i in range(12):
        lo = int(rng.integers(0, 8))
        gt_frames = set(range(lo, int(rng.integers(lo + 1, 11))))
        x, y = rng.uniform(0, 50, 2)
        records.append(_record(f"v{i}", ["declarative", "interrogative"][i % 2], gt_frames,
                               (x, y, x + rng.uniform(5, 40), y + rng.uniform(5, 40))))
        if rng.random() < 0.15:
            continue
        frames = []
        for f in sorted(set(rng.choice(12, size=int(rng.integers(1, 12)), replace=False).tolist())):
            n = int(rng.integers(1, 3))
            bx = [[float(x + rng.normal(0, 5)), float(y + rng.normal(0, 5)), float(x + 30), float(y + 30)]
                  for _ in range(n)]
            frames.append((f, bx, rng.uniform(0, 1, n).round(2).tolist() if rng.random() < 0.5 else None))
        preds[f"v{i}_s0"] = _pred(frames)
    viou, gt_viou = sentence_vious(records, preds)
    expected = np.array([reference_viou(r, preds.get(r.key)) for r in records])
    assert viou == pytest.approx(expected[:, 0], abs=1e-6)
    assert gt_viou == pytest.approx(expected[:, 1], abs=1e-6)


# ---------------------------------------------------------------- TubeDETR's evaluator, read literally

def tubedetr_frames(fps, start, end, sample_fps=5, video_max_len=200):
    sampling_rate = sample_fps / fps
    frame_ids = [start]
    for frame_id in range(start, end):
        if int(frame_ids[-1] * sampling_rate) < int(frame_id * sampling_rate):
            frame_ids.append(frame_id)
    if len(frame_ids) > video_max_len:
        frame_ids = [frame_ids[(j * len(frame_ids)) // video_max_len] for j in range(video_max_len)]
    return frame_ids


def tubedetr_scores(fps, segment, tube, gt_boxes, pred_boxes, pred_sted):
    frame_ids = tubedetr_frames(fps, *segment)
    inter_frames = [f for f in frame_ids if tube[0] <= f < tube[1]]
    max_start, min_end = max(tube[0], pred_sted[0]), min(tube[1], pred_sted[1])
    min_start, max_end = min(tube[0], pred_sted[0]), max(tube[1], pred_sted[1])
    if min_end <= max_start:
        tiou = 0
    else:
        inter = min_end - max_start
        tiou = inter / ((tube[1] - tube[0]) + (pred_sted[1] - pred_sted[0]) - inter)
    union_predgt = [f for f in frame_ids if min_start <= f < max_end]
    inter_predgt = {f for f in frame_ids if max_start <= f < min_end}
    viou = gt_viou = 0
    for f in inter_frames:
        iou = _iou(pred_boxes[f], gt_boxes[f])
        if f in inter_predgt:
            viou += iou
        gt_viou += iou
    return viou / max(len(union_predgt), 1), gt_viou / max(len(inter_frames), 1), tiou


@pytest.mark.parametrize("fps", [29.97, 23.976, 59.94, 30.0, 25.0, 5.0])
def test_frame_grid_is_tubedetrs(fps):
    rng = np.random.default_rng(int(fps * 100))
    for _ in range(20):
        start = int(rng.integers(0, 500))
        end = start + int(rng.integers(1, 3000))  # long segments hit the 200-frame cap
        assert tubedetr_frame_grid(fps, start, end).tolist() == tubedetr_frames(fps, start, end)


def test_frame_grid_by_hand():
    # absolute 5-fps grid at 30 fps from frame 7: 7 (start), then where int(f / 6) increases
    assert tubedetr_frame_grid(30.0, 7, 40).tolist() == [7, 12, 18, 24, 30, 36]
    # the project's range(start, end, round(fps / 5)) would give 7, 13, 19, ...: another grid
    assert tubedetr_frame_grid(5.0, 0, 1000).tolist() == list(range(0, 1000, 5))  # capped at 200 frames
    # 29.97 fps: step 6 until the 5.994-frame period drifts a frame (at 1000.998 -> 1001)
    grid = tubedetr_frame_grid(29.97, 0, 1010, max_frames=10_000).tolist()
    assert grid[:3] == [0, 6, 12] and 1001 in grid and 1002 not in grid


@pytest.mark.parametrize("seed", range(4))
def test_plain_data_equals_tubedetr_on_random_sentences(seed):
    rng = np.random.default_rng(seed)
    sentences, boxes, spans, expected = [], {}, {}, []
    for i in range(10):
        fps = float(rng.choice([29.97, 23.976, 59.94, 30.0]))
        start = int(rng.integers(0, 100))
        end = start + int(rng.integers(50, 2500))
        t0 = int(rng.integers(start, end - 1))
        t1 = int(rng.integers(t0 + 1, end + 1))
        x, y = rng.uniform(0, 50, 2)
        gt = {f: [x + f * 0.01, y, x + 40, y + 30] for f in range(t0, t1)}
        grid = tubedetr_frames(fps, start, end)
        pred = {f: [x + rng.normal(0, 8), y + rng.normal(0, 8), x + 40 + rng.normal(0, 8), y + 30] for f in grid}
        s0 = int(rng.integers(start, end))
        span = (s0, int(rng.integers(s0 + 1, end + 1)))
        key = f"v{i}"
        sentences.append(VidSTGSentence(key, ["declarative", "interrogative"][i % 2], fps, (start, end), (t0, t1), gt))
        boxes[key], spans[key] = pred, span
        expected.append(tubedetr_scores(fps, (start, end), (t0, t1), gt, pred, span))
    out = evaluate_vidstg_sentences(sentences, boxes, spans)
    e = np.array(expected)
    assert out["all_m_vIoU"] == pytest.approx(e[:, 0].mean())
    assert out["all_m_vIoU_gt_temporal"] == pytest.approx(e[:, 1].mean())
    assert out["all_m_tIoU"] == pytest.approx(e[:, 2].mean())
    assert out["all_vIoU@0.3"] == pytest.approx((e[:, 0] > 0.3).mean())
    assert out["declarative_vIoU@0.5_gt_temporal"] == pytest.approx((e[0::2, 1] > 0.5).mean())
    assert out["num_gt_frames_missing"] == 0 and out["num_pred_frames_missing"] == 0


def test_separate_predicted_span_by_hand():
    # 5 fps: every frame; tube [10, 20), predicted span [15, 25) with perfect boxes everywhere
    box = [0.0, 0.0, 10.0, 10.0]
    sentence = VidSTGSentence("k", "declarative", 5.0, (0, 30), (10, 20), {f: box for f in range(10, 20)})
    out = evaluate_vidstg_sentences([sentence], {"k": {f: box for f in range(30)}}, {"k": (15, 25)})
    assert out["all_m_vIoU"] == pytest.approx(5 / 15)  # frames 15..19 over the union 10..24
    assert out["all_m_vIoU_gt_temporal"] == 1.0 and out["all_m_tIoU"] == pytest.approx(5 / 15)
    # the same boxes, the span taken from the predicted frames (every frame: [0, 30))
    out = evaluate_vidstg_sentences([sentence], {"k": {f: box for f in range(30)}})
    assert out["all_m_vIoU"] == pytest.approx(10 / 30)


def test_records_with_a_separate_predicted_span():
    record = _record("a", "declarative", set(range(2, 6)))  # 5 fps, frames 0..9, tube [2, 6)
    pred = _pred([(f, [[0, 0, 10, 10]], None) for f in range(10)])
    assert evaluate_vidstg([record], {"a_s0": pred})["all_m_vIoU"] == pytest.approx(4 / 10)
    # span [4, 8): frames 4, 5 scored over the union [2, 8)
    out = evaluate_vidstg([record], {"a_s0": pred}, spans={"a_s0": (4, 8)})
    assert out["all_m_vIoU"] == pytest.approx(2 / 6) and out["all_m_tIoU"] == pytest.approx(2 / 6)
    assert evaluate_vidstg([record], {"a_s0": {**pred, "span": [4, 8]}}) == pytest.approx(out, nan_ok=True)


def test_long_segment_on_a_drifting_frame_rate_differs_from_the_project_grid():
    """29.97 fps, a 2000-frame tube: TubeDETR's grid (capped at 200) and range(start, end, 6) disagree."""
    fps, tube = 29.97, (1000, 3000)
    project = np.arange(tube[0], tube[1], 6)
    official = tubedetr_frame_grid(fps, *tube)
    assert len(official) == 200 and not set(official.tolist()) <= set(project.tolist())


def test_records_off_tubedetrs_grid_are_refused():
    """A 30-fps record from frame 7 holds 7, 13, 19, ...; TubeDETR's grid is 7, 12, 18, ..."""
    n = 6
    record = GroundedRecord(video_fname="v.mp4", video_id="a", clip_id="s0", fps=30.0, clip_start_frame=7,
                            clip_end_frame=7 + 6 * (n - 1), width=100, height=100, caption="s",
                            tagged_caption="<p>s</p>", phrases=["s"],
                            bboxes=[np.array([[0, 0, 10, 10]], dtype=np.float32)] * n, labels=[["s"]] * n,
                            extra={"sentence_type": "declarative", "tube": [7, 38], "used_segment": [7, 38]})
    assert record.frame_indices.tolist() == [7, 13, 19, 25, 31, 37]
    with pytest.raises(ValueError, match=r"frames \[12, 18, 24, 30, 36\] of TubeDETR's grid"):
        evaluate_vidstg([record], {})
    assert evaluate_vidstg([record], {}, grid="record")["num_all"] == 1


def test_torchmetric_equals_the_function():
    records, preds = hand_case()
    metric = VidSTGMetric()
    metric.set_references(records)
    metric.update({"a_s0": preds["a_s0"]})
    metric.update({"b_s0": preds["b_s0"], "d_s0": preds["d_s0"]})
    assert metric.compute() == pytest.approx(evaluate_vidstg([records[0], records[1], records[3]], preds), nan_ok=True)


def test_offline_evaluator_reads_both_layouts_alike(public, tmp_path, capsys):
    records = read_vidstg(public["original"], public["vidor"])
    preds = {}
    for i, r in enumerate(records):
        frames = [{"frame": int(f), "boxes": (b + [[2.0, -1.0, 1.0, 3.0]]).tolist(), "labels": [r.caption]}
                  for f, b in zip(r.frame_indices, r.bboxes) if len(b) and i != 2]
        preds[r.key] = {"caption": r.caption, "phrases": [r.caption], "frames": frames}
    path = tmp_path / "pred.json"
    path.write_text(json.dumps(preds))
    a = main(["--annotations", str(public["original"]), "--vidor-annotations", str(public["vidor"]),
              "--pred", str(path)])
    b = main(["--annotations", str(public["tubedetr"]), "--pred", str(path), "--out", str(tmp_path / "r.json")])
    assert a == b
    assert 0 < a["all_m_vIoU"] < 1 and a["interrogative_m_vIoU"] < a["declarative_m_vIoU"]
    assert json.loads((tmp_path / "r.json").read_text())["metrics"] == b
    assert "declarative_vIoU@0.5" in capsys.readouterr().out


def test_offline_evaluator_inline_layout_and_record_grid(public, tmp_path):
    records = read_vidstg(public["tubedetr"])
    preds = {r.key: {"caption": r.caption, "phrases": [r.caption], "frames": [
        {"frame": int(f), "boxes": b.tolist(), "labels": [r.caption] * len(b)}
        for f, b in zip(r.frame_indices, r.bboxes) if len(b)]} for r in records}
    path = tmp_path / "pred.json"
    path.write_text(json.dumps(preds))
    inline = main(["--annotations", str(public["inline"]), "--pred", str(path)])
    assert inline == main(["--annotations", str(public["tubedetr"]), "--pred", str(path)])
    # GT boxes as predictions: spatial vIoU 1 wherever the tube has a box (the gap frame has none)
    assert inline["all_m_vIoU_gt_temporal"] == pytest.approx(1.0)
    assert main(["--annotations", str(public["tubedetr"]), "--pred", str(path), "--grid", "record"])[
        "all_m_vIoU_gt_temporal"] == pytest.approx(1.0)


# ---------------------------------------------------------------- records on TubeDETR's grid

def _tubedetr_file(path, fps, used, tube, seed=0):
    """One declarative sentence in TubeDETR's layout; the target has a box on every tube frame."""
    rng = np.random.default_rng(seed)
    track = {}
    for f in range(*tube):
        x, y = rng.uniform(0, 300, 2)
        track[str(f)] = {"bbox": [float(x), float(y), float(rng.uniform(20, 200)), float(rng.uniform(20, 150))]}
    video = {"original_video_id": "v", "video_id": 0, "target_id": 3, "caption": "a dog runs.", "qtype": "declarative",
             "type": "subject", "fps": fps, "width": 640, "height": 480, "frame_count": used[1] + 5,
             "start_frame": used[0], "end_frame": used[1], "tube_start_frame": tube[0], "tube_end_frame": tube[1]}
    path.write_text(json.dumps({"videos": [video], "trajectories": {"v": {"3": track}}}))
    return {int(f): [b["bbox"][0], b["bbox"][1], b["bbox"][0] + b["bbox"][2], b["bbox"][1] + b["bbox"][3]]
            for f, b in track.items()}


@pytest.mark.parametrize("fps", [29.97, 23.976, 59.94])
def test_records_annotate_tubedetrs_frames_at_vidor_frame_rates(fps, tmp_path):
    used, tube = (37, 37 + 2600), (500, 1900)  # a long segment: TubeDETR's grid is capped at 200 frames
    path = tmp_path / "v.json"
    gt = _tubedetr_file(path, fps, used, tube)
    official = tubedetr_frames(fps, *used)
    assert len(official) == 200
    whole = read_vidstg(path, segment="used")[0]
    assert whole.frame_indices.tolist() == official
    r = read_vidstg(path)[0]  # the clip spans the tube: TubeDETR's evaluated frames (its inter_frames)
    in_tube = [f for f in official if tube[0] <= f < tube[1]]
    assert r.frame_indices.tolist() == in_tube
    assert len(r.bboxes) == len(in_tube)
    assert np.allclose(np.concatenate(r.bboxes), [gt[f] for f in in_tube], atol=1e-3)  # float32 boxes
    # the project grid is another set of frames
    project = read_vidstg(path, grid="project")[0]
    step = int(round(fps / 5))
    assert project.frame_indices.tolist() == list(range(tube[0], tube[1], step)) != in_tube


@pytest.mark.parametrize("seed", range(3))
def test_metric_on_the_records_equals_tubedetrs_evaluator(seed, tmp_path):
    """Predictions on the records' frames, scored by the metric, give TubeDETR's figure (literal port)."""
    rng = np.random.default_rng(seed)
    fps = float(rng.choice([29.97, 23.976, 59.94]))
    start = int(rng.integers(0, 100))
    used = (start, start + int(rng.integers(100, 3000)))
    t0 = int(rng.integers(used[0], used[1] - 20))
    tube = (t0, int(rng.integers(t0 + 20, used[1] + 1)))
    gt = _tubedetr_file(tmp_path / "v.json", fps, used, tube, seed)
    for segment in ("tube", "used"):
        r = read_vidstg(tmp_path / "v.json", segment=segment)[0]
        pred = {int(f): [gt[f][0] + rng.normal(0, 15), gt[f][1] + rng.normal(0, 15), gt[f][2], gt[f][3]]
                if f in gt else [0.0, 0.0, 50.0, 50.0] for f in r.frame_indices.tolist()}
        s0 = int(rng.integers(*used))
        span = (s0, int(rng.integers(s0 + 1, used[1] + 1)))
        frames = [{"frame": f, "boxes": [b], "labels": [r.caption]} for f, b in pred.items()]
        out = evaluate_vidstg([r], {r.key: {"caption": r.caption, "phrases": [r.caption], "frames": frames}},
                              spans={r.key: span})
        viou, gt_viou, tiou = tubedetr_scores(fps, used, tube, gt, pred, span)
        assert out["all_m_vIoU"] == pytest.approx(viou) and out["all_m_vIoU_gt_temporal"] == pytest.approx(gt_viou)
        assert out["all_m_tIoU"] == pytest.approx(tiou) and out["num_pred_frames_missing"] == 0


def test_a_tube_between_grid_frames_keeps_its_first_frame_and_scores_zero(tmp_path, caplog):
    fps, used, tube = 29.97, (0, 3000), (104, 110)  # 500 grid frames capped to 200: ..., 90, 102, 120, ...
    official = tubedetr_frames(fps, *used)
    assert not [f for f in official if tube[0] <= f < tube[1]]
    gt = _tubedetr_file(tmp_path / "v.json", fps, used, tube)
    with caplog.at_level("WARNING", logger="datamodules.vidstg"):
        r = read_vidstg(tmp_path / "v.json")[0]
    assert "1 of 1 sentences have no frame of TubeDETR's grid" in caplog.text
    assert r.frame_indices.tolist() == [104] and r.extra["off_grid"] is True and len(r.bboxes[0]) == 1
    perfect = {"caption": r.caption, "phrases": [r.caption],
               "frames": [{"frame": 104, "boxes": [gt[104]], "labels": [r.caption]}]}
    out = evaluate_vidstg([r], {r.key: perfect})
    expected = tubedetr_scores(fps, used, tube, gt, {}, tube)
    assert (out["all_m_vIoU"], out["all_m_vIoU_gt_temporal"]) == pytest.approx(expected[:2]) == (0.0, 0.0)


def test_tubedetr_grid_record_survives_pickling_and_lists_its_frames(public):
    import pickle

    r = read_vidstg(public["tubedetr"])[1]
    again = pickle.loads(pickle.dumps(r))  # DataLoader workers
    assert again.frame_indices.tolist() == r.frame_indices.tolist()
    assert r.to_dict()["frame_indices"] == r.frame_indices.tolist()
    with pytest.raises(ValueError, match="data.grid must be one of"):
        VidSTGDataModule(train_annotations=str(public["tubedetr"]), grid="stride")


def test_evaluation_callback_scores_tubedetrs_grid_and_refuses_other_records(public, tmp_path):
    import types

    from callbacks.task_evaluation import VidSTGEvaluation

    assert VidSTGEvaluation().make_metric(None).grid == "tubedetr"
    assert VidSTGEvaluation(grid="record").make_metric(None).grid == "record"
    with pytest.raises(ValueError, match="grid must be one of"):
        VidSTGEvaluation(grid="project")
    dm = VidSTGDataModule(val_annotations=str(public["tubedetr"]), video_root=str(tmp_path), grid="project")
    dm.datasets = {"val": types.SimpleNamespace(records=read_vidstg(public["tubedetr"], grid="project"))}
    trainer = types.SimpleNamespace(datamodule=dm)
    with pytest.raises(ValueError, match="data.init_args.grid: tubedetr, or the callback's init_args.grid: record"):
        VidSTGEvaluation()._start(trainer, None, "val")
    callback = VidSTGEvaluation(grid="record")
    callback._start(trainer, None, "val")
    assert set(callback.metrics["val"].references) == {r.key for r in dm.datasets["val"].records}
