"""What the lazy record sequences share: an index of ``.npy`` arrays memory-mapped on first use
(so a DataLoader worker maps the files itself instead of receiving copies), a record count in
``meta``, positions checked like a list's, and rows read by offset through one open descriptor.

An index must never describe another file than the one it is read against, and any number of
processes (DDP ranks, DataLoader workers) opening one changed file at the same moment must all
get the same, complete index. So:

* :func:`file_identity` names the indexed content by more than size and mtime: device, inode,
  ctime (which ``cp -p`` and ``rsync -t`` cannot set back) and a hash of the file's head, tail
  and evenly spaced blocks. It is stored in the index's ``meta.json`` and compared on open.
* :func:`staged_index` builds into a private temporary folder and publishes it as a version
  folder ``.NAME.v-<digest of the identity>``; ``NAME`` itself is a symbolic link to the current
  version, replaced atomically (``os.replace``). Builders of the same content produce the same
  version name: the first rename wins and the others drop their copy and use it. A reader never
  sees a half-written folder nor one removed under it.

:class:`formats.hub_jsonl.JsonlRecords` (the hub's JSONL files) and
:class:`datamodules.howtoground.LazyRecords` (per-clip folders, packed pickles) build on it.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_EDGE = 1 << 16  # bytes hashed at the head and at the tail of an indexed file
_BLOCK = 1 << 12  # bytes hashed at each sampled offset in between
_SAMPLES = 32
_GRACE_SECONDS = 600  # an older version of an index is removed once it is this old (a reader may still map it)
_BUILD_GRACE_SECONDS = 86400  # a build folder this old is a killed build's leftover


def content_sample(path: str | Path, size: int | None = None) -> str:
    """SHA-1 of a file's size, its first and last 64 KiB and 32 blocks of 4 KiB spread evenly between."""
    digest = hashlib.sha1()
    with open(path, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size if size is None else size
        digest.update(str(size).encode())
        fd = handle.fileno()
        offsets = [0, max(0, size - _EDGE)] + [size * i // (_SAMPLES + 1) for i in range(1, _SAMPLES + 1)]
        for offset, length in zip(offsets, [_EDGE, _EDGE] + [_BLOCK] * _SAMPLES):
            digest.update(os.pread(fd, length, offset))
    return digest.hexdigest()


def file_identity(path: str | Path | None, sample: bool = True) -> dict[str, Any] | None:
    """What identifies a file's content for an index (``None`` for ``None``): its resolved path,
    device, inode, size, mtime, ctime and (``sample``) :func:`content_sample`. A folder is named
    by path, inode, mtime and ctime (they change when entries are added or removed)."""
    if path is None:
        return None
    path = Path(path)
    st = path.stat()
    identity = {"path": str(path.resolve()), "device": int(st.st_dev), "inode": int(st.st_ino),
                "size": 0 if path.is_dir() else int(st.st_size), "mtime_ns": int(st.st_mtime_ns),
                "ctime_ns": int(st.st_ctime_ns)}
    if sample and not path.is_dir():
        identity["sample"] = content_sample(path, st.st_size)
    return identity


def identity_changed(stored: Mapping[str, Any] | None, path: str | Path) -> str | None:
    """What differs between a stored :func:`file_identity` and ``path`` now, judged by ``stat``
    alone (cheap enough for every worker's first read); ``None`` when nothing does."""
    if not stored:
        return None
    try:
        st = Path(path).stat()
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    fields = [("inode", st.st_ino), ("mtime_ns", st.st_mtime_ns), ("ctime_ns", st.st_ctime_ns)]
    if not Path(path).is_dir():
        fields.insert(1, ("size", st.st_size))
    for field, now in fields:
        if field in stored and int(stored[field]) != int(now):
            return f"its {field.replace('_ns', '')} changed"
    return None


def _digest(identity: Mapping[str, Any]) -> str:
    return hashlib.sha1(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _version_prefix(index_dir: Path) -> str:
    return f".{index_dir.name}.v-"


def current_index(index_dir: str | Path, identity: Mapping[str, Any]) -> Path | None:
    """The version folder of ``index_dir`` whose ``meta.json`` carries ``identity`` (every key of it
    equal), or ``None``: the published one first, then the one named by the identity's digest
    (which ``index_dir`` is then made to point to, if it does not yet)."""
    index_dir = Path(index_dir)
    for candidate in (index_dir, index_dir.with_name(_version_prefix(index_dir) + _digest(identity))):
        try:
            real = Path(os.path.realpath(candidate))
            stored = json.loads((real / "meta.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(stored, dict) and all(stored.get(k) == v for k, v in identity.items()):
            if candidate != index_dir and os.path.realpath(index_dir) != str(real):
                _point(index_dir, real)  # built by a process that has not published it yet
            return real
    return None


def _point(index_dir: Path, version: Path) -> None:
    """Make ``index_dir`` a link to ``version`` in one atomic step (an older real folder there,
    from an earlier layout, is moved aside and removed first)."""
    link = index_dir.with_name(f".{index_dir.name}.link-{secrets.token_hex(6)}")
    os.symlink(version.name, link)
    try:
        for _ in range(20):
            try:
                os.replace(link, index_dir)
                return
            except OSError as err:
                if err.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                    raise
            aside = index_dir.with_name(f".{index_dir.name}.old-{secrets.token_hex(6)}")
            try:
                os.rename(index_dir, aside)
            except FileNotFoundError:
                continue
            shutil.rmtree(aside, ignore_errors=True)
        raise OSError(f"{index_dir}: could not publish the index (the path keeps being replaced)")
    finally:
        if os.path.lexists(link):
            os.unlink(link)


def _prune(index_dir: Path, keep: Path, now: float) -> None:
    """Remove older versions and leftovers of killed builds once they are past the grace period."""
    prefixes = (_version_prefix(index_dir), f".{index_dir.name}.tmp-", f".{index_dir.name}.old-")
    try:
        entries = list(os.scandir(index_dir.parent))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefixes) or entry.name == keep.name:
            continue
        try:
            grace = _BUILD_GRACE_SECONDS if entry.name.startswith(prefixes[1]) else _GRACE_SECONDS
            if now - entry.stat(follow_symlinks=False).st_mtime > grace:
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue


@contextmanager
def staged_index(index_dir: Path, identity: Mapping[str, Any] | None = None) -> Iterator[Path]:
    """A private folder to write an index into, published as ``index_dir`` only when the block ends
    without an error (removed otherwise), so a reader never sees half an index.

    With ``identity`` (what the index describes, see :func:`file_identity`) the version folder is
    named by its digest, so concurrent builders of the same content converge on one folder;
    without it every build gets a version of its own. ``index_dir`` becomes a link to the version.
    """
    index_dir = Path(index_dir)
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = index_dir.with_name(f".{index_dir.name}.tmp-{os.getpid()}-{secrets.token_hex(6)}")
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    name = _digest(identity) if identity is not None else f"{time.time_ns():x}-{secrets.token_hex(6)}"
    version = index_dir.with_name(_version_prefix(index_dir) + name)
    try:
        os.rename(tmp, version)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if err.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not (version / "meta.json").is_file():
            raise
        # another process published the same content first: its folder is used
    _point(index_dir, version)
    _prune(index_dir, version, time.time())


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
