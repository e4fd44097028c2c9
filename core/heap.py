"""Telling glibc's allocator to hand freed memory back, so a long run's footprint stays flat.

A long ``predict`` allocates and frees the same large buffers (decoded frames, preprocessed clips,
activations) once per clip. With glibc's defaults the threshold above which a buffer gets its own
``mmap`` rises after the first large free (up to 32 MiB on 64-bit), so later buffers of that size
come from the heap, where freed blocks fragment it and the resident size keeps creeping up with the
number of clips, though nothing is kept. Fixing the thresholds (``mallopt``, glibc's documented
tunables ``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD``, ``M_ARENA_MAX``, the same as the
``MALLOC_*_`` environment variables) keeps large buffers out of the heap and returns the heap's
free top; ``malloc_trim`` returns free pages inside it. Elsewhere than glibc (macOS, musl) these
calls do not exist and nothing is changed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8


@functools.lru_cache(maxsize=1)
def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (it has ``gnu_get_libc_version``), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):
        return None


def glibc_version() -> str | None:
    libc = _glibc()
    return None if libc is None else libc.gnu_get_libc_version().decode()


# Buffers of this size or more get their own mapping. Much lower (64 KiB) maps every frame-sized
# tensor and pays a page fault per page on each allocation: long-video predict spent about 25 s of
# system time per 10 minutes of video at 64 KiB, about 3 s at 4 MiB, for the same flat footprint.
DEFAULT_MMAP_THRESHOLD = 4 * 2**20


def bound_heap(mmap_threshold: int | None = DEFAULT_MMAP_THRESHOLD, trim_threshold: int | None = DEFAULT_MMAP_THRESHOLD,
               arena_max: int | None = 2) -> bool:
    """Fix the allocator's thresholds for this process and the processes it forks from now on.

    Buffers of at least ``mmap_threshold`` bytes are mapped and unmapped on their own; the heap's
    free top is returned beyond ``trim_threshold`` bytes; at most ``arena_max`` arenas are made
    (threads share them); None leaves a setting as it is. Returns whether they were set (False
    where the C library is not glibc).
    """
    libc = _glibc()
    if libc is None:
        return False
    ok = True
    for name, option, value in (("mmap_threshold", M_MMAP_THRESHOLD, mmap_threshold),
                                ("trim_threshold", M_TRIM_THRESHOLD, trim_threshold)):
        if value is None:
            continue
        if not 0 < int(value) <= 32 * 2**20:
            raise ValueError(f"{name} must be in (0, 32 MiB] bytes, got {value}")
        ok &= libc.mallopt(option, int(value)) == 1
    if arena_max is not None:
        if int(arena_max) < 1:
            raise ValueError(f"arena_max must be at least 1, got {arena_max}")
        ok &= libc.mallopt(M_ARENA_MAX, int(arena_max)) == 1
    return bool(ok)


def release_heap() -> bool:
    """Return the free pages of every arena to the system (``malloc_trim(0)``); whether any were."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))


__all__ = ["bound_heap", "release_heap", "glibc_version"]
