"""The canonical record: validation errors name file/key/field, every file layout round-trips, pickles stay safe."""
import copy
import os
import pickle

import numpy as np
import pytest

from formats.frame_grids import annotation_grid
from formats.records import (
    GroundedRecord,
    RecordError,
    read_records,
    strip_tags,
    tagged_phrases,
    write_records_json,
    write_records_pickle,
    write_records_pickle_folder,
)
from formats.safe_pickle import UnsafePickleError, safe_load, safe_loads

SOURCE = "iground_val.pkl"


def raw_record(video_id="vid", phrases=("a person", "a knife")):
    """A 1-s clip at 25 fps from frame 100: grid frames 100, 105, ..., 125 (6 annotated frames)."""
    tagged = f"<p>{phrases[0]}</p> cuts bread with <p>{phrases[1]}</p>."
    boxes = [[[10, 20, 50, 80], [30, 40, 45, 60]], [[12, 20, 52, 80]], [], [[0, 0, 5, 5]], [[1, 1, 9, 9]], []]
    labels = [[phrases[0], phrases[1]], [phrases[0]], [], [phrases[1]], [phrases[0]], []]
    return {
        "video_fname": f"{video_id}.mp4", "video_id": video_id, "clip_id": "3", "fps": 25.0,
        "clip_start_frame": 100, "clip_end_frame": 125, "width": 64, "height": 96,
        "caption": strip_tags(tagged), "tagged_caption": tagged, "phrases": list(phrases),
        "bboxes": boxes, "labels": labels,
    }


def expect_error(raw, *fragments):
    with pytest.raises(RecordError) as err:
        GroundedRecord.from_dict(raw, source=SOURCE, key="vid_3")
    message = str(err.value)
    for fragment in (SOURCE, "vid_3", *fragments):
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_valid_record_fields_and_grid():
    rec = GroundedRecord.from_dict(raw_record(), source=SOURCE)
    assert rec.key == "vid_3"
    np.testing.assert_array_equal(rec.frame_indices, [100, 105, 110, 115, 120, 125])
    np.testing.assert_array_equal(annotation_grid(30, 0, 29), np.arange(0, 30, 6))
    presence = rec.presence()
    assert presence.tolist() == [[True, True], [True, False], [False, False],
                                 [False, True], [True, False], [False, False]]
    boxes, present = rec.phrase_boxes()
    np.testing.assert_array_equal(present, presence)
    np.testing.assert_array_equal(boxes[0, 1], [30, 40, 45, 60])


def test_missing_field_names_it():
    raw = raw_record()
    del raw["caption"]
    expect_error(raw, "missing field", "caption")


def test_phrase_not_tagged():
    raw = raw_record()
    raw["phrases"] = ["a person", "a knife", "a loaf"]
    expect_error(raw, "'phrases'", "a loaf")


def test_empty_phrase_and_unbalanced_tags_name_the_field():
    raw = raw_record()
    raw["phrases"] = ["a person", ""]
    raw["tagged_caption"] = "<p>a person</p> cuts bread with <p></p>."
    expect_error(raw, "'phrases[1]'", "empty phrase")
    cases = {"<p>a person</p> cuts bread with <p>a knife.": "never closed",
             "<p>a person cuts bread with <p>a knife</p>.": "opens before",
             "<p>a person</p> cuts bread</p> with <p>a knife</p>.": "closes no <p>",
             "<p>a person</p> cuts <p> </p> with <p>a knife</p>.": "empty phrase"}
    for tagged, why in cases.items():
        raw = raw_record()
        raw["tagged_caption"] = tagged
        expect_error(raw, "'tagged_caption'", why)


@pytest.mark.parametrize("field,value,why", [("video_id", "../../../X", "path separator"),
                                             ("video_id", "sub/dir", "path separator"),
                                             ("clip_id", "..", "'..'"), ("video_id", "a\x00b", "control character"),
                                             ("clip_id", " ", "empty")])
def test_ids_that_cannot_name_one_file_are_refused(field, value, why):
    raw = raw_record()
    raw[field] = value
    with pytest.raises(RecordError, match=f"field '{field}'.*{why}"):
        GroundedRecord.from_dict(raw, source=SOURCE)


