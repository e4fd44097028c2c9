"""One run at a time in an output folder: a lock file held with ``flock`` by the running process.

Two runs writing one output folder interleave their files and one's cleanup removes what the
other is writing (a shared staging folder). :func:`hold_folder` opens ``FOLDER/.lock`` and takes
an exclusive ``fcntl.flock`` on it: the kernel grants it to exactly one process at a time and
releases it when that process ends, however it ends (a kill included), so a lock left by a dead
run is free again with no stale state to judge and no takeover two runs could both win. The
holder writes its host, process id and command into the file for the message a second run gets
(naming the folder, the lock file and the process holding it) and removes the file when the run
ends. A lock file without the ``flock`` mark was written by a run that only created the file; it
is honoured while its process lives on this host.
"""
from __future__ import annotations

from core.output_paths import output_file

import errno
import fcntl
import json
import logging
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = ["FolderInUseError", "LOCK_NAME", "hold_file", "hold_folder"]

log = logging.getLogger(__name__)
LOCK_NAME = ".lock"


class FolderInUseError(RuntimeError):
    """Another live run holds the folder; the message names it, the lock file and the process."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as err:
        return err.errno == errno.EPERM  # exists, owned by another user
    return True


def _read_fd(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 1 << 16, 0).decode("utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _holder(lock: Path) -> dict:
    """What the holder wrote into the lock file (it writes right after taking the lock: wait a moment)."""
    for _ in range(10):
        try:
            data = json.loads(lock.read_text())
            if isinstance(data, dict) and data:
                return data
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    return {}


def _in_use(folder: Path, lock: Path, holder: dict) -> FolderInUseError:
    pid, host = holder.get("pid", "?"), holder.get("host")
    where = "" if host in (None, socket.gethostname()) else f" on host {host}"
    return FolderInUseError(
        f"{folder} is in use by another run (process {pid}{where}, {holder.get('command', '?')}, started "
        f"{holder.get('started', '?')}; lock file {lock}): wait for it to end or choose another output folder")


def _acquire(lock: Path, folder: Path, command: str) -> int:
    """The descriptor of ``lock``, flocked by this process and still the file at that path."""
    for _ in range(100):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise _in_use(folder, lock, _holder(lock)) from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(lock, follow_symlinks=False))
            except FileNotFoundError:
                same = False
            if not same:  # the previous holder removed the file between our open and our flock
                os.close(fd)
                continue
            previous = _read_fd(fd)
            pid = previous.get("pid")
            here = previous.get("host") in (None, socket.gethostname())
            if previous and not previous.get("flock") and isinstance(pid, int) and pid != os.getpid() \
                    and (not here or _alive(pid)):
                raise _in_use(folder, lock, previous)  # a lock written without flock, by a live process
            if previous.get("pid") is not None:
                log.warning("%s: the lock of process %s (no longer running) is taken over", lock, pid)
            record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                                 "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "flock": True}).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, record, 0)
            return fd
        except BaseException:
            try:
                os.close(fd)
            except OSError:
                pass
            raise
    raise FolderInUseError(f"{folder}: could not take the lock file {lock}")


@contextmanager
def _hold(lock: Path, folder: Path, command: str) -> Iterator[Path]:
    fd = _acquire(lock, folder, command)
    try:
        yield lock
    finally:
        try:  # removed while still held, so a waiting opener notices (its file is no longer at the path)
            if os.path.samestat(os.fstat(fd), os.stat(lock, follow_symlinks=False)):
                lock.unlink()
        except OSError:
            pass
        os.close(fd)


@contextmanager
def hold_folder(folder: str | Path, command: str = "this run") -> Iterator[Path]:
    """Hold ``folder`` (created if needed) for the duration of the ``with`` block.

    Raises :class:`FolderInUseError` when another live process holds it (in this process too: a
    second ``hold_folder`` of a held folder is refused).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _hold(folder / LOCK_NAME, folder, command) as lock:
        yield lock


@contextmanager
def hold_file(path: str | Path, command: str = "this run") -> Iterator[Path]:
    """Hold an output file that a run appends to (``.NAME.lock`` beside it), as :func:`hold_folder`.
    A ``path`` that is a symbolic link is refused (:class:`core.output_paths.OutputFolderError`):
    appending would write wherever it points."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    output_file(path.parent, path.name)
    with _hold(path.with_name(f".{path.name}.lock"), path, command) as lock:
        yield lock
