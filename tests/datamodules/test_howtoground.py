"""HowToGround1M / iGround: public layouts, the compact lazy index, the dataset on lazy records."""
import json
import os
import pickle

import numpy as np
import pytest

from datamodules.grounded_dataset import GroundedClipDataset
from datamodules.howtoground import (
    HowToGroundDataModule,
    LazyRecords,
    build_index,
    merge_instances,
    open_lazy_records,
    read_keys_file,
    record_from_file,
)
from formats.records import RecordError, read_records
from metrics.evaluator.evaluation import evaluate_files
from tests.fixtures.public_datasets import (
    MISSING_VIDEO_KEY,
    TRICKY_PHRASE,
    howtoground_records,
    write_howtoground_public,
)

FAST = dict(text_encoder="exact", caption_metrics=(), capture=False)


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    return write_howtoground_public(tmp_path_factory.mktemp("howtoground"))


def _same(a, b):
    assert a.key == b.key and a.phrases == b.phrases and a.tagged_caption == b.tagged_caption
    assert (a.fps, a.clip_start_frame, a.clip_end_frame, a.width, a.height) == \
        (b.fps, b.clip_start_frame, b.clip_end_frame, b.width, b.height)
    assert a.labels == b.labels
    assert all(np.array_equal(x, y) for x, y in zip(a.bboxes, b.bboxes))


def test_every_public_layout_reads_the_same_records(public):
    expected = {r.key: r for r in howtoground_records(raw=True)}
    for layout in ("folder", "pickle", "json", "raw"):
        got = {r.key: r for r in read_records(public[layout])}
        assert sorted(got) == sorted(expected), layout
        for key in expected:
            _same(got[key], expected[key])
            assert all(type(p) is str for p in got[key].phrases)  # numpy strings became str


def test_public_pickles_really_hold_numpy(public):
    with (public["folder"] / "vidA_0.pkl").open("rb") as f:
        raw = pickle.load(f)
    assert isinstance(raw["phrases"], np.ndarray) and isinstance(raw["labels"][0], np.ndarray)
    assert isinstance(raw["fps"], np.floating) and raw["bboxes"][3].shape == (0, 4)  # a frame with no box


@pytest.mark.parametrize("layout", ["folder", "pickle", "json"])
def test_lazy_records_match_the_eager_reader(public, layout, tmp_path):
    eager = {r.key: r for r in read_records(public[layout])}
    lazy = open_lazy_records(public[layout], index_dir=tmp_path / "index")
    assert len(lazy) == len(eager) and lazy.keys() == sorted(eager)
    for i in range(len(lazy)):
        _same(lazy[i], eager[lazy.key(i)])
        assert lazy.position(lazy.key(i)) == i
    with pytest.raises(KeyError):
        lazy.position("not_a_key")
    # what a DataLoader worker receives is a few paths, not the records
    shipped = pickle.dumps(lazy)
    assert len(shipped) < 2000
    assert pickle.loads(shipped)[1].key == lazy.key(1)


def test_index_is_reused_and_rebuilt_when_the_folder_changes(public, tmp_path):
    folder = tmp_path / "per_key"
    folder.mkdir()
    for p in public["folder"].iterdir():
        (folder / p.name).write_bytes(p.read_bytes())
    index = build_index(folder, tmp_path / "idx")
    stamp = (index / "keys.npy").stat().st_mtime_ns
    assert build_index(folder, tmp_path / "idx") == index
    assert (index / "keys.npy").stat().st_mtime_ns == stamp  # not rebuilt
    os.rename(folder / "vidA_1.pkl", folder / "vidA_9.pkl")
    os.utime(folder, ns=(stamp + 10**9, stamp + 10**9))  # a rename updates the folder's mtime
    lazy = LazyRecords(build_index(folder, tmp_path / "idx"))
    assert "vidA_9" in lazy.keys() and "vidA_1" not in lazy.keys()


