"""Stage 1: decoding plain SPEC §1 events and KServe payload-logging CloudEvents (monitor/source/decode.py)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from monitor.errors import ConfigError, InvalidEventError
from monitor.events import InferenceEvent, LivePrediction, feature_rows
from monitor.source.decode import (
    INVALID_REASONS,
    EventDecoder,
    KServeJoiner,
    KServeRequest,
    KServeResponse,
    ModelSchema,
    parse_timestamp,
)

NAMES = ("age", "income", "debt")
TS = "2026-11-20T10:00:00Z"
TS_SECONDS = 1795168800.0


def decoder(**kwargs: Any) -> EventDecoder:
    models = {"credit": ModelSchema(3, NAMES, default_version="7"), "wide": ModelSchema(32)}
    return EventDecoder(models, **{"default_model": "credit", **kwargs})


def event(**fields: Any) -> bytes:
    doc: dict[str, Any] = {"id": "a1b2", "ts": TS, "model": "credit", "features": [1.0, 2.0, 3.0]}
    doc.update(fields)
    return json.dumps({k: v for k, v in doc.items() if v is not ...}).encode()


def ce_headers(ce_type: str, ce_id: str = "req-1", isvc: str = "credit", **extra: str) -> list[tuple[str, bytes]]:
    headers = {
        "ce_specversion": "1.0",
        "ce_type": f"org.kubeflow.serving.inference.{ce_type}",
        "ce_id": ce_id,
        "ce_source": "http://localhost:9081/",
        "ce_inferenceservicename": isvc,
        "ce_namespace": "default",
        "ce_component": "predictor",
        "ce_endpoint": "default",
        "ce_time": TS,
        "content-type": "application/json",
        **extra,
    }
    return [(k, v.encode()) for k, v in headers.items()]


# ---------------------------------------------------------------------- plain events


def test_decode_plain_event_fields() -> None:
    ev = decoder().decode(
        event(model_version=3, segment="eu", prediction={"label": 1, "probabilities": [0.2, 0.8]}, extra="ignored"),
        origin=("events", 2, 41),
    )
    assert (ev.event_id, ev.model, ev.model_version, ev.segment) == ("a1b2", "credit", "3", "eu")
    assert ev.features.dtype == np.float64 and ev.features.shape == (3,)
    np.testing.assert_array_equal(ev.features, [1.0, 2.0, 3.0])
    assert ev.timestamp_seconds == TS_SECONDS
    assert ev.prediction == LivePrediction(label=1, probabilities=(0.2, 0.8))
    assert ev.origin == ("events", 2, 41)


def test_features_become_a_float64_array_once_when_read() -> None:
    """The fast path keeps the validated JSON list (most events are dropped unread); reading ``features`` makes
    the float64 array once, integers included."""
    ev = decoder().decode(event(id="ints", features=[1, 2, 3], ts=1_795_168_800_000))
    assert isinstance(ev._features, list)  # the fast path took it: no array made at decode
    first = ev.features
    assert first.dtype == np.float64 and first.tolist() == [1.0, 2.0, 3.0]
    assert ev.features is first  # made once
    assert "features=array([1., 2., 3.])" in repr(ev)


def test_feature_rows_stack_lists_and_arrays_as_float64() -> None:
    lazy = decoder().decode(event(features=[1, 2, 3], ts=1_795_168_800_000))
    read = decoder().decode(event(features=[4.5, 5.0, 6.0], ts=1_795_168_800_000))
    read.features  # noqa: B018 - already an array
    given = InferenceEvent("c", "credit", "7", np.array([7.0, 8.0, 9.0]), 0.0)
    rows = feature_rows([lazy, read, given])
    assert rows.dtype == np.float64 and rows.shape == (3, 3)
    np.testing.assert_array_equal(rows, [[1, 2, 3], [4.5, 5, 6], [7, 8, 9]])
    assert isinstance(lazy._features, list)  # stacking does not convert each event


def test_decode_dict_features_follow_the_configured_order() -> None:
    ev = decoder().decode(event(features={"debt": 30, "age": 10, "income": 20}))
    np.testing.assert_array_equal(ev.features, [10.0, 20.0, 30.0])


@pytest.mark.parametrize(
    ("ts", "seconds"),
    [
        (TS, TS_SECONDS),
        ("2026-11-20T11:00:00+01:00", TS_SECONDS),
        ("2026-11-20T10:00:00", TS_SECONDS),  # naive means UTC
        ("2026-11-20T10:00:00.250000000Z", TS_SECONDS + 0.25),  # Go's RFC3339Nano
        (1795168800000, TS_SECONDS),
        (1795168800250.0, TS_SECONDS + 0.25),
    ],
)
def test_decode_timestamp_formats(ts: object, seconds: float) -> None:
    assert decoder().decode(event(ts=ts)).timestamp_seconds == pytest.approx(seconds)


def test_decode_missing_ts_takes_now() -> None:
    assert decoder().decode(event(ts=...), now=123456.5).timestamp_seconds == 123456.5


def test_decode_missing_id_comes_from_origin_or_a_stable_digest() -> None:
    dec = decoder()
    assert dec.decode(event(id=...), origin=("events", 1, 99)).event_id == "events/1/99"
    first = dec.decode(event(id=...), origin=("replay.jsonl", -1, -1)).event_id
    assert first == dec.decode(event(id=...)).event_id
    assert first != dec.decode(event(id=..., features=[1, 2, 4])).event_id and len(first) == 16


def test_decode_defaults_model_and_version() -> None:
    ev = decoder().decode(event(model=..., id=17))
    assert (ev.event_id, ev.model, ev.model_version, ev.segment) == ("17", "credit", "7", "other")


def test_decode_segments_fold_into_other_past_the_bound() -> None:
    dec = decoder(max_segments=2)
    segments = [dec.decode(event(segment=s)).segment for s in ["eu", "us", "apac", "eu", "x" * 100]]
    assert segments == ["eu", "us", "other", "eu", "other"]
    dec.reset()
    assert dec.decode(event(segment="apac")).segment == "apac"


def test_decode_segment_allow_list() -> None:
    dec = decoder(segments=["eu"])
    assert [dec.decode(event(segment=s)).segment for s in ["eu", "us"]] == ["eu", "other"]


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ({"probabilities": [0.1, 0.7, 0.2]}, LivePrediction(label=1, probabilities=(0.1, 0.7, 0.2))),
        ({"label": True}, LivePrediction(label=1)),
        ({"label": "2"}, LivePrediction(label=2)),
        ({"value": 3.5}, LivePrediction(value=(3.5,))),
        ({"value": [1, 2]}, LivePrediction(value=(1.0, 2.0))),
        (None, None),
    ],
)
def test_decode_prediction_shapes(prediction: object, expected: LivePrediction | None) -> None:
    assert decoder().decode(event(prediction=prediction)).prediction == expected


def test_decode_accepts_huge_but_finite_features() -> None:
    ev = decoder().decode(event(features=[1.7e308, 1.7e308, 0]))
    assert np.isfinite(ev.features).all()


WIDE_31 = json.dumps({"id": "a1b2", "ts": TS, "model": "wide", "features": [0.5] * 31}).encode()

INVALID_CASES: list[tuple[bytes, str, str]] = [
    (b"{" + b" " * 300 + b"}", "too_large", r"event of 302 bytes exceeds max_bytes=256"),
    (b'{"id": "a1b2", "features": [1, 2', "not_json", r"event is not UTF-8 JSON .*starts b'\{\"id\""),
    (b"\xff\xfe", "not_json", r"not UTF-8 JSON"),
    (b"[1, 2, 3]", "not_object", r"must be a JSON object; got a JSON list"),
    (event(features=...), "missing_field", r"event 'a1b2' has no 'features' field; model 'credit' expects a list of 3"),
    (
        event(features={"age": 1, "income": 2}),
        "missing_field",
        r"model 'credit' expects 3 named features; event 'a1b2' lacks 'debt'\. Was the feature list changed\?",
    ),
    (event(features="1,2,3"), "bad_type", r"event 'a1b2': 'features' must be a list of 3 numbers or a name→value map"),
    (event(features=[1, "x", 3]), "bad_type", r"event 'a1b2': feature 'income' must be a number; got 'x'"),
    (event(features=[1, None, 3]), "bad_type", r"feature 'income' must be a number; got None"),
    (event(id=[1]), "bad_type", r"event 'id' must be a string or an integer; got \[1\]"),
    (event(model=5), "bad_type", r"'model' must be a string; got 5"),
    (event(segment=["eu"]), "bad_type", r"'segment' must be a string"),
    (
        event(model="wide", features={"a": 1}),
        "bad_type",
        r"gives features as a name→value map but model 'wide' has no feature_names",
    ),
    (
        WIDE_31,
        "wrong_width",
        r"^model 'wide' expects 32 features; event 'a1b2' has 31\. Was the feature list changed\?$",
    ),
    (b'{"id": "a1b2", "features": [1, NaN, 3]}', "not_finite", r"event 'a1b2': feature 'income' is nan"),
    (b'{"id": "a1b2", "features": [1, 2, -Infinity]}', "not_finite", r"feature 'debt' is -inf"),
    (b'{"id": "a1b2", "features": [1, 2, 1e400]}', "not_finite", r"feature 'debt' is inf"),
    (
        event(model="fraud"),
        "unknown_model",
        r"event 'a1b2' names model 'fraud', which is not configured; known models: 'credit', 'wide'",
    ),
    (
        event(features={"age": 1, "income": 2, "debt": 3, "zip": 4}),
        "unknown_feature",
        r"event 'a1b2' also has 'zip'\. Was the feature list changed\?",
    ),
    (event(ts="yesterday"), "bad_timestamp", r"'ts' 'yesterday' is not ISO-8601"),
    (event(ts=1795168800), "bad_timestamp", r"is not epoch milliseconds \(epoch seconds\? multiply by 1000\)"),
    (event(ts=True), "bad_timestamp", r"'ts' must be an ISO-8601 string or epoch milliseconds; got True"),
    (event(ts=...), "missing_field", r"event 'a1b2' has no 'ts' and no receive time was given"),
    (event(prediction=3), "bad_prediction", r"'prediction' must be an object"),
    (event(prediction={"label": "cat"}), "bad_prediction", r"prediction 'label' must be an integer class; got 'cat'"),
    (
        event(prediction={"probabilities": [2, 3]}),
        "bad_prediction",
        r"'probabilities' must be a list of numbers in \[0, 1\]",
    ),
    (event(prediction={"value": "big"}), "bad_prediction", r"'value' must be a finite number or list"),
    (event(prediction={}), "bad_prediction", r"has none of 'label', 'probabilities', 'value'"),
]


@pytest.mark.parametrize(("value", "reason", "match"), INVALID_CASES)
def test_decode_invalid_event_reason_and_message(value: bytes, reason: str, match: str) -> None:
    with pytest.raises(InvalidEventError, match=match) as info:
        decoder(max_bytes=256).decode(value)
    assert info.value.reason == reason


def test_decode_missing_model_without_default() -> None:
    dec = EventDecoder({"credit": ModelSchema(3)})
    with pytest.raises(InvalidEventError, match=r"has no 'model' field and no default_model is configured") as info:
        dec.decode(event(model=...))
    assert info.value.reason == "missing_field"


def test_decode_cloudevent_headers_are_unsupported_in_plain_decode() -> None:
    with pytest.raises(InvalidEventError, match=r"decode it with decode_many\(\) or KServeJoiner") as info:
        decoder().decode(b'{"instances": [[1, 2, 3]]}', ce_headers("request"))
    assert info.value.reason == "unsupported_format"


def test_decode_every_reason_is_declared_and_exercised() -> None:
    exercised = {reason for _, reason, _ in INVALID_CASES} | {"unsupported_format"}
    assert exercised == set(INVALID_REASONS)


def test_decode_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"feature_names lists 2 names but n_features is 3"):
        ModelSchema(3, ("a", "b"))
    with pytest.raises(ConfigError, match=r"duplicates: 'a'"):
        ModelSchema(3, ("a", "a", "b"))
    with pytest.raises(ConfigError, match=r"n_features must be >= 1"):
        ModelSchema(0)
    with pytest.raises(ConfigError, match=r"default_model 'x' is not one of the configured models"):
        EventDecoder({"credit": ModelSchema(3)}, default_model="x")
    with pytest.raises(ConfigError, match=r"at least one model"):
        EventDecoder({})
    with pytest.raises(ConfigError, match=r"max_bytes must be >= 1"):
        EventDecoder({"credit": ModelSchema(3)}, max_bytes=0)


def test_parse_timestamp_without_now_or_value() -> None:
    with pytest.raises(InvalidEventError, match=r"has no 'ts'"):
        parse_timestamp(None, None)


# ---------------------------------------------------------------------- KServe


def v1_request(*rows: list[float]) -> bytes:
    return json.dumps({"instances": list(rows)}).encode()


def v1_response(*predictions: object) -> bytes:
    return json.dumps({"predictions": list(predictions)}).encode()


def test_kserve_v1_request_decodes_one_event_per_instance() -> None:
    events = decoder().decode_many(v1_request([1, 2, 3], [4, 5, 6]), ce_headers("request", "r9"), ("log", 0, 5))
    assert [e.event_id for e in events] == ["r9/0", "r9/1"]
    assert {(e.model, e.model_version, e.timestamp_seconds, e.prediction) for e in events} == {
        ("credit", "default", TS_SECONDS, None)
    }
    np.testing.assert_array_equal(events[1].features, [4.0, 5.0, 6.0])
    assert decoder().decode_many(v1_response(1), ce_headers("response", "r9")) == []


def test_kserve_joiner_pairs_v1_request_and_response() -> None:
    joiner = KServeJoiner(decoder(), ttl_seconds=5.0)
    assert joiner.update(v1_request([1, 2, 3]), ce_headers("request"), now=0.0) == []
    assert joiner.pending == 1
    (ev,) = joiner.update(v1_response(1), ce_headers("response"), now=0.1)
    assert ev.event_id == "req-1" and ev.prediction == LivePrediction(label=1)
    assert (joiner.pending, joiner.paired_total, joiner.unpaired_total) == (0, 1, 0)


def test_kserve_joiner_pairs_a_response_that_arrives_first() -> None:
    joiner = KServeJoiner(decoder())
    assert joiner.update(v1_response([0.2, 0.8], [0.9, 0.1]), ce_headers("response", "r2"), now=0.0) == []
    events = joiner.update(v1_request([1, 2, 3], [4, 5, 6]), ce_headers("request", "r2"), now=0.2)
    assert [e.prediction for e in events] == [
        LivePrediction(label=1, probabilities=(0.2, 0.8)),
        LivePrediction(label=0, probabilities=(0.9, 0.1)),
    ]


def test_kserve_joiner_v2_request_and_response() -> None:
    request = {
        "id": "r3",
        "inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]}],
    }
    response = {
        "model_name": "credit",
        "id": "r3",
        "outputs": [
            {"name": "label", "shape": [2], "datatype": "INT64", "data": [1, 0]},
            {"name": "probabilities", "shape": [2, 2], "datatype": "FP32", "data": [0.3, 0.7, 0.6, 0.4]},
        ],
    }
    joiner = KServeJoiner(decoder())
    joiner.update(json.dumps(request).encode(), ce_headers("request", "r3"), now=0.0)
    events = joiner.update(json.dumps(response).encode(), ce_headers("response", "r3"), now=0.0)
    np.testing.assert_array_equal(np.stack([e.features for e in events]), [[1, 2, 3], [4, 5, 6]])
    assert [e.prediction for e in events] == [
        LivePrediction(label=1, probabilities=(0.3, 0.7)),
        LivePrediction(label=0, probabilities=(0.6, 0.4)),
    ]


def test_kserve_v2_columns_map_to_feature_names() -> None:
    body = {
        "inputs": [
            {"name": n, "shape": [2], "datatype": "FP64", "data": [v, v + 10]}
            for n, v in (("debt", 3), ("age", 1), ("income", 2))
        ]
    }
    events = decoder().decode_many(json.dumps(body).encode(), ce_headers("request"))
    np.testing.assert_array_equal(np.stack([e.features for e in events]), [[1, 2, 3], [11, 12, 13]])


def test_kserve_v2_regressor_response_is_a_value() -> None:
    response = {"outputs": [{"name": "y", "shape": [1, 1], "datatype": "FP32", "data": [2.5]}]}
    joiner = KServeJoiner(decoder())
    joiner.update(v1_request([1, 2, 3]), ce_headers("request"), now=0.0)
    (ev,) = joiner.update(json.dumps(response).encode(), ce_headers("response"), now=0.0)
    assert ev.prediction == LivePrediction(value=(2.5,))


def test_kserve_joiner_ttl_expiry_emits_requests_without_prediction() -> None:
    joiner = KServeJoiner(decoder(), ttl_seconds=2.0)
    joiner.update(v1_request([1, 2, 3]), ce_headers("request", "late"), ("log", 0, 7), now=0.0)
    joiner.update(v1_response(1), ce_headers("response", "orphan"), ("log", 1, 3), now=0.5)
    assert joiner.held_positions() == {("log", 0): 7, ("log", 1): 3}
    assert joiner.expire(1.9) == []
    (ev,) = joiner.expire(2.0)
    assert ev.event_id == "late" and ev.prediction is None
    assert joiner.expire(2.5) == [] and joiner.pending == 0
    assert (joiner.unpaired_total, joiner.orphan_responses_total) == (1, 1)
    # the response that finally comes after the TTL is itself held, then dropped as an orphan
    assert joiner.update(v1_response(1), ce_headers("response", "late"), now=3.0) == []


def test_kserve_joiner_update_releases_expired_requests() -> None:
    joiner = KServeJoiner(decoder(), ttl_seconds=1.0)
    joiner.update(v1_request([1, 2, 3]), ce_headers("request", "a"), now=0.0)
    (plain,) = [e for e in joiner.update(event(), now=0.5)]
    assert plain.event_id == "a1b2"
    released = joiner.update(event(id="b"), now=1.5)
    assert [e.event_id for e in released] == ["a", "b"]


def test_kserve_joiner_is_bounded() -> None:
    joiner = KServeJoiner(decoder(), ttl_seconds=100.0, max_pending=2)
    for i in range(3):
        out = joiner.update(v1_request([1, 2, 3]), ce_headers("request", f"r{i}"), now=float(i))
    assert [e.event_id for e in out] == ["r0"] and joiner.pending == 2
    assert joiner.unpaired_total == 1


def test_kserve_joiner_counts_duplicates_and_length_mismatches() -> None:
    joiner = KServeJoiner(decoder())
    joiner.update(v1_request([1, 2, 3], [4, 5, 6]), ce_headers("request", "d"), now=0.0)
    assert joiner.update(v1_request([1, 2, 3], [4, 5, 6]), ce_headers("request", "d"), now=0.0) == []
    events = joiner.update(v1_response(1), ce_headers("response", "d"), now=0.0)
    assert [e.prediction for e in events] == [None, None]
    assert (joiner.duplicates_total, joiner.unpaired_total, joiner.paired_total) == (1, 1, 0)


def test_kserve_joiner_invalid_response_leaves_request_to_expire() -> None:
    joiner = KServeJoiner(decoder(), ttl_seconds=1.0)
    joiner.update(v1_request([1, 2, 3]), ce_headers("request"), now=0.0)
    with pytest.raises(InvalidEventError, match=r"each prediction must be a class, a number or a list") as info:
        joiner.update(v1_response("cat"), ce_headers("response"), now=0.1)
    assert info.value.reason == "bad_prediction"
    assert [e.prediction for e in joiner.expire(1.0)] == [None]


def test_kserve_structured_mode() -> None:
    doc = {
        "specversion": "1.0",
        "type": "org.kubeflow.serving.inference.request",
        "id": "s1",
        "source": "x",
        "inferenceservicename": "credit",
        "datacontenttype": "application/json",
        "data": {"instances": [[1, 2, 3]]},
    }
    joiner = KServeJoiner(decoder())
    assert joiner.update(json.dumps(doc).encode(), now=0.0) == []
    doc.update(type="org.kubeflow.serving.inference.response", data={"predictions": [0]})
    (ev,) = joiner.update(json.dumps(doc).encode(), now=0.0)
    assert ev.event_id == "s1" and ev.prediction == LivePrediction(label=0)


def test_kserve_decode_kserve_returns_the_halves() -> None:
    dec = decoder()
    req = dec.decode_kserve(v1_request([1, 2, 3]), ce_headers("request", "h", ce_endpoint="canary"))
    resp = dec.decode_kserve(v1_response(2.5), ce_headers("response", "h"))
    assert isinstance(req, KServeRequest) and req.model_version == "canary" and req.features.shape == (1, 3)
    assert isinstance(resp, KServeResponse) and resp.predictions == (LivePrediction(value=(2.5,)),)


KSERVE_INVALID: list[tuple[bytes, list[tuple[str, bytes]], str, str]] = [
    (v1_request([1, 2, 3]), ce_headers("request", isvc="fraud"), "unknown_model", r"names model 'fraud'"),
    (
        v1_request([1, 2]),
        ce_headers("request", "w"),
        "wrong_width",
        r"model 'credit' expects 3 features; KServe request 'w' has 2",
    ),
    (v1_request([1, 2, 3], [1, 2]), ce_headers("request", "w"), "wrong_width", r"has rows of width \[2, 3\]"),
    (
        b'{"instances": [[1, 2, NaN]]}',
        ce_headers("request", "n"),
        "not_finite",
        r"instance 0 feature \[2\] is not finite",
    ),
    (
        b'{"instances": []}',
        ce_headers("request"),
        "unsupported_format",
        r"no non-empty 'instances' \(v1\) or 'inputs' \(v2\)",
    ),
    (b'{"instances": [[1, 2, 3]]}', ce_headers("feedback"), "unsupported_format", r"expected '\*\.inference\.request'"),
    (
        b'{"inputs": [{"name": "x", "shape": [1, 3], "datatype": "BYTES", "data": ["a", "b", "c"]}]}',
        ce_headers("request"),
        "bad_type",
        r"tensor 'x' has datatype BYTES; expected a numeric type",
    ),
    (
        b'{"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3]}]}',
        ce_headers("request"),
        "wrong_width",
        r"tensor 'x' data does not fit its shape \[2, 3\]",
    ),
    (
        b'{"answers": []}',
        ce_headers("response"),
        "unsupported_format",
        r"neither 'predictions' \(v1\) nor 'outputs' \(v2\)",
    ),
    (b"{}", [(k, v) for k, v in ce_headers("request") if k != "ce_id"], "missing_field", r"has no ce_id"),
    (b"{}", ce_headers("request", **{"content-type": "application/octet-stream"}), "unsupported_format", r"only JSON"),
]


@pytest.mark.parametrize(("value", "headers", "reason", "match"), KSERVE_INVALID)
def test_kserve_invalid_message_reason_and_message(
    value: bytes, headers: list[tuple[str, bytes]], reason: str, match: str
) -> None:
    with pytest.raises(InvalidEventError, match=match) as info:
        decoder().decode_many(value, headers)
    assert info.value.reason == reason


def test_kserve_joiner_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"ttl_seconds must be > 0"):
        KServeJoiner(decoder(), ttl_seconds=0)
    with pytest.raises(ConfigError, match=r"max_pending must be >= 1"):
        KServeJoiner(decoder(), max_pending=0)


def test_kserve_joiner_flush_and_reset() -> None:
    joiner = KServeJoiner(decoder())
    joiner.update(v1_request([1, 2, 3]), ce_headers("request", "f"), now=0.0)
    assert [e.event_id for e in joiner.flush()] == ["f"]
    joiner.update(v1_request([1, 2, 3]), ce_headers("request", "g"), now=0.0)
    joiner.reset()
    assert joiner.pending == 0 and joiner.unpaired_total == 0 and joiner.flush() == []


def tensor(name: str, shape: list[int], data: list[float], datatype: str = "FP32") -> dict[str, Any]:
    return {"name": name, "shape": shape, "datatype": datatype, "data": data}


def body(**doc: Any) -> bytes:
    return json.dumps(doc).encode()


def test_kserve_v1_instances_as_maps_and_inputs_lists() -> None:
    dec = decoder()
    rows = [{"debt": 3, "age": 1, "income": 2}, {"age": 4, "income": 5, "debt": 6}]
    events = dec.decode_many(body(instances=rows), ce_headers("request"))
    np.testing.assert_array_equal(np.stack([e.features for e in events]), [[1, 2, 3], [4, 5, 6]])
    (ev,) = dec.decode_many(body(inputs=[[7, 8, 9]]), ce_headers("request"))
    np.testing.assert_array_equal(ev.features, [7, 8, 9])


def test_kserve_single_feature_model_accepts_flat_instances() -> None:
    dec = EventDecoder({"one": ModelSchema(1)}, default_model="one")
    events = dec.decode_many(body(instances=[0.5, 1.5]), ce_headers("request", isvc="one"))
    assert [e.features.tolist() for e in events] == [[0.5], [1.5]]
    events = dec.decode_many(body(inputs=[tensor("x", [2], [1, 2])]), ce_headers("request", isvc="one"))
    assert [e.features.tolist() for e in events] == [[1.0], [2.0]]


def test_kserve_model_falls_back_to_body_then_default() -> None:
    headers = [(k, v) for k, v in ce_headers("request") if k != "ce_inferenceservicename"]
    (ev,) = decoder().decode_many(body(instances=[[1] * 32], model_name="wide"), headers)
    assert ev.model == "wide"
    (ev,) = decoder().decode_many(body(instances=[[1, 2, 3]]), headers)
    assert ev.model == "credit"


def test_kserve_structured_mode_data_encodings() -> None:
    base = {"specversion": "1.0", "type": "org.kubeflow.serving.inference.request", "id": "s", "time": TS}
    dec = decoder()
    as_string = {**base, "data": json.dumps({"instances": [[1, 2, 3]]})}
    as_base64 = {**base, "data_base64": "eyJpbnN0YW5jZXMiOiBbWzEsIDIsIDNdXX0="}  # {"instances": [[1, 2, 3]]}
    for doc in (as_string, as_base64):
        (ev,) = dec.decode_many(json.dumps(doc).encode())
        assert ev.event_id == "s" and ev.timestamp_seconds == TS_SECONDS
    assert isinstance(dec.decode_kserve(json.dumps(as_string).encode()), KServeRequest)


@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        ({"label": 2}, LivePrediction(label=2)),
        ([1.5, 2.5], LivePrediction(value=(1.5, 2.5))),
        (True, LivePrediction(label=1)),
    ],
)
def test_kserve_v1_prediction_shapes(prediction: object, expected: LivePrediction) -> None:
    (part,) = [decoder().decode_kserve(v1_response(prediction), ce_headers("response"))]
    assert isinstance(part, KServeResponse) and part.predictions == (expected,)


def test_kserve_headers_tolerate_dashes_case_and_empty_values() -> None:
    headers = [(k.replace("ce_", "ce-").upper(), v) for k, v in ce_headers("request", "dash")]
    headers.append(("traceparent", b"00-abc"))
    headers.append(("ce_namespace", None))  # type: ignore[arg-type]
    (ev,) = decoder().decode_many(v1_request([1, 2, 3]), headers)
    assert ev.event_id == "dash"


KSERVE_MORE_INVALID: list[tuple[bytes, list[tuple[str, bytes]], str, str]] = [
    (event(), [("content-type", b"application/json")], "unsupported_format", r"no CloudEvents headers"),
    (b"{}", [*ce_headers("request"), ("ce_source", b"\xff")], "bad_type", r"header 'ce_source' is not UTF-8"),
    (
        body(specversion="1.0", type="x.inference.request", id="s", data_base64="!!"),
        [],
        "not_json",
        r"'data_base64' that is not base64",
    ),
    (body(specversion="1.0", type="x.inference.request", id="s"), [], "missing_field", r"neither 'data' nor"),
    (body(specversion="1.0", type="x.inference.request", id="s", data="{"), [], "not_json", r"data is not JSON"),
    (body(specversion="1.0", type="x.inference.request", id="s", data=[1]), [], "not_object", r"must be a JSON object"),
    (
        body(instances=[{"age": 1, "income": 2}]),
        ce_headers("request", "m"),
        "missing_field",
        r"instance 0 lacks 'debt'",
    ),
    (
        body(instances=[{"age": 1, "income": 2, "debt": 3, "zip": 9}]),
        ce_headers("request", "m"),
        "unknown_feature",
        r"instance 0 also has 'zip'",
    ),
    (
        body(instances=[dict(zip(NAMES, [1, 2, 3], strict=True)), [1, 2, 3]]),
        ce_headers("request", "m"),
        "bad_type",
        r"instance 1 is not an object",
    ),
    (body(instances=[{"a": 1}]), ce_headers("request", isvc="wide"), "bad_type", r"model 'wide' has no feature_names"),
    (body(instances=[[1, 2, "x"]]), ce_headers("request", "t"), "bad_type", r"instances must be lists of 3 numbers"),
    (
        body(instances=[1, 2, 3]),
        ce_headers("request", "t"),
        "wrong_width",
        r"expects 3 features; KServe request 't' has scalar",
    ),
    (body(inputs=[{"data": [1]}]), ce_headers("request"), "missing_field", r"tensor needs 'name', 'shape', 'datatype'"),
    (
        body(inputs=[tensor("x", [1, -3], [1, 2, 3])]),
        ce_headers("request"),
        "bad_type",
        r"shape \[1, -3\] is not a list",
    ),
    (
        body(inputs=[tensor("x", [1, 3], [1, 2, 1e400])]),
        ce_headers("request"),
        "not_finite",
        r"tensor 'x' has a non-finite",
    ),
    (
        body(inputs=[tensor("x", [1, 4], [1, 2, 3, 4])]),
        ce_headers("request"),
        "wrong_width",
        r"input 'x' has shape \[1, 4\]",
    ),
    (
        body(inputs=[tensor("age", [1], [1]), tensor("income", [1], [2])]),
        ce_headers("request"),
        "missing_field",
        r"lacks inputs 'debt'",
    ),
    (
        body(inputs=[tensor(n, [1], [1]) for n in (*NAMES, "zip")]),
        ce_headers("request"),
        "unknown_feature",
        r"unknown inputs 'zip'",
    ),
    (
        body(inputs=[tensor(n, [1, 2], [1, 2]) for n in NAMES]),
        ce_headers("request"),
        "wrong_width",
        r"per-feature inputs must each have shape \[N\] or \[N, 1\]",
    ),
    (
        body(inputs=[tensor("a", [1], [1]), tensor("b", [1], [2])]),
        ce_headers("request", isvc="wide"),
        "unsupported_format",
        r"has 2 input tensors; mapping them to columns needs feature_names",
    ),
    (body(predictions=3), ce_headers("response", "p"), "bad_prediction", r"'predictions' must be a list"),
    (body(outputs=[]), ce_headers("response", "p"), "bad_prediction", r"'outputs' must be a non-empty list"),
    (body(outputs=[3]), ce_headers("response", "p"), "bad_prediction", r"each tensor must be an object"),
    (
        body(outputs=[tensor("y", [1, 1, 2], [1, 2])]),
        ce_headers("response", "p"),
        "bad_prediction",
        r"output 'y' has shape \[1, 1, 2\]",
    ),
    (
        body(outputs=[tensor("label", [2], [1, 0], "INT64"), tensor("probabilities", [1, 2], [0.5, 0.5])]),
        ce_headers("response", "p"),
        "bad_prediction",
        r"outputs disagree on the number of instances \[1, 2\]",
    ),
]


@pytest.mark.parametrize(("value", "headers", "reason", "match"), KSERVE_MORE_INVALID)
def test_kserve_more_invalid_messages(value: bytes, headers: list[tuple[str, bytes]], reason: str, match: str) -> None:
    with pytest.raises(InvalidEventError, match=match) as info:
        decoder().decode_kserve(value, headers)
    assert info.value.reason == reason


def test_decode_bad_model_version_and_integer_segment() -> None:
    assert decoder().decode(event(segment=42)).segment == "42"
    with pytest.raises(InvalidEventError, match=r"'model_version' must be a string or an integer; got 1.5"):
        decoder().decode(event(model_version=1.5))


# ---------------------------------------------------------------------- the common-shape fast path

_FIELD_CHOICES: dict[str, list[Any]] = {
    "id": ["a1", 17, None, True, 2.5, ["x"], ""],
    "model": ["credit", "wide", None, "nope", 3, False],
    "model_version": ["3", 4, None, 1.5, ["v"], True],
    "features": [
        [1.0, 2.0, 3.0],
        [1, 2, 3],
        [1.0, True, 3.0],
        [1.0, 2.0],
        [0.5] * 32,
        [1.0, "2", 3.0],
        [1.0, None, 3.0],
        [1e308, 1e308, 1e308],
        {"age": 1.0, "income": 2.0, "debt": 3.0},
        "1,2,3",
        None,
    ],
    "ts": [1795168800000, 1795168800000.5, TS, "yesterday", 1795168800, None, True, -5, 1e400],
    "segment": ["eu", "us", 7, None, True, "x" * 300, ["eu"]],
    "prediction": [
        None,
        {"label": 1},
        {"label": 0, "probabilities": [0.9, 0.1]},
        {"probabilities": [0.2, 0.8]},
        {"label": 1, "probabilities": [1, 0]},
        {"label": True},
        {"label": "1"},
        {"label": 1.0},
        {"label": 1, "probabilities": [0.5, 1.5]},
        {"label": 1, "probabilities": [0.5, True]},
        {"label": 1, "probabilities": []},
        {"label": 1, "value": 2.0},
        {"value": [1.0, 2.0]},
        {"other": 1},
        [0.1, 0.9],
        {"label": 1, "probabilities": "0.1,0.9"},
    ],
}


def _outcome(dec: EventDecoder, value: bytes, now: float | None) -> Any:
    try:
        ev = dec.decode(value, origin=("t", 1, 42), now=now)
    except InvalidEventError as exc:
        return ("invalid", exc.reason, str(exc))
    return (ev.event_id, ev.model, ev.model_version, ev.features.tolist(), ev.features.dtype, ev.timestamp_seconds,
            ev.segment, ev.prediction, ev.origin)  # fmt: skip


@pytest.mark.parametrize("segments", [None, ("eu",)])
@pytest.mark.parametrize("now", [None, 1795168000.0])
def test_the_fast_path_decodes_every_shape_as_the_careful_path(
    monkeypatch: pytest.MonkeyPatch, segments: tuple[str, ...] | None, now: float | None
) -> None:
    rng = np.random.default_rng(0)
    fast, careful = decoder(segments=segments, max_segments=2), decoder(segments=segments, max_segments=2)
    monkeypatch.setattr(careful, "_plain_common", lambda *args: None)
    shapes = [{name: values[0] for name, values in _FIELD_CHOICES.items()}]
    for name, values in _FIELD_CHOICES.items():  # every choice of every field, the others at their first choice
        shapes += [{**shapes[0], name: v} for v in values[1:]]
    for _ in range(1500):  # and random combinations
        shapes.append({name: values[rng.integers(len(values))] for name, values in _FIELD_CHOICES.items()})
    taken = 0
    for doc in shapes:
        value = json.dumps({k: v for k, v in doc.items() if v is not None or rng.random() < 0.5}).encode()
        got, want = _outcome(fast, value, now), _outcome(careful, value, now)
        assert got == want, value
        taken += fast._plain_common(json.loads(value), None, now) is not None
    assert taken >= 10  # the fast path did take the common shapes (most random combinations have a fault)
    assert fast._plain_common(shapes[0], None, now) is not None
