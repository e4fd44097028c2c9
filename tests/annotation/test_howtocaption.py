"""HowToCaption's hub parquet as the annotation pipeline's clip source (written here with pyarrow)."""
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from annotation.clips import clips_from_timestamps, read_timestamps
from annotation.howtocaption import is_parquet_source, read_howtocaption
from formats.video_writer import write_video

SPAN = pa.struct([("start", pa.float64()), ("end", pa.float64()), ("text", pa.list_(pa.string()))])


def write_split(path, rows, span_type=SPAN, extra=True):
    """One parquet shard: ``rows`` = [(video_id, [(start, end, [text])])]."""
    table = {"video_id": pa.array([r[0] for r in rows], pa.string()),
             "description": pa.array([[{"start": s, "end": e, "text": t} for s, e, t in r[1]] for r in rows],
                                     pa.list_(span_type))}
    if extra:
        table["source"] = pa.array(["youtube"] * len(rows))
    pq.write_table(pa.table(table), path)
    return path


SHARD_0 = [("vidA", [(0.0, 8.0, ["a man cuts bread"]), (10.5, 18.5, ["he eats it", "then leaves"])]),
           ("vid_B-2", [])]
SHARD_1 = [("vidC", [(3.25, 11.0, ["x"])])]


def test_files_folders_and_globs_give_the_spans(tmp_path):
    folder = tmp_path / "how_to_caption"
    folder.mkdir()
    write_split(folder / "how_to_caption-00000-of-00002.parquet", SHARD_0)
    write_split(folder / "how_to_caption-00001-of-00002.parquet", SHARD_1, extra=False)
    expected = {"vidA": [(0.0, 8.0), (10.5, 18.5)], "vid_B-2": [], "vidC": [(3.25, 11.0)]}
    assert read_howtocaption(folder) == expected
    assert read_timestamps(str(folder / "how_to_caption-*.parquet")) == expected  # through the clip source
    assert read_timestamps(folder / "how_to_caption-00001-of-00002.parquet") == {"vidC": [(3.25, 11.0)]}
    assert read_howtocaption(folder, video_ids=["vidC", "vidZ"]) == {"vidC": [(3.25, 11.0)]}
    assert is_parquet_source(folder) and not is_parquet_source(tmp_path / "x.json")


def test_seconds_written_as_text_are_read(tmp_path):
    text_span = pa.struct([("start", pa.string()), ("end", pa.string()), ("text", pa.list_(pa.string()))])
    path = write_split(tmp_path / "s.parquet", [("v", [("1.5", "9", ["a"])])], text_span)
    assert read_howtocaption(path) == {"v": [(1.5, 9.0)]}


@pytest.mark.parametrize("case, message", [
    ("null start", r"s.parquet, row 1 \(video 'vidB'\), description\[1\].start: missing"),
    ("word", r"s.parquet, row 0 \(video 'vidA'\), description\[0\].end: 'soon' is not a number"),
    ("no column", r"s.parquet has no column\(s\) description"),
    ("twice", r"video 'vidA' is given twice \(.*s.parquet, row 0 and .*s.parquet, row 1\)"),
])
def test_bad_rows_are_named_by_file_row_video_and_entry(tmp_path, case, message):
    path = tmp_path / "s.parquet"
    if case == "null start":
        write_split(path, [("vidA", [(0.0, 1.0, [])]), ("vidB", [(0.0, 1.0, []), (None, 2.0, [])])])
    elif case == "word":
        text_span = pa.struct([("start", pa.string()), ("end", pa.string())])
        pq.write_table(pa.table({"video_id": ["vidA"], "description": pa.array(
            [[{"start": "0", "end": "soon"}]], pa.list_(text_span))}), path)
    elif case == "no column":
        pq.write_table(pa.table({"video_id": ["vidA"], "captions": ["x"]}), path)
    else:
        write_split(path, [("vidA", [(0.0, 1.0, [])]), ("vidA", [(2.0, 3.0, [])])])
    with pytest.raises(ValueError, match=message):
        read_howtocaption(path)


