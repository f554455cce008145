"""Stage 1 (source): a KServe request for a model with a signature (several inputs, held int/bool/string inputs,
N-D tensors; :mod:`monitor.model.signature`): v2 named tensors mapped onto the model's inputs, or v1 instances, each
checked against its input's type and shape (:func:`shaped_rows`). Errors are
:class:`~monitor.errors.InvalidEventError` with a reason from :data:`~monitor.source.validate.INVALID_REASONS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.source.kserve_body import v2_or_v1
from monitor.source.validate import (
    FLOAT32_MAX,
    check_strings,
    invalid,
    names_listed,
    shown,
    signature_row,
)

if TYPE_CHECKING:
    from monitor.model.signature import InputSpec, Signature

__all__ = ["shaped_rows"]

_V2_FLOAT_TYPES = frozenset({"FP16", "FP32", "FP64"})
_V2_WHOLE_TYPES = frozenset({"UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"})
#: v2 tensors nested deeper than this are refused (no model input has that many dimensions)
_MAX_V2_DEPTH = 64


def _v2_types_for(spec: InputSpec) -> frozenset[str]:
    """The v2 datatypes an input takes: FP* for float and double, INT*/UINT* for ints, BOOL, BYTES for strings."""
    if spec.is_float:
        return _V2_FLOAT_TYPES
    if spec.type_name == "string":
        return frozenset({"BYTES"})
    if spec.type_name == "bool":
        return frozenset({"BOOL"})
    return _V2_WHOLE_TYPES


def shaped_rows(
    body: Mapping[str, object], model: str, signature: Signature, ce_id: str
) -> tuple[NDArray[np.float64], tuple[dict[str, Any], ...] | None]:
    """The (N, D) feature rows and each instance's held values (None when the model holds nothing) of a request for
    a model with a non-plain signature: v2 input tensors mapped by name onto the model's inputs, or v1 instances,
    each as a plain event's ``features`` (:func:`~monitor.source.validate.signature_row`)."""
    v2, instances = v2_or_v1(body, ce_id)
    if v2 is not None:
        return _v2_shaped(v2, model, signature, ce_id)
    xs: list[list[float]] = []
    helds: list[dict[str, Any]] = []
    for i, inst in enumerate(instances):
        x, held = signature_row(inst, signature, f"model '{model}': KServe request '{ce_id}' instance {i}")
        xs.append(x)
        if held is not None:
            helds.append(held)
    rows = np.array(xs, dtype=np.float64).reshape(len(xs), signature.n_features)
    return rows, (tuple(helds) if signature.has_held else None)


def _v2_shaped(
    inputs: list[object], model: str, signature: Signature, ce_id: str
) -> tuple[NDArray[np.float64], tuple[dict[str, Any], ...] | None]:
    """v2 named tensors ``[B, …]`` onto the model's inputs by name (a lone tensor for a one-input model whatever
    its name): datatype and shape checked against each input, data flat or nested; B instances."""
    from monitor.errors import ModelError

    where = f"model '{model}': KServe request '{ce_id}'"
    specs = {s.name: s for s in signature.inputs}
    lone = signature.inputs[0] if len(signature.inputs) == 1 and len(inputs) == 1 else None
    arrays: dict[str, NDArray[Any]] = {}
    batch: int | None = None
    for raw in inputs:
        if not isinstance(raw, dict):
            raise invalid("bad_type", f"{where}: each input tensor must be an object with name, shape, datatype, data")
        name, datatype, shape, data = raw.get("name"), raw.get("datatype"), raw.get("shape"), raw.get("data")
        if not isinstance(name, str) or not isinstance(datatype, str) or not isinstance(shape, list) or data is None:
            raise invalid("missing_field", f"{where}: each input tensor needs 'name', 'shape', 'datatype' and 'data'")
        spec = lone if lone is not None else specs.get(name)
        if spec is None:
            raise invalid(
                "unknown_feature",
                f"{where} has input {shown(name, 40)}, which the model does not take; it takes {signature.describe()}",
            )
        if spec.name in arrays:
            raise invalid("bad_type", f"{where} gives input '{spec.name}' twice")
        allowed = _v2_types_for(spec)
        if datatype.upper() not in allowed:
            raise invalid(
                "bad_type",
                f"{where}: input {spec.describe()} takes datatype {' or '.join(sorted(allowed))}; got "
                f"{shown(datatype, 30)}",
            )
        if not shape or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise invalid(
                "bad_type", f"{where}: input '{spec.name}' shape {shown(shape)} is not a list of sizes [batch, …]"
            )
        rest = tuple(shape[1:])
        if not (rest == spec.dims or (spec.size == 1 and all(d == 1 for d in rest))):
            raise invalid(
                "wrong_width",
                f"{where}: input {spec.describe()} expects shape [B, {', '.join(map(str, spec.dims))}]; got "
                f"{shown(shape)}",
            )
        if not isinstance(data, list):
            raise invalid("bad_type", f"{where}: input '{spec.name}' data must be a list; got {shown(data)}")
        flat = _leaves(data)
        need = math.prod(shape)
        if flat is None or len(flat) != need:
            got = f"nested deeper than {_MAX_V2_DEPTH}" if flat is None else f"{len(flat)} values"
            raise invalid(
                "wrong_width",
                f"{where}: input '{spec.name}' has shape {shape}, which needs {need} values; its data has {got}",
            )
        arrays[spec.name] = _v2_values(flat, spec, where).reshape(shape[0], *spec.dims)
        if batch is None:
            batch = shape[0]
        elif shape[0] != batch:
            raise invalid(
                "wrong_width", f"{where}: input '{spec.name}' has {shape[0]} rows; the inputs before it have {batch}"
            )
    missing = [s.name for s in signature.inputs if s.name not in arrays]
    if missing:
        raise invalid(
            "missing_field", f"{where} lacks inputs {names_listed(missing)}; the model takes {signature.describe()}"
        )
    try:
        x, held = signature.split(arrays, where=where)
    except ModelError as exc:  # everything split checks was checked above
        raise invalid("bad_type", str(exc)) from None
    if not signature.has_held:
        return x, None
    return x, tuple({k: v[i] for k, v in held.values.items()} for i in range(x.shape[0]))


