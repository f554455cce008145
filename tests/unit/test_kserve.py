"""Stage 1: KServe payload-logging CloudEvents (monitor/source/kserve.py) and their request/response joiner
(monitor/source/kserve_join.py)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from monitor.errors import ConfigError, InvalidEventError
from monitor.events import LivePrediction
from monitor.source.decode import EventDecoder
from monitor.source.kserve import KServeRequest, KServeResponse
from monitor.source.kserve_join import KSERVE_DROP_REASONS, KServeJoiner
from monitor.source.validate import ModelSchema
from tests.unit.test_decode import NAMES, TS, TS_SECONDS, ce_headers, decoder, event


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
    with pytest.raises(
        InvalidEventError, match=r"each prediction must be a class, a number, a list of numbers"
    ) as info:
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


# --------------------------------------------------------------------------------- values safe for every later stage


def test_kserve_joiner_counts_every_dropped_half_by_model_and_reason() -> None:
    """Reused ids were dropped silently: each drop is counted under a reason from KSERVE_DROP_REASONS."""
    joiner = KServeJoiner(decoder(), ttl_seconds=1.0)
    joiner.update(v1_request([1, 2, 3]), ce_headers("request", "d"), now=0.0)
    joiner.update(v1_request([1, 2, 3]), ce_headers("request", "d"), now=0.0)  # reused id: dropped
    joiner.update(v1_response(1, 0), ce_headers("response", "d"), now=0.1)  # two predictions for one instance
    joiner.update(v1_response(1), ce_headers("response", "lost"), now=0.2)
    joiner.expire(5.0)  # the response whose request never came
    assert joiner.dropped == {
        ("credit", "duplicate"): 1,
        ("credit", "mismatched_response"): 1,
        ("credit", "orphan_response"): 1,
    }
    assert {reason for _, reason in joiner.dropped} <= set(KSERVE_DROP_REASONS)
    joiner.reset()
    assert joiner.dropped == {}


def test_kserve_cleans_ids_and_versions_from_headers_and_structured_attributes() -> None:
    (ev,) = decoder().decode_many(v1_request([1, 2, 3]), ce_headers("request", "r\x1b1", ce_endpoint="blue\n"))
    assert (ev.event_id, ev.model_version) == ("r1", "blue")
    doc = {"specversion": "1.0", "type": "x.inference.request", "id": "s\ud800", "endpoint": "v" * 300,
           "time": TS, "data": {"instances": [[1, 2, 3]]}}  # fmt: skip
    (ev,) = decoder().decode_many(json.dumps(doc).encode())
    assert ev.event_id == "s\ufffd" and len(ev.model_version) == 128 and ev.model_version.encode("utf-8")


@pytest.mark.parametrize(
    ("value", "headers", "reason", "match"),
    [
        (v1_request([1, 2, 1e300]), ce_headers("request"), "out_of_range", r"feature \[2\] is 1e\+300, beyond float32"),
        (v1_request([1, 2, 10**400]), ce_headers("request"), "bad_type", r"instances must be lists of 3 numbers"),
        (v1_response(2**63), ce_headers("response"), "bad_prediction", r"class 9223372036854775808 does not fit"),
        (
            body(outputs=[{"name": "p", "shape": [1], "datatype": "INT64", "data": [1e300]}]),
            ce_headers("response"),
            "bad_prediction",
            r"output 'p' has a class beyond int64",
        ),
        (
            body(inputs=[{"name": "x", "shape": [2**62, 2**62], "datatype": "FP32", "data": [1, 2, 3]}]),
            ce_headers("request"),
            "wrong_width",
            r"data does not fit its shape",
        ),
        (
            body(specversion="1.0", type="x.inference.request", id="s", data_base64="é"),
            [],
            "not_json",
            r"'data_base64' that is not base64",
        ),
        (
            json.dumps({"specversion": "1.0", "type": "x.inference.request", "id": "s", "data": "\ud800"}).encode(),
            [],
            "not_json",
            r"data is not JSON",
        ),
    ],
)
def test_kserve_values_beyond_later_stages_are_refused_with_a_reason(
    value: bytes, headers: list[tuple[str, bytes]], reason: str, match: str
) -> None:
    """Each raised OverflowError, ValueError or UnicodeEncodeError out of the decoder before (found by fuzzing)."""
    with pytest.raises(InvalidEventError, match=match) as info:
        decoder().decode_kserve(value, headers)
    assert info.value.reason == reason


def test_kserve_bad_values_name_the_input_and_the_model() -> None:
    """A KServe request's NaN or beyond-float32 value is counted per input like an event's: by the model's name for
    the input, under the model the request names."""
    for raw, problem in (
        (b'{"instances": [[1, 2, 3], [1, NaN, 3]]}', "not_finite"),
        (b'{"instances": [[1e39, 2, 3]]}', "out_of_range"),
    ):
        with pytest.raises(InvalidEventError) as info:
            decoder().decode_many(raw, ce_headers("request", "bad"))
        column = 1 if problem == "not_finite" else 0
        assert (info.value.reason, info.value.model, info.value.inputs) == (
            problem,
            "credit",
            ((NAMES[column], problem),),
        )
