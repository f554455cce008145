"""Stage 3: the model's batch dimension, and rows evaluated in runs that fit it.

At load, :func:`canonical_graph` rewrites a model that is not one 2-D float input to take x and the held values
(:func:`~monitor.model.canonical.canonical_model`). A fixed batch dimension is made free by that rewrite when the
rewritten model agrees with row-by-row runs of the original on seeded rows (:func:`check_free_batch`); otherwise
the batch stays fixed, :attr:`CanonicalGraph.run_batch` says so, and one warning states the cost per run measured at
load (:func:`row_cost`). At run time :func:`run_fixed` feeds such a model runs of that many rows, and
:func:`merge_outputs` joins the outputs of several runs.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from monitor.model.canonical import Canonical, canonical_model
from monitor.model.session import OnnxRuntimeOptions, quiet_session_options
from monitor.model.signature import HELD_COLUMNS, Held, Signature, default_held

#: the model's load-time lines share one logger, wherever the code that says them lives
log = logging.getLogger("monitor.model.onnx")

#: one run of the model's session on a chunk of rows and their held values: {output name: values}
Run = Callable[[NDArray[Any], Held | None], dict[str, NDArray[Any]]]


@dataclass(frozen=True, slots=True)
class CanonicalGraph:
    """:func:`canonical_graph`'s result: what the model's sessions load and how they are fed."""

    model: bytes
    #: the input that takes the held float features as columns, when the signature holds some
    held_columns: str | None = None
    #: rows per ``session.run`` when the model's batch dimension stays fixed (None: free)
    run_batch: int | None = None


def canonical_graph(
    raw: bytes, signature: Signature, *, options: OnnxRuntimeOptions, providers: list[str], path: Path
) -> CanonicalGraph:
    """The model rewritten to take x and the held values (:func:`~monitor.model.canonical.canonical_model`); a
    plain model (one 2-D float input) as it is.

    A fixed batch dimension is made free when the rewritten model agrees with row-by-row runs of the original on
    seeded rows; otherwise the batch stays fixed and the caller feeds runs of that many rows (:func:`run_fixed`),
    with a warning stating the measured cost.
    """
    if signature.plain:
        return CanonicalGraph(raw)
    import onnx

    def disagreement(rewritten: Canonical, kept: Canonical, fixed: int) -> str | None:
        """What differs between ``rewritten`` and row-by-row runs of ``kept`` (None: they agree)."""
        return check_free_batch(
            kept.model,
            rewritten.model,
            rewritten.x,
            rewritten.held_columns,
            fixed,
            signature=signature,
            options=options,
            providers=providers,
        )

    canonical = canonical_model(onnx.load_from_string(raw), signature, free_batch=True)
    fixed = signature.fixed_batch
    run_batch = None
    if fixed is not None:
        kept = canonical_model(onnx.load_from_string(raw), signature, free_batch=False)
        problem = disagreement(canonical, kept, fixed)
        if problem is not None:  # the batch elsewhere than first in some Reshape targets (sequence-first layers)
            anywhere = canonical_model(onnx.load_from_string(raw), signature, free_batch=True, batch_anywhere=True)
            if disagreement(anywhere, kept, fixed) is None:
                canonical, problem = anywhere, None
        if problem is not None:
            canonical = kept
            run_batch = fixed
            cost = row_cost(
                kept.model, kept.x, kept.held_columns, fixed, signature=signature, options=options, providers=providers
            )
            if isinstance(cost, str):
                measured = f"the cost per run could not be measured at load ({cost})"
                seconds: float | None = None
            else:
                measured = (
                    f"{cost * 1e6:.0f} µs per run measured at load, about "
                    f"{cost * 1e6 * (1 + 75) / fixed:.0f} µs per scored event at the default ball and copies"
                )
                seconds = cost
            log.warning(
                f"model '{path.name}' has a fixed batch of {fixed} that cannot be made free ({problem}); "
                f"rows are evaluated in runs of {fixed}: {measured}. Export the model with a dynamic batch "
                "dimension to score in batches (torch: dynamic_shapes, or dynamo=False with dynamic_axes)",
                extra={"model": str(path), "batch": fixed, "seconds_per_run": seconds},
            )
        else:
            log.info(
                f"model '{path.name}' has a fixed batch of {fixed}; made free by a graph rewrite, checked "
                "against row-by-row runs",
                extra={"model": str(path), "batch": fixed},
            )
    return CanonicalGraph(canonical.model, canonical.held_columns, run_batch)


def example_feeds(signature: Signature, rows: int) -> tuple[NDArray[np.float32], Held | None]:
    """Seeded x and default held values (0, False, the empty string) for load-time checks."""
    x = np.random.default_rng(0).standard_normal((rows, signature.n_features)).astype(np.float32)
    return x, default_held(signature, rows)


def check_free_batch(
    original: bytes,
    rewritten: bytes,
    x_name: str,
    held_columns: str | None,
    fixed: int,
    *,
    signature: Signature,
    options: OnnxRuntimeOptions,
    providers: list[str],
) -> str | None:
    """Whether the rewritten model on 3·fixed rows agrees with the original run ``fixed`` rows at a time
    (``original``: the model rewritten to take x with its batch kept, so both take the same feeds); None when it
    does, else what differs."""
    try:
        x, held = example_feeds(signature, 3 * fixed)
        # a graph that fails here is expected (the batch stays fixed, with one warning of ours): onnxruntime
        # must not print its own error line for it
        quiet = quiet_session_options(options)
        new = ort.InferenceSession(rewritten, sess_options=quiet, providers=providers)
        old = ort.InferenceSession(original, sess_options=quiet, providers=providers)
        feed = canonical_feed(x_name, held_columns, x, held)
        names = [o.name for o in old.get_outputs()]
        got = new.run(names, feed)
        parts = []
        for i in range(0, 3 * fixed, fixed):
            part_held = None if held is None else held.take(slice(i, i + fixed))
            parts.append(old.run(names, canonical_feed(x_name, held_columns, x[i : i + fixed], part_held)))
    except Exception as exc:  # noqa: BLE001 - onnxruntime error types are not public
        return f"the rewritten graph fails: {str(exc).splitlines()[0][:200]}"
    for j, name in enumerate(names):
        want = np.concatenate([np.asarray(p[j]) for p in parts])
        have = np.asarray(got[j])
        if have.shape != want.shape:
            return f"output '{name}' has shape {list(have.shape)} for {3 * fixed} rows, not {list(want.shape)}"
        if have.dtype.kind in "fc" and not np.allclose(have, want, rtol=1e-5, atol=1e-6, equal_nan=True):
            return f"output '{name}' differs from row-by-row runs"
        if have.dtype.kind not in "fc" and not np.array_equal(have, want):
            return f"output '{name}' differs from row-by-row runs"
    return None


def row_cost(
    kept: bytes,
    x_name: str,
    held_columns: str | None,
    fixed: int,
    *,
    signature: Signature,
    options: OnnxRuntimeOptions,
    providers: list[str],
) -> float | str:
    """Seconds per ``session.run`` of ``fixed`` rows of the model with its batch kept (the best of 20), or why it
    could not be measured."""
    x, held = example_feeds(signature, fixed)
    try:
        session = ort.InferenceSession(kept, sess_options=quiet_session_options(options), providers=providers)
        feed = canonical_feed(x_name, held_columns, x, held)
        names = [o.name for o in session.get_outputs()]
        best = math.inf
        for _ in range(20):
            t0 = time.perf_counter()
            session.run(names, feed)
            best = min(best, time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001 - a cost estimate only
        return f"onnxruntime: {str(exc).splitlines()[0][:200]}" if str(exc) else type(exc).__name__
    return best


def canonical_feed(
    x_name: str, held_columns: str | None, x: NDArray[Any], held: Held | None
) -> dict[str, NDArray[Any]]:
    """The feed of a canonical model: x, and the held values under their inputs' names (the held float features
    under ``held_columns``)."""
    feed: dict[str, NDArray[Any]] = {x_name: x}
    if held is not None:
        for key, value in held.values.items():
            feed[held_columns if key == HELD_COLUMNS and held_columns is not None else key] = value
    return feed


def run_fixed(run: Run, chunk: NDArray[Any], held: Held | None, fixed: int) -> dict[str, NDArray[Any]]:
    """A model whose batch stays fixed: runs of ``fixed`` rows, the last one padded with copies of its last row."""
    b = chunk.shape[0]
    parts = []
    for i in range(0, b, fixed):
        idx = np.minimum(np.arange(i, i + fixed), b - 1)
        out = run(chunk[idx], None if held is None else held.take(idx))
        take = min(fixed, b - i)
        parts.append({k: v[:take] for k, v in out.items()})
    return merge_outputs(parts, b)


def merge_outputs(parts: list[dict[str, NDArray[Any]]], b: int) -> dict[str, NDArray[Any]]:
    """Chunk outputs written straight into arrays of the full size (no concatenate)."""
    if len(parts) == 1:
        return parts[0]
    merged: dict[str, NDArray[Any]] = {}
    for name, first in parts[0].items():
        if first.dtype.kind in "OSU":  # string labels: widths may differ per chunk
            merged[name] = np.empty((b, *first.shape[1:]), dtype=object)
        else:
            merged[name] = np.empty((b, *first.shape[1:]), dtype=first.dtype)
    i = 0
    for part in parts:
        size = 0
        for name, values in part.items():
            size = values.shape[0]
            merged[name][i : i + size] = values
        i += size
    return merged
