"""Every declared metric has a writer: one run of the real pipeline after which every
:data:`~monitor.telemetry.METRICS` entry has a sample that a code path wrote.

The run: ``harmonic-monitor run`` as a process against Kafka 0.9, reading the embedded demo's three phases
(stationary, an input shift, a harmful shift toward the decision boundary; ``monitor/cli/demo_data.py``) so
that the per-feature KS test, HarmonicInputDrift and HarmonicHarmfulShift fire, with one zero-weight input moved past
the reference's range from the input shift on (it stays moved: the range test and the per-feature count still see it
when this test reads them); a candidate model beside the classifier (``models[].compare_with``); delayed labels on a labels topic;
a scores topic and a dead-letter topic; the classifier's reference a JSON built with labels, so that the label-free
accuracy estimates are exported (finite, every method, every window); KServe CloudEvents; three model versions over ``segments.max_versions=2``;
probes every second; alerts to a real Alertmanager (which must hold them) and to a webhook nothing listens on. The
faults that fault-only metrics need are injected for real and listed in :data:`DRIVEN_BY`.

"Written" is read from ``/metrics`` alone: a counter has a sample > 0, a histogram a ``_count`` > 0, and a gauge a
sample that is neither 0 nor NaN. A series pre-registered at zero (the invalid-reason counters, the
``harmonic_degraded`` reasons, ``harmonic_alerts_firing`` of a quiet rule) therefore never counts; the gauges whose
healthy value is 0 are driven away from it by the faults and alerts of this run. A new ``MetricSpec`` with no writer
fails here, because the check iterates :data:`METRICS` itself.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import yaml
from kafka import KafkaProducer
from kafka.errors import KafkaError, NotEnoughReplicasError

from monitor import telemetry as tel
from monitor.accuracy import METHODS
from monitor.cli.demo_data import PHASES, DemoData, build_demo
from monitor.drift.registry import DETECTORS
from monitor.runtime.state import STATE_FILE, STATE_VERSION
from monitor.runtime.watch import HARMFUL_ALERT, INPUT_ALERT
from monitor.telemetry import METRICS, MetricSpec
from tests.integration.alertmanager_service import AlertmanagerService, free_port
from tests.integration.brokers import Kafka09Broker
from tests.integration.sidecar import Scrape, Sidecar, sidecar_in
from tests.integration.test_run_kafka import Message, group_name, produce

pytestmark = pytest.mark.slow

MODEL = "demo"
#: a second model, a regressor: some series exist for regressors only
REGRESSOR = "demo-regressor"
#: a third model, the same regressor with a reference built with true values: its error is estimated without labels
ERROR_MODEL = "demo-error"
#: events of ERROR_MODEL: enough for a window's error estimate (at least 50)
ERROR_EVENTS = 80
#: a candidate beside MODEL (models[].compare_with), another logistic regression on the same inputs: its paired
#: differences and disagreements with MODEL are the harmonic_compare_* series
CANDIDATE = "demo-candidate"
#: from the input shift on, one zero-weight input moves up by this share of its reference range (about 6.6 σ on the
#: demo's first one): every value lies past the reference's maximum, so the per-feature KS test flags it and the range
#: test counts it outside in every window that follows, the last one included
OUT_OF_RANGE_SHIFT = 1.1
#: events over the demo's three phases: enough for a 300-event drift window to fill with each shift
EVENTS = 2400
#: event time per event, as in the demo (100 events/s of event time)
SPACING_MS = 10
#: the first event's time is this far after the moment the stream is produced, so that the events' own time drives
#: the alert clock whatever wall-time lag the run allows
LEAD_MS = 2000
#: every that-many-th stationary event carries a wrong live label (shadow disagreements)
DISAGREE_EVERY = 40
#: events smaller than this pass; the dead-letter topic refuses records above DEAD_LETTER_MAX_BYTES
MAX_EVENT_BYTES = 4096
DEAD_LETTER_MAX_BYTES = 2048
#: events sent after the scores topic starts refusing writes (one producer failure is enough)
TAIL_EVENTS = 20
#: bound on draining the stream, on the alert reaching Alertmanager, and on the fault-driven metrics
DRAIN_TIMEOUT_SECONDS = 90.0
ALERT_TIMEOUT_SECONDS = 40.0
WRITTEN_TIMEOUT_SECONDS = 120.0
REFUSED_TIMEOUT_SECONDS = 20.0

#: metrics that only a fault, or one particular input, makes a code path write: what this run does for each
DRIVEN_BY: dict[str, str] = {
    tel.EVENTS_INVALID_TOTAL.name: "an event that is not JSON, one over max_event_bytes and one with a null feature",
    tel.EVENTS_DEAD_LETTERED_TOTAL.name: "the same three invalid events",
    tel.INPUT_INVALID_TOTAL.name: "the event with a null first feature (missing)",
    tel.SCORES_NONFINITE_TOTAL.name: "an event whose ±3e38 features overflow the model's float32 arithmetic",
    tel.KSERVE_DROPPED_TOTAL.name: "a KServe request CloudEvent sent twice (duplicate)",
    tel.MODEL_VERSIONS_EVICTED_TOTAL.name: "three model_version values with segments.max_versions=2",
    tel.WINDOW_SHADOW_DISAGREEMENT_RATIO.name: f"a wrong live label on every {DISAGREE_EVERY}th stationary event",
    tel.ALERTS_FIRING.name: "the drift phases (0 for a quiet rule is pre-registered, not written)",
    tel.ALERT_DELIVERIES_FAILED_TOTAL.name: "an alert webhook on a port nothing listens on",
    tel.DEGRADED.name: "the dead webhook (alert_delivery) and the scores topic refusing writes (producer)",
    tel.PRODUCER_FAILURES_TOTAL.name: "the scores topic altered to min.insync.replicas=2 on a one-broker cluster",
    tel.PRODUCER_DROPPED_TOTAL.name: f"the dead-letter topic's max.message.bytes={DEAD_LETTER_MAX_BYTES} below "
    "the too-large event (too_large)",
    tel.LABELS_INVALID_TOTAL.name: "a label that is not JSON",
    tel.LABELS_UNMATCHED_TOTAL.name: "two labels for an id never scored (the second is a duplicate)",
    tel.HTTP_REQUESTS_REJECTED_TOTAL.name: "a POST to /metrics (bad_request)",
    tel.REGIONS_EVICTED_TOTAL.name: "probes.max_regions=2 while the drift phases flag events in new places",
    tel.FLICKER_TOLERANCE.name: f"a regressor ({REGRESSOR}) watched beside the classifier: regressors only",
    tel.EVENTS_MISTIMED_TOTAL.name: "an event stamped 3 h ahead (future_timestamp) and one 10 min behind (late)",
    tel.OFFSETS_WENT_BACK_TOTAL.name: "a state dir whose labels-topic position and last commit lie past the topic's "
    "end (as after the topic was re-created)",
    tel.FEATURE_DRIFT_FEATURES.name: f"one zero-weight input moved by {OUT_OF_RANGE_SHIFT} × its reference range from "
    "the input shift on",
    tel.INPUT_OUT_OF_RANGE_RATIO.name: "the same input, past the reference's maximum",
    **{
        m.name: f"{CANDIDATE}, a logistic regression on every input, compared with {MODEL} on its events"
        for m in (
            tel.COMPARE_EVENTS,
            tel.COMPARE_DIFFERENCE,
            tel.COMPARE_DIFFERENCE_LOWER,
            tel.COMPARE_DIFFERENCE_UPPER,
            tel.COMPARE_DISAGREEMENT_RATIO,
            tel.COMPARE_VERDICT,
        )
    },
    tel.SEGMENT_WARMING_UP.name: f"three events of {REGRESSOR} in segment 'eu': it warms up its own baseline",
    **{
        m.name: f"{ERROR_EVENTS} events of {ERROR_MODEL}, a regressor whose reference was built with true values"
        for m in (tel.ESTIMATED_ERROR, tel.ESTIMATED_ERROR_LOWER, tel.ESTIMATED_ERROR_UPPER, tel.REFERENCE_ERROR)
    },
}


# ---------------------------------------------------------------------------------------------- the check


#: gauges never pre-registered: any sample, 0 included, was written by a code path (the consumer lag is 0 once the
#: sidecar has caught up, as it has when this test looks; the probe queue is written by every probe round, 0 when the
#: budget covers every region, as budget_share 1 does here)
PRESENT_IS_WRITTEN = frozenset({tel.CONSUMER_LAG_RECORDS.name, tel.PROBE_QUEUE.name})


def written(spec: MetricSpec, scrape: Scrape) -> bool:
    """Whether ``scrape`` holds a sample of ``spec`` that a code path wrote (see the module docstring)."""
    if spec.name in PRESENT_IS_WRITTEN:
        return bool(scrape.samples.get(spec.name))
    if spec.type == "counter":
        return any(v > 0 for _, v in scrape.samples.get(spec.name, []))
    if spec.type == "histogram":
        return any(v > 0 for _, v in scrape.samples.get(f"{spec.name}_count", []))
    return any(v != 0 and not math.isnan(v) for _, v in scrape.samples.get(spec.name, []))


def unwritten(scrape: Scrape) -> dict[str, str]:
    """Every declared metric without a written sample → what the page shows of it (and what should drive it)."""
    missing: dict[str, str] = {}
    for spec in METRICS:
        if written(spec, scrape):
            continue
        name = f"{spec.name}_count" if spec.type == "histogram" else spec.name
        seen = scrape.samples.get(name, [])
        shown = f"only {sorted({v for _, v in seen})}" if seen else "no sample"
        driver = DRIVEN_BY.get(spec.name)
        missing[spec.name] = shown + (f" (driven by: {driver})" if driver else "")
    return missing


# ---------------------------------------------------------------------------------------------- the stream


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000.0, UTC).isoformat()


@dataclass
class Stream:
    """The demo's phases re-timed to now, with the extra records this run needs; ``events`` go to the events topic,
    ``labels`` to the labels topic."""

    data: DemoData
    start_ms: int
    events: list[Message] = field(default_factory=list)
    labels: list[Message] = field(default_factory=list)
    index: int = 0
    #: (input, offset): the input moved from the input shift on (:data:`OUT_OF_RANGE_SHIFT`)
    shift: tuple[int, float] = (0, 0.0)

    def ts(self) -> int:
        return self.start_ms + self.index * SPACING_MS

    def add(self, doc: dict[str, object]) -> None:
        self.events.append((str(doc.get("id", "x")).encode(), json.dumps(doc).encode()))
        self.index += 1

    def phase(self, name: str, rows: list[bytes]) -> None:
        for j, raw in enumerate(rows):
            doc = json.loads(raw)
            doc["ts"] = self.ts()
            if name != "stationary":
                self.move(doc)
            if name == "stationary":
                doc["model_version"] = str(1 + j % 3)  # three versions, two kept: evictions
                if j % DISAGREE_EVERY == 0:
                    doc["prediction"] = {"label": 1 - int(doc["prediction"]["label"])}
                if j < 300:  # delayed labels: the live label is the truth, as far as this test cares
                    truth = {"id": doc["id"], "label": int(doc["prediction"]["label"])}
                    self.labels.append((str(doc["id"]).encode(), json.dumps(truth).encode()))
                if j == 100:
                    self.extras(doc)
            self.add(doc)

    def move(self, doc: dict[str, object]) -> None:
        """Move the shifted input of ``doc`` (from the input shift on)."""
        features = doc["features"]
        assert isinstance(features, list)
        j, offset = self.shift
        features[j] = round(float(features[j]) + offset, 6)

    def extras(self, like: dict[str, object]) -> None:
        """The fault-only inputs, in the stationary phase (see :data:`DRIVEN_BY`)."""
        features = like["features"]
        assert isinstance(features, list)
        self.add({**like, "id": "overflow", "features": [3e38 if k % 2 else -3e38 for k in range(len(features))]})
        self.events.append((b"bad-json", b"{this is not json"))
        self.add({**like, "id": "missing-value", "features": [None, *features[1:]]})  # an upstream column came null
        self.add({**like, "id": "too-large", "padding": "x" * (MAX_EVENT_BYTES + 100)})
        # a producer host whose clock runs 3 h ahead, before the shifts: the drift alerts must still fire (placed at
        # arrival, this event cannot move the model's clock past its windows)
        self.add({**like, "id": "from-the-future", "ts": self.ts() + 3 * 3600 * 1000})
        self.add({**like, "id": "late", "ts": self.ts() - 600 * 1000})
        for k in range(3):  # a segment of the regressor that is still learning its own baseline
            self.add({**like, "id": f"segment-{k}", "model": REGRESSOR, "segment": "eu", "prediction": {"value": 1.0}})
        # the regressor whose error is estimated without labels, on rows like its reference's (a finite interval)
        for k, row in enumerate(np.loadtxt(self.data.reference_path, delimiter=",")[:ERROR_EVENTS]):
            self.add({**like, "id": f"error-{k}", "model": ERROR_MODEL, "features": row.tolist()})
        ce = {
            "specversion": "1.0",
            "id": "kserve-1",
            "source": "test",
            "inferenceservicename": MODEL,
            "time": iso(self.ts()),
            "datacontenttype": "application/json",
        }
        request = {**ce, "type": "org.kubeflow.serving.inference.request", "data": {"instances": [features]}}
        response = {**ce, "type": "org.kubeflow.serving.inference.response", "data": {"predictions": [1]}}
        for doc in (request, request, response):  # the second request is a duplicate the joiner drops
            self.events.append((b"kserve-1", json.dumps(doc).encode()))
        self.index += 1
        self.labels += [(b"bad", b"not a label"), *[(b"nobody", b'{"id": "never-scored", "label": 1}')] * 2]


def build_stream(data: DemoData) -> Stream:
    j = data.zero_weight_features[0]
    x = np.loadtxt(data.reference_path, delimiter=",")[:, j]
    shift = (j, OUT_OF_RANGE_SHIFT * float(x.max() - x.min()))
    stream = Stream(data, start_ms=int(time.time() * 1000) + LEAD_MS, shift=shift)
    for name in PHASES:
        stream.phase(name, data.phases[name])
    return stream


def tail(stream: Stream, count: int) -> list[Message]:
    """``count`` more harmful-phase events, timed after the stream: their scores meet the refusing scores topic."""
    rows = stream.data.phases[PHASES[-1]][:count]
    before = len(stream.events)
    for j, raw in enumerate(rows):
        doc = {**json.loads(raw), "id": f"tail-{j}", "ts": stream.ts()}
        stream.move(doc)
        stream.add(doc)
    return stream.events[before:]


# ---------------------------------------------------------------------------------------------- the run


@pytest.fixture
def alertmanager() -> Iterator[AlertmanagerService]:
    with AlertmanagerService() as service:
        yield service


def build_regressor(data: DemoData, out: Path) -> Path:
    """A linear regressor on the demo's reference rows (the reference is also its reference)."""
    from sklearn.linear_model import LinearRegression

    from monitor.model.convert import convert_estimator

    x = np.loadtxt(data.reference_path, delimiter=",")
    estimator = LinearRegression().fit(x, x[:, 0] + x[:, 1])
    return convert_estimator(estimator, data.n_features, out)


