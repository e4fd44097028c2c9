"""The Hugging Face hub's JSONL layout of HowToGround1M and iGround: eager and lazy reading, keys
companions, errors naming file and line, the index's memory."""
import json
import os
import pickle
import tracemalloc

import numpy as np
import pytest

from datamodules.grounded_dataset import GroundedClipDataset
from datamodules.howtoground import HowToGroundDataModule, merge_instances
from formats.hub_jsonl import (
    JsonlRecords,
    build_jsonl_index,
    companion_keys,
    line_spans,
    open_jsonl_records,
    read_jsonl_records,
    split_key,
    write_jsonl_records,
)
from formats.records import RecordError, read_records
from metrics.evaluator.evaluation import evaluate_files
from tests.fixtures.public_datasets import howtoground_records, write_howtoground_public

FAST = dict(text_encoder="exact", caption_metrics=(), capture=False)


def hub_row(record, with_ids: bool) -> dict:
    """A record as a hub JSONL row holds it: plain JSON numbers and lists, ids only when asked."""
    row = {"video_fname": record.video_fname, "fps": record.fps, "clip_start_frame": record.clip_start_frame,
           "clip_end_frame": record.clip_end_frame, "width": record.width, "height": record.height,
           "caption": record.caption, "tagged_caption": record.tagged_caption, "phrases": list(record.phrases),
           "bboxes": [np.asarray(b).reshape(-1, 4).tolist() for b in record.bboxes],
           "labels": [list(l) for l in record.labels]}
    if with_ids:
        row = {"video_id": record.video_id, "clip_id": record.clip_id, **row}
    return row


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def write_howtoground1m(folder, config, records, key_style="string", extra=None):
    """``HowToGround1M_<config>.jsonl`` (rows without ids) and its ``_keys.jsonl``."""
    rows = [json.dumps({**hub_row(r, with_ids=False), **(extra or {})}) for r in records]
    keys = {"string": lambda r: json.dumps(r.key), "object": lambda r: json.dumps({"video_id": r.key}),
            "bare": lambda r: r.key}[key_style]
    write_lines(folder / f"HowToGround1M_{config}_keys.jsonl", [keys(r) for r in records])
    return write_lines(folder / f"HowToGround1M_{config}.jsonl", rows)


def _same(a, b):
    assert a.key == b.key and a.video_id == b.video_id and a.clip_id == b.clip_id
    assert (a.video_fname, a.fps, a.clip_start_frame, a.clip_end_frame, a.width, a.height) == \
        (b.video_fname, b.fps, b.clip_start_frame, b.clip_end_frame, b.width, b.height)
    assert (a.caption, a.tagged_caption, a.phrases, a.labels) == (b.caption, b.tagged_caption, b.phrases, b.labels)
    assert all(np.array_equal(x, y) for x, y in zip(a.bboxes, b.bboxes)) and len(a.bboxes) == len(b.bboxes)


@pytest.mark.parametrize("config", ["automatic_annotation_method", "model_preds"])
@pytest.mark.parametrize("key_style", ["string", "object", "bare"])
def test_howtoground1m_rows_take_their_keys_from_the_companion(tmp_path, config, key_style):
    records = howtoground_records(raw=False)
    path = write_howtoground1m(tmp_path, config, records, key_style, extra={"source": "hub", "score": 0.5})
    assert companion_keys(path) == tmp_path / f"HowToGround1M_{config}_keys.jsonl"
    got = read_records(path)  # the reader every tool uses
    assert [r.key for r in got] == [r.key for r in records]  # file order; 'vid_B-2_7' keeps its '_'
    for a, b in zip(got, records):
        _same(a, b)
        assert a.extra == {"source": "hub", "score": 0.5}  # extra columns are kept, not refused


def test_iground_rows_carry_their_ids_raw_and_processed(tmp_path):
    raw = howtoground_records(raw=True)
    for split in ("train", "val", "test"):
        write_lines(tmp_path / f"iGround_{split}_set_raw.jsonl", [json.dumps(hub_row(r, True)) for r in raw])
        write_lines(tmp_path / f"iGround_{split}_set_processed.jsonl",
                    [json.dumps(hub_row(merge_instances(r), True)) for r in raw])
    got_raw = read_records(tmp_path / "iGround_test_set_raw.jsonl")
    got_processed = read_records(tmp_path / "iGround_train_set_processed.jsonl")
    assert companion_keys(tmp_path / "iGround_test_set_raw.jsonl") is None
    for a, b, c in zip(got_raw, raw, got_processed):
        _same(a, b)
        _same(c, merge_instances(b))
    assert sum(len(b) for r in got_raw for b in r.bboxes) > sum(len(b) for r in got_processed for b in r.bboxes)


