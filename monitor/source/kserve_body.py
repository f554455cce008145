"""Stage 1 (source): the body of a KServe payload-logging CloudEvent, v1 (``instances`` / ``predictions``) or v2
(``inputs`` / ``outputs``): a response's live predictions (:func:`kserve_predictions`) and a plain model's request
rows (:func:`kserve_rows`). A model with a signature reads its request through :mod:`monitor.source.kserve_shaped`;
:mod:`monitor.source.kserve` turns the CloudEvent into a request or response half. Errors are
:class:`~monitor.errors.InvalidEventError` with a reason from :data:`~monitor.source.validate.INVALID_REASONS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.events import LivePrediction
from monitor.source.validate import (
    PROBA_SUM_TOLERANCE,
    ModelSchema,
    argmax,
    bare_prediction,
    invalid,
    names_listed,
    parse_prediction,
    shown,
)

__all__ = ["kserve_predictions", "kserve_rows", "v2_or_v1"]

_NUMERIC_V2_TYPES = frozenset(
    {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64"}
)
_INT_V2_TYPES = frozenset({"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"})


def _v1_prediction(raw: object, ce_id: str) -> LivePrediction:
    """One element of a v1 ``predictions`` list: a class, a probability row, a number, a vector, or a dict."""
    if isinstance(raw, dict):
        return parse_prediction(raw, ce_id)
    return bare_prediction(raw, f"KServe response '{ce_id}'", "each prediction")


def kserve_predictions(body: Mapping[str, object], ce_id: str) -> tuple[LivePrediction, ...]:
    if "predictions" in body:
        preds = body["predictions"]
        if not isinstance(preds, list):
            raise invalid("bad_prediction", f"KServe response '{ce_id}': 'predictions' must be a list")
        return tuple(_v1_prediction(p, ce_id) for p in preds)
    if "outputs" in body:
        return _v2_predictions(body["outputs"], ce_id)
    raise invalid("unsupported_format", f"KServe response '{ce_id}' has neither 'predictions' (v1) nor 'outputs' (v2)")


def _v2_tensor(raw: object, ce_id: str, what: str, reason: str) -> tuple[str, str, NDArray[np.float64]]:
    """(name, datatype, array reshaped to ``shape``) of one v2 tensor."""
    if not isinstance(raw, dict):
        raise invalid(
            reason, f"KServe {what} '{ce_id}': each tensor must be an object with name, shape, datatype, data"
        )
    name, datatype, shape, data = raw.get("name"), raw.get("datatype"), raw.get("shape"), raw.get("data")
    if not isinstance(name, str) or not isinstance(datatype, str) or not isinstance(shape, list) or data is None:
        raise invalid("missing_field", f"KServe {what} '{ce_id}': tensor needs 'name', 'shape', 'datatype' and 'data'")
    if datatype.upper() not in _NUMERIC_V2_TYPES:
        raise invalid(
            "bad_type", f"KServe {what} '{ce_id}': tensor '{name}' has datatype {datatype}; expected a numeric type"
        )
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise invalid(
            "bad_type", f"KServe {what} '{ce_id}': tensor '{name}' shape {shown(shape)} is not a list of sizes"
        )
    try:
        arr = np.asarray(data, dtype=np.float64).reshape(shape)
    # OverflowError: an integer beyond float64 in data, or a size beyond C's in shape; RecursionError: deep nesting
    except (ValueError, TypeError, OverflowError, RecursionError):
        raise invalid(
            "wrong_width", f"KServe {what} '{ce_id}': tensor '{name}' data does not fit its shape {shape}"
        ) from None
    if not np.isfinite(arr).all():
        raise invalid("not_finite", f"KServe {what} '{ce_id}': tensor '{name}' has a non-finite value")
    return name, datatype.upper(), arr


def _v2_predictions(outputs: object, ce_id: str) -> tuple[LivePrediction, ...]:
    if not isinstance(outputs, list) or not outputs:
        raise invalid("bad_prediction", f"KServe response '{ce_id}': 'outputs' must be a non-empty list of tensors")
    labels: NDArray[np.float64] | None = None
    proba: NDArray[np.float64] | None = None
    values: NDArray[np.float64] | None = None
    for raw in outputs:
        name, datatype, arr = _v2_tensor(raw, ce_id, "response", "bad_prediction")
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim == 1 and datatype in _INT_V2_TYPES:
            if not bool(np.all(np.abs(arr) < 2.0**63)):
                raise invalid("bad_prediction", f"KServe response '{ce_id}': output '{name}' has a class beyond int64")
            labels = arr
        elif (
            arr.ndim == 2
            and arr.shape[1] > 1
            and ("prob" in name.lower() or bool(np.all((arr >= 0) & (arr <= 1))))
            and bool(np.all(np.abs(arr.sum(axis=1) - 1.0) <= PROBA_SUM_TOLERANCE))
        ):
            proba = arr
        elif arr.ndim in (1, 2):
            values = arr.reshape(arr.shape[0], -1)
        else:
            raise invalid("bad_prediction", f"KServe response '{ce_id}': output '{name}' has shape {list(arr.shape)}")
    sizes = {a.shape[0] for a in (labels, proba, values) if a is not None}
    if len(sizes) != 1:
        raise invalid(
            "bad_prediction", f"KServe response '{ce_id}': outputs disagree on the number of instances {sorted(sizes)}"
        )
    n = sizes.pop()
    out: list[LivePrediction] = []
    for i in range(n):
        p = tuple(float(x) for x in proba[i]) if proba is not None else None
        label = int(labels[i]) if labels is not None else (argmax(p) if p is not None else None)
        v = tuple(float(x) for x in values[i]) if values is not None and label is None else None
        out.append(LivePrediction(label=label, probabilities=p, value=v))
    return tuple(out)


def v2_or_v1(body: Mapping[str, object], ce_id: str) -> tuple[list[Any] | None, list[Any]]:
    """(the v2 input tensors, None) of a v2 request body, or (None, the v1 instances) of a v1 one.

    A body without "instances" whose "inputs" are tensors (dicts with "data") is v2; otherwise "instances" (or, as v1
    also accepts, a columnar-free "inputs" list) must be a non-empty list.
    """
    instances = body.get("instances")
    inputs = body.get("inputs")
    if (
        instances is None
        and isinstance(inputs, list)
        and inputs
        and all(isinstance(t, dict) and "data" in t for t in inputs)
    ):
        return inputs, []
    if instances is None:
        instances = inputs  # v1 also accepts the columnar-free "inputs" list
    if not isinstance(instances, list) or not instances:
        raise invalid(
            "unsupported_format", f"KServe request '{ce_id}' has no non-empty 'instances' (v1) or 'inputs' (v2) list"
        )
    return None, instances


def kserve_rows(body: Mapping[str, object], model: str, schema: ModelSchema, ce_id: str) -> NDArray[np.float64]:
    """The (N, n_features) feature rows of a v1 or v2 request body."""
    n = schema.n_features
    v2, instances = v2_or_v1(body, ce_id)
    if v2 is not None:
        return _v2_rows(v2, model, schema, ce_id)
    if isinstance(instances[0], dict):
        names = schema.feature_names
        if names is None:
            raise invalid(
                "bad_type",
                f"KServe request '{ce_id}' sends instances as name→value maps but model '{model}' has no feature_names",
            )
        dec_rows: list[list[object]] = []
        for i, inst in enumerate(instances):
            if not isinstance(inst, dict):
                raise invalid("bad_type", f"KServe request '{ce_id}': instance {i} is not an object like the others")
            missing = [name for name in names if name not in inst]
            if missing:
                raise invalid(
                    "missing_field",
                    f"model '{model}': KServe request '{ce_id}' instance {i} lacks {names_listed(missing)}",
                )
            if len(inst) != len(names):
                extra = [str(k) for k in inst if k not in set(names)]
                raise invalid(
                    "unknown_feature",
                    f"model '{model}': KServe request '{ce_id}' instance {i} also has {names_listed(extra)}",
                )
            dec_rows.append([inst[name] for name in names])
        instances = dec_rows
    try:
        rows = np.array(instances, dtype=np.float64)
    except (ValueError, TypeError, OverflowError, RecursionError):  # see _v2_tensor
        widths = sorted({len(r) for r in instances if isinstance(r, list)})
        if widths and widths != [n]:
            raise invalid(
                "wrong_width",
                f"model '{model}' expects {n} features; KServe request '{ce_id}' has rows of width {widths}",
            ) from None
        raise invalid(
            "bad_type", f"KServe request '{ce_id}': instances must be lists of {n} numbers for model '{model}'"
        ) from None
    if rows.ndim == 1 and n == 1:
        rows = rows.reshape(-1, 1)
    if rows.ndim != 2 or rows.shape[1] != n:
        width = rows.shape[1] if rows.ndim == 2 else "scalar"
        raise invalid(
            "wrong_width",
            f"model '{model}' expects {n} features; KServe request '{ce_id}' has {width}. Was the feature list changed?",
        )
    return rows


def _v2_rows(inputs: list[object], model: str, schema: ModelSchema, ce_id: str) -> NDArray[np.float64]:
    n = schema.n_features
    tensors = [_v2_tensor(t, ce_id, "request", "bad_type") for t in inputs]
    if len(tensors) == 1:
        _, _, arr = tensors[0]
        if arr.ndim == 1 and n == 1:
            arr = arr.reshape(-1, 1)
        if arr.ndim != 2 or arr.shape[1] != n:
            raise invalid(
                "wrong_width",
                f"model '{model}' expects {n} features; KServe request '{ce_id}' input '{tensors[0][0]}' has shape "
                f"{list(arr.shape)}. Was the feature list changed?",
            )
        return arr
    # several inputs: one column per named feature
    names = schema.feature_names
    if names is None:
        raise invalid(
            "unsupported_format",
            f"KServe request '{ce_id}' has {len(tensors)} input tensors; mapping them to columns needs feature_names "
            f"for model '{model}'",
        )
    by_name = {name: arr.reshape(arr.shape[0], -1) if arr.ndim else arr.reshape(1, 1) for name, _, arr in tensors}
    missing = [name for name in names if name not in by_name]
    if missing:
        raise invalid(
            "missing_field", f"model '{model}': KServe request '{ce_id}' lacks inputs {names_listed(missing)}"
        )
    extra = [name for name in by_name if name not in set(names)]
    if extra:
        raise invalid(
            "unknown_feature", f"model '{model}': KServe request '{ce_id}' has unknown inputs {names_listed(extra)}"
        )
    columns = [by_name[name] for name in names]
    if any(c.shape[1] != 1 for c in columns) or len({c.shape[0] for c in columns}) != 1:
        raise invalid("wrong_width", f"KServe request '{ce_id}': per-feature inputs must each have shape [N] or [N, 1]")
    return np.hstack(columns)
