"""Stage 3: the evaluator of a model's neighbourhood graph, and its check against the model.

``OnnxModel.neighbourhood`` wraps the model's graph so that onnxruntime builds each event's ball points and noisy
copies itself (:func:`~monitor.model.neighbourhood.neighbourhood_graph`); :class:`NeighbourhoodEvaluator` runs that
graph and reads its outputs, and :func:`check_neighbourhood` compares it with the model evaluated on the same rows
before the scorer relies on it. :class:`NoiseProjector` projects the flicker noise through a linear head or first
affine layer for a graph that takes it so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from monitor.errors import ModelError
from monitor.model.base import ModelOutput, Predictor
from monitor.model.neighbourhood import NeighbourhoodRunner
from monitor.model.signature import Held


class NoiseProjector:
    """``rows @ W.T + b`` for a (T, n + 1) projection [W | b], in float32, on a one-thread onnxruntime session.

    The scorer projects its flicker noise bank through a linear head or a first affine layer when it redraws bank
    rows (:func:`~monitor.model.graph_patterns.linear_head`, :func:`~monitor.model.graph_patterns.affine_input`). numpy's matrix product goes to OpenBLAS, whose worker threads
    fight onnxruntime's spinning intra-op threads for the cores: with default threads on 2 cores, redrawing 1,024
    rows through the MLP's 20×64 layer in numpy took 21–35 % of the scorer's time. A session with one thread and no
    spinning takes no other core: the refresh is a small share of the MLP's score (``bench/engine_throughput.py``,
    its *refresh share* column, which the docs' table leaves out).
    """

    def __init__(self, projection: NDArray[np.float64]) -> None:
        t, n = projection.shape[0], projection.shape[1] - 1
        #: columns of the projected rows (T)
        self.width = int(t)
        #: the (T, n + 1) projection [W | b] itself, and W's rows by feature, (n, T): a per-event ball projects
        #: its few moved features with them (``NeighbourhoodEvaluator.project_ball``)
        self.projection = projection
        self.by_feature = np.ascontiguousarray(projection[:, :-1].T, dtype=np.float64)
        graph = helper.make_graph(
            [
                helper.make_node("MatMul", ["rows", "weights"], ["scores"]),
                helper.make_node("Add", ["scores", "bias"], ["projected"]),
            ],
            "noise_projection",
            [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["N", n])],
            [helper.make_tensor_value_info("projected", TensorProto.FLOAT, ["N", t])],
            initializer=[
                numpy_helper.from_array(np.ascontiguousarray(projection[:, :-1].T, dtype=np.float32), "weights"),
                numpy_helper.from_array(projection[:, -1].astype(np.float32).reshape(1, t), "bias"),
            ],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 7
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def __call__(self, rows: NDArray[np.float32]) -> NDArray[np.float32]:
        projected: NDArray[np.float32] = self._session.run(None, {"rows": np.ascontiguousarray(rows, np.float32)})[0]
        return projected


class NeighbourhoodEvaluator:
    """``OnnxModel.neighbourhood``'s result: ``evaluate(centres, noise)`` = ``evaluate(stacked rows)``."""

    def __init__(
        self,
        runner: NeighbourhoodRunner,
        convert: Callable[[dict[str, NDArray[Any]]], ModelOutput],
        projection: NDArray[np.float64] | None = None,
        held_names: dict[str, str] | None = None,
    ) -> None:
        self._runner = runner
        self._convert = convert
        self._projector = None if projection is None else NoiseProjector(projection)
        self._held_names = held_names or {}
        #: for a model with held values: compares the graph with the model on the first batch's first events
        #: (their held values are ones the model accepts), then is cleared
        self.check_first: Callable[..., str | None] | None = None

    @property
    def projects_noise(self) -> bool:
        """True when :meth:`evaluate` takes the noise projected by :meth:`project_noise` (a linear head)."""
        return self._projector is not None

    @property
    def noise_width(self) -> int | None:
        """Columns of the noise :meth:`evaluate` takes when projected (T), None when it takes raw rows."""
        return None if self._projector is None else self._projector.width

    def project_noise(self, rows: NDArray[np.float32]) -> NDArray[np.float32]:
        """Noise rows (r, n) as the graph takes them: ``rows @ W.T + b`` for a linear head or first affine layer
        (see :class:`NoiseProjector`)."""
        if self._projector is None:
            return rows
        return self._projector(rows)

    @property
    def events_per_run(self) -> int:
        return self._runner.events_per_run

    def chunks(self, b: int) -> list[tuple[int, int]]:
        """The [start, stop) events of each ``session.run`` for a batch of ``b`` events."""
        return self._runner.chunks(b)

    @property
    def per_event_ball(self) -> bool:
        """True when :meth:`evaluate` takes each event's ball offsets, projected (:meth:`project_ball`)."""
        return self._runner.takes_ball

    def project_offsets(self, offsets: NDArray[np.floating]) -> NDArray[np.float32]:
        """(B, m, n) per-event ball offsets as the graph takes them: (B, 1 + m, H), ``[0; δ] @ W + b``."""
        assert self._projector is not None
        proj = self._projector.projection  # (H, n + 1) = [W.T | b]
        n = proj.shape[1] - 1
        b, m, _ = offsets.shape
        out = np.empty((b, 1 + m, proj.shape[0]), dtype=np.float64)
        out[:, 0] = proj[:, n]
        out[:, 1:] = np.asarray(offsets, dtype=np.float64) @ proj[:, :n].T + proj[:, n]
        return out.astype(np.float32)

    def project_ball(self, axes: NDArray[np.intp], step: NDArray[np.floating]) -> NDArray[np.float32]:
        """A sampled hypercube per event as the graph takes it: event e's ball moves feature ``axes[e, i]`` by
        +step (point i) and −step (point m/2 + i), so its projected offsets are ``b ± step_a · W[a]``, built from
        m/2 rows of W per event (never the m·n ball rows). Returns (B, 1 + m, H) float32."""
        assert self._projector is not None
        proj = self._projector.projection
        n = proj.shape[1] - 1
        b, half = axes.shape
        bias = proj[:, n]
        delta = self._projector.by_feature[axes] * np.asarray(step, dtype=np.float64)[axes][..., None]  # (B, half, H)
        out = np.empty((b, 1 + 2 * half, proj.shape[0]), dtype=np.float64)
        out[:, 0] = bias
        out[:, 1 : 1 + half] = bias + delta
        out[:, 1 + half :] = bias - delta
        return out.astype(np.float32)

    def evaluate(
        self,
        centres: NDArray[np.float32],
        noise: NDArray[np.float32] | None,
        held: Held | None = None,
        ball: NDArray[np.float32] | None = None,
    ) -> ModelOutput:
        """Outputs for B float32 centres and their (B·K, ·) noise offsets (see :meth:`project_noise`), rows
        ordered as ``build_rows``; ``held``: the B centres' held values, repeated for their ball points and copies
        inside the graph. ``label`` is None when probabilities or logits carry it (take ``argmax_rows`` of the rows
        needed).

        Raises
        ------
        NeighbourhoodRejected
            On the first batch of a model with held values, when the graph disagrees with the model: the caller
            evaluates the rows it builds itself from then on.
        """
        if self.check_first is not None:
            check, self.check_first = self.check_first, None
            first = slice(0, min(3, centres.shape[0]))
            problem = check(
                centres=np.ascontiguousarray(centres[first]), held=None if held is None else held.take(first)
            )
            if problem is not None:
                raise NeighbourhoodRejected(problem)
        feed_held = None
        if held is not None and self._held_names:
            feed_held = {self._held_names[k]: v for k, v in held.values.items()}
        try:
            out = self._runner.run(centres, noise, feed_held, ball)
        except Exception as exc:  # noqa: BLE001 - onnxruntime error types are not public
            raise ModelError(f"onnxruntime failed on a batch of {centres.shape[0]} events: {exc}") from exc
        return self._convert(out)