def test_a_companion_of_video_ids_with_clip_ids_in_the_rows(tmp_path):
    records = howtoground_records(raw=False)
    rows = [json.dumps({"clip_id": r.clip_id, **hub_row(r, False)}) for r in records]
    path = write_lines(tmp_path / "HowToGround1M_model_preds.jsonl", rows)
    keys = tmp_path / "HowToGround1M_model_preds_keys.jsonl"
    write_lines(keys, [json.dumps(r.video_id) for r in records])  # the video ids alone
    assert [(r.video_id, r.clip_id) for r in read_records(path)] == [(r.video_id, r.clip_id) for r in records]
    write_lines(keys, [json.dumps(r.key) for r in records])  # or the whole keys
    assert [(r.video_id, r.clip_id) for r in read_records(path)] == [(r.video_id, r.clip_id) for r in records]


def test_a_key_column_serves_without_a_companion(tmp_path):
    records = howtoground_records(raw=False)
    path = write_lines(tmp_path / "clips.jsonl", [json.dumps({"key": r.key, **hub_row(r, False)}) for r in records])
    assert [r.key for r in read_records(path)] == [r.key for r in records]
    assert split_key("abc_def_12") == ("abc_def", "12") and split_key("abc_def_12", "abc") == ("abc", "def_12")
    assert split_key("loneid") == ("loneid", "0")


def test_errors_name_file_line_and_field(tmp_path):
    records = howtoground_records(raw=False)
    good = [json.dumps(hub_row(r, True)) for r in records]
    cases = {
        "broken JSON": (good[:2] + ['{"video_fname": "x.mp4", "fps": '] + good[2:], r"line 3: not valid JSON"),
        "missing fps": (good[:1] + [json.dumps({k: v for k, v in hub_row(records[1], True).items() if k != "fps"})],
                        r"line 2, record 'vidA_1': missing field\(s\) fps"),
        "bad boxes": (good[:3] + [json.dumps({**hub_row(records[3], True), "bboxes": [[[1, 2, 3]]] * 10})],
                      r"line 4, record 'vidMissing_0': field 'bboxes\[0\]'"),
        "not an object": (["[1, 2]"], r"line 1: expected a JSON object"),
        "no key": ([json.dumps(hub_row(records[0], False))], r"line 1: missing field\(s\) video_id, clip_id"),
        "twice": (good + good[:1], r"clip key 'vidA_0' appears twice \(lines 1 and 5\)"),
    }
    for name, (lines, message) in cases.items():
        path = write_lines(tmp_path / f"{name.replace(' ', '_')}.jsonl", lines)
        with pytest.raises(RecordError, match=message) as caught:
            read_records(path)
        assert str(path) in str(caught.value), name


def test_a_keys_companion_that_does_not_fit_is_refused(tmp_path):
    records = howtoground_records(raw=False)
    path = write_howtoground1m(tmp_path, "model_preds", records)
    keys = tmp_path / "HowToGround1M_model_preds_keys.jsonl"
    write_lines(keys, [json.dumps(r.key) for r in records[:3]])
    with pytest.raises(RecordError, match=r"_keys.jsonl: line 4 holds no key"):
        read_records(path)
    with pytest.raises(RecordError, match=r"line 4 holds no key"):
        build_jsonl_index(path, tmp_path / "idx")
    write_lines(keys, [json.dumps(r.key) for r in records] + ['"extra_1"'])
    with pytest.raises(RecordError, match=r"line 5 holds a key.*5 keys for 4 rows"):
        read_records(path)
    # a row that carries ids of its own must agree with the companion
    write_lines(path, [json.dumps(hub_row(r, True)) for r in records])
    write_lines(keys, [json.dumps(r.key) for r in records[1:]] + [json.dumps(records[0].key)])
    with pytest.raises(RecordError, match=r"line 1: fields 'video_id'/'clip_id' give the key 'vidA_0' but line 1"):
        read_records(path)


