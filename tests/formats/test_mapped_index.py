"""The staged index folder: published whole, or not at all; named by what it indexes."""
import os

import pytest

from formats.mapped_index import content_sample, current_index, file_identity, identity_changed, staged_index


def test_a_staged_index_replaces_the_old_one_only_when_complete(tmp_path):
    index = tmp_path / "idx"
    with staged_index(index) as tmp:
        (tmp / "a.npy").write_text("old")
    with pytest.raises(RuntimeError):
        with staged_index(index) as tmp:
            (tmp / "a.npy").write_text("half")
            raise RuntimeError("build failed")
    assert (index / "a.npy").read_text() == "old"  # the failed build left the old index as it was
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # and no staging folder behind
    with staged_index(index) as tmp:
        (tmp / "b.npy").write_text("new")
    assert sorted(p.name for p in index.iterdir()) == ["b.npy"]


def test_an_index_folder_of_the_earlier_layout_is_replaced(tmp_path):
    index = tmp_path / "idx"
    index.mkdir()
    (index / "meta.json").write_text("{}")
    with staged_index(index, {"v": 1}) as tmp:
        (tmp / "meta.json").write_text('{"v": 1}')
    assert index.is_symlink() and current_index(index, {"v": 1}) == index.resolve()
    assert current_index(index, {"v": 2}) is None


def test_builders_of_the_same_content_share_one_version(tmp_path):
    index = tmp_path / "idx"
    for text in ("first", "second"):  # the second builder loses: the winner's folder stays
        with staged_index(index, {"v": 1}) as tmp:
            (tmp / "meta.json").write_text('{"v": 1}')
            (tmp / "who").write_text(text)
    assert (index / "who").read_text() == "first"
    assert len([p for p in tmp_path.iterdir() if ".v-" in p.name]) == 1


def test_identity_tells_a_same_size_same_mtime_rewrite(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"k": "aaaa"}\n' * 1000)
    before = file_identity(path)
    st = path.stat()
    with open(path, "r+b") as handle:  # rewritten in place, then mtime set back (as cp -p / rsync -t leave it)
        handle.seek(7000)
        handle.write(b"b")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = file_identity(path)
    assert after["size"] == before["size"] and after["mtime_ns"] == before["mtime_ns"]
    assert after != before and identity_changed(before, path) is not None
    assert identity_changed(after, path) is None


def test_content_sample_sees_head_tail_and_middle(tmp_path):
    path = tmp_path / "big.bin"
    data = bytearray(os.urandom(1 << 20))
    path.write_bytes(bytes(data))
    base = content_sample(path)
    for offset in (0, len(data) - 1, (len(data) * 5) // 33):  # a sampled block in the middle
        changed = bytearray(data)
        changed[offset] ^= 0xFF
        path.write_bytes(bytes(changed))
        assert content_sample(path) != base, offset
