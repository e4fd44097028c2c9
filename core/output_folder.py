"""The contract of a command that writes a folder: it writes only into a folder it created or that
carries its marker, never through a link out of that folder, and never two runs at once.

* :func:`claim_output_folder` accepts a new or empty folder, or one whose marker file
  (``.grove_output.json``) names the same command; a non-empty folder of anything else (a user's
  README.md, notes, another command's output) is refused with a message listing what is there,
  unless the command was given ``--overwrite`` (then files of the same names are replaced, others
  are kept). The marker records the command and the files it wrote.
* :func:`output_file` is the path of a file inside a claimed folder, refused when it (or a folder
  on the way) is a symbolic link, or when it resolves outside the folder: a file is written by
  renaming a finished temporary file onto the name, never through whatever a link points at.
* :func:`write_output_folder` lets a library writer (``save_pretrained`` and the like) write into
  a private staging folder inside the claimed one, then moves each finished file into place by
  those rules, and removes the files of the command's previous write that the new one lacks.
* :func:`hold_run_folder` holds a run folder for a whole run (:mod:`core.folder_lock`): callbacks of
  one process share the hold, and a second run that picked the same folder is refused.
"""
from __future__ import annotations

from core.folder_lock import hold_folder
from core.output_paths import OutputFolderError, output_file

import json
import os
import secrets
import shutil
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

__all__ = ["MARKER_NAME", "OutputFolderError", "claim_output_folder", "hold_run_folder", "output_file",
           "write_output_folder"]

MARKER_NAME = ".grove_output.json"
_OWN_NAMES = {MARKER_NAME, ".lock"}


def _read_marker(folder: Path) -> dict | None:
    marker = folder / MARKER_NAME
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_marker(folder: Path, command: str, files: list[str]) -> None:
    from core.output_files import write_json_atomic

    path = folder / MARKER_NAME
    if path.is_symlink():
        path.unlink()
    write_json_atomic(path, {"command": command, "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
                             "files": sorted(files)})


def claim_output_folder(path: str | Path, command: str, overwrite: bool = False, option: str = "--out",
                        own_files: tuple[str, ...] = (), overwrite_option: str | None = "--overwrite") -> Path:
    """Make ``path`` this command's output folder (created when missing) or raise :class:`OutputFolderError`.

    Accepted: a missing or empty folder, one whose marker names ``command``, or one holding one of
    ``own_files`` (a file only this command writes, for folders written before the marker existed);
    with ``overwrite`` any folder. Refused otherwise, naming the folder, what is in it and
    ``overwrite_option`` (``None`` for a command without one).
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise OutputFolderError(f"{option} {folder} is a file, not a folder; choose a folder to write into")
    folder.mkdir(parents=True, exist_ok=True)
    marker = _read_marker(folder)
    others = sorted(entry.name for entry in folder.iterdir()  # a marker being written by a run beside this one
                    if entry.name not in _OWN_NAMES and not entry.name.startswith(f".{MARKER_NAME}."))
    hint = f", or pass {overwrite_option} to write into it" if overwrite_option else ""
    if not overwrite:
        if marker is not None and marker.get("command") != command:
            raise OutputFolderError(
                f"{option} {folder} holds the output of another command ({marker.get('command')}); choose another "
                f"folder{hint}")
        if marker is None and others and not any((folder / name).is_file() for name in own_files):
            shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            raise OutputFolderError(
                f"{option} {folder} is not empty and was not written by {command} (it holds {shown}); choose a new "
                f"or empty folder{hint}" + (" (files of the same names are replaced)" if hint else ""))
    files = list(marker.get("files", [])) if marker is not None and marker.get("command") == command else []
    _write_marker(folder, command, files)
    return folder


def write_output_folder(path: str | Path, command: str, write: Callable[[Path], Any], overwrite: bool = False,
                        option: str = "--out") -> list[Path]:
    """Claim ``path`` (:func:`claim_output_folder`), let ``write(staging)`` write the output into a
    private folder, then move every file into ``path`` (:func:`output_file` checks each name first:
    one refusal moves nothing). Returns the files written."""
    folder = claim_output_folder(path, command, overwrite, option)
    with hold_run_folder(folder, command):  # two writes into one folder at once: the second is refused
        return _write_staged(folder, command, write)


def _write_staged(folder: Path, command: str, write: Callable[[Path], Any]) -> list[Path]:
    staging = folder / f".staging-{secrets.token_hex(6)}"
    staging.mkdir()
    try:
        write(staging)
        names = sorted(p.relative_to(staging) for p in staging.rglob("*") if p.is_file() and not p.is_symlink())
        targets = [output_file(folder, name) for name in names]  # every check before the first move
        for name, target in zip(names, targets):
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / name, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    written = {str(name) for name in names}
    for old in (_read_marker(folder) or {}).get("files", []):
        if old not in written:  # the previous write's file this one lacks (a shard of a larger model)
            stale = folder / old
            if not stale.is_symlink() and stale.is_file() and Path(os.path.realpath(stale)).parent.is_relative_to(
                    Path(os.path.realpath(folder))):
                stale.unlink()
    _write_marker(folder, command, sorted(written))
    return targets


_held: dict[str, list] = {}  # real path -> [hold context, count]
_held_lock = threading.Lock()


@contextmanager
def hold_run_folder(folder: str | Path, command: str) -> Iterator[Path]:
    """Hold ``folder`` for a run (:func:`core.folder_lock.hold_folder`), shared by every holder in
    this process: the callbacks of one run write side by side, a second run is refused."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = os.path.realpath(folder)
    with _held_lock:
        entry = _held.get(key)
        if entry is None:
            context = hold_folder(folder, command)
            context.__enter__()
            entry = _held[key] = [context, 0]
        entry[1] += 1
    try:
        yield folder
    finally:
        with _held_lock:
            entry[1] -= 1
            if entry[1] == 0:
                del _held[key]
                entry[0].__exit__(None, None, None)