def build_candidate(out: Path) -> Path:
    """The candidate: an L2 logistic regression on the demo's dataset (every input weighted, the shifted one too),
    so that its values and some of its decisions differ from the served model's."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from monitor.model.convert import convert_estimator

    x, y = load_breast_cancer(return_X_y=True)
    estimator = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000)).fit(x, y)
    return convert_estimator(estimator, x.shape[1], out)


def labelled_regressor_reference(data: DemoData, model: Path, out: Path) -> Path:
    """The regressor's reference built with true values (its target plus noise: errors to estimate)."""
    import monitor

    x = np.loadtxt(data.reference_path, delimiter=",")
    y = x[:, 0] + x[:, 1] + np.random.default_rng(0).normal(size=x.shape[0])
    monitor.reference(model, x, labels=y, flicker_copies=4, out=out / "error-reference.json")
    return in_one_segment(out / "error-reference.json", "loss_estimator", ("mae", "rmse"), out)


def in_one_segment(reference: Path, key: str, values: tuple[str, ...], out: Path) -> Path:
    """A copy of a labelled reference whose every row is in segment 'other' (the segment the events without one are
    watched as): its per-segment reference performance is the model-wide one, as ``reference --segment-column``
    writes it for a column that names one segment, so the run exports the segment's own reference value."""
    doc = json.loads(reference.read_text())
    fit = doc[key]
    fit["segments"] = {"other": {**{v: fit[v] for v in values}, "n": float(fit["n"])}}
    copy = out / f"one-segment-{reference.name}"
    copy.write_text(json.dumps(doc))
    return copy


