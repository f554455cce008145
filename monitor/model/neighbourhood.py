"""Ball points and flicker copies generated inside the ONNX graph: one ``session.run`` per micro-batch chunk.

Why: for cheap dense models (a logistic regression, a small MLP) writing the B·(1 + m + K) rows in numpy — centres,
ball points x + r·s⊙v_i, noisy copies x + σ·s⊙ε — costs as much as onnxruntime's evaluation of them, so a scorer
that writes them runs at a fraction of onnxruntime's speed. Here the rows are produced by onnxruntime itself, in
C++ and on its intra-op threads, from the B centres, and the scorer runs close to onnxruntime alone on the same
rows (docs/BENCHMARKS.md, *Engine vs bound*):

- the graph takes ``centres`` [B, n] and ``noise`` [B, K, n] (the scorer passes a view of its noise bank, no copy);
  the offsets [1, 1 + m, n] — a zero row, then the m ball offsets — are an initializer;
- ``ball = centres[:, None, :] + offsets`` and ``flicker = centres[:, None, :] + noise`` (the centres expanded to
  [B, 1 + m, n] and [B, K, n] first, then one Add each), reshaped to [B·(1 + m), n] and [B·K, n]: each event's
  centre is the first of its ball rows (``centre + 0.0``);
- the model's nodes are copied twice — once on the centres with their ball points, once on the flicker copies
  (tensor names prefixed ``b/`` and ``f/``; initializers are shared, not copied) — so the rows are never
  concatenated into one input tensor (which would be one more pass over every row), and no copy runs on B rows
  only (a third copy for the centres paid each node's fixed cost per run for 1/75 of the rows);
- each requested output comes back in two parts, which :class:`NeighbourhoodRunner` writes into arrays laid out
  exactly as ``evaluate`` of the stacked rows would return them: B centre rows, then B·m ball rows, then B·K copies.
  A linear head (:func:`linear_head`) keeps a ``c/`` part of its own.
- when the input feeds one affine layer (:func:`affine_input`: an MLP's first ``MatMul`` + ``Add``, a ``Gemm``),
  that layer runs on the B centres only: ``(x + δ) @ W + b = x @ W + (δ @ W + b)``, so the ball rows are the
  centres' ``x @ W`` plus the offsets' ``δ @ W + b`` (computed once, in float64), and the flicker rows plus the noise
  projected the same way (the scorer keeps that projected bank). The MLP of bench/ multiplies only the centres by
  its 20×64 first layer, not 75 rows per event: a few per cent more scored events/s at B = 1024, less at B = 256.
- a **per-event ball** (a sampled hypercube drawn per event above 256 features, ``monitor.signals.balls``) is wrapped
  only through that affine rewrite: the graph takes an input ``ball`` [B, 1 + m, H] holding each event's offsets
  already projected, ``b ± r·s_a·W[a]`` for its m/2 sampled features a (``NeighbourhoodEvaluator.project_ball``), and
  adds it to the centres' ``x @ W`` as the flicker noise is added. No ball row of n features is ever formed: for
  the 4,096-pixel MLP of bench/high_dimension.py the scorer runs faster than onnxruntime alone on those rows.
- when the model is a binary classifier whose probabilities are ``Concat([1 − p, p])`` (:func:`binary_positive`:
  skl2onnx's sigmoid heads, the MLP of bench/ among them), ``OnnxModel.neighbourhood`` asks for p [rows, 1] instead,
  so the ``Sub`` and ``Concat`` do not run on every ball point and copy, and the scorer reads the class, f at it and
  the flips from p (``ModelOutput.positive``), bit for bit what it reads from the table: 3–4 % more scored events/s
  for that MLP at B = 1024, no difference beyond the run-to-run spread at B = 256.

Otherwise every row gets the same float32 operations as the numpy path (``centre + offset``, ``centre + noise``; a
model with a double input gets the float32 row cast to double, as ``OnnxModel.evaluate`` casts a float32 buffer), so
the rows are bit-identical — the centre too, up to the sign of a zero (``-0.0 + 0.0`` is ``+0.0``); the model's
outputs may differ in the last bits only where onnxruntime's kernels depend on the number of rows in a run. The
linear-head and affine rewrites change the order of float32 operations (the offset is no longer rounded into
``x + δ`` first), so their outputs agree with the model's within float32 rounding, not bit for bit;
``OnnxModel.neighbourhood`` compares every wrapped graph with the model at load and falls back to numpy rows if not.

Graphs the rewrite cannot copy safely — a node with a sub-graph attribute (If, Loop, Scan), whose inner graphs
may read outer tensors by name — get ``None`` from :func:`neighbourhood_graph`; the scorer then builds the rows in
numpy as before.

Here: :func:`neighbourhood_graph` and :class:`NeighbourhoodRunner`. Beside them: the graph shapes the rewrite
recognizes (:mod:`monitor.model.graph_patterns`), the nodes it writes (:mod:`monitor.model.neighbourhood_wrap`), and
the evaluator with its noise projector (:mod:`monitor.model.neighbourhood_evaluator`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.model.graph_patterns import affine_input, binary_positive, linear_head
from monitor.model.neighbourhood_wrap import WrappedGraph, Wrapping, wrap_affine, wrap_linear, wrap_rows

#: the rewrite's entry points; the recognizers (:mod:`monitor.model.graph_patterns`) are part of what it offers
__all__ = [
    "PARTS",
    "NeighbourhoodRunner",
    "WrappedGraph",
    "affine_input",
    "binary_positive",
    "linear_head",
    "neighbourhood_graph",
]

#: the three row blocks of a micro-batch, in output order: centres, ball points, flicker copies
PARTS = ("c", "b", "f")


def neighbourhood_graph(
    model_bytes: bytes,
    *,
    input_name: str,
    output_names: Sequence[str],
    offsets: NDArray[np.float32],
    copies: int,
    input_is_double: bool,
    held: Sequence[tuple[str, int, tuple[int, ...]]] = (),
    per_event_ball: bool = False,
) -> WrappedGraph | None:
    """The model wrapped to evaluate each centre, its ball points and its flicker copies in one run.

    Parameters
    ----------
    model_bytes : the model (ZipMap already removed) as serialized ONNX.
    input_name : its single 2-D input.
    output_names : the outputs to expose, each as ``c/<name>``, ``b/<name>`` and (when ``copies``) ``f/<name>``;
        a float32 inner tensor of the model may stand for an output (see :func:`binary_positive`).
    offsets : (m, n) float32 ball offsets in raw units.
    copies : K flicker copies per centre (0: no ``noise`` input and no ``f/`` outputs).
    input_is_double : the model's input is double: rows are built in float32 and cast, as the numpy path does.
    held : the model's inputs held fixed, (name, ONNX element type, row dims): inputs of the wrapped graph with B
        rows, each row repeated for its event's ball points and copies inside the graph (Unsqueeze, Expand,
        Reshape); the linear-head and affine rewrites are not tried for such a model.
    per_event_ball : each event has its own m ball offsets (``offsets`` is then only their count and width): only
        a model whose input feeds one affine layer is wrapped (:func:`affine_input`), taking each event's offsets
        projected through that layer as an input (``ball_input``); None otherwise.

    Returns
    -------
    The new model and the noise projection, or None when the graph holds sub-graphs (see the module docstring),
    or when its opset is below 8.
    """
    wrap = Wrapping.of(model_bytes, input_name, output_names, offsets, copies, per_event_ball=per_event_ball)
    if wrap is None:
        return None
    graph, n = wrap.proto.graph, offsets.shape[1]
    if per_event_ball:
        affine = None if input_is_double or held else affine_input(graph, input_name, n)
        return None if affine is None else wrap_affine(wrap, affine)
    head = None if input_is_double or held else linear_head(graph, input_name, n)
    if head is not None:
        return wrap_linear(wrap, head, input_name)
    affine = None if input_is_double else affine_input(graph, input_name, n)
    if affine is not None:
        return wrap_affine(wrap, affine, held)
    return wrap_rows(wrap, input_name, held, input_is_double=input_is_double)


class NeighbourhoodRunner:
    """Runs a :func:`neighbourhood_graph` session in chunks of whole events.

    ``run`` returns the requested outputs as one dict laid out like ``session.run`` on the stacked rows —
    B centre rows, B·m ball rows, B·K flicker rows — ready for the model's
    :class:`~monitor.model.readout.OutputReader`.
    ``centre_in_ball``: the graph's ``b`` part holds each event's centre then its m ball points (no ``c`` part).
    """

    def __init__(
        self,
        session: Any,
        output_names: Sequence[str],
        m: int,
        copies: int,
        events_per_run: int,
        *,
        centre_in_ball: bool = False,
        ball_input: str | None = None,
    ) -> None:
        self._session = session
        self._ball_name = ball_input
        #: the graph takes each event's ball offsets (projected) as an input
        self.takes_ball = ball_input is not None
        self._names = list(output_names)
        self._m, self._k = m, copies
        self.events_per_run = max(1, events_per_run)
        self._centre_in_ball = centre_in_ball
        inputs = session.get_inputs()
        self._centres_name = inputs[0].name
        self._noise_name = inputs[1].name if copies else None
        parts = [p for p in PARTS if (p != "c" or not centre_in_ball) and (p != "f" or copies)]
        self._fetch = [f"{p}/{name}" for p in parts for name in self._names]

    def chunks(self, b: int) -> list[tuple[int, int]]:
        """The [start, stop) events of each run for a batch of ``b``: as few runs as ``events_per_run`` allows, of
        equal size (±1) — 256 events at 218 per run are two runs of 128, not 218 and a 38-event run that pays every
        node's fixed cost for a sixth of the work."""
        runs = max(1, -(-b // self.events_per_run))
        size, extra = divmod(b, runs)
        bounds, start = [], 0
        for i in range(runs):
            stop = start + size + (1 if i < extra else 0)
            bounds.append((start, stop))
            start = stop
        return bounds

    def run(
        self,
        centres: NDArray[np.float32],
        noise: NDArray[np.float32] | None,
        held: dict[str, NDArray[Any]] | None = None,
        ball: NDArray[np.float32] | None = None,
    ) -> dict[str, NDArray[Any]]:
        """Outputs for (B, n) float32 ``centres``, (B·K, width) float32 ``noise`` (None when K = 0), the B
        centres' held values by graph input name and, for a per-event ball, (B, 1 + m, H) ``ball``."""
        b = centres.shape[0]
        m, k = self._m, self._k
        noise3 = None if noise is None or not k else noise.reshape(b, k, noise.shape[1])
        merged: dict[str, NDArray[Any]] = {}
        for e0, e1 in self.chunks(b):
            part = self._run_chunk(
                centres[e0:e1],
                None if noise3 is None else noise3[e0:e1],
                None if not held else {k: v[e0:e1] for k, v in held.items()},
                None if ball is None else ball[e0:e1],
            )
            if not merged:
                merged = self._allocate(part, b)
            for name in self._names:
                target = merged[name]
                if self._centre_in_ball:
                    rows = part[f"b/{name}"]
                    per_event = rows.reshape(e1 - e0, 1 + m, *rows.shape[1:])
                    target[e0:e1] = per_event[:, 0]
                    # one copy: reshaping the strided per_event[:, 1:] first would copy it once more
                    target[b + e0 * m : b + e1 * m].reshape(e1 - e0, m, *rows.shape[1:])[...] = per_event[:, 1:]
                else:
                    target[e0:e1] = part[f"c/{name}"]
                    target[b + e0 * m : b + e1 * m] = part[f"b/{name}"]
                if k:
                    target[b * (1 + m) + e0 * k : b * (1 + m) + e1 * k] = part[f"f/{name}"]
        return merged

    def _run_chunk(
        self,
        centres: NDArray[np.float32],
        noise3: NDArray[np.float32] | None,
        held: dict[str, NDArray[Any]] | None = None,
        ball: NDArray[np.float32] | None = None,
    ) -> dict[str, NDArray[Any]]:
        feed: dict[str, NDArray[Any]] = {self._centres_name: centres}
        if self._ball_name is not None:
            if ball is None:
                raise ValueError("this neighbourhood graph takes each event's ball offsets; none were given")
            feed[self._ball_name] = ball
        if self._noise_name is not None:
            assert noise3 is not None
            feed[self._noise_name] = noise3
        if held:
            feed.update(held)
        return dict(zip(self._fetch, self._session.run(self._fetch, feed), strict=True))

    def _allocate(self, part: dict[str, NDArray[Any]], b: int) -> dict[str, NDArray[Any]]:
        rows = b * (1 + self._m + self._k)
        out: dict[str, NDArray[Any]] = {}
        for name in self._names:
            first = part[f"b/{name}"]
            dtype = object if first.dtype.kind in "OSU" else first.dtype  # string labels: widths may differ
            out[name] = np.empty((rows, *first.shape[1:]), dtype=dtype)
        return out