def test_keys_file_restricts_the_split_and_unknown_keys_are_left_out(public, tmp_path, caplog):
    keys = read_keys_file(public["keys"])
    assert "vidZ_9" in keys
    lazy = open_lazy_records(public["folder"], tmp_path / "idx", keys_file=public["keys"])
    assert lazy.keys() == sorted(k for k in keys if k != "vidZ_9")
    assert "vidZ_9" in caplog.text
    only = tmp_path / "keys.txt"
    only.write_text("vidA_1\n\nvid_B-2_7\n")
    assert open_lazy_records(public["folder"], tmp_path / "idx2", keys_file=only).keys() == ["vidA_1", "vid_B-2_7"]


def test_bad_per_key_files_are_record_errors_naming_the_file(tmp_path):
    (tmp_path / "cut.pkl").write_bytes(pickle.dumps({"video_id": "x"})[:-3])
    (tmp_path / "evil.pkl").write_bytes(pickle.dumps(os.system))
    (tmp_path / "two.pkl").write_bytes(pickle.dumps({"a": 1, "b": 2}))
    for name in ("cut.pkl", "evil.pkl", "two.pkl", "absent.pkl"):
        with pytest.raises(RecordError, match=name):
            record_from_file(tmp_path / name)


def test_lazy_dataset_sample_with_tricky_phrases_and_empty_frames(public, tmp_path):
    lazy = open_lazy_records(public["folder"], tmp_path / "idx")
    ds = GroundedClipDataset(lazy, public["videos"], num_frames=4, train=False, all_frames=True,
                             global_image_size=32, grounding_image_size=64)
    assert ds.records is lazy  # never materialised
    sample = ds[lazy.position("vidA_0")]
    # the tagged phrases in caption order, the repeated one twice, regex characters verbatim
    assert sample["phrases"] == ["a man", TRICKY_PHRASE, "a man"]
    assert np.array_equal(sample["boxes"][:, 0], sample["boxes"][:, 2])
    assert sample["boxes"].shape == (10, 3, 4) and sample["frame_indices"].tolist() == list(range(0, 20, 2))
    # annotated frame 3 has no box at all; "a man" has two instances, merged into their union
    assert not sample["present"][3].any()
    record = lazy[lazy.position("vidA_0")]
    union = record.bboxes[0][[0, 1]]
    x1, y1 = union[:, :2].min(0)
    x2, y2 = union[:, 2:].max(0)
    cx, cy = (x1 + x2) / 2 / record.width, (y1 + y2) / 2 / record.height
    assert sample["boxes"][0, 0, :2].numpy() == pytest.approx([cx, cy], abs=1e-6)


def test_missing_video_is_skipped_in_training_and_dropped_in_evaluation(public, tmp_path):
    lazy = open_lazy_records(public["folder"], tmp_path / "idx")
    position = lazy.position(MISSING_VIDEO_KEY)
    train = GroundedClipDataset(lazy, public["videos"], num_frames=4, train=True, global_image_size=32,
                                grounding_image_size=64)
    sample = train[position]
    assert sample["key"] == lazy.key(position + 1)  # the next clip stands in
    assert sample["skipped"][0][0] == MISSING_VIDEO_KEY and "FileNotFoundError" in sample["skipped"][0][1]
    evaluation = GroundedClipDataset(lazy, public["videos"], num_frames=4, train=False)
    assert "key" not in evaluation[position] and evaluation[position]["skipped"][0][0] == MISSING_VIDEO_KEY


def test_malformed_lazy_record_is_skipped_with_its_key(public, tmp_path):
    folder = tmp_path / "per_key"
    folder.mkdir()
    for p in public["folder"].iterdir():
        (folder / p.name).write_bytes(p.read_bytes())
    (folder / "vidA_1.pkl").write_bytes(b"not a pickle")
    lazy = open_lazy_records(folder, tmp_path / "idx")
    ds = GroundedClipDataset(lazy, public["videos"], num_frames=4, train=True, global_image_size=32,
                             grounding_image_size=64)
    sample = ds[lazy.position("vidA_1")]
    assert sample["skipped"][0][0] == "vidA_1" and "RecordError" in sample["skipped"][0][1]
    with pytest.raises(RecordError, match="vidA_1.pkl"):
        GroundedClipDataset(lazy, public["videos"], train=True, on_error="raise")[lazy.position("vidA_1")]


