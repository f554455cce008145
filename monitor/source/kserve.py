"""Stage 1 (source): KServe payload-logging CloudEvents, parsed into request and response halves.

KServe payload logging sends CloudEvents over Kafka in binary mode (``ce_type``, ``ce_id``,
``ce_inferenceservicename``, ``ce_endpoint``, ``ce_time`` … headers; ``ce-`` prefixes and structured mode,
``application/cloudevents+json``, are accepted too) whose body is a v1 (``instances`` / ``predictions``) or
v2 (``inputs`` / ``outputs``) inference-protocol payload. A request and its response arrive as two messages
sharing ``ce_id``; :class:`~monitor.source.kserve_join.KServeJoiner` pairs them so that the response becomes the
event's live prediction.

Held here: :class:`KServeRequest` and :class:`KServeResponse`, the CloudEvents header helpers,
:func:`decode_structured` and :func:`decode_cloudevent` (a CloudEvent to a request or response half; the caller
resolves the model). The v1/v2 bodies are read by :mod:`monitor.source.kserve_body` (a plain model's rows, a
response's predictions) and :mod:`monitor.source.kserve_shaped` (a model with a signature). The entry points are
:class:`~monitor.source.decode.EventDecoder` and :class:`~monitor.source.kserve_join.KServeJoiner`. Errors are
:class:`~monitor.errors.InvalidEventError` with a reason from :data:`~monitor.source.validate.INVALID_REASONS`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.errors import InvalidEventError
from monitor.events import InferenceEvent, LivePrediction
from monitor.source.kserve_body import kserve_predictions, kserve_rows
from monitor.source.kserve_shaped import shaped_rows
from monitor.source.validate import (
    FLOAT32_MAX,
    MAX_ID_CHARS,
    MAX_VERSION_CHARS,
    Headers,
    ModelSchema,
    Origin,
    clean_text,
    invalid,
    loads,
    parse_timestamp,
)

#: (raw model name or None, event id) → (model, schema), raising ``missing_field`` / ``bad_type`` / ``unknown_model``
ModelLookup = Callable[[object, str | None], tuple[str, ModelSchema]]


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
                rows = _checked_rows(kserve_rows(body, model, schema, ce_id), ce_id, schema)
            else:
                rows, held = shaped_rows(body, model, schema.shaped, ce_id)
        except InvalidEventError as exc:
            if exc.model is None:
                exc.model = model  # the per-input count needs the model whose input it is
            raise
        endpoint = attrs.get("endpoint")
        version = clean_text(endpoint, MAX_VERSION_CHARS) if endpoint else schema.default_version
        return KServeRequest(ce_id, model, version, timestamp, rows, origin, held)
    if ce_type.endswith(".inference.response"):
        return KServeResponse(ce_id, model, kserve_predictions(body, ce_id), origin)
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
