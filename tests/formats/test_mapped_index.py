"""The staged index folder: published whole, or not at all."""
import pytest

from formats.mapped_index import staged_index


def test_a_staged_index_replaces_the_old_one_only_when_complete(tmp_path):
    index = tmp_path / "idx"
    with staged_index(index) as tmp:
        (tmp / "a.npy").write_text("old")
    with pytest.raises(RuntimeError):
        with staged_index(index) as tmp:
            (tmp / "a.npy").write_text("half")
            raise RuntimeError("build failed")
    assert (index / "a.npy").read_text() == "old"  # the failed build left the old index as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # and no staging folder behind
    with staged_index(index) as tmp:
        (tmp / "b.npy").write_text("new")
    assert sorted(p.name for p in index.iterdir()) == ["b.npy"]
