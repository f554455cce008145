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
dimension, the scorer's neighbourhood graph: events first) and cuts every run's feeds along that axis into ``parts``
slices of equal size (±1): one runs on the calling thread, the others on a shared pool, and each output is the
parts' outputs joined in order. Rows do not interact within a run, so the outputs are the rows' own, whichever
part they ran in: a tree ensemble's scores are those of a single-threaded run bit for bit, a matrix product's within
float32 rounding (its kernel may group a row's sums by the run's row count; ``tests/unit/test_split_runs.py``). The
parts depend on the row count alone, so a run is reproduced bit for bit on the same CPUs. ``run`` keeps one run per
call.
"""

from __future__ import annotations

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
    """An onnxruntime session whose :meth:`run` runs up to ``parts`` slices of the batch at once (see the module
    docstring); every other attribute (``get_inputs``, ``get_outputs``, …) is the session's own.

    ``rows_per_item``: model rows per item of the batch axis (1 for a model's rows; 1 + m + K for the neighbourhood
    graph, whose batch is events): each part gets at least :data:`MIN_PART_ROWS` model rows.
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
        """``session.run(names, feed)``, the feeds' first axis cut into parts run at once; feeds without a
        common first axis, or too few rows for two parts, run whole."""
        values = list(feed.values())
        rows = values[0].shape[0] if values and values[0].ndim else 0
        parts = min(self.parts, rows // self.min_items)
        if parts < 2 or any(v.ndim == 0 or v.shape[0] != rows for v in values):
            return list(self.session.run(names, feed, run_options))
        bounds = part_bounds(rows, parts)
        futures = [
            self._pool.submit(self.session.run, names, {k: v[a:b] for k, v in feed.items()}, run_options)
            for a, b in bounds[1:]
        ]
        a, b = bounds[0]
        try:
            first = self.session.run(names, {k: v[a:b] for k, v in feed.items()}, run_options)
        finally:
            wait(futures)  # no part outlives the call, whatever failed
        parts = [first, *(f.result() for f in futures)]
        joined: list[Any] = []
        for i in range(len(names)):
            pieces = [np.asarray(p[i]) for p in parts]
            if any(piece.ndim == 0 for piece in pieces):  # an output without the batch axis: the whole run's
                return list(self.session.run(names, feed, run_options))
            joined.append(np.concatenate(pieces))
        return joined
