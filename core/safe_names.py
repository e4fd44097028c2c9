"""File names made from record keys and video ids: readable, distinct, and always one file in the folder.

The mapping (:func:`safe_file_name`):

* letters and digits of any script (``猫``, ``é``), ``-``, ``_``, ``+``, ``=`` and inner dots are kept;
* every other run of characters (``/``, ``\\``, spaces, control characters, ``~``) becomes one ``_``,
  and leading dots are dropped, so a name never climbs out of its folder (``..``), hides itself
  or names a sub-folder;
* a name that had to change, or is longer than :data:`MAX_STEM_BYTES` (UTF-8), gets ``~`` and 8 hex digits
  of the original's SHA-1 appended. ``~`` never survives the first rule, so names that did not
  change and names that did can never collide, and two changed names differ unless their hashes do.

``safe_file_name("猫.mp4")`` is ``猫.mp4``; ``safe_file_name("../../x")`` is ``_.._x~`` and a hash;
``safe_file_name("a b")`` and ``safe_file_name("a_b")`` differ (``a_b~…`` and ``a_b``).
"""
from __future__ import annotations

import hashlib
import unicodedata

MAX_STEM_BYTES = 200  # UTF-8 bytes; file systems allow 255 per name, leaving room for hash and suffix
_KEPT_PUNCTUATION = frozenset("-_+=.")


def _kept(char: str) -> bool:
    return char in _KEPT_PUNCTUATION or (char.isalnum() and unicodedata.category(char)[0] in "LN")


def safe_file_name(name: str, suffix: str = "") -> str:
    """``name`` as a single, portable file name (see the module docstring), with ``suffix`` appended."""
    name = str(name)
    out: list[str] = []
    for char in name:
        if _kept(char):
            out.append(char)
        elif not out or out[-1] != "\0":
            out.append("\0")  # one placeholder per run of replaced characters
    stem = "".join(out).replace("\0", "_").lstrip(".")
    changed = stem != name or not stem
    if len(stem.encode("utf-8")) > MAX_STEM_BYTES:
        stem = stem.encode("utf-8")[:MAX_STEM_BYTES].decode("utf-8", "ignore")
        changed = True
    if changed:
        stem = f"{stem}~{hashlib.sha1(name.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
    return stem + suffix


def unsafe_id_reason(value: str) -> str | None:
    """Why ``value`` cannot name one file on its own (a path separator, ``.``/``..``, a control
    character, empty), or None when it can. Record validators refuse such ids."""
    value = str(value)
    if not value.strip():
        return "it is empty"
    if "/" in value or "\\" in value:
        return "it holds a path separator"
    if value in (".", ".."):
        return "it names a folder ('.' or '..')"
    if any(unicodedata.category(c) == "Cc" for c in value):
        return "it holds a control character"
    return None