def test_label_not_a_phrase():
    raw = raw_record()
    raw["labels"][1] = ["a spoon"]
    expect_error(raw, "labels[1]", "a spoon")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_box(bad):
    raw = raw_record()
    raw["bboxes"][3] = [[0, 0, bad, 5]]
    expect_error(raw, "bboxes[3]", "non-finite")


def test_degenerate_box_and_degenerate_after_clipping():
    raw = raw_record()
    raw["bboxes"][4] = [[9, 1, 9, 9]]
    expect_error(raw, "bboxes[4]", "degenerate")
    raw = raw_record()
    raw["bboxes"][4] = [[70, 1, 90, 9]]  # entirely right of the 64-px-wide frame
    expect_error(raw, "bboxes[4]", "degenerate", "64x96")


def test_clipping_to_the_frame():
    raw = raw_record()
    raw["bboxes"][0] = [[-5, -3, 80, 50], [30, 40, 45, 200]]
    rec = GroundedRecord.from_dict(raw)
    np.testing.assert_array_equal(rec.bboxes[0], [[0, 0, 64, 50], [30, 40, 45, 96]])
    unclipped = GroundedRecord.from_dict(raw, clip_boxes=False)
    np.testing.assert_array_equal(unclipped.bboxes[0], [[-5, -3, 80, 50], [30, 40, 45, 200]])


def test_length_mismatches():
    raw = raw_record()
    raw["labels"] = raw["labels"][:-1]
    expect_error(raw, "'bboxes' and 'labels'", "6", "5")
    raw = raw_record()
    raw["labels"][0] = ["a person"]  # two boxes, one label
    expect_error(raw, "frame 0", "2 boxes", "1 labels")
    raw = raw_record()
    raw["bboxes"], raw["labels"] = raw["bboxes"] + [[]], raw["labels"] + [[]]
    expect_error(raw, "5-fps grid", "7 frames", "has 6")


def test_bad_scalar_fields():
    for name, value, fragment in (("fps", "25", "'fps'"), ("width", 0, "'width'"),
                                  ("clip_end_frame", 90, "clip_end_frame"), ("clip_start_frame", 1.5, "integer"),
                                  ("caption", None, "'caption'")):
        raw = raw_record()
        raw[name] = value
        expect_error(raw, fragment)


def test_phrases_with_regex_metacharacters():
    phrases = ("a (red) circle?+", "[the] knife.*|$")
    rec = GroundedRecord.from_dict(raw_record(phrases=phrases))
    assert rec.phrases == list(phrases)
    assert tagged_phrases(rec.tagged_caption) == list(phrases)
    assert rec.presence()[0].all()


