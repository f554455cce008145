"""Stage 1 (source): KServe payload-logging CloudEvents, parsed into request and response halves.

KServe payload logging sends CloudEvents over Kafka in binary mode (``ce_type``, ``ce_id``,
``ce_inferenceservicename``, ``ce_endpoint``, ``ce_time`` … headers; ``ce-`` prefixes and structured mode,
``application/cloudevents+json``, are accepted too) whose body is a v1 (``instances`` / ``predictions``) or
v2 (``inputs`` / ``outputs``) inference-protocol payload. A request and its response arrive as two messages
sharing ``ce_id``; :class:`~monitor.source.kserve_join.KServeJoiner` pairs them so that the response becomes the
event's live prediction.

Held here: :class:`KServeRequest` and :class:`KServeResponse`, the CloudEvents header helpers,
:func:`decode_structured` and :func:`decode_cloudevent` (a CloudEvent to a request or response half; the caller
resolves the model), and the v1/v2 body parsers. The entry points are
:class:`~monitor.source.decode.EventDecoder` and :class:`~monitor.source.kserve_join.KServeJoiner`. Errors are
:class:`~monitor.errors.InvalidEventError` with a reason from :data:`~monitor.source.validate.INVALID_REASONS`.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.errors import InvalidEventError
from monitor.events import InferenceEvent, LivePrediction
from monitor.source.validate import (
    FLOAT32_MAX,
    INT64_MAX,
    INT64_MIN,
    MAX_ID_CHARS,
    MAX_VERSION_CHARS,
    Headers,
    ModelSchema,
    Origin,
    argmax,
    check_strings,
    clean_text,
    invalid,
    loads,
    names_listed,
    number_tuple,
    parse_prediction,
    parse_timestamp,
    shown,
    signature_row,
)

if TYPE_CHECKING:
    from monitor.model.signature import InputSpec, Signature

#: (raw model name or None, event id) → (model, schema), raising ``missing_field`` / ``bad_type`` / ``unknown_model``
ModelLookup = Callable[[object, str | None], tuple[str, ModelSchema]]

#: tolerance on Σp = 1 when telling a probability vector from a regression vector
_PROBA_SUM_TOLERANCE = 1e-3
_NUMERIC_V2_TYPES = frozenset(
    {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64"}
)
_INT_V2_TYPES = frozenset({"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"})


@dataclass(frozen=True, slots=True)
class KServeRequest:
    """A decoded KServe request: one row of ``features`` per instance, shape (N, n_features), and for a model that
    holds inputs fixed each instance's held values (:attr:`monitor.events.InferenceEvent.held`)."""

    ce_id: str
    model: str
    model_version: str
    timestamp_seconds: float
    features: NDArray[np.float64]
    origin: Origin | None = None
    held: tuple[dict[str, Any], ...] | None = None

    def events(self, predictions: Sequence[LivePrediction | None] | None = None) -> list[InferenceEvent]:
        """One event per instance; ``id`` is ``ce_id`` for a single instance, ``"<ce_id>/<i>"`` otherwise."""
        n = self.features.shape[0]
        preds: Sequence[LivePrediction | None] = predictions if predictions is not None else (None,) * n
        ids = [self.ce_id] if n == 1 else [f"{self.ce_id}/{i}" for i in range(n)]
        return [
            InferenceEvent(
                event_id=ids[i],
                model=self.model,
                model_version=self.model_version,
                features=self.features[i],
                timestamp_seconds=self.timestamp_seconds,
                prediction=preds[i],
                held=self.held[i] if self.held is not None else None,
            ).with_origin(self.origin)
            for i in range(n)
        ]


@dataclass(frozen=True, slots=True)
class KServeResponse:
    """A decoded KServe response: one live prediction per instance of the matching request."""

    ce_id: str
    model: str
    predictions: tuple[LivePrediction, ...]
    origin: Origin | None = None


def is_cloudevent(headers: Headers) -> bool:
    for key, _ in headers:
        k = key.lower()
        if k == "ce_type" or k == "ce-type":
            return True
    return False


