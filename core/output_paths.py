"""A file path inside an output folder that a write cannot take outside it: no symbolic link on the
way (the file itself included) and nothing resolving beyond the folder. Writers rename a finished
temporary file onto such a path, so nothing is ever written through a link."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["OutputFolderError", "output_file"]


class OutputFolderError(ValueError):
    """A folder a command may not write into (foreign content, a link leaving it); the message says why."""


def output_file(folder: str | Path, name: str | Path) -> Path:
    """``folder / name``, refused (:class:`OutputFolderError`) when the file or a folder on its way
    inside ``folder`` is a symbolic link or it lies outside ``folder``."""
    folder = Path(folder)
    relative = Path(name)
    if relative.is_absolute() or ".." in relative.parts:
        raise OutputFolderError(f"{folder}: {name} is not a path inside the output folder")
    current = folder
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            raise OutputFolderError(
                f"{current} is a symbolic link (to {os.readlink(current)}); a command writes only inside its "
                f"output folder {folder} and never through a link: remove the link or choose another folder")
    target = Path(os.path.realpath(folder / relative))
    base = Path(os.path.realpath(folder))
    if base != target and base not in target.parents:
        raise OutputFolderError(f"{folder / relative} resolves to {target}, outside the output folder {folder}")
    if target.is_dir():
        raise OutputFolderError(f"{folder / relative} is a folder; cannot write a file there")
    return folder / relative
