"""ActivityNet-Entities: the public files, the 10 sampled frames, and the official F1 metrics on
hand-computed cases."""
import json

import numpy as np
import pytest

from datamodules.anet_entities import (
    ActivityNetEntitiesDataModule,
    ActivityNetEntitiesDataset,
    read_anet_entities,
    sampled_frame_times,
)
from metrics.commands.anet_entities import main
from metrics.protocols.anet_entities import (
    anet_overlap,
    evaluate_anet_entities,
    evaluate_gt_grounding,
    load_reference,
    reference_from_records,
    spacy_lemmatizer,
    submission_from_predictions,
    tagged_word_indices,
)
from metrics.protocols.anet_entities_metric import ANetEntitiesMetric
from tests.fixtures.public_datasets import ANET_FPS, anet_segments, write_anet_public


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    return write_anet_public(tmp_path_factory.mktemp("anet"))


@pytest.fixture(scope="module")
def lemmatize():
    return spacy_lemmatizer()


def _val(public, **kw):
    return read_anet_entities(public["cleaned"], public["split"], ["validation"], [public["captions"]],
                              public["raw"], **kw)


# ---------------------------------------------------------------- reading

def test_segment_records(public):
    records = _val(public)
    assert [r.key for r in records] == ["v_val000001_0", "v_val000001_1", "v_val000002_0"]  # segment 2: no boxes
    r = records[0]
    assert r.caption == "a man throws a ball to a man ."
    assert r.tagged_caption == "a <p>man</p> throws a <p>ball</p> to a <p>man</p> ."
    assert r.phrases == ["man", "ball"] and (r.width, r.height) == (720, 405)
    assert r.frame_indices.tolist() == list(range(10))  # the 10 sampled frames
    assert r.labels[2] == ["man", "ball"] and r.labels[7] == ["man"] and r.labels[0] == []
    assert r.bboxes[7].tolist() == [[500, 30, 700, 390]]
    assert r.extra["timestamps"] == [0.5, 3.5] and r.extra["process_idx"] == [[1], [4], [7]]


def test_timestamps_and_sizes_from_every_source(public, tmp_path):
    inline = write_anet_public(tmp_path, write_videos=False, timestamps_in_segments=True)
    a = _val(public)
    b = read_anet_entities(inline["cleaned"], inline["split"], ["validation"],
                           frame_size_file=inline["raw"])  # timestamps in the segments
    probed = read_anet_entities(public["cleaned"], public["split"], ["validation"], [public["captions"]],
                                video_root=public["videos"])  # 64x36 video -> 720 x 405
    for x, y, z in zip(a, b, probed):
        assert x.extra["timestamps"] == y.extra["timestamps"] and x.tagged_caption == y.tagged_caption
        assert (z.width, z.height) == (x.width, x.height)
    assert read_anet_entities(public["cleaned"], public["split"], ["validation"], [], public["raw"]) == []
    everything = read_anet_entities(public["cleaned"], None, timestamp_files=[public["captions"]],
                                    frame_size_file=public["raw"])
    assert "v_trn000003_0" in {r.key for r in everything}
    with pytest.raises(Exception, match="rwidth/rheight"):
        read_anet_entities(public["cleaned"], public["split"], ["validation"], [public["captions"]])


def test_sampled_frames_are_decoded_at_segment_part_centres(public):
    records = _val(public)
    ds = ActivityNetEntitiesDataset(records, public["videos"], num_frames=8, train=False, all_frames=True,
                                    global_image_size=32, grounding_image_size=64)
    r = records[2]  # [0, 4] s: centres at 0.2, 0.6, ..., 3.8 s -> source frames 2, 6, ..., 38
    assert sampled_frame_times(0, 4) == pytest.approx(np.arange(0.2, 4, 0.4))
    frames = ds.decode_frames(r, np.arange(10))
    brightness = frames.reshape(10, -1).mean(1) / 4  # frame k has brightness 4k
    assert np.round(brightness).tolist() == [int(np.floor(t * ANET_FPS)) for t in np.arange(0.2, 4, 0.4)]
    sample = ds[2]
    assert sample["frame_indices"].tolist() == list(range(10))  # predictions use the 0-9 numbering
    assert sample["present"][0].tolist() == [True, False] and sample["present"][9].tolist() == [False, True]


def test_datamodule_splits_and_missing_split_file(public, tmp_path):
    dm = ActivityNetEntitiesDataModule(
        train_annotations=str(public["cleaned"]), val_annotations=str(public["cleaned"]),
        split_annotations=str(public["split"]), timestamp_annotations=[str(public["captions"])],
        frame_size_annotations=str(public["raw"]), video_root=str(public["videos"]), num_workers=0)
    dm.setup("fit")
    assert [r.key for r in dm.datasets["train"].records] == ["v_trn000003_0"]
    assert len(dm.datasets["val"]) == 3
    bad = ActivityNetEntitiesDataModule(train_annotations=str(public["cleaned"]), video_root=str(public["videos"]),
                                        split_annotations=str(tmp_path / "split.json"))
    with pytest.raises(FileNotFoundError, match=r"data.init_args.split_annotations.*README section 'Datasets'"):
        bad.setup("fit")


