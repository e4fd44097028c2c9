"""Argument types for the project's argparse commands: numbers checked where they are typed.

A value given on the command line is refused by argparse itself, so the message names the option
(``argument --limit: must be a positive integer, got '-1'``) rather than a config file it was
merged into or a wrong result much later.
"""
from __future__ import annotations

import argparse
import math
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
