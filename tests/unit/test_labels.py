"""Stage 1 (labels): decoding delayed labels and joining them to scored predictions (monitor/source/labels.py)."""

from __future__ import annotations

import pytest

from monitor.errors import ConfigError, InvalidEventError
from monitor.events import LabelEvent
from monitor.source.decode import EventDecoder
from monitor.source.labels import JoinedLabel, LabelDecoder, LabelJoiner, ScoredPrediction
from monitor.source.validate import ModelSchema


def scored(event_id: str, predicted: int = 1, noisy: int | None = None) -> ScoredPrediction:
    return ScoredPrediction(
        event_id, "credit", "3", "eu", 0.0, predicted_class=predicted, confidence=0.8, noisy_class=noisy
    )


def test_label_decode_fields() -> None:
    dec = LabelDecoder()
    assert dec.decode(b'{"id": "a1", "label": 1, "ts": "2026-11-20T10:00:00Z"}') == LabelEvent("a1", 1, 1795168800.0)
    assert dec.decode(b'{"id": 7, "label": true, "ts": 1795168800000, "x": 1}') == LabelEvent("7", 1, 1795168800.0)
    assert dec.decode(b'{"id": "b", "label": "2"}', now=5.0) == LabelEvent("b", 2, 5.0)
    assert dec.decode(b'{"id": "b", "label": 0.0}', now=5.0).label == 0


@pytest.mark.parametrize(
    ("value", "reason", "match"),
    [
        (
            b'{"id": "a", "label": 1, "pad": "' + b"x" * 100 + b'"}',
            "too_large",
            r"label of \d+ bytes exceeds max_bytes=64",
        ),
        (b"{", "not_json", r"label is not UTF-8 JSON"),
        (b"3", "not_object", r"label must be a JSON object; got a JSON int"),
        (b'{"label": 1}', "missing_field", r"label has no 'id'; it cannot be joined"),
        (b'{"id": "a"}', "missing_field", r"label for event 'a' has no 'label' field"),
        (b'{"id": ["a"], "label": 1}', "bad_type", r"label 'id' must be a string or an integer"),
        (b'{"id": "a", "label": "cat"}', "bad_type", r"label for event 'a' must be an integer class; got 'cat'"),
        (b'{"id": "a", "label": 0.5}', "bad_type", r"must be an integer class; got 0\.5"),
        (b'{"id": "a", "label": 1, "ts": "soon"}', "bad_timestamp", r"event 'a': 'ts' 'soon' is not ISO-8601"),
        (b'{"id": "a", "label": 1}', "missing_field", r"event 'a' has no 'ts'"),
    ],
)
def test_label_decode_invalid_reason_and_message(value: bytes, reason: str, match: str) -> None:
    with pytest.raises(InvalidEventError, match=match) as info:
        LabelDecoder(max_bytes=64).decode(value)
    assert info.value.reason == reason


def test_label_joiner_joins_a_label_to_its_prediction() -> None:
    joiner = LabelJoiner(ttl_seconds=60.0)
    assert joiner.add_prediction(scored("a", predicted=1, noisy=0), now=0.0) is None
    joined = joiner.add_label(LabelEvent("a", 1, 10.0), now=10.0)
    assert isinstance(joined, JoinedLabel)
    assert joined.prediction.model == "credit" and joined.correct and joined.noisy_correct is False
    assert (joiner.joined_total, joiner.pending_predictions) == (1, 0)


def test_label_joiner_holds_an_early_label_for_its_prediction() -> None:
    joiner = LabelJoiner(ttl_seconds=60.0)
    assert joiner.add_label(LabelEvent("a", 0, 0.0), now=0.0) is None
    joined = joiner.add_prediction(scored("a", predicted=1), now=1.0)
    assert joined is not None and not joined.correct and joined.noisy_correct is None
    assert (joiner.pending_labels, joiner.unmatched_labels_total) == (0, 0)


def test_label_joiner_expires_after_the_ttl() -> None:
    joiner = LabelJoiner(ttl_seconds=60.0)
    joiner.add_prediction(scored("a"), now=0.0)
    joiner.add_label(LabelEvent("early", 1, 0.0), now=0.0)
    assert joiner.add_label(LabelEvent("a", 1, 60.0), now=60.0) is None
    assert (joiner.expired_total, joiner.pending_predictions) == (1, 0)
    joiner.expire(61.0)
    assert joiner.unmatched_labels_total == 1 and joiner.pending_labels == 1  # "early" expired, "a" now held


def test_label_joiner_is_bounded() -> None:
    joiner = LabelJoiner(ttl_seconds=1e9, max_predictions=3, max_early_labels=2)
    for i in range(5):
        joiner.add_prediction(scored(f"p{i}"), now=float(i))
        joiner.add_label(LabelEvent(f"l{i}", 1, float(i)), now=float(i))
    assert (joiner.pending_predictions, joiner.evicted_total) == (3, 2)
    assert (joiner.pending_labels, joiner.unmatched_labels_total) == (2, 3)
    assert joiner.add_label(LabelEvent("p0", 1, 5.0), now=5.0) is None  # evicted
    assert joiner.add_label(LabelEvent("p4", 1, 5.0), now=5.0) is not None


