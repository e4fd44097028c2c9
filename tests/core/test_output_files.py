"""core.output_files: outputs replace their destination whole or not at all, and never overwrite an input."""
from core.output_files import (
    OutputIsInputError,
    atomic_write,
    refuse_input_as_output,
    same_or_inside,
    write_json_atomic,
    write_text_atomic,
)

import os

import pytest


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "report.json"
    write_text_atomic(path, "old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(path) as handle:
            handle.write("new, half")
            raise KeyboardInterrupt
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    write_json_atomic(tmp_path / "deep" / "x.json", {"a": [1, 2]})
    assert (tmp_path / "deep" / "x.json").read_text() == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    with atomic_write(tmp_path / "b.bin", "wb") as handle:
        handle.write(b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "b.bin").stat().st_mode & 0o777 == 0o666 & ~umask  # the usual permissions, not 0600
    with pytest.raises(ValueError, match="for writing"):
        with atomic_write(path, "r"):
            pass


def test_an_output_that_is_an_input_is_refused_through_any_path(tmp_path):
    gt = tmp_path / "gt.json"
    gt.write_text("{}")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link.json").symlink_to(gt)
    for out in (gt, tmp_path / "." / "gt.json", tmp_path / "link.json", tmp_path / "folder" / ".." / "gt.json"):
        assert same_or_inside(out, gt)
        with pytest.raises(OutputIsInputError, match=f"--out {out} is --gt {gt}, an input of this command"):
            refuse_input_as_output(out, {"--gt": gt, "--pred": None})
    with pytest.raises(OutputIsInputError, match="lies inside --gt-folder"):
        refuse_input_as_output(tmp_path / "folder" / "report.json", {"--gt-folder": tmp_path / "folder"})
    refuse_input_as_output(tmp_path / "report.json", {"--gt": gt, "--gt-folder": tmp_path / "folder"})
    refuse_input_as_output(None, {"--gt": gt})
    assert not same_or_inside(tmp_path / "gt.json.bak", gt)