def _leaves(data: list[object]) -> list[object] | None:
    """The elements of nested lists in row-major order; None when nested deeper than :data:`_MAX_V2_DEPTH`."""
    out: list[object] = []
    stack = [iter(data)]
    while stack:
        for v in stack[-1]:
            if isinstance(v, list):
                if len(stack) >= _MAX_V2_DEPTH:
                    return None
                stack.append(iter(v))
                break
            out.append(v)
        else:
            stack.pop()
    return out


def _v2_values(flat: list[object], spec: InputSpec, where: str) -> NDArray[Any]:
    """One input's elements as the model's type, each checked: finite numbers within float32's range for float
    inputs, whole numbers within the type's range for ints, booleans for bool, UTF-8 strings for strings."""
    if spec.is_float:
        for i, v in enumerate(flat):
            if type(v) is not float and type(v) is not int:  # a bool or a string is no number here
                raise invalid("bad_type", f"{where}: input {spec.describe()} takes numbers; element {i} is {shown(v)}")
        try:
            arr = np.array(flat, dtype=np.float64)
        except OverflowError:  # an integer beyond float64
            raise invalid(
                "out_of_range", f"{where}: input '{spec.name}' holds an integer beyond float's range"
            ) from None
        within = np.abs(arr) <= FLOAT32_MAX  # NaN fails the comparison too
        if not bool(within.all()):
            i = int(np.argmin(within))
            if not math.isfinite(arr[i]):
                raise invalid(
                    "not_finite", f"{where}: input '{spec.name}' element {i} is {arr[i]!r}; expected finite values"
                )
            raise invalid(
                "out_of_range",
                f"{where}: input '{spec.name}' element {i} is {arr[i]:g}, beyond float32's range (±3.4e38) in which "
                "the model computes",
            )
        return arr
    if spec.type_name == "string":
        for i, v in enumerate(flat):
            if not isinstance(v, str):
                raise invalid("bad_type", f"{where}: input {spec.describe()} takes strings; element {i} is {shown(v)}")
        strings = np.array(flat, dtype=object)
        check_strings({spec.name: strings}, (spec,), where)
        return strings
    if spec.type_name == "bool":
        for i, v in enumerate(flat):
            if not (type(v) is bool or (type(v) is int and v in (0, 1))):
                raise invalid("bad_type", f"{where}: input {spec.describe()} takes booleans; element {i} is {shown(v)}")
        return np.array(flat, dtype=np.bool_)
    info = np.iinfo(spec.dtype)
    for i, v in enumerate(flat):
        whole = type(v) is int or (type(v) is float and v.is_integer())
        if not (whole and info.min <= v <= info.max):  # type: ignore[operator]
            raise invalid(
                "bad_type",
                f"{where}: input {spec.describe()} takes whole numbers in [{info.min}, {info.max}]; element {i} is "
                f"{shown(v)}",
            )
    return np.array(flat, dtype=spec.dtype)