class NeighbourhoodRejected(ModelError):
    """The neighbourhood graph disagreed with the model on the first batch (see ``NeighbourhoodEvaluator.evaluate``)."""


def check_neighbourhood(
    model: Predictor,
    evaluator: NeighbourhoodEvaluator,
    offsets: NDArray[np.float32],
    copies: int,
    centres: NDArray[np.float32] | None = None,
    held: Held | None = None,
) -> str | None:
    """Compare the wrapped graph with ``model`` on a few rows (seeded, or the given ``centres`` with their ``held``
    values); a description of the first mismatch."""
    rng = np.random.default_rng(0)
    n = model.n_features
    if centres is None:
        centres = rng.standard_normal((3, n)).astype(np.float32)
    b = centres.shape[0]
    noise = (0.05 * rng.standard_normal((b * copies, n))).astype(np.float32)
    rows = [centres, (centres[:, None, :] + offsets[None, :, :]).reshape(-1, n)]
    if copies:
        rows.append((centres[:, None, :] + noise.reshape(b, copies, n)).reshape(-1, n))
    ball = None
    if evaluator.per_event_ball:  # every event gets the sample ``offsets`` as its own ball here
        ball = evaluator.project_offsets(np.broadcast_to(offsets, (b, *offsets.shape)))
    try:
        got = evaluator.evaluate(centres, evaluator.project_noise(noise) if copies else None, held, ball)
    except ModelError as exc:
        return str(exc)
    got = got.with_table()
    stacked_held = None
    if held is not None:
        stacked_held = Held.concat(
            [held, held.repeat(int(offsets.shape[0]))] + ([held.repeat(copies)] if copies else [])
        )
    want = model.evaluate(np.concatenate(rows), stacked_held)
    for name in ("proba", "logits", "value"):
        a, e = getattr(got, name), getattr(want, name)
        if (a is None) != (e is None):
            return f"output {name} present in one graph only"
        if a is not None and (a.shape != e.shape or not np.allclose(a, e, rtol=1e-4, atol=1e-5, equal_nan=True)):
            return f"output {name} differs (shapes {a.shape} and {e.shape})"
    if got.proba is None and got.logits is None and not np.array_equal(np.asarray(got.label), np.asarray(want.label)):
        return "labels differ"
    return None
