"""Writing a command's output files: never half-written, never over one of the command's inputs.

Every file a command writes goes to a temporary file beside its destination and is renamed into
place when complete (``os.replace`` is atomic within one filesystem), so a kill at any moment
leaves the old file or the new one, never a truncated one. Before a command reads anything it
calls :func:`refuse_input_as_output`: an output that is one of its inputs (the same file through
any path or link, or a path inside an input folder) is an error naming both options, because
writing it would destroy the input while it is read (a memory-mapped input turns into SIGBUS or
silently wrong tensors).
"""
from __future__ import annotations

import json
import os
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, Mapping

__all__ = ["OutputIsInputError", "atomic_write", "refuse_input_as_output", "same_or_inside", "write_json_atomic",
           "write_text_atomic"]


class OutputIsInputError(ValueError):
    """An output path that is one of the command's inputs; the message names both."""


def same_or_inside(path: str | Path, other: str | Path) -> bool:
    """Whether ``path`` is the file ``other`` (through any link or relative path) or lies inside folder ``other``."""
    path, other = Path(path).expanduser(), Path(other).expanduser()
    if path.exists() and other.exists() and os.path.samefile(path, other):
        return True
    resolved, base = path.resolve(), other.resolve()
    return resolved == base or (base.is_dir() and base in resolved.parents)


def refuse_input_as_output(output: str | Path | None, inputs: Mapping[str, str | Path | None],
                           output_option: str = "--out") -> None:
    """Raise :class:`OutputIsInputError` when ``output`` is (or lies inside) one of ``inputs``.

    ``inputs`` maps each input's option name (``"--gt"``, ``"checkpoint"``) to its path; None
    entries (options not given) are ignored, as is a None ``output``.
    """
    if output is None:
        return
    for option, path in inputs.items():
        if path is None:
            continue
        if same_or_inside(output, path):
            inside = Path(path).is_dir() and Path(output).resolve() != Path(path).resolve()
            how = "lies inside" if inside else "is"
            raise OutputIsInputError(
                f"{output_option} {output} {how} {option} {path}, an input of this command: writing it would "
                "destroy the input; choose another output path")


def _temporary_sibling(path: Path) -> tuple[Path, int]:
    """A new, empty file beside ``path`` (created with the usual permissions) and its descriptor."""
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: could not create a temporary file beside it")


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8",
                 newline: str | None = None) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on a clean exit it replaces ``path``.

    On an exception (or a kill) ``path`` is untouched and the temporary file is removed (a kill
    leaves only a hidden ``.NAME.*.partial``). Parent folders are created.
    """
    if "w" not in mode:
        raise ValueError(f"atomic_write opens files for writing ('w' or 'wb'), got mode {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, fd = _temporary_sibling(path)
    try:
        text = "b" not in mode
        with os.fdopen(fd, mode, encoding=encoding if text else None, newline=newline if text else None) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> Path:
    """``path.write_text(text)``, atomically."""
    with atomic_write(path) as handle:
        handle.write(text)
    return Path(path)


def write_json_atomic(path: str | Path, data: Any, indent: int | None = 2) -> Path:
    """``data`` as JSON into ``path``, atomically."""
    with atomic_write(path) as handle:
        json.dump(data, handle, indent=indent)
    return Path(path)
