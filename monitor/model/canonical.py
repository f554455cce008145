"""The load-time rewrite of a model into one taking x [batch, D] float32 (see :mod:`monitor.model.signature`).

:func:`canonical_model` gathers, reshapes and casts x back into the model's float inputs inside the graph, beside
the held float features and the non-float inputs as they are; :func:`free_reshapes` frees a fixed batch dimension
where a ``Reshape`` spells it as a constant. The caller (:mod:`monitor.model.batching`) checks the rewritten model
against row-by-row runs of the original before trusting it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto, helper, numpy_helper

from monitor.errors import ModelError
from monitor.model.broadcast import fresh_namer
from monitor.model.signature import Signature


@dataclass(frozen=True, slots=True)
class Canonical:
    """:func:`canonical_model`'s result: the model bytes and the names of its new inputs."""

    model: bytes
    x: str  # [batch, D] float32
    held_columns: str | None  # [batch, H] float32, when fixed_features holds some
    batch_free: bool  # False: the model's fixed batch is kept (the caller runs rows in runs of that size)


def canonical_model(
    proto: onnx.ModelProto, signature: Signature, *, free_batch: bool = True, batch_anywhere: bool = False
) -> Canonical:
    """The model rewritten to take x [batch, D] float32 (see the module docstring); ``proto`` is changed in place.

    ``free_batch``: also make a fixed batch dimension free — the inputs' and outputs' first dimension becomes
    symbolic, and a ``Reshape`` whose target shape is a constant starting with the fixed batch size gets 0 there
    (copy the batch from its input), as a torch export's ``[1, -1]`` flatten needs. ``batch_anywhere`` also rewrites
    the targets where the batch sits at another position (sequence-first tensors: ``[5, 1, 16]``): see
    :func:`free_reshapes`. The caller checks the rewritten model against row-by-row runs of the original before
    trusting it.
    """
    graph = proto.graph
    taken = {i.name for i in graph.initializer} | {t for n in graph.node for t in (*n.input, *n.output)}
    taken |= {i.name for i in graph.input} | {o.name for o in graph.output}
    fresh = fresh_namer(taken)
    opset = max((op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")), default=1)
    if opset < 5:
        raise ModelError(
            f"the model's inputs ({signature.describe()}) need a rewrite that uses Reshape with a shape input "
            f"(opset 5 or later); the model imports opset {opset}: convert it with a newer opset"
        )
    fixed = signature.fixed_batch
    batch_dim: str | int = "batch" if (free_batch or fixed is None) else fixed
    x_name = fresh("x")
    held_name = fresh("fixed_features") if signature.held_features else None
    d, h = signature.n_features, len(signature.held_features)
    new_inputs = [helper.make_tensor_value_info(x_name, TensorProto.FLOAT, [batch_dim, d])]
    if held_name is not None:
        new_inputs.append(helper.make_tensor_value_info(held_name, TensorProto.FLOAT, [batch_dim, h]))
    for spec in signature.held_inputs:
        new_inputs.append(helper.make_tensor_value_info(spec.name, spec.elem_type, [batch_dim, *spec.dims]))
    pre: list[onnx.NodeProto] = []
    source = x_name
    if held_name is not None:
        source = fresh("x_and_fixed")
        pre.append(helper.make_node("Concat", [x_name, held_name], [source], axis=1, name=fresh("sig_concat")))
    for spec in signature.float_inputs:
        columns = signature.columns_of(spec.name)
        current = source
        if not (len(columns) == d + h and np.array_equal(columns, np.arange(d + h))):
            idx = fresh(f"{spec.name}_columns")
            graph.initializer.append(numpy_helper.from_array(columns.astype(np.int64), idx))
            current = fresh(f"{spec.name}_gathered")
            pre.append(helper.make_node("Gather", [source, idx], [current], axis=1, name=fresh("sig_gather")))
        if spec.dims != (spec.size,):
            shape = fresh(f"{spec.name}_shape")
            graph.initializer.append(numpy_helper.from_array(np.array([-1, *spec.dims], dtype=np.int64), shape))
            reshaped = fresh(f"{spec.name}_reshaped")
            pre.append(helper.make_node("Reshape", [current, shape], [reshaped], name=fresh("sig_reshape")))
            current = reshaped
        if spec.elem_type != TensorProto.FLOAT:  # double, float16, bfloat16: cast from x's float32
            pre.append(helper.make_node("Cast", [current], [spec.name], to=spec.elem_type, name=fresh("sig_cast")))
        else:
            pre.append(helper.make_node("Identity", [current], [spec.name], name=fresh("sig_input")))
    if free_batch and fixed is not None:
        free_reshapes(graph, fixed, fresh, anywhere=batch_anywhere)
        _drop_zero_initial_states(graph)
        for out in graph.output:
            if out.type.HasField("tensor_type") and out.type.tensor_type.HasField("shape"):
                dims = out.type.tensor_type.shape.dim
                if dims and dims[0].HasField("dim_value") and dims[0].dim_value == fixed:
                    dims[0].dim_param = "batch"
    nodes = pre + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    initialized = {i.name for i in graph.initializer}
    kept = [i for i in graph.input if i.name in initialized]  # old IR: initializers listed as inputs
    del graph.input[:]
    graph.input.extend(new_inputs + kept)
    return Canonical(proto.SerializeToString(), x_name, held_name, free_batch or fixed is None)


def free_reshapes(graph: onnx.GraphProto, batch: int, fresh: Callable[[str], str], *, anywhere: bool = False) -> None:
    """Reshape targets that are constants starting with ``batch`` take the batch from the reshaped tensor instead.

    Without ``allowzero`` the target's first value becomes 0 (copy the input's first dimension). With
    ``allowzero=1`` (torch's dynamo exporter writes ``view`` so) a 0 is a literal zero: the target becomes
    ``Concat(Shape(data)[0:1], target[1:])``, computed in the graph before the Reshape. Shape annotations of
    intermediate tensors that state the fixed batch are dropped (onnxruntime infers them again).

    ``anywhere``: a target that does not start with the batch, holds no -1 and holds the batch size exactly once
    (``[5, 1, 16]``: sequence, batch, hidden, as a GRU's output is reshaped) gets -1 there — the one dimension
    inferred from the data's size. A guess: the caller keeps it only if the rewritten model agrees with the original.
    """
    consts = {i.name: i for i in graph.initializer}
    producers = {n.output[0]: n for n in graph.node if n.op_type == "Constant" and n.output}
    nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        value = None
        # a constant reshaped (a bias to [1, C, 1, 1]) has no batch: its target's leading 1 stays
        if node.op_type == "Reshape" and len(node.input) >= 2 and node.input[0] not in consts.keys() | producers:
            value = _constant_target(node.input[1], consts, producers)
        if value is not None and anywhere and value.ndim == 1 and value.size and value[0] != batch:
            if -1 not in value and int(np.count_nonzero(value == batch)) == 1:
                new = np.where(value == batch, -1, value).astype(np.int64)
                target = fresh(f"{node.name or 'reshape'}_target")
                graph.initializer.append(numpy_helper.from_array(new, target))
                node.input[1] = target
            nodes.append(node)
            continue
        if value is None or value.ndim != 1 or not value.size or value[0] != batch:
            nodes.append(node)
            continue
        if any(a.name == "allowzero" and a.i for a in node.attribute):  # 0 is a literal zero there
            rest = fresh(f"{node.name or 'reshape'}_rest")
            graph.initializer.append(numpy_helper.from_array(value[1:].astype(np.int64), rest))
            first = fresh(f"{node.name or 'reshape'}_first")
            graph.initializer.append(numpy_helper.from_array(np.array([0], dtype=np.int64), first))
            shape, rows, target = (fresh(f"{node.name or 'reshape'}_{t}") for t in ("shape", "rows", "target"))
            nodes.append(helper.make_node("Shape", [node.input[0]], [shape], name=fresh("free_batch_shape")))
            nodes.append(helper.make_node("Gather", [shape, first], [rows], axis=0, name=fresh("free_batch_rows")))
            nodes.append(helper.make_node("Concat", [rows, rest], [target], axis=0, name=fresh("free_batch_target")))
            node.input[1] = target
        else:
            new = value.copy()
            new[0] = 0
            target = fresh(f"{node.name or 'reshape'}_target")
            graph.initializer.append(numpy_helper.from_array(new.astype(np.int64), target))
            node.input[1] = target
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [vi for vi in graph.value_info if not _starts_with(vi, batch)]
    del graph.value_info[:]
    graph.value_info.extend(kept)


#: recurrent nodes and the positions of their initial states (ONNX: zeros when absent)
_INITIAL_STATES = {"RNN": (5,), "GRU": (5,), "LSTM": (5, 6)}


def _drop_zero_initial_states(graph: onnx.GraphProto) -> None:
    """An RNN, GRU or LSTM whose initial state is a constant of zeros (torch writes ``[layers, batch, hidden]`` with
    the traced batch) gets no initial state: ONNX's default is zeros, for any batch."""
    consts = {i.name: i for i in graph.initializer}
    producers = {n.output[0]: n for n in graph.node if n.op_type == "Constant" and n.output}
    for node in graph.node:
        for position in _INITIAL_STATES.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ():
            if position < len(node.input) and node.input[position]:
                value = _constant_target(node.input[position], consts, producers)
                if value is not None and not np.any(value):
                    node.input[position] = ""


def _constant_target(
    name: str, consts: Mapping[str, onnx.TensorProto], producers: Mapping[str, onnx.NodeProto]
) -> NDArray[Any] | None:
    """The value of a Reshape's target when it is an initializer or a Constant node's output, else None."""
    if name in consts:
        return numpy_helper.to_array(consts[name])
    if name in producers:
        attr = next((a for a in producers[name].attribute if a.name == "value" and a.HasField("t")), None)
        if attr is not None:
            return numpy_helper.to_array(attr.t)
    return None


def _starts_with(vi: onnx.ValueInfoProto, batch: int) -> bool:
    """Whether a tensor's annotated shape starts with the fixed batch size."""
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return False
    dims = vi.type.tensor_type.shape.dim
    return bool(dims) and dims[0].HasField("dim_value") and dims[0].dim_value == batch