@pytest.mark.parametrize("chunk", [1, 3, 7, 64, 1 << 20])
def test_line_spans_match_python_line_splitting(tmp_path, chunk):
    rng = np.random.default_rng(chunk)
    for case in range(20):
        pieces = []
        for _ in range(rng.integers(0, 12)):
            kind = rng.integers(0, 4)
            text = "" if kind == 0 else "\r" if kind == 1 else "x" * int(rng.integers(1, 9))
            pieces.append(text + ("\r\n" if kind == 3 else "\n"))
        data = "".join(pieces) + ("tail" if rng.integers(0, 2) else "")
        path = tmp_path / f"f{case}.jsonl"
        path.write_bytes(data.encode())
        expected = [(n, line.rstrip("\r")) for n, line in enumerate(data.split("\n"), start=1) if line.rstrip("\r")]
        starts, lengths, numbers = line_spans(path, chunk=chunk)
        raw = path.read_bytes()
        got = [(int(n), raw[s:s + l].decode()) for s, l, n in zip(starts, lengths, numbers)]
        assert got == expected, repr(data)


def test_lazy_records_equal_the_eager_reader_and_hold_no_rows(tmp_path):
    records = howtoground_records(raw=True)
    path = write_howtoground1m(tmp_path, "automatic_annotation_method", records)
    eager = read_records(path)
    lazy = open_jsonl_records(path, tmp_path / "idx")
    assert len(lazy) == len(eager) and lazy.keys() == [r.key for r in eager]
    for i, record in enumerate(eager):
        _same(lazy[i], record)
        assert lazy.position(record.key) == i and lazy.line(i) == i + 1
    with pytest.raises(KeyError):
        lazy.position("vidQ_0")
    shipped = pickle.dumps(lazy)  # what a DataLoader worker receives: paths, not rows
    assert len(shipped) < 2000 and pickle.loads(shipped)[2].key == records[2].key


def test_index_is_reused_and_rebuilt_when_the_file_changes(tmp_path):
    records = howtoground_records(raw=False)
    path = write_lines(tmp_path / "iGround_val_set_raw.jsonl", [json.dumps(hub_row(r, True)) for r in records])
    index = build_jsonl_index(path)
    assert index == tmp_path / "iGround_val_set_raw.jsonl.index"
    stamp = (index / "starts.npy").stat().st_mtime_ns
    assert build_jsonl_index(path) == index and (index / "starts.npy").stat().st_mtime_ns == stamp
    write_lines(path, [json.dumps(hub_row(r, True)) for r in records[1:]])
    lazy = open_jsonl_records(path)
    assert lazy.keys() == [r.key for r in records[1:]]


def test_a_malformed_row_is_found_when_read_and_skipped_by_the_dataset(tmp_path):
    public = write_howtoground_public(tmp_path / "public")
    records = howtoground_records(raw=True)
    lines = [json.dumps(hub_row(r, True)) for r in records]
    lines[1] = lines[1][:40]  # cut short
    path = write_lines(tmp_path / "train.jsonl", lines)
    lazy = open_jsonl_records(path, tmp_path / "idx")
    assert len(lazy) == 4 and lazy.key(1) == "train.jsonl:2"  # no key could be read from the row
    with pytest.raises(RecordError, match=r"train.jsonl, line 2: not valid JSON"):
        lazy[1]
    ds = GroundedClipDataset(lazy, public["videos"], num_frames=4, train=True, global_image_size=32,
                             grounding_image_size=64)
    sample = ds[1]
    assert sample["key"] == records[2].key  # the next clip stands in
    assert sample["skipped"][0][0] == "train.jsonl:2" and "line 2" in sample["skipped"][0][1]


def test_restricting_keys_file(tmp_path):
    records = howtoground_records(raw=False)
    path = write_howtoground1m(tmp_path, "automatic_annotation_method", records)
    only = write_lines(tmp_path / "keys.txt", ["vid_B-2_7", "vidA_0", "vidNone_3"])
    lazy = open_jsonl_records(path, restrict_to=only)
    assert lazy.keys() == ["vidA_0", "vid_B-2_7"] and [lazy.line(i) for i in range(2)] == [1, 3]
    _same(lazy[1], records[2])
    assert open_jsonl_records(path).keys() == [r.key for r in records]  # its own index, beside
    sample = write_lines(tmp_path / "sample_keys.jsonl", ['"vidA_1"', '{"video_id": "vidA_0"}'])  # companion lines
    assert open_jsonl_records(path, restrict_to=sample).keys() == ["vidA_0", "vidA_1"]


def test_a_file_where_no_row_has_a_key_fails_when_indexed(tmp_path):
    rows = [json.dumps(hub_row(r, with_ids=False)) for r in howtoground_records(raw=False)]
    path = write_lines(tmp_path / "iGround_val_set_raw.jsonl", rows)
    with pytest.raises(RecordError, match=r"iGround_val_set_raw.jsonl, line 1: missing field\(s\) video_id, clip_id"):
        build_jsonl_index(path)


