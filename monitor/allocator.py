"""Memory settings for the hot loop: glibc malloc keeps freed memory in its heap; the cyclic GC runs less often.

**malloc.**
Why: every micro-batch allocates and frees arrays of 100 KB-1 MB (onnxruntime's outputs, numpy temporaries). glibc
serves blocks above its mmap threshold (128 KB at start, adapting upwards only as such blocks are freed) with fresh
``mmap`` pages, and every first touch of a fresh page is a page fault — expensive on virtual machines. Reading a
model's 150 KB output right after the run cost 0.41 µs/event with fresh pages and 0.10 µs/event with reused heap
memory when the scorer still labelled every row; with the current scorer the difference is within run-to-run noise,
and the setting stays because it costs only RSS.

:func:`tune_malloc` raises the mmap threshold to 64 MiB and the trim threshold to 256 MiB, so such blocks are reused
from the heap. The price is that memory freed below 256 MiB of heap top is kept by the process rather than
returned to the system: RSS stays at its high-water mark (bounded by the largest micro-batch) instead of
shrinking. Off glibc (musl, macOS) it does nothing. ``HARMONIC_MALLOC_TUNING=0`` turns it off.

**Cyclic garbage collector.** Decoding allocates several container objects per event (orjson's dicts and lists, the
record, the event); CPython collects its youngest generation every 700 net allocations, and each collection walks
every young container — and every so often an older generation, with everything start-up built. Nothing on the hot
path builds reference cycles, so :func:`tune_gc` collects the youngest generation every ``GC_THRESHOLDS[0]``
allocations instead (older generations as CPython does, every 10 younger collections), and
:func:`freeze_startup_objects` moves what start-up built — models, sessions, imported modules, some 160,000 objects —
out of the collector's sight (``gc.freeze``), so a full collection walks only what the loop created. With CPython's
settings the decoding process spent up to twice the CPU per record (``bench/stream.py throughput --gc default`` against
the default, minutes apart on a drifting machine: direction and size, not a controlled difference). Cyclic garbage
waits longer to be freed (up to that many allocations); reference-counted memory is freed as before.
``HARMONIC_GC_TUNING=0`` keeps CPython's settings.

**Collections by time as well.** Allocation counts alone let garbage live for as long as it takes the loop to make
50,000 net allocations, and at a low event rate that is minutes. kafka-python does build cycles: a fetch that times
out inside ``poll`` raises and catches ``KafkaTimeoutError`` (kafka-python 3.0), whose traceback holds the frames
that hold the poll's records — over and over while the loop waits for records. With the threshold alone the consumer
process grew by ~1.2 MiB per 100,000 events, steadily, over 1,000,000 events at 2,500/s (``bench/stream.py
memory-kafka --rate 2500``). :class:`TimedCollector` also collects every second (the older generations every 10
and 60 seconds), so the garbage cannot outlive a few seconds whatever the rate; the sidecar's loop and the consumer
process call it once per poll. With it the consumer process stays flat over that run (docs/BENCHMARKS.md,
*Memory*).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 64 * 2**20
TRIM_THRESHOLD = 256 * 2**20
#: gc.set_threshold: youngest generation every 50,000 net allocations (CPython: 700), older ones as CPython
GC_THRESHOLDS = (50_000, 10, 10)
_OFF = ("0", "false", "no", "off")


def tune_malloc() -> bool:
    """Apply the settings above; True when glibc accepted them."""
    if not _switched_on("HARMONIC_MALLOC_TUNING"):
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


def tune_gc() -> bool:
    """Apply :data:`GC_THRESHOLDS`; False (nothing changed) when ``HARMONIC_GC_TUNING=0``."""
    if not _switched_on("HARMONIC_GC_TUNING"):
        return False
    gc.set_threshold(*GC_THRESHOLDS)
    log.debug("gc tuning", extra={"thresholds": GC_THRESHOLDS})
    return True


def freeze_startup_objects() -> None:
    """After start-up (models loaded, consumer created): collect once, then exempt what is left from the collector.

    Does nothing when ``HARMONIC_GC_TUNING=0``.
    """
    if not _switched_on("HARMONIC_GC_TUNING"):
        return
    gc.collect()
    gc.freeze()


class TimedCollector:
    """Runs the cyclic GC by time: the youngest generation every ``interval`` seconds, the middle one every
    ``middle_every``-th time and all of them every ``full_every``-th (defaults: 1 s, 10 s, 60 s).

    :meth:`maybe_collect` is meant to be called from a loop, as often as it likes: between due times it only reads
    the clock. With CPython's own settings (``HARMONIC_GC_TUNING=0``) it never collects, since their thresholds
    already collect often. A collection walks only objects not frozen by :func:`freeze_startup_objects`.

    >>> now = [0.0]
    >>> c = TimedCollector(clock=lambda: now[0], enabled=True)
    >>> c.maybe_collect(), c.maybe_collect()  # the first call starts the clock
    (None, None)
    >>> now[0] = 1.0; c.maybe_collect()
    0
    """

    def __init__(
        self,
        interval: float = 1.0,
        *,
        middle_every: int = 10,
        full_every: int = 60,
        clock: Callable[[], float] = time.monotonic,
        enabled: bool | None = None,
    ) -> None:
        self.interval, self.middle_every, self.full_every = interval, middle_every, full_every
        self._clock = clock
        self.enabled = _switched_on("HARMONIC_GC_TUNING") if enabled is None else enabled
        self._due: float | None = None
        self.collections = 0

    def maybe_collect(self) -> int | None:
        """Collect when due; returns the generation collected, else None."""
        if not self.enabled:
            return None
        now = self._clock()
        if self._due is None:
            self._due = now + self.interval
            return None
        if now < self._due:
            return None
        self._due = now + self.interval
        self.collections += 1
        generation = (
            2 if self.collections % self.full_every == 0 else 1 if self.collections % self.middle_every == 0 else 0
        )
        gc.collect(generation)
        return generation


def _switched_on(variable: str) -> bool:
    """False when the environment variable says 0/false/no/off (any case); on when unset or anything else."""
    return os.environ.get(variable, "1").strip().lower() not in _OFF
