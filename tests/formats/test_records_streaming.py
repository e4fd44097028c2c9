"""The project's ``{"records": [...]}`` layout is read one record at a time; any file must give the
records (or the error) that reading the whole JSON gives."""
import core  # noqa: F401

import json

import numpy as np
import pytest

from formats.record_errors import RecordError
from formats.records import GroundedRecord, _records_from_container, read_ground_truth, read_records


def _record(rng, i):
    n = int(rng.integers(1, 6))
    phrases = [f"a thing {i} {j}" for j in range(int(rng.integers(1, 4)))]
    boxes, labels = [], []
    for _ in range(n):
        keep = [p for p in phrases if rng.random() < 0.6]
        xy = rng.uniform(0, 50, (len(keep), 2))
        boxes.append(np.concatenate([xy, xy + rng.uniform(1, 40, (len(keep), 2))], 1).round(3).tolist())
        labels.append(keep)
    return {"video_fname": f"v{i}.mp4", "video_id": f"v{i}", "clip_id": str(i % 3), "fps": 25.0,
            "clip_start_frame": 0, "clip_end_frame": 5 * (n - 1), "width": 100, "height": 100,
            "caption": " and ".join(phrases), "tagged_caption": " and ".join(f"<p>{p}</p>" for p in phrases),
            "phrases": phrases, "bboxes": boxes, "labels": labels, **({"extra": i} if i % 2 else {})}


def _same(a: list[GroundedRecord], b: list[GroundedRecord]):
    assert [r.to_dict() for r in a] == [r.to_dict() for r in b]
    for x, y in zip(a, b):
        assert all(u.dtype == v.dtype and np.array_equal(u, v) for u, v in zip(x.bboxes, y.bboxes))


@pytest.mark.parametrize("seed", range(6))
def test_streamed_records_equal_whole_file_records(tmp_path, seed):
    rng = np.random.default_rng(seed)
    raws = [_record(rng, i) for i in range(int(rng.integers(0, 30)))]
    indent = [None, 1, 2][seed % 3]
    text = json.dumps({"records": raws}, indent=indent, separators=None if seed % 2 else (",", ":"))
    path = tmp_path / "gt.json"
    path.write_text("\n " * (seed % 2) + text + "\n" * (seed % 3))
    want = _records_from_container(json.loads(path.read_text()), str(path))
    _same(read_records(path), want)
    got, corrupt = read_ground_truth(path)
    assert corrupt == [] and list(got) == [r.key for r in want]


@pytest.mark.parametrize("text, message", [
    ('{"records": [RECORD,]}', "not valid JSON"),        # trailing comma: not JSON
    ('{"records": [RECORD RECORD]}', "not valid JSON"),   # missing comma
    ('{"records": [RECORD], "records": []}', "'records' is given twice"),  # never last-key-wins
    ('{"meta": 1, "records": [RECORD]}', "RECORD_OK"),    # other layouts are read whole
    ('{"records": [RECORD, 3]}', "expected a dict"),
])
def test_odd_files_behave_as_the_whole_file_reader(tmp_path, text, message):
    raw = json.dumps(_record(np.random.default_rng(0), 0))
    path = tmp_path / "gt.json"
    path.write_text(text.replace("RECORD", raw))
    if message is None:
        assert read_records(path) == []
    elif message == "RECORD_OK":
        assert [r.key for r in read_records(path)] == ["v0_0"]
    else:
        with pytest.raises(RecordError, match=message):
            read_records(path)


def test_labels_share_the_phrase_strings(tmp_path):
    path = tmp_path / "gt.json"
    path.write_text(json.dumps({"records": [_record(np.random.default_rng(1), 4)]}))
    (rec,) = read_records(path)
    phrase_ids = {id(p) for p in rec.phrases}
    assert all(id(label) in phrase_ids for frame in rec.labels for label in frame)
