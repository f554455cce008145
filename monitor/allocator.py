"""glibc malloc settings for the hot loop: keep freed memory in the heap instead of unmapping it.

Why: every micro-batch allocates and frees arrays of 100 KB-1 MB (onnxruntime's outputs, numpy temporaries). glibc
serves blocks above its mmap threshold (128 KB at start, adapting upwards only as such blocks are freed) with fresh
``mmap`` pages, and every first touch of a fresh page is a page fault — expensive on virtual machines. During
development (docs/BENCHMARKS.md, engine throughput, change 8) reading a model's 150 KB output right after the run
cost 0.41 µs/event with fresh pages and 0.10 µs/event with reused heap memory; with the final scorer, which no longer
labels every row, the difference is within run-to-run noise (``bench/engine_breakdown.py``).

:func:`tune_malloc` raises the mmap threshold to 64 MiB and the trim threshold to 256 MiB, so such blocks are reused
from the heap. The price is that memory freed below 256 MiB of heap top is kept by the process rather than
returned to the system: RSS stays at its high-water mark (bounded by the largest micro-batch) instead of
shrinking. Off glibc (musl, macOS) it does nothing. ``HARMONIC_MALLOC_TUNING=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 64 * 2**20
TRIM_THRESHOLD = 256 * 2**20


def tune_malloc() -> bool:
    """Apply the settings above; True when glibc accepted them."""
    if os.environ.get("HARMONIC_MALLOC_TUNING", "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    log.debug("malloc tuning", extra={"applied": ok})
    return ok
