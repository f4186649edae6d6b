"""Giving freed heap memory back to the operating system between compilation-heavy stages.

Each XLA compilation allocates and frees hundreds of megabytes of temporaries (LLVM code
generation; the tuning step of ``gcc-jax tune`` about 0.5 GB). glibc's ``malloc`` keeps freed
pages that are not at the top of its heaps, so after a few dozen compilations the resident
memory of a long experiment is mostly freed memory: measured on ``gcc-jax tune``'s x·sin(x)
worst-case slice, 1.6 GB resident of which 0.48 GB remained after ``malloc_trim``.
:func:`release_memory` before a large compilation and between an experiment's stages returns
it, so the peak is the live data plus one compilation's temporaries. Garbage collection is
itself slow in such a process, so a call collects only the young generations, and does nothing
unless the resident size has grown since the last release (64 MB by default).
"""

import ctypes
import ctypes.util
import functools
import gc
import os

__all__ = ["release_memory"]


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or ``None`` (another C library: nothing to do)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


#: resident size (bytes) right after the last release; None before the first
_after_last_release: list[int | None] = [None]


def _resident_bytes() -> int | None:
    """This process's resident set size (Linux ``/proc``), or ``None`` where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def release_memory(min_growth_mb: float = 64.0) -> bool:
    """Collect young Python garbage and return the heap's free pages to the OS (glibc only).

    The collection covers generations 0 and 1 (what the last stage's tracing left behind): a
    full collection costs seconds in a process that has traced and compiled many programs
    (1-4 s per call in ``gcc-jax tune --toy``) and handed back no more memory (``tune --toy``:
    peak resident 739 MB with full collections, 700 MB with young ones, 2026-12-02). Even so,
    a release runs only when the resident size has grown by ``min_growth_mb`` since the last
    one (or on the first call, or where the resident size is unknown). ``min_growth_mb=0``
    always releases.

    Args:
        min_growth_mb: growth of the resident size (MB) since the last release below which
            there is nothing worth handing back.

    Returns:
        True when memory could be handed back (glibc's ``malloc_trim`` released some pages);
        False when skipped or nothing was released.

    Example:
        >>> release_memory(min_growth_mb=0) in (True, False)
        True
        >>> release_memory(min_growth_mb=1e9)  # has not grown by 1 PB since: skipped
        False
    """
    before, last = _resident_bytes(), _after_last_release[0]
    if before is not None and last is not None and before - last < min_growth_mb * 2**20:
        return False
    gc.collect(1)
    trim = _malloc_trim()
    released = bool(trim(0)) if trim is not None else False
    _after_last_release[0] = _resident_bytes()
    return released
