"""What the lazy record sequences share: an index of ``.npy`` arrays memory-mapped on first use
(so a DataLoader worker maps the files itself instead of receiving copies), a record count in
``meta``, positions checked like a list's, and rows read by offset through one open descriptor.

:class:`formats.hub_jsonl.JsonlRecords` (the hub's JSONL files) and
:class:`datamodules.howtoground.LazyRecords` (per-clip folders, packed pickles) build on it.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def staged_index(index_dir: Path) -> Iterator[Path]:
    """A private sibling folder to write an index into; it replaces ``index_dir`` only when the
    block ends without an error (removed otherwise), so a reader never sees half an index."""
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = index_dir.with_name(f".{index_dir.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if index_dir.exists():
            shutil.rmtree(index_dir)
        tmp.replace(index_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


class MappedRecordIndex(Sequence):
    """Base of a lazy record sequence; subclasses set ``meta`` (with ``num_records``), ``_arrays``
    (``None`` until mapped) and ``_fd`` (``None`` until a row is read)."""

    meta: dict[str, Any]
    _arrays: Any = None
    _fd: int | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_arrays"], state["_fd"] = None, None  # each process maps the files itself
        return state

    def __len__(self) -> int:
        return int(self.meta["num_records"])

    def _check(self, position: int) -> int:
        """``position`` as a non-negative index (negative counts from the end); IndexError outside."""
        position = int(position)
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError(f"record position {position} out of range for {len(self)} records")
        return position

    def _pread(self, path: Path, offset: int, length: int) -> bytes:
        """``length`` bytes of ``path`` from ``offset`` (the file opened once, on first use); an
        OSError opening it propagates for the subclass to name."""
        if self._fd is None:
            self._fd = os.open(path, os.O_RDONLY)
        return os.pread(self._fd, length, offset)

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