def test_writer_round_trip_both_layouts(tmp_path):
    records = howtoground_records(raw=True)
    for companion in (False, True):
        path = write_jsonl_records(records, tmp_path / f"clips_{companion}.jsonl", keys_companion=companion)
        assert (companion_keys(path) is not None) == companion
        first = json.loads(path.read_text().splitlines()[0])
        assert ("video_id" in first) != companion
        for a, b in zip(read_jsonl_records(path), records):
            _same(a, b)


def test_evaluator_reads_the_jsonl_like_the_pickle(tmp_path):
    public = write_howtoground_public(tmp_path / "public")
    records = howtoground_records(raw=True)
    jsonl = write_howtoground1m(tmp_path, "automatic_annotation_method", records)
    preds = {r.key: {"caption": r.caption, "tagged_caption": r.tagged_caption, "phrases": r.phrases,
                     "frames": [{"frame": int(f), "boxes": (np.asarray(b) + 1.5).tolist(), "labels": list(l)}
                                for f, b, l in zip(r.frame_indices, r.bboxes, r.labels)]} for r in records[:3]}
    pred_path = tmp_path / "pred.json"
    pred_path.write_text(json.dumps(preds))
    assert evaluate_files(jsonl, pred_path, **FAST) == evaluate_files(public["pickle"], pred_path, **FAST)


def test_datamodules_read_a_jsonl_training_file_lazily(tmp_path):
    public = write_howtoground_public(tmp_path / "public")
    records = howtoground_records(raw=True)
    train = write_howtoground1m(tmp_path, "automatic_annotation_method", records)
    val = write_lines(tmp_path / "iGround_val_set_raw.jsonl", [json.dumps(hub_row(r, True)) for r in records])
    keys = write_lines(tmp_path / "train_keys.txt", ["vidA_0", "vidA_1", "vid_B-2_7"])
    dm = HowToGroundDataModule(train_annotations=str(train), val_annotations=str(val), train_keys=str(keys),
                               video_root=str(public["videos"]), index_dir=str(tmp_path / "idx"), num_workers=0,
                               global_image_size=32, grounding_image_size=64)
    dm.prepare_data()
    dm.setup("fit")
    assert isinstance(dm.datasets["train"].records, JsonlRecords) and len(dm.datasets["train"]) == 3
    assert isinstance(dm.datasets["val"].records, list) and len(dm.datasets["val"]) == 4
    assert dm.datasets["train"][0]["key"] == "vidA_0"


def test_a_100k_row_file_is_indexed_and_read_holding_only_the_index(tmp_path):
    """The lazy reader keeps only the memory-mapped index: the Python heap stays a small fraction
    of the file while rows are read, and the arrays are the index's size."""
    n = 100_000
    template = ('{"video_fname": "v%d.mp4", "fps": 10.0, "clip_start_frame": 0, "clip_end_frame": 9, '
                '"width": 64, "height": 48, "caption": "a man cuts bread", "tagged_caption": '
                '"<p>a man</p> cuts <p>bread</p>", "phrases": ["a man", "bread"], "bboxes": '
                '[[[1, 2, 30, 40], [5, 6, 20, 22]], [], [[3, 4, 31, 41]], [], []], '
                '"labels": [["a man", "bread"], [], ["a man"], [], []]}\n')
    path = tmp_path / "HowToGround1M_automatic_annotation_method.jsonl"
    with path.open("w") as f:
        f.writelines(template % i for i in range(n))
    with (tmp_path / "HowToGround1M_automatic_annotation_method_keys.jsonl").open("w") as f:
        f.writelines(f'"vid{i:06d}_{i % 7}"\n' for i in range(n))
    size = path.stat().st_size
    build_jsonl_index(path)
    tracemalloc.start()
    try:
        lazy = open_jsonl_records(path)
        rng = np.random.default_rng(0)
        picks = rng.integers(0, n, 200)
        for i in picks:
            record = lazy[int(i)]
            assert record.key == f"vid{int(i):06d}_{int(i) % 7}" and record.video_fname == f"v{int(i)}.mp4"
        assert lazy.position(f"vid054321_{54321 % 7}") == 54321
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size / 20, (peak, size)  # no copy of the rows, nor of the index, on the heap
    arrays = lazy.arrays()
    assert all(isinstance(a, np.memmap) for a in arrays.values())
    assert arrays["starts"].shape == (n,) and arrays["keys"].dtype.itemsize == len("vid000000_0")
    index_bytes = sum(a.nbytes for a in arrays.values())
    assert index_bytes == n * (8 + 8 + 8 + 8 + 11)  # starts, lengths, lines, order, keys
    assert len(pickle.dumps(lazy)) < 2000
    assert os.path.getsize(path) == size