# ---------------------------------------------------------------- metrics

def test_overlap_follows_the_official_pixel_convention():
    gt = np.array([[400, 100, 480, 180], [5, 5, 5, 5], [0, 0, 10, 10]], dtype=float)
    pred = np.array([[400, 100, 480, 140], [4, 4, 8, 8], [3, 3, 3, 3]], dtype=float)
    # 81x41 inside 81x81 pixels: 3321 / 6561 > 0.5 (the continuous IoU would be exactly 0.5);
    # a point-sized GT box overlaps 0, a point-sized prediction -1 (that rule is applied last)
    assert anet_overlap(pred, gt) == pytest.approx([3321 / 6561, 0.0, -1.0])
    assert anet_overlap(gt[1:2], gt[1:2]) == pytest.approx([-1.0])


def _reference():
    segs = anet_segments()
    return {v: segs[v] for v in ("v_val000001", "v_val000002")}


def _zeros():
    return [[0, 0, 0, 0] for _ in range(10)]


def _with(frames: dict):
    boxes = _zeros()
    for f, b in frames.items():
        boxes[f] = b
    return boxes


def hand_submission():
    return {
        "v_val000001": {
            "0": {"clss": ["man", "ball", "throw", "dog"], "idx_in_sent": [1, 4, 2, 0],
                  "bbox_for_all_frames": [_with({2: [10, 20, 300, 380]}), _with({2: [400, 100, 480, 140]}),
                                          _with({}), _with({2: [10, 20, 300, 380]})]},
            "1": {"clss": ["ball"], "idx_in_sent": [5], "bbox_for_all_frames": [_with({4: [50, 50, 250, 350]})]},
            "2": {"clss": ["camera"], "idx_in_sent": [3], "bbox_for_all_frames": [_with({})]},
        },
        "v_trn000003": {"0": {"clss": ["dog"], "idx_in_sent": [1], "bbox_for_all_frames": [_with({})]}},
    }


def test_hand_computed_f1(lemmatize):
    out = evaluate_anet_entities(_reference(), hand_submission(), lemmatize)
    # precision_all: man [1], ball [1, 0 (hallucinated in segment 1)], dog [0]; "throw" is a
    # non-object word of the sentence -> ignored. 2 classes (man, ball) in the predicted segments.
    assert out["precision_all"] == pytest.approx(0.75)
    assert out["precision_loc"] == pytest.approx(1.0)
    # recall_all: man [1, 0 (word 7: the first 'man' has no box on frame 7), 0 (not predicted in
    # segment 1)], ball [1], woman [0], horse [0] (video not submitted)
    assert out["recall_all"] == pytest.approx((1 / 3 + 1) / 2)
    assert out["recall_loc"] == pytest.approx((0.5 + 1) / 2)
    assert out["F1_all"] == pytest.approx(2 * 0.75 * (2 / 3) / (0.75 + 2 / 3))
    assert out["F1_loc"] == pytest.approx(2 * 1.0 * 0.75 / 1.75)
    # per sentence, over 4 submitted segments: segment 0: P = R = 2/3; segment 1: P = R = 0
    assert out["precision_all_per_sent"] == pytest.approx(2 / 3 / 4)
    assert out["recall_all_per_sent"] == pytest.approx(2 / 3 / 4)
    assert out["F1_all_per_sent"] == pytest.approx(2 / 3 / 4)
    # loc: segment 1 has no entry -> left out (denominator 3); segment 0: P = 1, R = 2/3, F1 = 0.8
    assert out["precision_loc_per_sent"] == pytest.approx(1 / 3)
    assert out["recall_loc_per_sent"] == pytest.approx(2 / 9)
    assert out["F1_loc_per_sent"] == pytest.approx(0.8 / 3)
    assert out["num_classes"] == 2 and out["num_segments"] == 3


def test_segment_with_an_empty_precision_list_counts_zero(lemmatize):
    """The official rule: recall entries but no precision entry -> P = R = F1 = 0, not left out."""
    reference = {"v_val000001": anet_segments()["v_val000001"]}
    sub = {"v_val000001": {
        "0": hand_submission()["v_val000001"]["0"],
        # "camera" is a non-object word of segment 1: ignored by precision, so its list is empty
        "1": {"clss": ["camera"], "idx_in_sent": [5], "bbox_for_all_frames": [_with({})]},
    }}
    out = evaluate_anet_entities(reference, sub, lemmatize)
    # segment 0: P = R = F1 = 2/3 (as above); segment 1: recall [0], precision [] -> 0; 2 segments
    assert out["precision_all_per_sent"] == pytest.approx((2 / 3 + 0) / 2)
    assert out["recall_all_per_sent"] == pytest.approx((2 / 3 + 0) / 2)
    assert out["F1_all_per_sent"] == pytest.approx((2 / 3 + 0) / 2)


