"""Delayed labels through the pipeline: accuracy, resilience, reliability (1 − ECE) and the composite."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

from monitor import telemetry as tel
from monitor.config import load_settings
from monitor.model.convert import convert_estimator
from monitor.rolling.labelled import LabelledWindow, expected_calibration_error
from monitor.runtime.models import load_model_runtime
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.service import build_sampler
from monitor.source.base import RawRecord
from monitor.source.replay import MemorySource

TS_MS = 1_795_000_000_000


class TwoTopicSource(MemorySource):
    """Events on 'events', labels on 'labels', delivered in one poll each."""

    def __init__(self, polls: list[list[RawRecord]]) -> None:
        super().__init__()
        self._polls = list(polls)

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawRecord]:
        return self._polls.pop(0) if self._polls else []

    @property
    def exhausted(self) -> bool:
        return not self._polls


def _pipeline(tmp_path: Path, polls: list[list[RawRecord]], x: np.ndarray, y: np.ndarray) -> Pipeline:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = LogisticRegression(max_iter=500).fit(x, y)
    path = convert_estimator(model, x.shape[1], tmp_path / "m.onnx")
    np.savetxt(tmp_path / "ref.csv", x, delimiter=",")
    settings = load_settings(
        None,
        {
            "models": [{"name": "m", "path": str(path), "reference": str(tmp_path / "ref.csv")}],
            "kafka": {"labels_topic": "labels"},
            "sampler": {"events_per_second": 0},
            "state_dir": str(tmp_path / "state"),
            "labels": {"window_events": 500},
            "checkpoint_seconds": 0,  # commits at every micro-batch, so the test can read them after a flush
        },
    )
    rts = [load_model_runtime(m) for m in settings.models]
    return Pipeline(settings, TwoTopicSource(polls), rts, build_sampler(settings), clock=lambda: TS_MS / 1000)


def _events(x: np.ndarray, n: int) -> list[RawRecord]:
    """The first ``n`` rows of ``x`` as event records on topic ``events``, partition 0, offsets 0…n−1."""
    return [
        RawRecord(
            json.dumps({"id": f"e{i}", "ts": TS_MS + i, "features": x[i].tolist()}).encode(),
            topic="events",
            partition=0,
            offset=i,
        )
        for i in range(n)
    ]


def _labels(y: np.ndarray, n: int) -> list[RawRecord]:
    """Labels of the first ``n`` events as records on topic ``labels``, partition 0, offsets 0…n−1."""
    return [
        RawRecord(json.dumps({"id": f"e{i}", "label": int(y[i])}).encode(), topic="labels", partition=0, offset=i)
        for i in range(n)
    ]


def test_pipeline_joins_delayed_labels_into_accuracy_resilience_and_reliability(tmp_path: Path) -> None:
    x, y = make_classification(n_samples=600, n_features=5, n_informative=3, random_state=0, flip_y=0.1)
    events = _events(x, 400)
    labels = _labels(y, 400) + [RawRecord(b'{"id": "nobody", "label": 1}', topic="labels", partition=0, offset=400)]
    pipe = _pipeline(tmp_path, [events, labels, [RawRecord(b"[]", topic="labels", partition=0, offset=401)]], x, y)
    while not pipe.source.exhausted:
        pipe.step(0.0)
    pipe.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = float((LogisticRegression(max_iter=500).fit(x, y).predict(x[:400]) == y[:400]).mean())
    st = pipe.state
    assert st.counter(tel.LABELS_JOINED_TOTAL.name, ("m",)) == 400
    assert pipe.label_joiner.pending_labels == 1  # "nobody": held (bounded, TTL) in case its event comes late
    assert st.counter(tel.LABELS_INVALID_TOTAL.name, ("not_object",)) == 1
    assert st.gauge(tel.WINDOW_ACCURACY.name, ("m", "all", "last_500")) == pytest.approx(expected, abs=1e-9)
    resilience = st.gauge(tel.RESILIENCE.name, ("m",))
    reliability = st.gauge(tel.RELIABILITY.name, ("m",))
    composite = st.gauge(tel.ROBUSTNESS_COMPOSITE.name, ("m",))
    assert resilience is not None and 0.5 < resilience <= 1.0
    assert reliability is not None and 0.0 <= reliability <= 1.0
    assert composite is not None and 0.0 <= composite <= 1.0
    assert pipe.source.committed[("labels", 0)] == 402  # label records are committed like events


def test_expected_calibration_error_is_zero_for_a_calibrated_bin_and_the_gap_otherwise() -> None:
    conf = np.full(10, 0.75)
    assert expected_calibration_error(conf, np.array([True] * 7 + [False] * 3)) == pytest.approx(0.05)
    assert expected_calibration_error(np.array([1.0, 1.0]), np.array([True, True])) == 0.0


def test_labelled_window_keeps_only_the_last_size_labels_and_reports_resilience_capped_at_one() -> None:
    w = LabelledWindow(size=3).update([False, True, True, True], [True, True, True, True], [None] * 4)
    q = w.get()
    assert q.events == 3 and q.accuracy == 1.0 and q.resilience == 1.0
    assert np.isnan(q.ece)  # no confidences: ECE undefined, not 0


def test_one_poll_of_events_labels_and_an_undecodable_labels_batch_goes_each_its_way(tmp_path: Path) -> None:
    """The poll's one pass (``Ingest.decode_all``) hands label records to the label stage, and refuses a record
    batch the source could not decode as ``undecodable_batch`` even on the labels topic (not as a bad label)."""
    from monitor.source.records import UNDECODABLE_HEADER

    x, y = make_classification(n_samples=300, n_features=5, n_informative=3, random_state=1)
    events, labels = _events(x, 100), _labels(y, 50)
    stand_in = RawRecord(b"\x00raw", ((UNDECODABLE_HEADER, b"lz4 missing"),), "labels", 0, 25)
    after = [r._replace(offset=r.offset + 1) for r in labels[25:]]
    pipe = _pipeline(tmp_path, [events[:50] + labels[:25] + [stand_in] + events[50:] + after], x, y)
    while not pipe.source.exhausted:
        pipe.step(0.0)
    pipe.flush()
    st = pipe.state
    assert st.counter(tel.LABELS_JOINED_TOTAL.name, ("m",)) == 50
    assert st.counter(tel.EVENTS_INVALID_TOTAL.name, ("unknown", "undecodable_batch")) == 1
    assert st.counter_sum(tel.LABELS_INVALID_TOTAL.name) == 0
    assert pipe.source.committed == {("events", 0): 100, ("labels", 0): 51}


def test_a_redelivered_event_and_a_duplicate_label_join_each_pair_once(tmp_path: Path) -> None:
    x, y = make_classification(n_samples=300, n_features=5, n_informative=3, random_state=1)
    n = 200
    events, labels = _events(x, n), _labels(y, n)
    redelivered = [RawRecord(r.value, topic="events", partition=0, offset=n + r.offset) for r in events]
    again = [RawRecord(r.value, topic="labels", partition=0, offset=n + r.offset) for r in labels]
    # the sampler releases both deliveries together (this clock stands still): the first joins the held label, the
    # second must not wait for the duplicate label that comes next
    pipe = _pipeline(tmp_path, [events, labels, redelivered, again], x, y)
    while not pipe.source.exhausted:
        pipe.step(0.0)
    pipe.flush()
    assert pipe.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 2 * n
    assert pipe.state.counter(tel.LABELS_JOINED_TOTAL.name, ("m",)) == n  # not 2n
    assert pipe.state.counter_sum(tel.LABELS_UNMATCHED_TOTAL.name) == n  # the duplicates
    assert (pipe.label_joiner.pending_labels, pipe.label_joiner.pending_predictions) == (0, 0)
