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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from monitor.model.broadcast import fresh_namer

#: the three row blocks of a micro-batch, in output order: centres, ball points, flicker copies
PARTS = ("c", "b", "f")


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
class LinearHead:
    """The LinearClassifier/LinearRegressor reading the model input (see :func:`linear_head`)."""

    index: int  # of the node in the graph
    weights: NDArray[np.float64]  # (T, n)
    intercepts: NDArray[np.float32]  # (T,)
    #: the standard op replacing the node's post-transform once its scores are ``x @ W.T + intercepts``: "" (none),
    #: "Sigmoid" or "Softmax"
    lowered: str
    output: str  # the node output the lowered ops write (probabilities, or the regressor's values)


_LOWERED_POST = {"NONE": "", "LOGISTIC": "Sigmoid", "SOFTMAX": "Softmax"}


def linear_head(graph: onnx.GraphProto, input_name: str, n: int) -> LinearHead | None:
    """The linear head when the input feeds only a LinearClassifier/LinearRegressor with T < n targets.

    Such a node computes ``x @ W.T + b`` before its post-transform, so ``(x + δ) @ W.T = x @ W.T + δ @ W.T``:
    the ball points and noisy copies can be built with T numbers per row instead of n. onnxruntime's linear
    kernels also cost a few ns per row (docs/BENCHMARKS.md, *Engine vs bound*, the logistic regression), mostly
    per-row work, so where the node's semantics are plain standard ops — a classifier with one score per class
    (T = classes ≥ 2), post-transform NONE, LOGISTIC or SOFTMAX, whose label output feeds no other node; a regressor
    with post-transform NONE — the copies compute ``Add`` (+ ``Sigmoid``/``Softmax``) instead, and labels come from
    the probabilities. ``OnnxModel.neighbourhood`` checks the wrapped graph against the model before using it.
    """
    consumers = [i for i, node in enumerate(graph.node) if input_name in node.input]
    if len(consumers) != 1 or any(o.name == input_name for o in graph.output):
        return None
    index = consumers[0]
    node = graph.node[index]
    if node.domain != "ai.onnx.ml" or node.op_type not in ("LinearClassifier", "LinearRegressor"):
        return None
    if list(node.input) != [input_name]:
        return None
    coefficients = next((a for a in node.attribute if a.name == "coefficients"), None)
    if coefficients is None or not coefficients.floats or len(coefficients.floats) % n:
        return None
    w = np.asarray(coefficients.floats, dtype=np.float64).reshape(-1, n)
    targets = w.shape[0]
    if targets >= n:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    raw_intercepts = attrs.get("intercepts") or [0.0] * targets
    if len(raw_intercepts) != targets:
        return None
    intercepts = np.asarray(raw_intercepts, dtype=np.float32)
    post = attrs.get("post_transform", b"NONE")
    post = post.decode() if isinstance(post, bytes) else str(post)
    consumed = {t for other in graph.node for t in other.input}
    lowered: str | None = None
    output = node.output[0]
    if node.op_type == "LinearClassifier":
        classes = len(attrs.get("classlabels_ints") or attrs.get("classlabels_strings") or [])
        if len(node.output) == 2 and node.output[0] not in consumed and targets == classes >= 2:
            lowered = _LOWERED_POST.get(post)
            output = node.output[1]
    elif post == "NONE":
        lowered = ""
    if lowered is None:
        return None
    return LinearHead(index, w, intercepts, lowered, output)


@dataclass(frozen=True, slots=True)
class AffineInput:
    """The model's first affine layer, ``[Cast →] MatMul(W) [→ Add(b)]`` or ``Gemm``, reading the input (see
    :func:`affine_input`)."""

    nodes: tuple[int, ...]  # indices of the nodes it replaces, in graph order
    weights: NDArray[np.float64]  # (n, H): x @ weights
    bias: NDArray[np.float64]  # (H,)
    output: str  # the tensor its last node writes, [rows, H]


def _initializer(graph: onnx.GraphProto, name: str) -> NDArray[np.float64] | None:
    for init in graph.initializer:
        if init.name == name:
            value = numpy_helper.to_array(init)
            return value.astype(np.float64) if value.dtype == np.float32 else None
    return None