def ce_attributes(headers: Headers) -> dict[str, str]:
    """CloudEvents attributes from Kafka headers: ``ce_type`` → ``type``; ``content-type`` kept as is."""
    attrs: dict[str, str] = {}
    for key, raw in headers:
        k = key.lower()
        if k.startswith(("ce_", "ce-")):
            k = k[3:]
        elif k != "content-type":
            continue
        if raw is None:
            continue
        try:
            attrs[k] = raw.decode() if isinstance(raw, bytes | bytearray) else str(raw)
        except UnicodeDecodeError:
            raise invalid("bad_type", f"CloudEvents header '{key}' is not UTF-8") from None
    return attrs if "type" in attrs else {}


def decode_structured(
    doc: Mapping[str, object], model_of: ModelLookup, origin: Origin | None, now: float | None
) -> KServeRequest | KServeResponse:
    """A structured-mode CloudEvent (``application/cloudevents+json``): attributes and ``data`` in one object."""
    attrs = {k.lower(): v for k, v in doc.items() if isinstance(v, str) and k not in ("data", "data_base64")}
    body: object
    if "data" in doc:
        body = doc["data"]
        if isinstance(body, str):  # a lone surrogate (a valid JSON escape) has no UTF-8: let the parser refuse it
            body = _json_body(body.encode("utf-8", "surrogatepass"))
    elif isinstance(doc.get("data_base64"), str):
        try:
            raw = base64.b64decode(str(doc["data_base64"]), validate=True)
        except ValueError:  # binascii.Error, or a non-ASCII character (a plain ValueError)
            raise invalid("not_json", "structured CloudEvent has a 'data_base64' that is not base64") from None
        body = _json_body(raw)
    else:
        raise invalid("missing_field", f"CloudEvent '{attrs.get('id', '?')}' has neither 'data' nor 'data_base64'")
    if not isinstance(body, dict):
        raise invalid("not_object", "structured CloudEvent 'data' must be a JSON object")
    return decode_cloudevent(attrs, body, model_of, origin, now)


def decode_cloudevent(
    attrs: Mapping[str, str],
    body: Mapping[str, object],
    model_of: ModelLookup,
    origin: Origin | None,
    now: float | None,
) -> KServeRequest | KServeResponse:
    """The request or response half that a CloudEvent's attributes (``type``, ``id``, ...) and body describe."""
    ce_type = attrs.get("type", "")
    ce_id = clean_text(attrs.get("id", ""), MAX_ID_CHARS)  # first: every message below quotes it
    if not ce_id:
        raise invalid(
            "missing_field",
            f"KServe CloudEvent of type '{ce_type}' has no ce_id; requests and responses pair on it",
        )
    raw_model = attrs.get("inferenceservicename") or body.get("model_name")
    model, schema = model_of(raw_model, ce_id)
    if ce_type.endswith(".inference.request"):
        timestamp = parse_timestamp(attrs.get("time"), now, ce_id)
        held: tuple[dict[str, Any], ...] | None = None
        try:
            if schema.shaped is None:
                rows = _checked_rows(_kserve_rows(body, model, schema, ce_id), ce_id, schema)
            else:
                rows, held = _shaped_rows(body, model, schema.shaped, ce_id)
        except InvalidEventError as exc:
            if exc.model is None:
                exc.model = model  # the per-input count needs the model whose input it is
            raise
        endpoint = attrs.get("endpoint")
        version = clean_text(endpoint, MAX_VERSION_CHARS) if endpoint else schema.default_version
        return KServeRequest(ce_id, model, version, timestamp, rows, origin, held)
    if ce_type.endswith(".inference.response"):
        return KServeResponse(ce_id, model, _kserve_predictions(body, ce_id), origin)
    raise invalid(
        "unsupported_format",
        f"CloudEvent '{ce_id}' has type '{ce_type}'; expected '*.inference.request' or '*.inference.response'",
    )


