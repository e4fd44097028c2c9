"""One run at a time in an output folder: a lock file holding the run's process id.

Two runs writing one output folder interleave their files and one's cleanup removes what the
other is writing (a shared staging folder). :func:`hold_folder` creates ``FOLDER/.lock`` with
``O_EXCL`` (so of two runs started together exactly one gets it), writes the host and process id
into it and removes it when the run ends, however it ends short of a kill. A second run finds the
lock and is refused with a message naming the folder, the lock file and the process holding it.
A lock left by a killed run is stale: its process no longer exists on this host, so the lock is
taken over (with a warning) instead of blocking every later run.
"""
from __future__ import annotations

import errno
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


def _read(lock: Path) -> dict:
    try:
        data = json.loads(lock.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _create(lock: Path, command: str) -> bool:
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "command": command,
                   "started": time.strftime("%Y-%m-%dT%H:%M:%S")}, handle)
    return True


@contextmanager
def hold_folder(folder: str | Path, command: str = "this run") -> Iterator[Path]:
    """Hold ``folder`` (created if needed) for the duration of the ``with`` block.

    Raises :class:`FolderInUseError` when a live process holds it. A lock whose process is gone
    (on this host) is stale and taken over; a lock from another host is trusted, since its process
    cannot be checked from here (remove the file by hand when that run is known to be over).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _hold(folder / LOCK_NAME, folder, command) as lock:
        yield lock


@contextmanager
def hold_file(path: str | Path, command: str = "this run") -> Iterator[Path]:
    """Hold an output file that a run appends to (``.NAME.lock`` beside it), as :func:`hold_folder`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _hold(path.with_name(f".{path.name}.lock"), path, command) as lock:
        yield lock


@contextmanager
def _hold(lock: Path, folder: Path, command: str) -> Iterator[Path]:
    for _ in range(3):
        if _create(lock, command):
            break
        holder = _read(lock)
        pid, host = holder.get("pid"), holder.get("host")
        here = host in (None, socket.gethostname())
        if isinstance(pid, int) and (not here or _alive(pid)) and pid != os.getpid():
            where = "" if here else f" on host {host}"
            raise FolderInUseError(
                f"{folder} is in use by another run (process {pid}{where}, {holder.get('command', '?')}, started "
                f"{holder.get('started', '?')}; lock file {lock}): wait for it to end or choose another output "
                "folder. If that run is over, delete the lock file")
        if not holder and lock.exists() and time.time() - lock.stat().st_mtime < 5:
            time.sleep(0.2)  # another run is writing its lock right now
            continue
        log.warning("%s: a stale lock of process %s (no longer running) is taken over", lock, pid)
        lock.unlink(missing_ok=True)
    else:
        raise FolderInUseError(f"{folder}: could not take the lock file {lock}")
    try:
        yield lock
    finally:
        if _read(lock).get("pid") == os.getpid():
            lock.unlink(missing_ok=True)