def affine_input(graph: onnx.GraphProto, input_name: str, n: int) -> AffineInput | None:
    """The affine layer the (float32) input feeds alone: ``MatMul`` by an (n, H) initializer, then optionally an
    ``Add`` of an H-value initializer, or a ``Gemm`` (alpha = beta = 1, A not transposed) with initializer B and
    C; a float-to-float ``Cast`` before it is passed over.

    Since ``(x + δ) @ W + b = x @ W + (δ @ W + b)``, the ball points' and copies' first-layer activations can be
    built from the centres' ``x @ W`` (B rows) and the offsets' ``δ @ W + b`` — computed once for the ball, and
    for the flicker noise bank when it is drawn — instead of multiplying every one of the B·(1 + m + K) rows.
    """
    consumers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.node):
        for t in node.input:
            consumers.setdefault(t, []).append(i)
    exposed = {o.name for o in graph.output}

    def only_consumer(tensor: str) -> int | None:
        readers = consumers.get(tensor, [])
        return readers[0] if len(readers) == 1 and tensor not in exposed else None

    index = only_consumer(input_name)
    nodes: list[int] = []
    tensor = input_name
    # an Identity (the input rewrite of monitor/model/signature.py names the model's input with one) or a
    # float-to-float Cast before the layer is passed over
    while index is not None and graph.node[index].op_type in ("Cast", "Identity"):
        node = graph.node[index]
        if node.domain not in ("", "ai.onnx"):
            return None
        if node.op_type == "Cast" and next((a.i for a in node.attribute if a.name == "to"), None) != TensorProto.FLOAT:
            return None
        nodes.append(index)
        tensor = node.output[0]
        index = only_consumer(tensor)
    if index is None:
        return None
    node = graph.node[index]
    if node.domain not in ("", "ai.onnx") or list(node.input[:1]) != [tensor]:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "MatMul":
        w = _initializer(graph, node.input[1])
        bias: NDArray[np.float64] | None = None
    elif node.op_type == "Gemm" and len(node.input) == 3 and attrs.get("alpha", 1.0) == 1.0:
        if attrs.get("beta", 1.0) != 1.0 or attrs.get("transA", 0):
            return None
        w = _initializer(graph, node.input[1])
        if w is not None and attrs.get("transB", 0):
            w = w.T
        bias = _initializer(graph, node.input[2])
    else:
        return None
    if w is None or w.ndim != 2 or w.shape[0] != n:
        return None
    h = w.shape[1]
    nodes.append(index)
    out = node.output[0]
    after = only_consumer(out) if node.op_type == "MatMul" else None
    if after is not None and graph.node[after].op_type == "Add" and graph.node[after].domain in ("", "ai.onnx"):
        add = graph.node[after]
        other = add.input[1] if add.input[0] == out else add.input[0]
        value = _initializer(graph, other)
        if value is not None and value.shape in ((h,), (1, h)):  # the bias is folded into the offsets
            bias = value.reshape(h)
            nodes.append(after)
            out = add.output[0]
    if out in exposed:
        return None
    if bias is None:
        bias = np.zeros(h)
    elif bias.size != h or bias.ndim > 2 or bias.shape[-1] != h:
        return None
    return AffineInput(tuple(nodes), w, bias.reshape(h), out)


def binary_positive(graph: onnx.GraphProto, proba_name: str) -> str | None:
    """The tensor p [rows, 1] when the probability output ``proba_name`` is ``Concat([1 − p, p], axis=1)``, else None.

    That is how skl2onnx writes a binary classifier's probabilities after a sigmoid (an MLP, SGD or any
    ``predict_proba`` of the form [1 − p, p]): ``Sub(1, p)`` then ``Concat`` along the class axis. The scorer needs
    no more than p for such a model — the class is 1 exactly where ``p > 1 − p`` in float32, which is what the
    table's row-wise argmax finds, and f at class 0 is ``1 − p`` computed as the graph's ``Sub`` computes it — so the
    wrapped graph exposes p and leaves out the ``Sub`` and ``Concat`` on every ball point and copy (see
    ``OnnxModel.neighbourhood``). The constant must be a single 1 (any shape of one element); the ``Sub`` must read
    the same tensor the ``Concat`` takes second. ``OnnxModel.neighbourhood`` checks the result against the model.
    """
    producers = {t: node for node in graph.node for t in node.output}
    concat = producers.get(proba_name)
    if concat is None or concat.op_type != "Concat" or concat.domain not in ("", "ai.onnx") or len(concat.input) != 2:
        return None
    if next((a.i for a in concat.attribute if a.name == "axis"), None) not in (1, -1):
        return None
    negative, positive = concat.input
    sub = producers.get(negative)
    if sub is None or sub.op_type != "Sub" or sub.domain not in ("", "ai.onnx") or list(sub.input[1:]) != [positive]:
        return None
    one = _initializer(graph, sub.input[0])
    constant = producers.get(sub.input[0])
    if one is None and constant is not None and constant.op_type == "Constant":
        value = next((a.t for a in constant.attribute if a.name == "value" and a.HasField("t")), None)
        if value is not None and value.data_type == TensorProto.FLOAT:
            one = numpy_helper.to_array(value).astype(np.float64)
    return positive if one is not None and one.size == 1 and float(one.reshape(-1)[0]) == 1.0 else None