def test_label_joiner_counts_duplicate_and_unheld_labels() -> None:
    joiner = LabelJoiner(max_early_labels=0)
    assert joiner.add_label(LabelEvent("x", 1, 0.0), now=0.0) is None
    assert joiner.unmatched_labels_total == 1 and joiner.pending_labels == 0
    joiner = LabelJoiner()
    joiner.add_label(LabelEvent("x", 1, 0.0), now=0.0)
    joiner.add_label(LabelEvent("x", 0, 0.0), now=0.0)
    assert joiner.unmatched_labels_total == 1
    joined = joiner.add_prediction(scored("x", predicted=1), now=0.0)
    assert joined is not None and joined.label.label == 1  # the first label wins


def test_label_joiner_redelivered_prediction_replaces_the_first() -> None:
    joiner = LabelJoiner()
    joiner.add_prediction(scored("a", predicted=0), now=0.0)
    joiner.add_prediction(scored("a", predicted=2), now=1.0)
    joined = joiner.add_label(LabelEvent("a", 2, 2.0), now=2.0)
    assert joiner.pending_predictions == 0 and joined is not None and joined.correct


@pytest.mark.parametrize("label_first", [False, True], ids=["prediction-first", "label-first"])
def test_an_event_id_joins_once_whatever_is_delivered_twice(label_first: bool) -> None:
    # each pair: its prediction and label in either order, then a duplicate label and a redelivered event (both ways
    # round): 2,000 pairs are 2,000 joins, not 4,000
    joiner = LabelJoiner(ttl_seconds=600.0)
    joined: list[JoinedLabel | None] = []
    for i in range(2000):
        now, event_id = i * 0.01, f"e{i}"
        order = ["label", "prediction"] if label_first else ["prediction", "label"]
        order += ["duplicate", "prediction"] if i % 2 else ["prediction", "duplicate"]
        for step in order:
            if step == "prediction":
                joined.append(joiner.add_prediction(scored(event_id), now))
            else:
                joined.append(joiner.add_label(LabelEvent(event_id, int(step == "label"), now), now))
    pairs = [j for j in joined if j is not None]
    assert joiner.joined_total == len(pairs) == 2000
    assert all(j.label.label == 1 for j in pairs)  # the first label is the one joined
    assert (joiner.unmatched_labels_total, joiner.redelivered_total) == (2000, 2000)
    assert (joiner.pending_predictions, joiner.pending_labels) == (0, 0)
    # past the TTL the id is forgotten: a new event with the same id joins again
    joiner.add_prediction(scored("e0"), now=1000.0)
    assert joiner.add_label(LabelEvent("e0", 1, 1000.0), now=1000.0) is not None


def test_label_joiner_reset_restores_a_fresh_joiner() -> None:
    joiner = LabelJoiner()
    joiner.add_prediction(scored("a"), now=0.0)
    joiner.add_label(LabelEvent("b", 1, 0.0), now=0.0)
    joiner.reset()
    assert (joiner.pending_predictions, joiner.pending_labels, joiner.joined_total) == (0, 0, 0)
    assert joiner.add_label(LabelEvent("a", 1, 0.0), now=0.0) is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ttl_seconds": 0.0}, r"ttl_seconds must be > 0"),
        ({"max_predictions": 0}, r"max_predictions must be >= 1"),
        ({"max_early_labels": -1}, r"max_early_labels must be >= 0"),
    ],
)
def test_label_joiner_bad_configuration_is_refused(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        LabelJoiner(**kwargs)  # type: ignore[arg-type]


def test_label_decoder_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"max_bytes must be >= 1"):
        LabelDecoder(max_bytes=0)


def test_label_decode_cleans_the_id_as_the_event_decoder_does() -> None:
    """A label's id must still join its event's after both are cleaned (lone surrogate ids)."""
    events = EventDecoder({"m": ModelSchema(1)}, default_model="m")
    for raw_id in ("p\\ud800", "a\\u0000b", "i" * 300):
        value = b'{"id": "%s", "ts": 1795168800000, "features": [1]}' % raw_id.encode()
        label = LabelDecoder(max_bytes=1024).decode(b'{"id": "%s", "label": 1}' % raw_id.encode(), now=0.0)
        assert label.event_id == events.decode(value).event_id
        assert label.event_id.encode("utf-8")


@pytest.mark.parametrize("label", [b"9223372036854775808", b"-9223372036854775809", b"1e300", b'"1' + b"0" * 30 + b'"'])
def test_label_decode_refuses_a_class_beyond_int64(label: bytes) -> None:
    with pytest.raises(InvalidEventError, match=r"must be an integer class; got .* \(classes fit in int64\)") as info:
        LabelDecoder().decode(b'{"id": "a", "label": ' + label + b"}", now=0.0)
    assert info.value.reason == "bad_type"
