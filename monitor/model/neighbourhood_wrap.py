"""Stage 3 helper: the nodes that wrap a model so that one run evaluates each centre, its ball points and its flicker
copies (:func:`monitor.model.neighbourhood.neighbourhood_graph`; the module docstring there says what and why).

:class:`Wrapping` holds what every wrapping of one model shares and assembles the wrapped graph;
:func:`wrap_linear` (a linear head, :func:`~monitor.model.graph_patterns.linear_head`), :func:`wrap_affine` (a first
affine layer, :func:`~monitor.model.graph_patterns.affine_input`) and :func:`wrap_rows` (any other graph) write its
nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from monitor.model.broadcast import fresh_namer
from monitor.model.graph_patterns import AffineInput, LinearHead

__all__ = ["WrappedGraph", "Wrapping", "wrap_affine", "wrap_linear", "wrap_rows"]


@dataclass(frozen=True, slots=True)
class WrappedGraph:
    """:func:`neighbourhood_graph`'s result.

    ``projection`` is None when the graph takes the flicker noise as rows of n features; for a linear head it is
    the (T, n + 1) float64 matrix [W | b] and the graph takes the noise already projected, ``noise @ W.T + b``.
    """

    model: bytes
    projection: NDArray[np.float64] | None
    #: the centre is the first of 1 + m rows per event in the ``b`` part (offset 0) and there is no ``c`` part
    centre_in_ball: bool = False
    #: a per-event ball (a sampled hypercube drawn per event): the graph takes each event's 1 + m ball offsets
    #: projected through the first affine layer, ``[0; δ_e] @ W + b``, as this input [B, 1 + m, H]
    ball_input: str | None = None


@dataclass(frozen=True, slots=True)
class Wrapping:
    """What every wrapping of one model shares: the parsed model, its initializer names (shared by the copies, never
    renamed), a fresh-name maker, the new inputs' names, the outputs to expose, the ball and the copies."""

    proto: onnx.ModelProto
    shared: frozenset[str]
    fresh: Callable[[str], str]
    centres: str
    noise: str
    output_names: Sequence[str]
    offsets: NDArray[np.float32]
    copies: int
    opset: int
    #: the per-event ball input's name ("" for a ball fixed as an initializer)
    ball: str = ""

    @classmethod
    def of(
        cls,
        model_bytes: bytes,
        input_name: str,
        output_names: Sequence[str],
        offsets: NDArray[np.float32],
        copies: int,
        *,
        per_event_ball: bool,
    ) -> Wrapping | None:
        """The wrapping of the serialized model; None when its graph holds sub-graphs (If, Loop, Scan: their inner
        graphs may read outer tensors by name) or its opset is below 8 (Expand arrived in opset 8)."""
        proto = onnx.load_from_string(model_bytes)
        graph = proto.graph
        for node in graph.node:
            if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
                return None
        shared = {init.name for init in graph.initializer} | {init.name for init in graph.sparse_initializer}
        fresh = fresh_namer(shared | {t for node in graph.node for t in (*node.input, *node.output)} | {input_name})
        opset = max((op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")), default=0)
        # only ai.onnx.ml nodes (onnxmltools' tree ensembles): the wrapping's own ops need the default domain's
        if opset == 0:
            proto.opset_import.append(helper.make_opsetid("", 13))
            opset = 13
        if opset < 8:
            return None
        return cls(
            proto,
            frozenset(shared),
            fresh,
            fresh("centres"),
            fresh("noise"),
            output_names,
            offsets,
            copies,
            opset,
            fresh("ball") if per_event_ball else "",
        )

    def assemble(
        self,
        nodes: list[onnx.NodeProto],
        constants: list[onnx.TensorProto],
        noise_width: int,
        parts: Sequence[str],
        projection: NDArray[np.float64] | None,
        *,
        centre_in_ball: bool,
        held: Sequence[tuple[str, int, tuple[int, ...]]] = (),
    ) -> WrappedGraph:
        """The wrapped model: inputs ``centres`` [B, n] (and ``noise`` [B, K, width]), outputs ``<part>/<name>``."""
        graph = self.proto.graph
        by_name = {o.name: o for o in graph.output}
        outputs = []
        for part in parts:
            for name in self.output_names:
                if name not in by_name:  # an inner tensor (a binary classifier's p, see binary_positive): float32
                    outputs.append(helper.make_tensor_value_info(f"{part}/{name}", TensorProto.FLOAT, None))
                    continue
                out = onnx.ValueInfoProto()
                out.CopyFrom(by_name[name])
                out.name = f"{part}/{name}"
                if out.type.HasField("tensor_type"):  # the batch dimension changes (B, B·m, B·K): leave it free
                    out.type.tensor_type.ClearField("shape")
                outputs.append(out)
        inputs = [helper.make_tensor_value_info(self.centres, TensorProto.FLOAT, ["B", self.offsets.shape[1]])]
        if self.copies:
            inputs.append(helper.make_tensor_value_info(self.noise, TensorProto.FLOAT, ["B", self.copies, noise_width]))
        if self.ball:
            m1 = self.offsets.shape[0] + 1
            inputs.append(helper.make_tensor_value_info(self.ball, TensorProto.FLOAT, ["B", m1, noise_width]))
        inputs.extend(helper.make_tensor_value_info(name, elem, ["B", *dims]) for name, elem, dims in held)
        live = _live(nodes, [o.name for o in outputs])
        read = {t for node in live for t in node.input}
        wrapped = helper.make_graph(
            live,
            f"{graph.name}_neighbourhood",
            inputs,
            outputs,
            initializer=[t for t in (*graph.initializer, *constants) if t.name in read],
            sparse_initializer=[t for t in graph.sparse_initializer if t.values.name in read],
        )
        model = helper.make_model(wrapped, opset_imports=list(self.proto.opset_import))
        model.ir_version = self.proto.ir_version
        model.functions.extend(self.proto.functions)
        return WrappedGraph(
            model.SerializeToString(), projection, centre_in_ball=centre_in_ball, ball_input=self.ball or None
        )


def wrap_rows(
    wrap: Wrapping, input_name: str, held: Sequence[tuple[str, int, tuple[int, ...]]], *, input_is_double: bool
) -> WrappedGraph:
    """The model copied twice, on each centre's ball rows and on its flicker copies, the rows built in the graph
    from the centres (no linear head or affine layer to rewrite)."""
    graph, fresh = wrap.proto.graph, wrap.fresh
    m, n = wrap.offsets.shape
    pre: list[onnx.NodeProto] = []
    constants: list[onnx.TensorProto] = []
    # the centre rides with its ball points as offset 0 (centre + 0.0 is the centre): one copy of the model fewer,
    # whose fixed cost per node and run was paid for B rows only
    with_centre = np.vstack([np.zeros((1, n), dtype=np.float32), wrap.offsets.astype(np.float32)])
    sources = _neighbourhood_rows(wrap, pre, constants, wrap.centres, with_centre)
    if input_is_double:
        for part, src in list(sources.items()):
            cast = fresh(f"nbh_{part}_double")
            pre.append(helper.make_node("Cast", [src], [cast], to=TensorProto.DOUBLE, name=fresh("nbh_cast")))
            sources[part] = cast
    rows_per_part = {"b": 1 + m, "f": wrap.copies}
    for name, _, dims in held:
        for part in sources:
            _repeat_held(wrap, pre, constants, name, dims, rows_per_part[part], f"{part}/{name}")
    nodes = pre + _copies(graph, sources, input_name, wrap.shared, skip=())
    return wrap.assemble(nodes, constants, n, list(sources), None, centre_in_ball=True, held=held)


def _repeat_held(
    wrap: Wrapping,
    nodes: list[onnx.NodeProto],
    constants: list[onnx.TensorProto],
    name: str,
    dims: tuple[int, ...],
    count: int,
    out: str,
) -> None:
    """The held input ``name`` [B, *dims] with each row repeated ``count`` times, [B·count, *dims], as ``out``."""
    fresh = wrap.fresh
    with_axis, rep, expand_shape, rows_shape = (
        fresh(f"nbh_{name}_3"),
        fresh(f"nbh_{name}_rep"),
        fresh(f"nbh_{name}_expand"),
        fresh(f"nbh_{name}_rows"),
    )
    if wrap.opset >= 13:
        axis = fresh("nbh_held_axis1")
        constants.append(numpy_helper.from_array(np.array([1], dtype=np.int64), axis))
        nodes.append(helper.make_node("Unsqueeze", [name, axis], [with_axis], name=fresh("nbh_unsqueeze")))
    else:
        nodes.append(helper.make_node("Unsqueeze", [name], [with_axis], axes=[1], name=fresh("nbh_unsqueeze")))
    constants.append(numpy_helper.from_array(np.array([1, count, *([1] * len(dims))], dtype=np.int64), expand_shape))
    nodes.append(helper.make_node("Expand", [with_axis, expand_shape], [rep], name=fresh("nbh_expand_held")))
    constants.append(numpy_helper.from_array(np.array([-1, *dims], dtype=np.int64), rows_shape))
    nodes.append(helper.make_node("Reshape", [rep, rows_shape], [out], name=fresh("nbh_rows_held")))


def _neighbourhood_rows(
    wrap: Wrapping,
    nodes: list[onnx.NodeProto],
    constants: list[onnx.TensorProto],
    rows: str,
    offsets: NDArray[np.float32],
) -> dict[str, str]:
    """Each of the B ``rows`` [B, w] plus the (1 + m, w) ``offsets`` — ``b``, [B·(1 + m), w] — and, with copies,
    plus its K rows of the input ``noise`` [B, K, w] — ``f``, [B·K, w]; returns the two tensors' names by part."""
    fresh, copies = wrap.fresh, wrap.copies
    width = offsets.shape[1]
    axis1, rows_shape, rows3 = fresh("nbh_axis1"), fresh("nbh_rows_shape"), fresh("nbh_rows3")
    constants.append(numpy_helper.from_array(np.array([-1, width], dtype=np.int64), rows_shape))
    # Broadcast Adds whose innermost broadcast span is a single row (w values) run ~2.5x slower in onnxruntime
    # (1.31) than an Expand followed by an Add over spans of m·w values, so the rows are expanded first.
    if wrap.opset >= 13:  # axes became an input in opset 13
        constants.append(numpy_helper.from_array(np.array([1], dtype=np.int64), axis1))
        nodes.append(helper.make_node("Unsqueeze", [rows, axis1], [rows3], name=fresh("nbh_unsqueeze")))
    else:
        nodes.append(helper.make_node("Unsqueeze", [rows], [rows3], axes=[1], name=fresh("nbh_unsqueeze")))
    if wrap.ball:  # each event's own offsets, already projected: added like the flicker noise
        ball = _expanded_add(nodes, constants, fresh, rows3, "ball", offsets.shape[0], width, noise=wrap.ball)
    else:
        ball = _expanded_add(nodes, constants, fresh, rows3, "ball", offsets.shape[0], width, offsets=offsets)
    nodes.append(helper.make_node("Reshape", [ball, rows_shape], [fresh("nbh_ball")], name=fresh("nbh_rows_ball")))
    sources = {"b": nodes[-1].output[0]}
    if copies:
        flick = _expanded_add(nodes, constants, fresh, rows3, "flicker", copies, width, noise=wrap.noise)
        nodes.append(
            helper.make_node("Reshape", [flick, rows_shape], [fresh("nbh_flicker")], name=fresh("nbh_rows_flicker"))
        )
        sources["f"] = nodes[-1].output[0]
    return sources


def _expanded_add(
    nodes: list[onnx.NodeProto],
    constants: list[onnx.TensorProto],
    fresh: Callable[[str], str],
    rows3: str,
    what: str,
    count: int,
    width: int,
    *,
    offsets: NDArray[np.float32] | None = None,
    noise: str | None = None,
) -> str:
    """``rows3`` [B, 1, width] expanded to [B, count, width] plus the (count, width) ``offsets`` (an initializer,
    added over rows of count·width values) or the [B, count, width] input ``noise``; returns the result's name."""
    shape, rep, out = fresh(f"nbh_{what}_shape"), fresh(f"nbh_{what}_rep"), fresh(f"nbh_{what}_sum")
    constants.append(numpy_helper.from_array(np.array([1, count, width], dtype=np.int64), shape))
    nodes.append(helper.make_node("Expand", [rows3, shape], [rep], name=fresh(f"nbh_expand_{what}")))
    if noise is not None:
        nodes.append(helper.make_node("Add", [rep, noise], [out], name=fresh(f"nbh_add_{what}")))
        return out
    assert offsets is not None
    flat_shape, flat, offs = fresh(f"nbh_{what}_flat_shape"), fresh(f"nbh_{what}_flat"), fresh(f"nbh_{what}_offsets")
    constants.append(numpy_helper.from_array(np.array([-1, count * width], dtype=np.int64), flat_shape))
    constants.append(
        numpy_helper.from_array(np.ascontiguousarray(offsets, dtype=np.float32).reshape(1, count * width), offs)
    )
    nodes.append(helper.make_node("Reshape", [rep, flat_shape], [flat], name=fresh(f"nbh_flatten_{what}")))
    nodes.append(helper.make_node("Add", [flat, offs], [out], name=fresh(f"nbh_add_{what}")))
    return out


def _copies(
    graph: onnx.GraphProto, sources: dict[str, str], input_name: str, shared: Set[str], skip: Sequence[int]
) -> list[onnx.NodeProto]:
    """The graph's nodes once per part, tensors prefixed ``<part>/``, the input read from ``sources[part]``."""
    copied: list[onnx.NodeProto] = []
    for part, src in sources.items():
        for index, node in enumerate(graph.node):
            if index in skip:
                continue
            clone = onnx.NodeProto()
            clone.CopyFrom(node)
            if clone.name:
                clone.name = f"{part}/{node.name}"
            del clone.input[:]
            clone.input.extend(_rename(t, part, src, input_name, shared) for t in node.input)
            del clone.output[:]
            clone.output.extend(_rename(t, part, src, input_name, shared) for t in node.output)
            copied.append(clone)
    return copied


def wrap_linear(wrap: Wrapping, head: LinearHead, input_name: str) -> WrappedGraph:
    """A linear head's scores for every row of an event from one MatMul of its centre (see :func:`linear_head`).

    With W (T, n) and intercepts b, an event's m ball scores are ``x @ tile(W.T, m) + (offsets @ W.T + b)`` — a
    [B, n] × [n, m·T] MatMul and one Add over rows of m·T values — and its K copies' scores are
    ``x @ tile(W.T, K) + fed`` where the scorer feeds ``fed = noise @ W.T + b`` (``project_noise``). Building rows
    of T values with Expand/Add instead cost more than the logistic regression itself: onnxruntime's broadcasting
    loops pay per innermost span, here T = 2 values.
    """
    graph, fresh, centres, noise, copies = wrap.proto.graph, wrap.fresh, wrap.centres, wrap.noise, wrap.copies
    offsets = wrap.offsets
    m, n = offsets.shape
    w = head.weights
    t = w.shape[0]
    wt = np.ascontiguousarray(w.T, dtype=np.float32)  # (n, T)
    bias = head.intercepts.astype(np.float64)
    rows_shape = fresh("nbh_rows_shape")
    constants = [numpy_helper.from_array(np.array([-1, t], dtype=np.int64), rows_shape)]
    nodes: list[onnx.NodeProto] = []

    def scores(part: str, weights: NDArray[np.float32], add: str, add_value: NDArray[np.float32] | None) -> None:
        """``centres @ weights + add`` → post-transform → [rows, T] into the part's copy of the head's output."""
        w_name, s_name, z_name = fresh(f"nbh_{part}_weights"), fresh(f"nbh_{part}_scores"), fresh(f"nbh_{part}_z")
        constants.append(numpy_helper.from_array(weights, w_name))
        if add_value is not None:
            constants.append(numpy_helper.from_array(add_value, add))
        nodes.append(helper.make_node("MatMul", [centres, w_name], [s_name], name=fresh(f"nbh_{part}_matmul")))
        nodes.append(helper.make_node("Add", [s_name, add], [z_name], name=fresh(f"nbh_{part}_add")))
        target = f"{part}/{head.output}"
        if head.lowered == "Sigmoid":  # elementwise: on the wide [B, m·T] block, then reshaped
            post = fresh(f"nbh_{part}_post")
            nodes.append(helper.make_node("Sigmoid", [z_name], [post], name=fresh(f"nbh_{part}_sigmoid")))
            nodes.append(helper.make_node("Reshape", [post, rows_shape], [target], name=fresh(f"nbh_{part}_rows")))
        elif head.lowered == "Softmax":  # per row of T scores
            rows = fresh(f"nbh_{part}_rows")
            nodes.append(helper.make_node("Reshape", [z_name, rows_shape], [rows], name=fresh(f"nbh_{part}_reshape")))
            softmax = helper.make_node("Softmax", [rows], [target], name=fresh(f"nbh_{part}_softmax"))
            softmax.attribute.append(helper.make_attribute("axis", -1))
            nodes.append(softmax)
        else:
            nodes.append(helper.make_node("Reshape", [z_name, rows_shape], [target], name=fresh(f"nbh_{part}_rows")))

    scores("c", wt, fresh("nbh_c_bias"), bias.astype(np.float32).reshape(1, t))
    ball_bias = (offsets.astype(np.float64) @ w.T + bias).astype(np.float32).reshape(1, m * t)
    scores("b", np.tile(wt, (1, m)), fresh("nbh_b_bias"), ball_bias)
    parts = ["c", "b"]
    if copies:
        flat, noise_shape = fresh("nbh_noise_flat"), fresh("nbh_noise_shape")
        constants.append(numpy_helper.from_array(np.array([-1, copies * t], dtype=np.int64), noise_shape))
        nodes.append(helper.make_node("Reshape", [noise, noise_shape], [flat], name=fresh("nbh_flatten_noise")))
        scores("f", np.tile(wt, (1, copies)), flat, None)
        parts.append("f")
    # the rest of the graph (after the head) once per part; nothing else reads the input
    nodes += _copies(graph, dict.fromkeys(parts, ""), input_name, wrap.shared, skip=(head.index,))
    projection = np.hstack([w, bias[:, None]])  # (T, n + 1): [noise, 1] @ projection.T = noise @ W.T + b
    return wrap.assemble(nodes, constants, t, parts, projection, centre_in_ball=False)


def wrap_affine(
    wrap: Wrapping, affine: AffineInput, held: Sequence[tuple[str, int, tuple[int, ...]]] = ()
) -> WrappedGraph:
    """The first affine layer applied to the B centres only; ball points and copies get ``x @ W`` plus their
    offsets' ``δ @ W + b`` (see :func:`affine_input`): the scorer feeds the noise projected, ``noise @ W + b``."""
    n = wrap.offsets.shape[1]
    w, bias = affine.weights, affine.bias
    weights, z = wrap.fresh("nbh_weights"), wrap.fresh("nbh_z")
    constants = [numpy_helper.from_array(w.astype(np.float32), weights)]
    pre = [helper.make_node("MatMul", [wrap.centres, weights], [z], name=wrap.fresh("nbh_matmul"))]
    with_centre = np.vstack([np.zeros((1, n)), wrap.offsets.astype(np.float64)])
    projected = (with_centre @ w + bias).astype(np.float32)  # (1 + m, H); row 0, the centre's, is the bias
    sources = _neighbourhood_rows(wrap, pre, constants, z, projected)
    rows_per_part = {"b": 1 + wrap.offsets.shape[0], "f": wrap.copies}
    for name, _, dims in held:
        for part in sources:
            _repeat_held(wrap, pre, constants, name, dims, rows_per_part[part], f"{part}/{name}")
    nodes = pre + _copies(wrap.proto.graph, sources, affine.output, wrap.shared, skip=affine.nodes)
    projection = np.hstack([w.T, bias[:, None]])  # (H, n + 1): [noise, 1] @ projection.T = noise @ W + b
    return wrap.assemble(nodes, constants, w.shape[1], list(sources), projection, centre_in_ball=True, held=held)


def _live(nodes: Sequence[onnx.NodeProto], outputs: Sequence[str]) -> list[onnx.NodeProto]:
    """The nodes the ``outputs`` depend on, in their order (``nodes`` is topologically sorted).

    onnxruntime runs every node of a graph, even one whose outputs nothing reads: a classifier's label branch
    (ArgMax, ArrayFeatureExtractor, Cast, Reshape) on every ball point and copy cost the MLP of bench/ ~0.37 µs
    per event, 5 % of the run, when the wrapped graph exposes only the probabilities.
    """
    needed = set(outputs)
    kept: list[onnx.NodeProto] = []
    for node in reversed(nodes):
        if any(t in needed for t in node.output):
            kept.append(node)
            needed.update(t for t in node.input if t)
    kept.reverse()
    return kept


def _rename(tensor: str, part: str, source: str, input_name: str, shared: Set[str]) -> str:
    if not tensor or tensor in shared:
        return tensor
    if tensor == input_name:
        return source
    return f"{part}/{tensor}"