def test_hand_computed_gt_mode():
    sub = {"v_val000001": {
        "0": {"clss": ["man", "ball", "man"], "idx_in_sent": [1, 4, 7],
              "bbox_for_all_frames": [_with({2: [10, 20, 300, 380]}), _with({2: [400, 100, 480, 140]}),
                                      _with({7: [550, 30, 750, 390]})]},  # 151 / 251 > 0.5
        "1": {"clss": ["man"], "idx_in_sent": [2], "bbox_for_all_frames": [_with({4: [50, 50, 250, 350]})]}}}
    out = evaluate_gt_grounding(_reference(), sub)
    # man [1, 1, 0 (word 1 of segment 1 not grounded)], ball [1], woman [0], horse [0]
    assert out["localization_accuracy"] == pytest.approx((2 / 3 + 1 + 0 + 0) / 4)


def test_predictions_become_a_submission(lemmatize):
    boxes = {"A": [1, 2, 30, 40], "B": [5, 5, 50, 50], "C": [7, 7, 70, 70]}
    preds = {"v_val000001_0": {
        "caption": "a man throws a ball to the men and a man", "phrases": ["man", "ball", "men", "man"],
        "tagged_caption": "a <p>man</p> throws a <p>ball</p> to the <p>men</p> and a <p>man</p>",
        "frames": [{"frame": 2, "boxes": [boxes["A"], boxes["B"], boxes["C"]], "labels": ["man", "ball", "man"]},
                   {"frame": 12, "boxes": [boxes["A"]], "labels": ["man"]}]}}
    entry = submission_from_predictions(preds, _reference(), lemmatize)["v_val000001"]["0"]
    assert entry["clss"] == ["man", "ball", "man", "man"]
    assert entry["idx_in_sent"] == [1, 4, 7, 10] == tagged_word_indices(preds["v_val000001_0"]["tagged_caption"])
    got = np.array(entry["bbox_for_all_frames"])
    assert got.shape == (4, 10, 4)
    assert got[0, 2].tolist() == boxes["A"] and got[3, 2].tolist() == boxes["C"] and got[1, 2].tolist() == boxes["B"]
    assert not got[2].any() and not got[:, [0, 1, 3, 4, 5, 6, 7, 8, 9]].any()
    # teacher-forced: the phrases are the reference's tagged words -> the reference's word indices
    forced = {"v_val000001_0": {"phrases": ["man", "ball", "man"],
                                "tagged_caption": "a <p>man</p> , <p>ball</p> <p>man</p>", "frames": []}}
    assert submission_from_predictions(forced, _reference(), lemmatize)["v_val000001"]["0"]["idx_in_sent"] == [1, 4, 7]


def test_online_metric_and_offline_cli_agree(public, tmp_path, lemmatize, capsys):
    records = _val(public)
    rng = np.random.default_rng(0)
    preds = {}
    for r in records:
        frames = []
        for f, (b, l) in enumerate(zip(r.bboxes, r.labels)):
            if len(b):
                frames.append({"frame": f, "boxes": (b + rng.normal(0, 20, b.shape)).round(1).tolist(), "labels": l})
        preds[r.key] = {"caption": r.caption, "tagged_caption": r.tagged_caption, "phrases": r.phrases,
                        "frames": frames}
    metric = ANetEntitiesMetric(lemmatize=lemmatize)
    metric.set_references(records)
    metric.update(preds)
    online = metric.compute()
    pred_path, sub_path = tmp_path / "pred.json", tmp_path / "sub.json"
    pred_path.write_text(json.dumps(preds))
    common = ["--reference", str(public["cleaned"]), "--split-file", str(public["split"])]
    from_pred = main([*common, "--pred", str(pred_path), "--write-submission", str(sub_path)])
    from_sub = main([*common, "--submission", str(sub_path)])
    assert online == pytest.approx(from_pred) and from_pred == from_sub
    assert 0 < online["F1_all"] <= 1 and "F1_loc_per_sent" in capsys.readouterr().out
    ref = load_reference(public["cleaned"], public["split"], ["validation"])
    assert reference_from_records(records) == {v: {s: {k: a[k] for k in ("tokens", "process_clss", "process_idx",
                                                                          "process_bnd_box", "frame_ind")}
                                                   for s, a in segs.items() if a["frame_ind"]}
                                               for v, segs in ref.items()}
