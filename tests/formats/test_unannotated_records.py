"""Unannotated clip records: frames on the clip's 5-fps grid, empty boxes, the file's checks."""
from pathlib import Path

import numpy as np
import pytest

from formats.unannotated_records import unannotated_record, video_clip_record
from formats.video_files import VideoInfo, probe_video
from formats.video_writer import write_video


def info(num_frames=100, fps=30.0):
    return VideoInfo(path=Path("/videos/cat.mp4"), video_id="cat", num_frames=num_frames,
                     fps=fps, width=64, height=48)


def test_a_clip_holds_its_grid_frames_with_empty_boxes():
    record = unannotated_record(info(), 12, 41, clip_id="3")
    assert record.key == "cat_3"
    # 30 fps: every 6th source frame from 12 up to 41
    assert record.frame_indices.tolist() == [12, 18, 24, 30, 36]
    assert len(record.bboxes) == len(record.labels) == 5
    assert all(b.shape == (0, 4) and b.dtype == np.float32 for b in record.bboxes)
    assert record.phrases == [] and record.caption == "" and record.extra == {"num_frames": 100}
    assert (record.width, record.height, record.fps) == (64, 48, 30.0)


def test_defaults_take_the_whole_video_and_an_end_past_it_is_its_last_frame():
    whole = unannotated_record(info(num_frames=50, fps=25.0))
    assert (whole.clip_start_frame, whole.clip_end_frame) == (0, 49)
    assert whole.frame_indices.tolist() == list(range(0, 50, 5))
    assert unannotated_record(info(num_frames=50, fps=25.0), 40, 1000).clip_end_frame == 49


@pytest.mark.parametrize("start, end", [(-1, 10), (20, 10)])
def test_a_bad_range_is_an_error_naming_both_ends(start, end):
    with pytest.raises(ValueError, match=f"start_frame {start} / end_frame {end}"):
        unannotated_record(info(), start, end)


def test_a_file_is_probed_and_given_sizes_are_checked(tmp_path):
    path = write_video(tmp_path / "walk.mp4", np.zeros((20, 48, 64, 3), np.uint8), fps=10)
    record = video_clip_record(path, 2, 13)
    assert record.key == "walk_0" and record.video_fname == str(path.resolve())
    assert record.frame_indices.tolist() == [2, 4, 6, 8, 10, 12]
    assert unannotated_record(probe_video(path), 2, 13).frame_indices.tolist() == record.frame_indices.tolist()
    assert video_clip_record(path, w=64, h=48, video_fps=10).clip_end_frame == 19
    with pytest.raises(ValueError, match="h=50 but .*walk.mp4 has 48"):
        video_clip_record(path, h=50)
    with pytest.raises(FileNotFoundError, match="no such file"):
        video_clip_record(tmp_path / "missing.mp4")
