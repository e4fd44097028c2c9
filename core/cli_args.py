"""Argument types for the project's argparse commands: numbers checked where they are typed.

A value given on the command line is refused by argparse itself, so the message names the option
(``argument --limit: must be a positive integer, got '-1'``) rather than a config file it was
merged into or a wrong result much later. Sizes (``5GB``) and paths that must exist (a file, a
folder, a JSON file, refused with its line and column) are checked the same way.
"""
from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Callable


def _number(kind: type, test: Callable[[float], bool], wanted: str) -> Callable[[str], int | float]:
    def parse(text: str):
        try:
            value = kind(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}") from None
        if not (math.isfinite(value) and test(value)):
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
        return value

    parse.__name__ = wanted.replace(" ", "_")
    return parse


positive_int = _number(int, lambda v: v >= 1, "a positive integer")
non_negative_int = _number(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number(float, lambda v: v > 0, "a positive number")
non_negative_float = _number(float, lambda v: v >= 0, "a number >= 0")
unit_float = _number(float, lambda v: 0 <= v <= 1, "a number in [0, 1]")


_SIZE_UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000 ** 2, "GB": 1000 ** 3, "TB": 1000 ** 4,
               "KIB": 1024, "MIB": 1024 ** 2, "GIB": 1024 ** 3, "TIB": 1024 ** 4}


def byte_size(text: str) -> int:
    """A positive size in bytes: ``5GB``, ``500MB``, ``2GiB`` or a plain number of bytes."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise argparse.ArgumentTypeError(f"must be a size such as 500MB, 5GB or 2GiB, got {text!r}")
    value = int(float(match.group(1)) * _SIZE_UNITS[unit])
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive size such as 500MB or 5GB, got {text!r}")
    return value


def existing_file(text: str) -> str:
    """A path to a file that exists (refused where typed, before anything heavy is loaded)."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: a folder, not a file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    return text


def existing_folder(text: str) -> str:
    """A path to a folder that exists."""
    path = Path(text).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {'a file, not a folder' if path.exists() else 'no such folder'}")
    return text


def json_file(text: str) -> str:
    """A path to a file that holds JSON; a file that does not is refused with its line and column."""
    from core.json_file import JSONFileError, read_json

    existing_file(text)
    try:
        read_json(text)
    except JSONFileError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def unit_float_list(text: str) -> list[float]:
    """Comma-separated numbers in [0, 1] (thresholds); each one is checked and named when refused."""
    return [unit_float(part.strip()) for part in str(text).split(",") if part.strip()]


port_number = _number(int, lambda v: 0 <= v <= 65535, "a port number in [0, 65535]")


def existing_path(text: str) -> str:
    """A path to a file or folder that exists."""
    if not Path(text).expanduser().exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file or folder")
    return text