@dataclass(frozen=True, slots=True)
class _Wrapping:
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
    The new model and the noise projection, or None when the graph holds sub-graphs (see the module docstring).
    """
    proto = onnx.load_from_string(model_bytes)
    graph = proto.graph
    for node in graph.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            return None
    m, n = offsets.shape
    shared = {init.name for init in graph.initializer} | {init.name for init in graph.sparse_initializer}
    fresh = fresh_namer(shared | {t for node in graph.node for t in (*node.input, *node.output)} | {input_name})
    opset = max((op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")), default=0)
    if opset == 0:  # only ai.onnx.ml nodes (onnxmltools' tree ensembles): the wrapping's own ops need the default one
        proto.opset_import.append(helper.make_opsetid("", 13))
        opset = 13
    if opset < 8:
        return None  # Expand arrived in opset 8
    wrap = _Wrapping(
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
    if per_event_ball:
        affine = None if input_is_double or held else affine_input(graph, input_name, n)
        return None if affine is None else _wrap_affine(wrap, affine)
    head = None if input_is_double or held else linear_head(graph, input_name, n)
    if head is not None:
        return _wrap_linear(wrap, head, input_name)
    affine = None if input_is_double else affine_input(graph, input_name, n)
    if affine is not None:
        return _wrap_affine(wrap, affine, held)
    pre: list[onnx.NodeProto] = []
    constants: list[onnx.TensorProto] = []
    # the centre rides with its ball points as offset 0 (centre + 0.0 is the centre): one copy of the model fewer,
    # whose fixed cost per node and run was paid for B rows only
    with_centre = np.vstack([np.zeros((1, n), dtype=np.float32), offsets.astype(np.float32)])
    sources = _neighbourhood_rows(wrap, pre, constants, wrap.centres, with_centre)
    if input_is_double:
        for part, src in list(sources.items()):
            cast = fresh(f"nbh_{part}_double")
            pre.append(helper.make_node("Cast", [src], [cast], to=TensorProto.DOUBLE, name=fresh("nbh_cast")))
            sources[part] = cast
    rows_per_part = {"b": 1 + m, "f": copies}
    for name, _, dims in held:
        for part in sources:
            _repeat_held(wrap, pre, constants, name, dims, rows_per_part[part], f"{part}/{name}")
    nodes = pre + _copies(graph, sources, input_name, shared, skip=())
    return wrap.assemble(nodes, constants, n, list(sources), None, centre_in_ball=True, held=held)


def _repeat_held(
    wrap: _Wrapping,
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
    wrap: _Wrapping,
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


def _wrap_linear(wrap: _Wrapping, head: LinearHead, input_name: str) -> WrappedGraph:
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


def _wrap_affine(
    wrap: _Wrapping, affine: AffineInput, held: Sequence[tuple[str, int, tuple[int, ...]]] = ()
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


class NoiseProjector:
    """``rows @ W.T + b`` for a (T, n + 1) projection [W | b], in float32, on a one-thread onnxruntime session.

    The scorer projects its flicker noise bank through a linear head or a first affine layer when it redraws bank
    rows (:func:`linear_head`, :func:`affine_input`). numpy's matrix product goes to OpenBLAS, whose worker threads
    fight onnxruntime's spinning intra-op threads for the cores: with default threads on 2 cores, redrawing 1,024
    rows through the MLP's 20×64 layer in numpy took 21–35 % of the scorer's time. A session with one thread and no
    spinning takes no other core: the refresh is a small share of the MLP's score (``bench/engine_throughput.py``,
    its *refresh share* column; docs/BENCHMARKS.md, *Engine vs bound*).
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