def _checked_rows(rows: NDArray[np.float64], ce_id: str, schema: ModelSchema) -> NDArray[np.float64]:
    """``rows`` when every feature is finite and within float32's range (the model computes in float32). The error
    names the input at fault as the drift gauges do (``feature_names``, else the model's element name)."""
    if not bool(np.all(np.abs(rows) <= FLOAT32_MAX)):  # one pass; NaN fails the comparison too
        bad = np.argwhere(~(np.abs(rows) <= FLOAT32_MAX))[0]
        value = rows[bad[0], bad[1]]
        column = int(bad[1])
        names = schema.feature_names or (schema.signature.features if schema.signature is not None else None)
        name = str(names[column]) if names is not None and column < len(names) else f"f{column}"
        if not np.isfinite(value):
            raise invalid(
                "not_finite",
                f"KServe request '{ce_id}': instance {bad[0]} feature [{bad[1]}] is not finite",
                ((name, "not_finite"),),
            )
        raise invalid(
            "out_of_range",
            f"KServe request '{ce_id}': instance {bad[0]} feature [{bad[1]}] is {value:g}, beyond float32's range "
            "(±3.4e38) in which the model computes; send values in the model's units",
            ((name, "out_of_range"),),
        )
    return rows


def _json_body(raw: bytes) -> object:
    try:
        return loads(raw)
    except (ValueError, RecursionError) as exc:
        raise invalid("not_json", f"CloudEvent data is not JSON ({exc})") from None


def _is_distribution(values: tuple[float, ...]) -> bool:
    return all(0.0 <= p <= 1.0 for p in values) and abs(sum(values) - 1.0) <= _PROBA_SUM_TOLERANCE


def _v1_prediction(raw: object, ce_id: str) -> LivePrediction:
    """One element of a v1 ``predictions`` list: a class, a probability row, a number, a vector, or a dict."""
    if isinstance(raw, dict):
        return parse_prediction(raw, ce_id)
    if isinstance(raw, bool | int):
        if not INT64_MIN <= raw <= INT64_MAX:
            raise invalid("bad_prediction", f"KServe response '{ce_id}': class {shown(raw)} does not fit in int64")
        return LivePrediction(label=int(raw))
    if isinstance(raw, float) and math.isfinite(raw):
        return LivePrediction(value=(raw,))
    values = number_tuple(raw)
    if values is None:
        raise invalid(
            "bad_prediction",
            f"KServe response '{ce_id}': each prediction must be a class, a number or a list of numbers; got {shown(raw)}",
        )
    if len(values) > 1 and _is_distribution(values):
        return LivePrediction(label=argmax(values), probabilities=values)
    return LivePrediction(value=values)


def _kserve_predictions(body: Mapping[str, object], ce_id: str) -> tuple[LivePrediction, ...]:
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
            and bool(np.all(np.abs(arr.sum(axis=1) - 1.0) <= _PROBA_SUM_TOLERANCE))
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


def _v2_or_v1(body: Mapping[str, object], ce_id: str) -> tuple[list[Any] | None, list[Any]]:
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


def _kserve_rows(body: Mapping[str, object], model: str, schema: ModelSchema, ce_id: str) -> NDArray[np.float64]:
    """The (N, n_features) feature rows of a v1 or v2 request body."""
    n = schema.n_features
    v2, instances = _v2_or_v1(body, ce_id)
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


# ---------------------------------------------------------------------- models with a signature

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


def _shaped_rows(
    body: Mapping[str, object], model: str, signature: Signature, ce_id: str
) -> tuple[NDArray[np.float64], tuple[dict[str, Any], ...] | None]:
    """The (N, D) feature rows and each instance's held values (None when the model holds nothing) of a request for
    a model with a non-plain signature: v2 input tensors mapped by name onto the model's inputs, or v1 instances,
    each as a plain event's ``features`` (:func:`~monitor.source.validate.signature_row`)."""
    v2, instances = _v2_or_v1(body, ce_id)
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