def assert_same_records(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for name in ("video_fname", "video_id", "clip_id", "fps", "clip_start_frame", "clip_end_frame", "width",
                     "height", "caption", "tagged_caption", "phrases", "labels", "extra"):
            assert getattr(x, name) == getattr(y, name), name
        assert len(x.bboxes) == len(y.bboxes)
        for bx, by in zip(x.bboxes, y.bboxes):
            assert by.dtype == np.float32 and by.shape == bx.shape
            np.testing.assert_allclose(bx, by, atol=1e-3)


def some_records():
    rng = np.random.default_rng(0)
    records = []
    for i in range(4):
        raw = raw_record(video_id=f"v{i}")
        raw["bboxes"] = [np.asarray(b, dtype=np.float64).reshape(-1, 4) + rng.uniform(0, 1, (len(b), 4)).round(3)
                         for b in raw["bboxes"]]
        raw["split_note"] = f"extra {i}"  # unknown fields survive in `extra`
        records.append(GroundedRecord.from_dict(raw))
    return records


def test_json_round_trip(tmp_path):
    records = some_records()
    path = write_records_json(records, tmp_path / "ann" / "val.json")
    back = read_records(path)
    assert_same_records(records, back)
    assert back[0].extra == {"split_note": "extra 0"}


def test_pickle_layouts_round_trip(tmp_path):
    records = some_records()
    single = write_records_pickle(records, tmp_path / "all.pkl")
    with single.open("rb") as f:
        stored = pickle.load(f)  # our own file: check it really is the public layout with numpy boxes
    assert sorted(stored) == sorted(r.key for r in records)
    assert isinstance(stored["v0_3"]["bboxes"][0], np.ndarray)
    assert_same_records(records, read_records(single))

    folder = write_records_pickle_folder(records, tmp_path / "per_key")
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{r.key}.pkl" for r in records)
    assert_same_records(records, read_records(folder))


def test_errors_from_files_name_the_file(tmp_path):
    raw = raw_record()
    raw["labels"][2] = ["a ghost"]
    path = tmp_path / "broken.pkl"
    with path.open("wb") as f:
        pickle.dump({"vid_3": raw}, f)
    with pytest.raises(RecordError, match=r"broken\.pkl, record 'vid_3'.*labels\[2\]"):
        read_records(path)


class _RunsCode:
    """Unpickling this would run a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_safe_loader_refuses_code_execution(tmp_path):
    marker = tmp_path / "pwned"
    raw = raw_record()
    raw["caption"] = _RunsCode(marker)
    path = tmp_path / "evil.pkl"
    with path.open("wb") as f:
        pickle.dump({"vid_3": raw}, f)
    with pytest.raises(UnsafePickleError) as err:
        read_records(path)
    assert not marker.exists()
    assert str(path) in str(err.value) and os.system.__module__ + ".system" in str(err.value)
    with pytest.raises(UnsafePickleError, match="builtins.eval"):
        safe_loads(b"cbuiltins\neval\n(S'1+1'\ntR.", source="inline")


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_safe_loader_reads_numpy(protocol, tmp_path):
    data = {"boxes": np.arange(12, dtype=np.float32).reshape(3, 4), "ids": np.array([1, 2], dtype=np.int64),
            "score": np.float32(0.5), "n": np.int64(7), "nested": [(1, "a"), {"b": 2.0}]}
    path = tmp_path / "arrays.pkl"
    path.write_bytes(pickle.dumps(data, protocol=protocol))
    back = safe_load(path)
    np.testing.assert_array_equal(back["boxes"], data["boxes"])
    assert back["boxes"].dtype == np.float32 and back["ids"].dtype == np.int64
    assert back["score"] == data["score"] and back["n"] == 7 and back["nested"] == data["nested"]


def test_safe_loader_reads_numpy1_pickles():
    """The public files were written by numpy 1.x, whose arrays name ``numpy.core.multiarray``."""
    data = pickle.dumps(np.arange(6, dtype=np.float32).reshape(2, 3), protocol=2)
    assert b"numpy._core.multiarray" in data
    old = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    np.testing.assert_array_equal(safe_loads(old), np.arange(6, dtype=np.float32).reshape(2, 3))


def test_records_are_not_mutated_by_validation():
    raw = raw_record()
    before = copy.deepcopy(raw)
    GroundedRecord.from_dict(raw)
    assert raw == before


def test_a_huge_frame_range_is_refused_before_any_grid_is_built():
    import random
    import tracemalloc

    rng = random.Random(2)
    for _ in range(20):
        raw = raw_record()
        raw["clip_end_frame"] = rng.choice([10 ** 12, 10 ** 15, 200 + rng.randint(1, 10 ** 9)])
        tracemalloc.start()
        expect_error(raw, "field 'bboxes' covers 6 frames")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 50 * 2 ** 20


@pytest.mark.parametrize("text", [
    '{"records": [RECORD], "records": [RECORD]}',
    '{"records": [RECORD_DUP]}',
    '{"other": 1, "records": [RECORD], "other": 2}',
])
def test_a_key_given_twice_is_refused_at_every_json_layer(tmp_path, text):
    import json

    record = json.dumps(raw_record())
    dup = record[:-1] + ', "caption": "again"}'
    path = tmp_path / "gt.json"
    path.write_text(text.replace("RECORD_DUP", dup).replace("RECORD", record))
    with pytest.raises(RecordError, match=r"gt.json.*given twice"):
        read_records(path)


def test_deep_nesting_is_named_not_a_recursion_error(tmp_path):
    from core.json_file import JSONFileError, read_json

    depth = 100_000
    for name, text in (("deep.json", "[" * depth + "]" * depth),
                       ("records.json", '{"records": [' + "[" * depth + "]" * depth + "]}")):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises((RecordError, JSONFileError), match=rf"{name}.*nested too deeply"):
            read_records(path) if name == "records.json" else read_json(path)