def test_parquet_and_json_cut_the_same_clips(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    write_video(videos / "vidA.mp4", np.full((50, 16, 16, 3), 90, np.uint8), 25.0, threads=1)  # 2 s at 25 fps
    spans = [(0.0, 0.8, ["a"]), (0.4, 0.6, ["b"]), (1.0, 2.0, ["c"])]
    parquet = write_split(tmp_path / "how_to_caption.parquet", [("vidA", spans), ("vidOther", spans)])
    as_json = tmp_path / "howtocaption.json"
    as_json.write_text(json.dumps({"vidA": {"start": [s for s, _, _ in spans], "end": [e for _, e, _ in spans],
                                            "text": [t for _, _, t in spans]}}))
    from_parquet = clips_from_timestamps(videos, parquet, min_seconds=0.5)
    assert from_parquet == clips_from_timestamps(videos, as_json, min_seconds=0.5)
    # 25 fps: [0, 0.8) s -> frames 0..19; [0.4, 0.6) s is under 0.5 s: dropped; [1, 2) s -> frames 25..49
    assert [(c.key, c.start_frame, c.end_frame) for c in from_parquet[0]] == [("vidA_0", 0, 19), ("vidA_2", 25, 49)]


def _one_video(tmp_path):
    videos = tmp_path / "videos"
    videos.mkdir()
    write_video(videos / "vidA.mp4", np.full((50, 16, 16, 3), 90, np.uint8), 25.0, threads=1)  # 2 s at 25 fps
    return videos


GOOD = [(0.0, 0.8, ["a"]), (1.0, 2.0, ["c"])]


@pytest.mark.parametrize("layout", ["parquet", "json"])
def test_bad_rows_of_other_videos_are_counted_and_named_not_fatal(tmp_path, layout):
    videos = _one_video(tmp_path)
    if layout == "parquet":  # a NaN start, a missing end and a missing description in three other videos' rows
        source = write_split(tmp_path / "how_to_caption.parquet",
                             [("vidZ", [(0.0, 1.0, []), (float("nan"), 2.0, [])]), ("vidA", GOOD),
                              ("vidY", [(0.0, None, [])])])
        table = pq.read_table(source)
        rows = table.to_pylist() + [{"video_id": "vidX", "description": None, "source": "youtube"}]
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), source)
        named = [r"how_to_caption.parquet, row 0 \(video 'vidZ'\), description\[1\].start: missing or not finite",
                 r"row 2 \(video 'vidY'\), description\[0\].end: missing",
                 r"row 3 \(video 'vidX'\): description is missing"]
    else:  # a NaN, a word for seconds, a missing end
        source = tmp_path / "howtocaption.json"
        source.write_text(json.dumps({"vidZ": {"start": [0.0, float("nan")], "end": [1.0, 2.0]},
                                      "vidA": {"start": [0.0, 1.0], "end": [0.8, 2.0]},
                                      "vidY": {"start": ["soon"], "end": [1.0]},
                                      "vidX": [{"start": 0.0}]}))
        named = [r"video 'vidZ': seconds that are not finite", r"video 'vidY': no start/end seconds \(ValueError",
                 r"video 'vidX': no start/end seconds \(KeyError"]
    with pytest.warns(UserWarning, match=r"3 row\(s\) of video\(s\) not in this run have bad values") as caught:
        specs, skipped = clips_from_timestamps(videos, source, min_seconds=0.5)
    message = "\n".join(str(w.message) for w in caught)
    for pattern in named:
        assert re.search(pattern, message), (pattern, message)
    assert [(c.key, c.start_frame, c.end_frame) for c in specs] == [("vidA_0", 0, 19), ("vidA_1", 25, 49)]
    assert skipped == []


@pytest.mark.parametrize("layout", ["parquet", "json"])
def test_a_bad_row_of_a_video_in_the_run_is_an_error_naming_file_row_and_field(tmp_path, layout):
    videos = _one_video(tmp_path)
    if layout == "parquet":
        source = write_split(tmp_path / "how_to_caption.parquet",
                             [("vidZ", GOOD), ("vidA", [(0.0, 0.8, []), (1.0, float("nan"), [])])])
        message = r"how_to_caption.parquet, row 1 \(video 'vidA'\), description\[1\].end: missing or not finite"
    else:
        source = tmp_path / "howtocaption.json"
        source.write_text(json.dumps({"vidZ": {"start": [0.0], "end": [1.0]}, "vidA": {"start": [0.0, 1.0]}}))
        message = r"howtocaption.json: video 'vidA' has no start/end seconds \(KeyError: 'end'\)"
    with pytest.raises(ValueError, match=message):
        clips_from_timestamps(videos, source, min_seconds=0.5)
