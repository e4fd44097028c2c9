"""Ground truth with masks: the record readers take per-box masks as compressed RLE, uncompressed RLE
or polygons (stored compressed), in JSON, pickles and the hub's JSONL (whole and streamed); records
without masks are read and written exactly as before; bad masks are errors naming file, clip and frame."""
from __future__ import annotations

import json

import numpy as np
import pytest
from pycocotools import mask as mask_api

from formats.hub_jsonl import open_jsonl_records, write_jsonl_records
from formats.mask_rle import decode_masks, encode_masks
from formats.records import (
    GroundedRecord,
    RecordError,
    read_records,
    write_records_json,
    write_records_pickle,
)
from tests.formats.test_records import raw_record

W, H = 64, 96  # raw_record's frame size


def _square(x1, y1, x2, y2):
    m = np.zeros((H, W), dtype=bool)
    m[y1:y2, x1:x2] = True
    return m


def _uncompressed(mask):
    """COCO's uncompressed RLE: column-major run lengths, starting with a run of zeros."""
    flat = mask.T.reshape(-1).astype(np.int8)
    change = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], change, [flat.size]])
    runs = np.diff(bounds).tolist()
    if flat[0]:
        runs = [0] + runs
    return {"size": [H, W], "counts": runs}


def masked_raw():
    raw = raw_record()
    a, b = _square(10, 20, 50, 80), _square(30, 40, 45, 60)
    raw["masks"] = [
        [encode_masks(a)[0], _uncompressed(b)],      # compressed and uncompressed RLE
        [[[12, 20, 52, 20, 52, 80, 12, 80]]],         # a polygon (one ring)
        [],
        [None],                                       # a box without a mask
        [encode_masks(_square(1, 1, 9, 9))[0]],
        [],
    ]
    return raw


def test_masks_of_every_form_are_read_as_compressed_rle():
    record = GroundedRecord.from_dict(masked_raw(), source="gt.json")
    assert [len(m) for m in record.masks] == [len(b) for b in record.bboxes]
    first = decode_masks(record.masks[0])
    assert (first[0] == _square(10, 20, 50, 80)).all() and (first[1] == _square(30, 40, 45, 60)).all()
    assert all(isinstance(r["counts"], str) for r in record.masks[0])
    polygon = mask_api.decode(mask_api.merge(mask_api.frPyObjects([[12, 20, 52, 20, 52, 80, 12, 80]], H, W)))
    assert (decode_masks(record.masks[1])[0] == polygon.astype(bool)).all()
    assert record.masks[3] == [None]
    assert "masks" not in record.extra


def test_records_with_masks_round_trip_through_json_pickle_and_jsonl(tmp_path):
    record = GroundedRecord.from_dict(masked_raw(), source="gt.json")
    for path in (write_records_json([record], tmp_path / "gt.json"),
                 write_records_pickle([record], tmp_path / "gt.pkl"),
                 write_jsonl_records([record], tmp_path / "gt.jsonl")):
        again = read_records(path)[0]
        assert again.masks == record.masks, path
    streamed = open_jsonl_records(tmp_path / "gt.jsonl", index_dir=tmp_path / "index")[0]
    assert streamed.masks == record.masks


def test_records_without_masks_are_unchanged(tmp_path):
    record = GroundedRecord.from_dict(raw_record(), source="gt.json")
    assert record.masks is None and "masks" not in record.to_dict()
    path = write_records_json([record], tmp_path / "gt.json")
    assert "masks" not in json.loads(path.read_text())["records"][0]
    null = raw_record()
    null["masks"] = None
    assert GroundedRecord.from_dict(null).masks is None


@pytest.mark.parametrize("change, fragments", [
    (lambda m: m.pop(), ["'masks' covers 5 frames", "'bboxes' covers 6"]),
    (lambda m: m[0].pop(), ["frame 0", "2 boxes", "1 masks"]),
    (lambda m: m[4].__setitem__(0, {"size": [10, 10], "counts": "abc"}), ["masks[4][0]", "[10, 10]"]),
    (lambda m: m[4].__setitem__(0, {"size": [H, W], "counts": [1, 2]}), ["masks[4][0]", "sum to 3"]),
    (lambda m: m[1].__setitem__(0, [[1, 2, 3]]), ["masks[1][0]", "polygon"]),
    (lambda m: m[1].__setitem__(0, "mask"), ["masks[1][0]", "str"]),
])
def test_bad_masks_name_file_clip_and_frame(change, fragments):
    raw = masked_raw()
    change(raw["masks"])
    with pytest.raises(RecordError) as err:
        GroundedRecord.from_dict(raw, source="gt.json", key="vid_3")
    for fragment in ("gt.json", "vid_3", *fragments):
        assert fragment in str(err.value), (fragment, str(err.value))
