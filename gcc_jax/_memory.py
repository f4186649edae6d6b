"""Giving freed heap memory back to the operating system between compilation-heavy stages.

Each XLA compilation allocates and frees hundreds of megabytes of temporaries (LLVM code
generation; the tuning step of ``gcc-jax tune`` about 0.5 GB). glibc's ``malloc`` keeps freed
pages that are not at the top of its heaps, so after a few dozen compilations the resident
memory of a long experiment is mostly freed memory: measured on ``gcc-jax tune``'s x·sin(x)
worst-case slice, 1.6 GB resident of which 0.48 GB remained after ``malloc_trim``.
:func:`release_memory` before a large compilation and between an experiment's stages returns
it, so the peak is the live data plus one compilation's temporaries.
"""

import ctypes
import ctypes.util
import functools
import gc

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


def release_memory() -> bool:
    """Collect Python garbage and return the heap's free pages to the OS (glibc only).

    Returns:
        True when memory could be handed back (glibc's ``malloc_trim`` released some pages).

    Example:
        >>> release_memory() in (True, False)
        True
    """
    gc.collect()
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
