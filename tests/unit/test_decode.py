"""Stage 1: plain JSON events (monitor/source/decode.py) and the shared checks (monitor/source/validate.py).

KServe CloudEvents and the joiner: tests/unit/test_kserve.py (which reuses the helpers here)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from monitor.errors import ConfigError, InvalidEventError
from monitor.events import InferenceEvent, LivePrediction, feature_rows
from monitor.source.decode import EventDecoder
from monitor.source.validate import (
    INVALID_REASONS,
    MAX_ID_CHARS,
    MAX_VERSION_CHARS,
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
        # bare, as a server writes its answer (and KServe v1 each element of "predictions")
        (2, LivePrediction(label=2)),
        (True, LivePrediction(label=1)),
        (3.5, LivePrediction(value=(3.5,))),
        ([0.1, 0.7, 0.2], LivePrediction(label=1, probabilities=(0.1, 0.7, 0.2))),
        ([1.5, 2.5], LivePrediction(value=(1.5, 2.5))),
    ],
)
def test_decode_prediction_shapes(prediction: object, expected: LivePrediction | None) -> None:
    assert decoder().decode(event(prediction=prediction)).prediction == expected


def test_decode_accepts_features_up_to_the_float32_range() -> None:
    """The model computes in float32: ±3.4e38 is the largest magnitude it holds (many such values together take the
    careful path, which accepts them)."""
    ev = decoder().decode(event(features=[3.4e38, -3.4e38, 3.4e38]))
    assert np.isfinite(ev.features.astype(np.float32)).all()


@pytest.mark.parametrize("features", [[1e300, 1.0, 2.0], [1.7e308, 1.7e308, 0], [1, 2, 10**40], [3.5e38, 0, 0]])
def test_decode_refuses_features_beyond_float32(features: list[float]) -> None:
    """An event with 1e300 was neither scored nor counted: float32 made it inf in the model."""
    with pytest.raises(InvalidEventError, match=r"beyond float32's range \(±3\.4e38\) in which the model computes"):
        decoder().decode(event(features=features))


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
    (b'{"id": "a1b2", "features": [Infinity, -Infinity, 3]}', "not_finite", r"feature 'age' is inf"),
    (event(features=[1, 1e300, 3]), "out_of_range", r"event 'a1b2': feature 'income' is 1e\+300, beyond float32's"),
    (
        event(model="fraud"),
        "unknown_model",
        r"event 'a1b2' names model 'fraud', which is not configured; known models: 'credit', 'wide' \(a model's name: "
        r"--model-name, models\[\]\.name\)",
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
    (
        event(prediction="cat"),
        "bad_prediction",
        r"'prediction' must be a class, a number, a list of numbers or an object",
    ),
    (event(prediction=2**63), "bad_prediction", r"class 9223372036854775808 does not fit in int64"),
    (event(prediction=[0.5, "x"]), "bad_prediction", r"'prediction' must be a class"),
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


def test_decode_bad_model_version_and_integer_segment() -> None:
    assert decoder().decode(event(segment=42)).segment == "42"
    with pytest.raises(InvalidEventError, match=r"'model_version' must be a string or an integer; got 1.5"):
        decoder().decode(event(model_version=1.5))


# ---------------------------------------------------------------------- the common-shape fast path

_FIELD_CHOICES: dict[str, list[Any]] = {
    "id": ["a1", 17, None, True, 2.5, ["x"], "", "p\ud800", "a\nb", "é", "i" * 200, 10**200],
    "model": ["credit", "wide", None, "nope", 3, False],
    "model_version": ["3", 4, None, 1.5, ["v"], True, "\ud800", "v\x00", "v" * 129, "ß"],
    "features": [
        [1.0, 2.0, 3.0],
        [1, 2, 3],
        [1.0, True, 3.0],
        [1.0, 2.0],
        [0.5] * 32,
        [1.0, "2", 3.0],
        [1.0, None, 3.0],
        [1e308, 1e308, 1e308],
        [float("inf"), float("-inf"), 1.0],
        [1.0, float("nan"), 3.0],
        [1e300, 2.0, 3.0],
        [3.4e38, -3.4e38, 3.4e38],
        [10**40, 2, 3],
        {"age": 1.0, "income": 2.0, "debt": 3.0},
        "1,2,3",
        None,
    ],
    "ts": [1795168800000, 1795168800000.5, TS, "yesterday", 1795168800, None, True, -5, 1e400, 10**30, 2.6e14],
    "segment": ["eu", "us", 7, None, True, "x" * 300, ["eu"], "eu\x00", "\ud800", "ü"],
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
        [1.5, 2.5],
        2,
        True,
        2.0,
        2**63,
        "cat",
        {"label": 1, "probabilities": "0.1,0.9"},
        {"label": 2**63},
        {"label": -(2**63)},
        {"label": 1e300},
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


# --------------------------------------------------------------------------------- values safe for every later stage


@pytest.mark.parametrize("field", ["segment", "model_version", "id"])
def test_decode_cleans_a_lone_surrogate_on_both_paths(field: str) -> None:
    """A lone surrogate is valid JSON; it made the alert fingerprint (segment), /metrics (model_version) and the
    dead-letter header (id) raise UnicodeEncodeError. Both paths replace it and give the same event."""
    value = b'{"id": "p1", "ts": 1763800000000, "model": "credit", "features": [1, 2, 3]}'
    value = value[:-1] + b', "' + field.encode() + b'": "a\\ud800"}'
    events = [decoder().decode(value), CarefulDecoder().decode(value)]
    for ev in events:
        text = {"segment": ev.segment, "model_version": ev.model_version, "id": ev.event_id}[field]
        assert text == "a\ufffd" and text.encode("utf-8")
    assert _outcome_of(events[0]) == _outcome_of(events[1])


def test_decode_removes_control_characters_and_caps_long_values() -> None:
    ev = decoder().decode(event(id="a\x00b\n", model_version="v\x1b[31m1", segment="eu\u2028"))
    assert (ev.event_id, ev.model_version, ev.segment) == ("ab", "v[31m1", "eu")
    long_id, long_version = "i" * 300, "v" * 300
    ev = decoder().decode(event(id=long_id, model_version=long_version))
    assert len(ev.event_id) == MAX_ID_CHARS and ev.event_id.startswith("i" * 100) and ev.event_id[-17] == "~"
    assert len(ev.model_version) == MAX_VERSION_CHARS
    assert decoder().decode(event(id=long_id + "x")).event_id != ev.event_id  # distinct values stay distinct


def test_decode_message_of_an_invalid_event_always_encodes() -> None:
    """The message quotes event data (here an extra feature name with a surrogate); it goes into a Kafka header."""
    with pytest.raises(InvalidEventError) as info:
        decoder().decode(event(features={"age": 1, "income": 2, "debt": 3, "\ud800": 4}))
    assert info.value.reason == "unknown_feature"
    assert str(info.value).encode("utf-8")


def test_decode_infinity_and_minus_infinity_together_are_not_finite() -> None:
    """fsum raised ValueError on inf + -inf (json.dumps writes both tokens) and the process exited."""
    value = json.dumps({"id": "i1", "ts": 1795168800000, "features": [math.inf, -math.inf, 1.0]}).encode()
    for dec in (decoder(), CarefulDecoder()):
        with pytest.raises(InvalidEventError, match=r"feature 'age' is inf; every feature must be finite") as info:
            dec.decode(value)
        assert info.value.reason == "not_finite"


def test_decode_refuses_labels_and_timestamps_beyond_what_later_stages_hold() -> None:
    with pytest.raises(InvalidEventError, match=r"must be an integer class; got 9223372036854775808") as info:
        decoder().decode(event(prediction={"label": 2**63}))
    assert info.value.reason == "bad_prediction"
    for ts in (10**30, 253402214400000, "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"):
        with pytest.raises(InvalidEventError) as info:
            decoder().decode(event(ts=ts))
        assert info.value.reason == "bad_timestamp"


def test_decode_allow_list_matches_cleaned_values() -> None:
    dec = decoder(segments=["eu"])
    assert [dec.decode(event(segment=s)).segment for s in ["eu\x00", "\ud800", "eu"]] == ["eu", "other", "eu"]


def test_decode_refuses_a_default_version_that_is_no_label() -> None:
    with pytest.raises(ConfigError, match=r"default_version 'v\\n' has control characters"):
        ModelSchema(3, default_version="v\n")


class CarefulDecoder(EventDecoder):
    """The decoder of the tests above with its fast path switched off."""

    def __init__(self) -> None:
        super().__init__({"credit": ModelSchema(3, NAMES, default_version="7")}, default_model="credit")

    def _plain_common(self, doc: Any, origin: Any, now: float | None) -> InferenceEvent | None:
        return None


def _outcome_of(ev: InferenceEvent) -> tuple[Any, ...]:
    return (ev.event_id, ev.model, ev.model_version, ev.features.tolist(), ev.timestamp_seconds, ev.segment)


@pytest.mark.parametrize("field", ["id", "model", "model_version", "segment", "ts", "prediction"])
def test_decode_refuses_a_field_nested_as_deep_as_json_parses(field: str) -> None:
    """Quoting such a value in the message recursed too deep (RecursionError out of the decoder)."""
    for depth in range(900, 1001, 5):
        nested = b"[" * depth + b"1" + b"]" * depth
        with pytest.raises(InvalidEventError):
            decoder().decode(event(features=[1, 2, 3])[:-1] + b', "%s": %s}' % (field.encode(), nested))
