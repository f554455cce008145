"""One input's values as the monitor receives them, checked and converted for the model: array columns
(:func:`as_float`, :func:`as_held`) and one event's JSON row (:func:`flatten`, :func:`nest`, :func:`held_row`).

What a :class:`~monitor.model.signature.Signature` splits a file's or an event's inputs with; each refusal names
the input and what it takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from onnx import TensorProto

from monitor.errors import ModelError, SignatureError

if TYPE_CHECKING:
    from monitor.model.signature import InputSpec


def _converted(arr: NDArray[Any], dtype: Any, refusal: Callable[[], str]) -> NDArray[Any]:
    """``arr`` as ``dtype``; a ModelError saying ``refusal()`` where its values do not convert (text that is not a
    number, objects)."""
    try:
        return arr.astype(dtype)
    except (TypeError, ValueError):
        raise ModelError(refusal()) from None


def as_float(arr: NDArray[Any], spec: InputSpec, where: str) -> NDArray[np.float64]:
    return _converted(
        arr,
        np.float64,
        lambda: f"{where}: input {spec.describe()} takes numbers; got values of type {arr.dtype} that are not numbers",
    )


def as_held(arr: NDArray[Any], spec: InputSpec, where: str) -> NDArray[Any]:
    if spec.elem_type == TensorProto.STRING:
        return arr.astype(str).astype(object)
    if arr.dtype.kind == "f" and (not np.all(np.isfinite(arr)) or not np.array_equal(arr, np.round(arr))):
        raise ModelError(f"{where}: input {spec.describe()} takes whole numbers; got non-integer values")
    return _converted(
        arr,
        spec.dtype,
        lambda: f"{where}: input {spec.describe()} takes {spec.type_name} values; got {arr.dtype} values that are not",
    )


def flatten(value: object, spec: InputSpec, where: str) -> list[Any]:
    """A JSON value for one row of ``spec`` as a flat list of its elements, checking the nesting."""
    dims = spec.dims
    if spec.size == 1 and not isinstance(value, list):
        return [value]
    flat: list[Any] = []

    def walk(v: object, depth: int) -> None:
        if depth == len(dims):
            if isinstance(v, list):
                raise SignatureError(
                    "bad_features", f"{where}: input {spec.describe()} is nested deeper than its shape"
                )
            flat.append(v)
            return
        if not isinstance(v, list) or len(v) != dims[depth]:
            got = f"a list of {len(v)}" if isinstance(v, list) else f"a JSON {type(v).__name__}"
            raise SignatureError(
                "bad_features",
                f"{where}: input {spec.describe()} expects {dims[depth]} values at depth {depth + 1}; got {got}",
            )
        for item in v:
            walk(item, depth + 1)

    if spec.size == 1 and isinstance(value, list):  # [v] or [[v]] for a one-element row
        while isinstance(value, list) and len(value) == 1:
            value = value[0]
        if isinstance(value, list):
            raise SignatureError(
                "bad_features", f"{where}: input {spec.describe()} takes one value per row; got a list of {len(value)}"
            )
        return [value]
    walk(value, 0)
    return flat


def nest(flat: list[Any], dims: tuple[int, ...]) -> object:
    """A flat row-major list of values as nested lists of shape ``dims``."""
    if len(dims) <= 1:
        return flat if dims and dims[0] > 1 else flat[0]
    step = len(flat) // dims[0]
    return [nest(flat[i * step : (i + 1) * step], dims[1:]) for i in range(dims[0])]


def held_row(flat: list[Any], spec: InputSpec, where: str) -> NDArray[Any]:
    gaps = [i for i, v in enumerate(flat) if v is None]
    if gaps:
        kinds: dict[int, str] = {TensorProto.STRING: "strings", TensorProto.BOOL: "booleans"}
        kind = kinds.get(spec.elem_type, "whole numbers")
        raise SignatureError(
            "bad_features",
            f"{where}: input {spec.describe()} takes {kind}; got null (a missing value: send the category the model "
            "was trained with for 'missing', if any)",
            tuple((spec.element_names()[i], "missing") for i in gaps),
        )
    if spec.elem_type == TensorProto.STRING:
        if not all(isinstance(v, str) for v in flat):
            raise SignatureError("bad_features", f"{where}: input {spec.describe()} takes strings; got {flat[:3]!r}")
        return np.array(flat, dtype=object).reshape(spec.dims)
    if spec.elem_type == TensorProto.BOOL:
        if not all(isinstance(v, bool) or v in (0, 1) for v in flat):
            raise SignatureError("bad_features", f"{where}: input {spec.describe()} takes booleans; got {flat[:3]!r}")
        return np.array(flat, dtype=np.bool_).reshape(spec.dims)
    info = np.iinfo(spec.dtype)
    for v in flat:
        ok = (type(v) is int or (type(v) is float and v.is_integer())) and info.min <= v <= info.max
        if not ok:
            raise SignatureError(
                "bad_features",
                f"{where}: input {spec.describe()} takes whole numbers in [{info.min}, {info.max}]; got {v!r}",
            )
    return np.array(flat, dtype=spec.dtype).reshape(spec.dims)