def new_topic(broker: Kafka09Broker, stem: str, configs: dict[str, str] | None = None) -> str:
    name = f"metric-writers-{stem}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, 1, configs)  # one partition: the phases arrive in order
    return name


def wait_until_refused(broker: Kafka09Broker, topic: str) -> None:
    """Wait until the broker refuses acks=all writes to ``topic`` (it applies a config change a moment after
    ZooKeeper holds it): the sidecar's scores produced after this fail for sure."""
    producer = KafkaProducer(**broker.kafka_kwargs(), acks="all", retries=0)
    deadline = time.monotonic() + REFUSED_TIMEOUT_SECONDS
    try:
        while True:
            try:
                producer.send(topic, b"are writes refused yet?").get(timeout=10)
            except NotEnoughReplicasError:
                return
            except KafkaError as exc:
                raise AssertionError(f"writing to {topic} failed otherwise than refused: {exc!r}") from exc
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"{topic} still takes acks=all writes {REFUSED_TIMEOUT_SECONDS:.0f} s after the change"
                )
            time.sleep(0.1)  # bounded polling of an external process
    finally:
        producer.close(timeout=5)


def post_metrics(sidecar: Sidecar) -> int:
    """POST to /metrics (a request the endpoint refuses); returns the status."""
    request = urllib.request.Request(f"http://127.0.0.1:{sidecar.port}/metrics", data=b"x", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        with exc:
            return int(exc.code)


def test_every_declared_metric_is_written_by_the_real_pipeline(
    kafka09_broker: Kafka09Broker, alertmanager: AlertmanagerService, tmp_path: Path
) -> None:
    assert DRIVEN_BY.keys() <= {m.name for m in METRICS}, "DRIVEN_BY names a metric that is not declared"
    broker = kafka09_broker
    data = build_demo(tmp_path / "demo", events=EVENTS, seed=0)
    events, labels, scores = new_topic(broker, "events"), new_topic(broker, "labels"), new_topic(broker, "scores")
    dead_letters = new_topic(broker, "dlq", {"max.message.bytes": str(DEAD_LETTER_MAX_BYTES)})
    stream = build_stream(data)
    produce(broker, labels, stream.labels)
    produce(broker, events, stream.events)
    records = len(stream.events)

    config = tmp_path / "monitor.yaml"
    settings = {
        "models": [
            {
                "name": MODEL,
                "path": str(data.model_path),
                "version": "1",
                # `reference --labels`: the run estimates accuracy without labels (harmonic_estimated_accuracy)
                "reference": str(
                    in_one_segment(data.labelled_reference_path, "accuracy_estimator", ("accuracy",), tmp_path)
                ),
                "feature_names": list(data.feature_names),
            },
            {
                "name": CANDIDATE,
                "path": str(build_candidate(tmp_path / "candidate.onnx")),
                "feature_names": list(data.feature_names),
                "compare_with": MODEL,
            },
            {
                "name": REGRESSOR,
                "path": str(build_regressor(data, tmp_path / "regressor.onnx")),
                "reference": str(data.reference_path),
            },
            {
                "name": ERROR_MODEL,
                "path": str(tmp_path / "regressor.onnx"),
                "reference": str(labelled_regressor_reference(data, tmp_path / "regressor.onnx", tmp_path)),
            },
        ],
        "kafka": {
            "labels_topic": labels,
            "scores_topic": scores,
            "dead_letter_topic": dead_letters,
            "producer_delivery_timeout_ms": 1000,  # the refused scores fail (and count) after a second
        },
        "sampler": {"events_per_second": 0},
        "segments": {"max_versions": 2},
        "drift": {"window": 300, "every": 50},
        # micro-batches no larger than the verdict's cadence: a verdict is evaluated once per batch, so on a loaded
        # machine (fuller batches) a short input-shift phase could otherwise be judged only once and never hold for
        # alerts.for_seconds before the harmful phase replaces it
        "batch": {"max_events": 50},
        "alerts": {
            "alertmanager_url": alertmanager.url,
            "webhook_url": f"http://127.0.0.1:{free_port()}/nobody-listens",
            "for_seconds": 1.0,
            "resolve_after_seconds": 600.0,
        },
        # two regions at most: the drift phases open more, so the full index evicts (harmonic_regions_evicted_total)
        "probes": {"interval_seconds": 1.0, "budget_share": 1.0, "max_regions": 2},
        "max_event_bytes": MAX_EVENT_BYTES,
    }
    config.write_text(yaml.safe_dump(settings))
    # the labels topic as if re-created under a kept state dir: the saved position and last commit lie past its end;
    # the broker's offsets must win (every label read: harmonic_labels_* below), seen and counted
    (tmp_path / "state").mkdir()
    gone = [[labels, 0, 10_000]]
    saved = {"version": STATE_VERSION, "counters": [], "models": {}, "positions": gone, "committed": gone}
    (tmp_path / "state" / STATE_FILE).write_text(json.dumps(saved))
    sidecar = sidecar_in(tmp_path, broker, topic=events, group_id=group_name(), config=config)
    with sidecar:
        sidecar.wait_ready()
        sidecar.wait_for_metrics(
            lambda s: (
                s.total(tel.EVENTS_CONSUMED_TOTAL.name) >= records
                and s.total(tel.ALERTS_FIRED_TOTAL.name, alertname=HARMFUL_ALERT) > 0
                and s.total(tel.ALERTS_FIRED_TOTAL.name, alertname=INPUT_ALERT) > 0
            ),
            f"{records} records consumed, {INPUT_ALERT} and {HARMFUL_ALERT} fired",
            DRAIN_TIMEOUT_SECONDS,
        )
        # the alerts went out of the process: the real Alertmanager holds both drift alerts
        held = alertmanager.wait_for_alerts(
            lambda alerts: {HARMFUL_ALERT, INPUT_ALERT} <= {a["labels"]["alertname"] for a in alerts},
            ALERT_TIMEOUT_SECONDS,
            model=MODEL,
        )
        assert all(a["status"]["state"] == "active" for a in held)
        # what a pager shows: each alert says which detectors fired, each with its own statistic, threshold, window
        # value and reference value; the input alert names the inputs that moved by the model's feature names
        by_name = {a["labels"]["alertname"]: a["annotations"] for a in held}
        for name in (HARMFUL_ALERT, INPUT_ALERT):
            notes = by_name[name]
            assert len(notes["summary"]) < 200 and notes["summary"].startswith(f"{name} {MODEL}/"), notes
            assert "fired" not in notes and " window " in notes["description"], json.dumps(notes, indent=1)
        # its summary says what changed in plain words and where, the detectors' names and numbers left to the above
        harmful_summary = by_name[HARMFUL_ALERT]["summary"]
        assert "CUSUM" not in harmful_summary and "_cusum" not in harmful_summary, harmful_summary
        assert f"inputs moved: {by_name[HARMFUL_ALERT]['top_features'].split(',')[0]}" in harmful_summary
        harmful_clauses = by_name[HARMFUL_ALERT]["description"].split("; ")
        harmful_detectors = {c.split(" ", 1)[0] for c in harmful_clauses}
        assert harmful_detectors & {d.name for d in DETECTORS if d.role != "input"}, by_name[HARMFUL_ALERT]
        assert any(" > " in c for c in harmful_clauses), by_name[HARMFUL_ALERT]  # a statistic over its threshold
        moved = [f for f in by_name[INPUT_ALERT]["top_features"].split(",") if f]
        assert moved and set(moved) <= set(data.feature_names), by_name[INPUT_ALERT]
        assert all(f in by_name[INPUT_ALERT]["description"] for f in moved), by_name[INPUT_ALERT]
        # the null feature is counted against its input, by the model's name for it
        first = data.feature_names[0]
        assert sidecar.scrape().total(tel.INPUT_INVALID_TOTAL.name, model=MODEL, feature=first, problem="missing") == 1

        # accuracy without labels: every method and window of the classifier has a finite estimate in [lower, upper]
        scrape = sidecar.scrape()
        estimates = {
            (lab["window"], lab["method"]): v
            for lab, v in scrape.samples.get(tel.ESTIMATED_ACCURACY.name, [])
            if lab["model"] == MODEL
        }
        assert {m for _, m in estimates} == set(METHODS) and {w for w, _ in estimates} >= {"60s", "last_2000"}, (
            estimates
        )
        bounds = {
            name: {
                (lab["window"], lab["method"]): v for lab, v in scrape.samples.get(name, []) if lab["model"] == MODEL
            }
            for name in (tel.ESTIMATED_ACCURACY_LOWER.name, tel.ESTIMATED_ACCURACY_UPPER.name)
        }
        for key, value in estimates.items():
            lower, upper = (
                bounds[tel.ESTIMATED_ACCURACY_LOWER.name][key],
                bounds[tel.ESTIMATED_ACCURACY_UPPER.name][key],
            )
            assert all(math.isfinite(v) for v in (lower, value, upper)) and 0 <= lower <= value <= upper <= 1, key
        assert 0.9 < scrape.total(tel.REFERENCE_ACCURACY.name, model=MODEL) <= 1.0

        # faults last, so that the stream above was scored at full speed: the scores topic now refuses acks=all
        # writes (one in-sync replica of the two it asks for), and the endpoint gets a request it refuses
        broker.alter_topic_config(scores, {"min.insync.replicas": "2"})
        wait_until_refused(broker, scores)
        produce(broker, events, tail(stream, TAIL_EVENTS))
        assert post_metrics(sidecar) >= 400

        missing: dict[str, str] = {}

        def all_written(s: Scrape) -> bool:
            missing.clear()
            missing.update(unwritten(s))
            return not missing

        try:
            sidecar.wait_for_metrics(all_written, "a written sample of every declared metric", WRITTEN_TIMEOUT_SECONDS)
        except AssertionError as exc:
            lines = "\n".join(f"  {name}: {what}" for name, what in missing.items())
            # the list first and again after the sidecar's log tail: a truncated CI page still shows it
            raise AssertionError(
                f"declared metrics with no written sample:\n{lines}\n{exc}\n--- still unwritten ---\n{lines}"
            ) from None
