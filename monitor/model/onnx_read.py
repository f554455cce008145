"""Reading an ONNX file for :class:`~monitor.model.onnx.OnnxModel`: the bytes with their external data (refused past
protobuf's 2 GiB), and the graph prepared for onnxruntime (a ZipMap's input exposed, bfloat16 outputs widened, the
signature and output decision read)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from monitor.errors import ModelError
from monitor.model.broadcast import widen_scalar_operands
from monitor.model.outputs import ModelKindSetting, OutputDecision, add_probabilities, decide_outputs
from monitor.model.signature import FIXED_FEATURES, Signature
from monitor.model.sniff import not_onnx, sniff


def prepare(
    model_bytes: bytes, model_kind: ModelKindSetting, model: str, fixed_features: Sequence[str] = FIXED_FEATURES
) -> tuple[bytes, dict[str, str], OutputDecision, Signature]:
    """The model as the sessions load it, and what its outputs are (:func:`~monitor.model.outputs.decide_outputs`).

    ZipMap outputs are exposed as tensors (:func:`expose_zipmap_input`), logits alone get their softmax as a new
    output (:func:`~monitor.model.outputs.add_probabilities`) and single-value constants are reshaped to their
    partners' rank (:mod:`monitor.model.broadcast`); parsed once, and serialized again only when a rewrite changed
    something. Returns the bytes, the ZipMap mapping {original output name: new tensor output name}, the
    decision and the model's input signature (:class:`~monitor.model.signature.Signature`).

    Raises
    ------
    ModelError
        The bytes are not ONNX, no output fits the kind, or an input cannot be fed.
    """
    import onnx

    try:
        proto = onnx.load_from_string(model_bytes)
        mapping = expose_zipmap_input(proto)
    except Exception as exc:  # noqa: BLE001 - any parse failure means "not ONNX"
        raise ModelError(f"cannot load '{model}' as an ONNX model: {exc}") from exc
    if not proto.graph.input and not proto.graph.output:  # b"" and some other bytes parse as an empty model
        raise ModelError(f"cannot load '{model}' as an ONNX model: it holds no graph (no inputs, no outputs)")
    signature = Signature.from_graph(proto.graph, fixed_features, model=Path(model).name)
    widened = _widen_bfloat16_outputs(proto.graph)
    decision = decide_outputs(proto.graph, mapping, model_kind, model=model)
    changed = bool(mapping) or widened
    if decision.softmax_of is not None:
        decision = replace(decision, proba=add_probabilities(proto.graph, decision.softmax_of))
        changed = True
    changed = widen_scalar_operands(proto) > 0 or changed
    if not changed:
        return model_bytes, mapping, decision, signature
    prepared: bytes = proto.SerializeToString()
    return prepared, mapping, decision, signature


#: protobuf cannot serialize a message of 2 GiB or more: a model whose weights reach it cannot be read into one
PROTOBUF_LIMIT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ExternalData:
    """A file an ONNX model keeps some of its tensors in (torch's default export writes ``model.onnx.data``)."""

    name: str  # as the model names it, relative to the model's directory
    size: int  # bytes
    tensors: int  # how many tensors it holds

    def describe(self) -> str:
        """``'cnn.onnx.data' (3.1 kB, 4 tensors)``."""
        return f"'{self.name}' ({_size(self.size)}, {self.tensors} tensor{'s' if self.tensors != 1 else ''})"


def _size(n: int) -> str:
    """Bytes in words.

    >>> _size(512), _size(3_100), _size(41_900_000), _size(2_100_000_000)
    ('512 B', '3.1 kB', '41.9 MB', '2.1 GB')
    """
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _all_tensors(graph: Any) -> list[Any]:
    """The graph's initializers and constant tensors, sub-graphs included."""
    tensors = list(graph.initializer)
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                tensors.append(attr.t)
            tensors.extend(attr.tensors)
            if attr.HasField("g"):
                tensors.extend(_all_tensors(attr.g))
            for sub in attr.graphs:
                tensors.extend(_all_tensors(sub))
    return tensors


def read_model(path: Path) -> tuple[bytes, tuple[ExternalData, ...]]:
    """The model's bytes with its external data (tensors kept in files beside it) read in, and those files.

    External data paths are relative to the model's own directory, whatever the working directory: the model is
    read from there, so a sidecar started anywhere loads ``model.onnx`` and ``model.onnx.data`` side by side. A model
    without external data is returned as its file's bytes.

    Raises
    ------
    ModelError
        The file is not ONNX (the message says what it holds: :func:`~monitor.model.sniff.sniff`), an external data file is missing or outside the model's directory, or the model with
        its weights reaches protobuf's 2 GiB limit.
    """
    import onnx

    raw = path.read_bytes()
    try:
        proto = onnx.load_from_string(raw)
    except Exception:  # noqa: BLE001 - any parse failure means "not ONNX": say what the file is instead
        raise ModelError(not_onnx(path, sniff(path))) from None
    if not proto.graph.input and not proto.graph.output:  # b"" and some other bytes parse as an empty model
        raise ModelError(not_onnx(path, sniff(path)))
    external: Counter[str] = Counter()
    for tensor in _all_tensors(proto.graph):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            external[next((e.value for e in tensor.external_data if e.key == "location"), "")] += 1
    if not external:
        return raw, ()
    folder = path.resolve().parent
    files: list[ExternalData] = []
    for name, tensors in external.items():
        where = (folder / name).resolve()
        if not where.is_relative_to(folder):
            raise ModelError(
                f"model '{path}' keeps tensors in '{name}', outside its own directory '{folder}'; external data must "
                "lie in the model's directory or below it: export the model again, or move the data file beside it"
            )
        if not where.is_file():
            raise ModelError(
                f"model '{path}' keeps {tensors} tensor(s) in the external data file '{name}', which should be "
                f"at '{where}' and is not; copy the data file beside the model (torch's export writes it next to "
                "the .onnx file: ship both)"
            )
        files.append(ExternalData(name, where.stat().st_size, tensors))
    total = len(raw) + sum(f.size for f in files)
    if total >= PROTOBUF_LIMIT:
        raise ModelError(
            f"model '{path}' with its external data ({', '.join(f.describe() for f in files)}) is {_size(total)}; the "
            "monitor rewrites the graph in memory and protobuf stops at 2 GiB: monitor a smaller copy of the model "
            "(distilled or quantized) or a sub-graph"
        )
    try:
        onnx.load_external_data_for_model(proto, str(folder))
    except Exception as exc:  # noqa: BLE001 - onnx raises several types for a bad data file
        raise ModelError(f"cannot read the external data of model '{path}': {exc}") from exc
    return proto.SerializeToString(), tuple(files)


def _widen_bfloat16_outputs(graph: Any) -> bool:
    """Cast (in place) the graph's bfloat16 outputs to float32, under the same names: onnxruntime's Python API
    returns no bfloat16 array. True when it changed something."""
    from onnx import TensorProto, helper

    from monitor.model.broadcast import fresh_namer

    targets = [
        o
        for o in graph.output
        if o.type.HasField("tensor_type") and o.type.tensor_type.elem_type == TensorProto.BFLOAT16
    ]
    if not targets:
        return False
    taken = {t for n in graph.node for t in (*n.input, *n.output)} | {i.name for i in graph.input}
    fresh = fresh_namer(taken | {i.name for i in graph.initializer})
    for out in targets:
        inner = fresh(f"{out.name}_bfloat16")
        for node in graph.node:
            node.output[:] = [inner if t == out.name else t for t in node.output]
            node.input[:] = [inner if t == out.name else t for t in node.input]
        graph.node.append(helper.make_node("Cast", [inner], [out.name], to=TensorProto.FLOAT, name=fresh("widen")))
        out.type.tensor_type.elem_type = TensorProto.FLOAT
    return True


def expose_zipmap_input(proto: Any) -> dict[str, str]:
    """Rewrite (in place) a graph whose outputs come from ZipMap nodes to output the probability tensors instead.

    Returns the mapping {original output name: new tensor output name} (empty: nothing changed).
    """
    import onnx
    from onnx import TensorProto, helper

    graph = proto.graph
    zip_nodes = {n.output[0]: n for n in graph.node if n.op_type == "ZipMap"}
    mapping: dict[str, str] = {}
    if not zip_nodes:
        return mapping
    # the tensor feeding ZipMap is float for float inputs and double for double inputs: read it, don't assume
    inferred = onnx.shape_inference.infer_shapes(proto).graph
    elem_types = {
        vi.name: vi.type.tensor_type.elem_type
        for vi in (*inferred.value_info, *inferred.output)
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type
    }
    new_outputs = []
    for out in graph.output:
        node = zip_nodes.get(out.name)
        if node is None:
            new_outputs.append(out)
            continue
        mapping[out.name] = node.input[0]
        new_outputs.append(
            helper.make_tensor_value_info(node.input[0], elem_types.get(node.input[0], TensorProto.FLOAT), ["N", None])
        )
    del graph.output[:]
    graph.output.extend(new_outputs)
    remaining = [n for n in graph.node if n.op_type != "ZipMap"]
    del graph.node[:]
    graph.node.extend(remaining)
    return mapping