def test_raw_and_processed_iground(public):
    raw = {r.key: r for r in read_records(public["raw"])}
    processed = {r.key: r for r in read_records(public["processed"])}
    for key, r in raw.items():
        merged = merge_instances(r)
        _same(merged, processed[key])
        assert all(len(set(l)) == len(l) for l in merged.labels)  # one box per phrase and frame
        boxes_raw, present_raw = r.phrase_boxes()
        boxes_proc, present_proc = processed[key].phrase_boxes()
        assert np.array_equal(boxes_raw, boxes_proc) and np.array_equal(present_raw, present_proc)
    assert (sum(len(b) for r in raw.values() for b in r.bboxes)
            > sum(len(b) for r in processed.values() for b in r.bboxes))


def test_offline_evaluator_gives_one_report_for_every_layout(public, tmp_path):
    records = howtoground_records(raw=True)
    rng = np.random.default_rng(0)
    preds = {}
    for r in records:
        frames = []
        for f, boxes, labels in zip(r.frame_indices, r.bboxes, r.labels):
            if len(boxes):
                noisy = (boxes + rng.normal(0, 2, boxes.shape)).round(2)
                frames.append({"frame": int(f), "boxes": noisy.tolist(), "labels": list(labels),
                               "scores": rng.uniform(0.3, 1, len(boxes)).round(3).tolist()})
        preds[r.key] = {"caption": r.caption, "tagged_caption": r.tagged_caption, "phrases": r.phrases,
                        "frames": frames}
    pred_path = tmp_path / "pred.json"
    pred_path.write_text(json.dumps(preds))
    reports = {layout: evaluate_files(public[layout], pred_path, **FAST)
               for layout in ("folder", "pickle", "json", "raw")}
    assert reports["folder"] == reports["pickle"] == reports["json"] == reports["raw"]
    assert 0.5 < reports["json"]["metrics"]["mIoU"] < 1.0


def test_datamodule_lazy_train_eager_val_and_missing_paths(public, tmp_path):
    dm = HowToGroundDataModule(train_annotations=str(public["folder"]), val_annotations=str(public["raw"]),
                               video_root=str(public["videos"]), train_keys=str(public["keys"]),
                               index_dir=str(tmp_path / "idx"), num_workers=0)
    dm.prepare_data()
    dm.setup("fit")
    assert isinstance(dm.datasets["train"].records, LazyRecords) and len(dm.datasets["train"]) == 4
    assert isinstance(dm.datasets["val"].records, list)
    bad = HowToGroundDataModule(train_annotations=str(tmp_path / "nowhere"), video_root=str(public["videos"]))
    with pytest.raises(FileNotFoundError, match=r"data.init_args.train_annotations.*README section 'Datasets'"):
        bad.setup("fit")
    bad_keys = HowToGroundDataModule(train_annotations=str(public["folder"]), video_root=str(public["videos"]),
                                     train_keys=str(tmp_path / "keys.pkl"))
    with pytest.raises(FileNotFoundError, match=r"data.init_args.train_keys.*README section 'Datasets'"):
        bad_keys.prepare_data()


def test_frame_folder_root_gives_the_same_frames(public, tmp_path):
    from PIL import Image

    from formats.video_reader import PyAVVideoSource

    record = next(r for r in read_records(public["raw"]) if r.key == "vidA_1")
    with PyAVVideoSource(public["videos"] / "vidA_1.mp4") as video:
        frames = video.read_all()
    folder = tmp_path / "frames" / "vidA_1"  # <root>/<video stem>/000001.png, 1-based like ffmpeg
    folder.mkdir(parents=True)
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(folder / f"{i + 1:06d}.png")
    kw = dict(num_frames=4, train=False, all_frames=True, global_image_size=32, grounding_image_size=64)
    from_video = GroundedClipDataset([record], public["videos"], **kw)[0]
    from_folder = GroundedClipDataset([record], tmp_path / "frames", **kw)[0]
    assert from_folder["skipped"] == [] and from_folder["global_frames"].equal(from_video["global_frames"])
