"""core.heap: glibc's allocator thresholds set from code, observed through glibc's own counters."""
from core.heap import bound_heap, glibc_version, release_heap

import subprocess
import sys
import textwrap

import pytest

from tests.fixtures.paths import ROOT

glibc_only = pytest.mark.skipif(glibc_version() is None, reason="the C library is not glibc")

# In a fresh process (the thresholds are per process): how many chunks are mmapped (mallinfo2's
# hblks) after malloc(1 MiB) with the given mmap threshold (None: glibc's default, 128 KiB at start).
PROBE = textwrap.dedent("""
    import ctypes, sys
    from core.heap import bound_heap, _glibc
    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")]
    libc = _glibc()
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    threshold = None if sys.argv[1] == "default" else int(sys.argv[1])
    if threshold is not None:
        assert bound_heap(mmap_threshold=threshold, trim_threshold=threshold, arena_max=None)
    before = libc.mallinfo2().hblks
    block = libc.malloc(1 << 20)
    print(libc.mallinfo2().hblks - before)
    libc.free(block)
""")


def mapped_chunks(threshold: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, threshold], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


@glibc_only
def test_the_mmap_threshold_decides_whether_a_buffer_gets_its_own_mapping():
    assert mapped_chunks("default") == 1          # glibc maps 1 MiB on its own by default (128 KiB threshold)
    assert mapped_chunks(str(4 << 20)) == 0       # below a 4 MiB threshold it comes from the heap
    assert mapped_chunks(str(512 << 10)) == 1     # above a 512 KiB one it is mapped again


@glibc_only
def test_bound_heap_and_release_report_what_they_did():
    assert isinstance(release_heap(), bool)
    assert bound_heap(mmap_threshold=None, trim_threshold=None, arena_max=None) is True  # nothing to set


@pytest.mark.parametrize("kwargs", [dict(mmap_threshold=0), dict(trim_threshold=64 << 20), dict(arena_max=0)])
@glibc_only
def test_out_of_range_settings_are_refused(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        bound_heap(**kwargs)
