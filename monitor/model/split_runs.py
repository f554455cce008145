"""Stage 3: one ``session.run`` cut into parts that run at once on several threads — how the offline commands use
every core.

Why: the offline commands (``score``, ``reference``, ``estimate``, ``probe``, ``compare``, ``report``, the Python API)
have the machine to themselves. onnxruntime's own intra-op threads split each node of one run and meet at a barrier
after every parallel section: a 100-tree ensemble's rows ran 1.7× faster on 2 intra-op threads than on 1 on a quiet
2-core machine, and up to 2× *slower* than on 1 while other processes held a core (each barrier waits for it).
Independent runs on their own threads, one intra-op thread each, meet once, when they return: the same rows ran
1.9× faster in 2 parts than on 1 thread (quiet), and 1.3–2.2× faster than on 2 intra-op threads under load
(``bench/score_process.py``; docs/BENCHMARKS.md, *``harmonic-monitor score`` as a whole process*).

:class:`SplitSession` wraps a session whose inputs and outputs are all batch-first (a model with a free batch
dimension, the scorer's neighbourhood graph: events first) and cuts every run's feeds along that axis into slices of
equal size (±1), up to 4 per thread: the calling thread and ``parts − 1`` threads of a shared pool each take the next
slice as they come free (a thread whose core another process holds takes fewer), and each output is the slices'
outputs joined in order. Rows do not interact within a run, so the outputs are the rows' own, whichever
slice they ran in: a tree ensemble's scores are those of a single-threaded run bit for bit, a matrix product's within
float32 rounding (its kernel may group a row's sums by the run's row count; ``tests/unit/test_split_runs.py``). The
slices depend on the row count alone, so a run is reproduced bit for bit on the same CPUs. ``run`` keeps one run per
call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: model rows each part gets at least: a run of fewer than twice as many runs whole. A part's handoff to a pool
#: thread costs tens of µs, about what onnxruntime spends on 512 rows of a cheap model (a logistic regression);
#: a 100-tree ensemble spends ~1 ms on them
MIN_PART_ROWS = 512

#: slices per thread a run is cut into at most (each thread takes the next as it comes free): 4 keeps a thread
#: that shares its core with another process from holding the run up by more than about a quarter of its share
SLICES_PER_THREAD = 4

_pool: ThreadPoolExecutor | None = None
_pool_workers = 0
_pool_lock = threading.Lock()


def _workers(count: int) -> ThreadPoolExecutor:
    """The shared pool, with at least ``count`` threads (made, or made larger, on first need)."""
    global _pool, _pool_workers
    with _pool_lock:
        if _pool is None or _pool_workers < count:
            _pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="onnx-part")
            _pool_workers = count
        return _pool


def part_bounds(rows: int, parts: int) -> list[tuple[int, int]]:
    """[start, stop) of ``min(parts, rows)`` slices of ``rows`` of equal size (±1), the larger first.

    >>> part_bounds(7, 3), part_bounds(1, 4)
    ([(0, 3), (3, 5), (5, 7)], [(0, 1)])
    """
    count = max(1, min(parts, rows))
    size, extra = divmod(rows, count)
    bounds, start = [], 0
    for i in range(count):
        stop = start + size + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


class SplitSession:
    """An onnxruntime session whose :meth:`run` runs slices of the batch on up to ``parts`` threads at once (see the
    module docstring); every other attribute (``get_inputs``, ``get_outputs``, …) is the session's own.

    A run is cut into up to :data:`SLICES_PER_THREAD` slices per thread, each of at least :data:`MIN_PART_ROWS` model
    rows, and each thread (the caller's among them) takes the next slice as it comes free: a thread on a core that
    another process holds takes fewer. ``rows_per_item``: model rows per item of the batch axis (1 for a model's
    rows; 1 + m + K for the neighbourhood graph, whose batch is events).
    """

    def __init__(self, session: Any, parts: int, *, rows_per_item: int = 1) -> None:
        if parts < 2:
            raise ValueError(f"a split session runs at least 2 parts at once; got {parts}")
        self.session = session
        self.parts = parts
        self.min_items = max(1, -(-MIN_PART_ROWS // max(1, rows_per_item)))
        self._pool = _workers(parts - 1)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def run(self, names: Sequence[str], feed: dict[str, NDArray[Any]], run_options: Any = None) -> list[Any]:
        """``session.run(names, feed)``, the feeds' first axis cut into slices run at once; feeds without a
        common first axis, or too few rows for two slices, run whole."""
        values = list(feed.values())
        rows = values[0].shape[0] if values and values[0].ndim else 0
        count = min(self.parts * SLICES_PER_THREAD, rows // self.min_items)
        if count < 2 or any(v.ndim == 0 or v.shape[0] != rows for v in values):
            return list(self.session.run(names, feed, run_options))
        bounds = part_bounds(rows, count)
        pending: queue.SimpleQueue[int] = queue.SimpleQueue()
        for i in range(count):
            pending.put(i)
        outputs: list[Any] = [None] * count

        def work() -> None:
            while True:
                try:
                    i = pending.get_nowait()
                except queue.Empty:
                    return
                a, b = bounds[i]
                outputs[i] = self.session.run(names, {k: v[a:b] for k, v in feed.items()}, run_options)

        futures = [self._pool.submit(work) for _ in range(min(self.parts, count) - 1)]
        try:
            work()
        finally:
            wait(futures)  # no slice outlives the call, whatever failed
        for f in futures:
            f.result()  # a slice's error
        joined: list[Any] = []
        for j in range(len(names)):
            pieces = [np.asarray(out[j]) for out in outputs]
            if any(piece.ndim == 0 for piece in pieces):  # an output without the batch axis: the whole run's
                return list(self.session.run(names, feed, run_options))
            joined.append(np.concatenate(pieces))
        return joined