def test_the_annotation_truth_and_the_glamm_baseline_read_the_hub_layout(tmp_path):
    from annotation.commands.run import plan_clips
    from annotation.config import load_config
    from tests.fixtures.paths import ROOT

    records = howtoground_records(raw=True)
    truth = write_howtoground1m(tmp_path, "model_preds", records)
    config = load_config([ROOT / "configs" / "annotation" / "synthetic.yaml"])
    specs, skipped = plan_clips(config, tmp_path, truth)
    assert [s.key for s in specs] == [r.key for r in records] and not skipped
    assert [(s.start_frame, s.end_frame, s.fps) for s in specs] == [(0, 19, 10.0)] * 4


def _rows(prefix: str, n: int = 6) -> list[str]:
    """``n`` rows whose keys start with ``prefix`` (rows of equal length for equal-length prefixes)."""
    records = howtoground_records(raw=False)
    rows = []
    for i in range(n):
        row = hub_row(records[i % len(records)], with_ids=True)
        row["video_id"], row["clip_id"] = f"{prefix}{i:02d}", "0"
        rows.append(json.dumps(row))
    return rows


def test_a_rewrite_with_the_same_size_and_mtime_is_reindexed(tmp_path):
    path = write_lines(tmp_path / "clips.jsonl", _rows("old"))
    assert open_jsonl_records(path).keys() == [f"old{i:02d}_0" for i in range(6)]
    st = path.stat()
    new = _rows("new")
    new[2], new[3] = new[3], new[2]  # other offsets too, only if they shift: rows have equal length here
    write_lines(path, new)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as cp -p or rsync -t leave a replaced file
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    lazy = open_jsonl_records(path)
    assert lazy.keys() == [f"new{i:02d}_0" for i in (0, 1, 3, 2, 4, 5)]
    assert lazy[2].key == "new03_0"


def test_a_file_changed_after_indexing_is_refused_when_read(tmp_path):
    path = write_lines(tmp_path / "clips.jsonl", _rows("old"))
    lazy = open_jsonl_records(path)
    write_lines(path, _rows("new"))
    with pytest.raises(RecordError, match=r"clips.jsonl: the file changed after it was indexed"):
        lazy[0]


def _open_together(path, barrier, results, expected):
    try:
        barrier.wait()
        lazy = open_jsonl_records(path)
        got = lazy.keys() == expected and [lazy[i].key for i in range(len(lazy))] == expected
        results.put("ok" if got else f"wrong keys {lazy.keys()[:2]}")
    except BaseException as err:  # noqa: BLE001 - reported to the parent
        results.put(f"{type(err).__name__}: {err}")


def test_processes_opening_a_changed_file_together_all_get_the_right_index(tmp_path):
    import multiprocessing

    context = multiprocessing.get_context("fork")
    path = tmp_path / "race.jsonl"
    processes, rounds = 8, 20
    for round_ in range(rounds):
        prefix = f"r{round_:02d}k"
        write_lines(path, _rows(prefix, n=3 + round_ % 4))
        expected = [f"{prefix}{i:02d}_0" for i in range(3 + round_ % 4)]
        barrier, results = context.Barrier(processes), context.Queue()
        workers = [context.Process(target=_open_together, args=(path, barrier, results, expected))
                   for _ in range(processes)]
        for worker in workers:
            worker.start()
        outcomes = [results.get(timeout=120) for _ in workers]
        for worker in workers:
            worker.join(timeout=60)
        assert outcomes == ["ok"] * processes, (round_, outcomes)
    assert open_jsonl_records(path).keys() == expected


def test_a_file_rewritten_in_place_after_its_first_row_was_read_is_refused_on_the_next_read(tmp_path):
    import random

    rng = random.Random(1)
    path = write_lines(tmp_path / "clips.jsonl", _rows("old"))
    lazy = open_jsonl_records(path)
    n = len(lazy)
    first = rng.randrange(n)
    assert lazy[first].key  # the index is mapped and the file open
    with open(path, "r+b") as handle:  # same inode: only the size or the times tell
        rows = _rows("new")
        rng.shuffle(rows)
        handle.write(("\n".join(rows) + "\n").encode())
        handle.truncate()
    for position in rng.sample(range(n), min(3, n)):
        with pytest.raises(RecordError, match=r"clips.jsonl: the file changed after it was indexed"):
            lazy[position]
