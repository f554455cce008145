"""One rewrite of the model graph at load: single-value constants given the rank of the tensors they meet.

onnxruntime's CPU kernels for broadcasting elementwise ops (Add, Sub, Mul, Div, Pow, Max, ...) take a slow path when
one operand is a single value of lower rank and the other's innermost dimension is 1: ``Sub(1.0, p)`` with ``p`` of
shape [N, 1] — how skl2onnx writes a binary classifier's ``1 - p`` column — costs ~8 ns per element against ~0.5 ns
when the constant has shape [1, 1] (measured on onnxruntime 1.31). For the MLP of
bench/engine_throughput.py that one Sub was ~9 % of every run. The rewrite reshapes such a constant to all-ones
dimensions of the other operands' rank: the broadcast result — shape and every value — is the same, by the
broadcasting rules, and only the kernel onnxruntime picks changes.

Ranks come from ONNX shape inference; a node whose operand ranks are not all known is left alone, as are
constants that are also graph inputs (a caller may override them) and graphs with sub-graphs' nodes (not visited).
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import numpy_helper

#: elementwise ops with multidirectional (numpy-style) broadcasting of all their inputs
BROADCASTING_OPS = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean",
        "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Where",
    }
)  # fmt: skip


def widen_scalar_operands(model: onnx.ModelProto) -> int:
    """Rewrite ``model`` in place (see the module docstring); returns how many node inputs now read a widened copy."""
    graph = model.graph
    constants = {init.name: init for init in graph.initializer if _size(init) == 1}
    constants = {name: init for name, init in constants.items() if name not in {i.name for i in graph.input}}
    if not constants:
        return 0
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - shape inference is best effort: no ranks, no rewrite
        return 0
    ranks: dict[str, int] = {init.name: len(init.dims) for init in graph.initializer}
    for info in (*inferred.input, *inferred.value_info, *inferred.output):
        tensor = info.type.tensor_type if info.type.HasField("tensor_type") else None
        if tensor is not None and tensor.HasField("shape"):
            ranks[info.name] = len(tensor.shape.dim)
    widened: dict[tuple[str, int], str] = {}
    fresh = fresh_namer(
        {init.name for init in graph.initializer} | {t for n in graph.node for t in (*n.input, *n.output)}
    )
    rewrites = 0
    for node in graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in BROADCASTING_OPS:
            continue
        for position, name in enumerate(node.input):
            if name not in constants:
                continue
            others = [ranks.get(t) for i, t in enumerate(node.input) if i != position and t]
            if not others or any(r is None for r in others):
                continue
            target = max(r for r in others if r is not None)
            if target <= ranks[name]:
                continue
            key = (name, target)
            if key not in widened:
                new = fresh(f"{name}_rank{target}")
                value = numpy_helper.to_array(constants[name]).reshape((1,) * target)
                graph.initializer.append(numpy_helper.from_array(value, new))
                widened[key] = new
            node.input[position] = widened[key]
            rewrites += 1
    return rewrites


def fresh_namer(taken: set[str]) -> Callable[[str], str]:
    """A maker of tensor names not in ``taken`` (which it extends): the base name, prefixed by ``_`` until unused."""

    def fresh(base: str) -> str:
        name = base
        while name in taken:
            name = "_" + name
        taken.add(name)
        return name

    return fresh


def _size(init: onnx.TensorProto) -> int:
    size = 1
    for d in init.dims:
        size *= d
    return size
