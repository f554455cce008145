"""End to end: ``harmonic-monitor run`` as a real process against real brokers (Kafka 0.9 and Tansu).

Each test produces inference events to a fresh topic, starts the sidecar (``sidecar.Sidecar``), and checks
what an operator would see: the ``/metrics`` counters and histograms, ``/readyz``, the dead-letter and scores
topics, the consumer group's committed offsets and ``state.json``. Together they pin the delivery contract:
every record counted once per delivery, every invalid one counted by reason and dead-lettered, every valid one
scored at least once across a crash (SIGKILL) and a restart, a clean SIGTERM exit with offsets at the end of
the log, and replicas of one group splitting the partitions without losing or double-counting events.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from monitor import telemetry as tel
from monitor.config import KafkaSettings, load_settings
from monitor.errors import SourceError
from monitor.runtime.models import load_model_runtime
from monitor.runtime.pipeline import Pipeline
from monitor.sampler.keep_all import KeepAllSampler
from monitor.source.kafka import KafkaSource
from monitor.source.kafka_config import ConsumerConfig
from monitor.source.validate import INVALID_REASONS
from tests.integration.brokers import CONSUMER_SESSION_TIMEOUT_MS, Broker
from tests.integration.model_fixtures import ClassifierFiles
from tests.integration.sidecar import Scrape, Sidecar, partitions_of, sidecar_in

pytestmark = pytest.mark.integration

MODEL = "credit"
PARTITIONS = 4
SEGMENTS = ("eu", "us", "apac")
#: Bound on draining a few hundred events (the first Tansu join alone takes 3 s).
DRAIN_TIMEOUT_SECONDS = 60.0
#: Bound on reading an output topic back, and how long to read on once it looks complete (to see a surplus).
READ_TIMEOUT_SECONDS = 30.0
READ_SETTLE_SECONDS = 1.0
#: ``max_event_bytes`` for the tests, so that a "too large" event stays small.
MAX_EVENT_BYTES = 4096
#: What the sidecar writes with every dead letter.
REASON_HEADER = "harmonic-invalid-reason"

Message = tuple[bytes, bytes]  # (key, value)


# ---------------------------------------------------------------------------------------------- fixtures


def new_topic(broker: Broker, stem: str, partitions: int = PARTITIONS) -> str:
    name = f"{stem}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name


def group_name() -> str:
    return f"hm-run-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class Batch:
    """Messages to produce, with what the sidecar should make of them."""

    messages: list[Message]
    valid_ids: list[str]
    labelled: int  # valid events carrying a live prediction label
    disagreeing: int  # ... whose label differs from the ONNX copy's
    invalid_reasons: Counter[str]  # expected harmonic_events_invalid_total by reason


def valid_events(files: ClassifierFiles, count: int, *, prefix: str, start: int = 0, as_map: bool = False) -> Batch:
    """``count`` valid events: several segments, both timestamp forms, a live label on every third.

    Every 21st event (labelled, and j divisible by 7) carries the wrong label: a shadow disagreement. With
    ``as_map`` every 4th event sends its features as a name→value map (needs ``feature_names`` in the config).
    """
    now_ms = int(time.time() * 1000)
    messages: list[Message] = []
    ids: list[str] = []
    labelled = disagreeing = 0
    for j in range(count):
        i = start + j
        row = files.events[i % len(files.events)]
        event_id = f"{prefix}-{i}"
        doc: dict[str, object] = {"id": event_id, "features": [float(v) for v in row]}
        if j % 2 == 0:
            doc["model"] = MODEL  # the rest rely on the default model
        doc["ts"] = now_ms - 1000 if j % 2 else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if j % 5:
            doc["segment"] = SEGMENTS[j % len(SEGMENTS)]
        if as_map and j % 4 == 1:
            doc["features"] = dict(zip(files.feature_names, (float(v) for v in row), strict=True))
        if j % 3 == 0:
            label = int(files.onnx_labels[i % len(files.events)])
            labelled += 1
            if j % 7 == 0:
                label, disagreeing = 1 - label, disagreeing + 1
            doc["prediction"] = {"label": label} if j % 2 else label  # an object, or the bare class a server writes
        messages.append((event_id.encode(), json.dumps(doc).encode()))
        ids.append(event_id)
    return Batch(messages, ids, labelled, disagreeing, Counter())


#: marks a field that :func:`invalid_events` leaves out of the document
_DROP = object()


def invalid_events(files: ClassifierFiles) -> Batch:
    """At least one event of every invalid kind (``INVALID_REASONS``), tagged with the reason the decoder must give.

    All are plain records without Kafka headers, so that Kafka 0.9 (no headers before 0.11) can carry them.
    """
    row = [float(v) for v in files.events[0]]
    names = files.feature_names
    iso = "2026-11-20T10:00:00Z"

    def doc(**fields: object) -> bytes:
        base: dict[str, object] = {"id": f"bad-{uuid.uuid4().hex[:6]}", "model": MODEL, "features": row, "ts": iso}
        base.update(fields)
        return json.dumps({k: v for k, v in base.items() if v is not _DROP}).encode()

    cases: list[tuple[str, bytes]] = [
        ("not_json", b"{this is not json"),
        ("not_json", b"\xff\xfe\x00 binary garbage"),
        ("not_json", b""),
        ("not_object", b"[1, 2, 3]"),
        ("not_object", b'"a string"'),
        ("missing_field", doc(features=_DROP)),
        ("missing_field", doc(features=dict(zip(names[:-1], row[:-1], strict=True)))),
        ("bad_type", doc(features="0.1,0.2")),
        ("bad_type", doc(features=[*row[:-1], "x"])),
        ("bad_type", doc(id=[1, 2])),
        ("bad_type", doc(segment={"region": "eu"})),
        ("wrong_width", doc(features=row[:-1])),
        ("wrong_width", doc(features=[*row, 1.0])),
        # Python's json emits the non-standard NaN/Infinity literals and json.loads accepts them: the decoder
        # must still refuse the value, not the document
        ("not_finite", doc(features=[float("nan"), *row[1:]])),
        ("not_finite", doc(features=[*row[:-1], float("inf")])),
        ("not_finite", doc(features=[*row[:-1], 1e400])),
        ("not_finite", doc(features=[float("inf"), float("-inf"), *row[2:]])),  # once raised out of the decoder
        ("out_of_range", doc(features=[*row[:-1], 1e300])),  # finite, but inf in the model's float32
        ("too_large", doc(padding="x" * (MAX_EVENT_BYTES + 100))),
        ("unknown_model", doc(model="no-such-model")),
        ("unknown_feature", doc(features={**dict(zip(names, row, strict=True)), "f_extra": 1.0})),
        ("bad_timestamp", doc(ts="yesterday at noon")),
        ("bad_timestamp", doc(ts=1_795_168_800)),  # epoch seconds, not milliseconds
        ("bad_timestamp", doc(ts=True)),
        ("bad_prediction", doc(prediction={"label": "cat"})),
        ("bad_prediction", doc(prediction=[0.2, "0.8"])),
        ("bad_prediction", doc(prediction={"probabilities": [0.2, 1.8]})),
        # a structured CloudEvent (no Kafka headers needed, so Kafka 0.9 can carry it) of an unknown type
        (
            "unsupported_format",
            json.dumps({"specversion": "1.0", "type": "com.example.other", "id": "ce-1", "data": {}}).encode(),
        ),
    ]
    messages = [(f"bad-{k}".encode(), value) for k, (_, value) in enumerate(cases)]
    return Batch(messages, [], 0, 0, Counter(reason for reason, _ in cases))


def interleave(a: Sequence[Message], b: Sequence[Message], seed: int = 0) -> list[Message]:
    """``a`` and ``b`` shuffled together (seeded), each keeping its own order."""
    rng = np.random.default_rng(seed)
    slots = rng.permutation(np.r_[np.zeros(len(a), dtype=bool), np.ones(len(b), dtype=bool)])
    ia, ib = iter(a), iter(b)
    return [next(ib) if from_b else next(ia) for from_b in slots]


# ---------------------------------------------------------------------------------------------- Kafka I/O


def produce(broker: Broker, topic: str, messages: Sequence[Message]) -> dict[int, int]:
    """Send ``messages`` (acks=all) and wait for every ack; return end offsets (last offset + 1) per partition."""
    ends: dict[int, int] = {}
    producer = KafkaProducer(**broker.kafka_kwargs(), acks="all", linger_ms=5, max_request_size=1 << 20)
    try:
        futures = [producer.send(topic, key=key, value=value) for key, value in messages]
        for future in futures:
            meta = future.get(timeout=30)
            ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
    finally:
        producer.close(timeout=10)
    return ends


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]


def read_topic(
    broker: Broker, topic: str, done: Callable[[list[Record]], bool], what: str, partitions: int = PARTITIONS
) -> list[Record]:
    """Read ``topic`` from the beginning (no group) until ``done(records)``; fail after the deadline.

    Reads on for a moment after that, so that a surplus record would be seen too. (Kafka 0.9 has no
    ListOffsets v1, so "the end of the log" is not asked for; the caller says what it expects.)
    """
    consumer = KafkaConsumer(**broker.kafka_kwargs(), group_id=None, enable_auto_commit=False)
    records: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + READ_TIMEOUT_SECONDS
        settle_until: float | None = None
        while time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=250).values():
                records.extend(Record(r.key, r.value, dict(r.headers or ())) for r in batch)
            if settle_until is None and done(records):
                settle_until = time.monotonic() + READ_SETTLE_SECONDS
            if settle_until is not None and time.monotonic() >= settle_until:
                return records
    finally:
        consumer.close()
    raise AssertionError(f"{what}: not complete after {READ_TIMEOUT_SECONDS:.0f} s; read {len(records)} records")


def committed_offsets(broker: Broker, topic: str, group_id: str, partitions: int = PARTITIONS) -> dict[int, int | None]:
    """The group's committed offset per partition (without joining the group)."""
    consumer = KafkaConsumer(**broker.consumer_kwargs(group_id))
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()


def score_ids(records: Sequence[Record]) -> Counter[str]:
    return Counter(str(json.loads(r.value)["id"]) for r in records)


# ---------------------------------------------------------------------------------------------- metrics


def nonzero(values: dict[str, float]) -> dict[str, float]:
    """Drop the series pre-registered at 0 (every invalid reason is exported from the start)."""
    return {k: v for k, v in values.items() if v}


def consumed(s: Scrape) -> float:
    return s.total(tel.EVENTS_CONSUMED_TOTAL.name)


def run_env(events_per_second: float, **extra: str) -> dict[str, str]:
    return {
        "HARMONIC_SAMPLER__EVENTS_PER_SECOND": str(events_per_second),
        "HARMONIC_MAX_EVENT_BYTES": str(MAX_EVENT_BYTES),
        **extra,
    }


def counters_in_state(state_dir: Path, name: str) -> float:
    """Sum of counter ``name`` in ``state_dir/state.json`` (the file must exist)."""
    path = state_dir / "state.json"
    assert path.is_file(), f"{path} was not written"
    data = json.loads(path.read_text())
    return sum(float(row["value"]) for row in data.get("counters", []) if row["name"] == name)


def merge_ends(*ends: dict[int, int]) -> dict[int, int]:
    out: dict[int, int] = {}
    for e in ends:
        for p, off in e.items():
            out[p] = max(out.get(p, 0), off)
    return out


# ---------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("events_per_second", [0.0, 50.0], ids=["score-all", "budget-50"])
def test_run_counts_scores_and_dead_letters_every_event(
    kafka_broker: Broker, topic: str, classifier: ClassifierFiles, tmp_path: Path, events_per_second: float
) -> None:
    dead_letters = new_topic(kafka_broker, "dlq", partitions=1)
    good = valid_events(classifier, 400, prefix="ev", as_map=True)
    bad = invalid_events(classifier)
    n, m = len(good.valid_ids), len(bad.messages)
    assert set(bad.invalid_reasons) == set(INVALID_REASONS), "a new invalid reason needs a case here"
    produce(kafka_broker, topic, interleave(good.messages, bad.messages))
    config = tmp_path / "monitor.yaml"
    model = {
        "name": MODEL,
        "path": str(classifier.onnx_path),
        "reference": str(classifier.reference_path),
        "feature_names": list(classifier.feature_names),
        "version": "3",
    }
    config.write_text(yaml.safe_dump({"models": [model]}))
    sidecar = sidecar_in(
        tmp_path,
        kafka_broker,
        topic=topic,
        group_id=group_name(),
        config=config,
        dead_letter_topic=dead_letters,
        env=run_env(events_per_second),
    )
    with sidecar:
        sidecar.wait_ready()
        s = sidecar.wait_for_metrics(
            lambda s: (
                consumed(s) >= n + m
                and s.total(tel.EVENTS_SCORED_TOTAL.name) == s.total(tel.EVENTS_SAMPLED_TOTAL.name)
                # the ratio gauge is written after the poll's scoring: a render between the two has no ratio yet
                and s.value(tel.EVENTS_SAMPLED_RATIO.name, model=MODEL) is not None
            ),
            f"{n + m} events consumed, every sampled one scored and the sampled ratio exported",
            DRAIN_TIMEOUT_SECONDS,
            settle_seconds=0.5,
        )
        code, _ = sidecar.terminate()
    log = sidecar.log_tail()
    assert code == 0, f"SIGTERM exit status {code}\n{log}"

    # every record counted once, under the watched model it named (valid ones, and invalid ones the decoder could
    # attribute), else under "unknown"; each invalid one counted under the same model
    consumed_by = nonzero(s.by_label(tel.EVENTS_CONSUMED_TOTAL.name, "model"))
    invalid_by = s.by_label(tel.EVENTS_INVALID_TOTAL.name, "model")
    assert set(consumed_by) <= {MODEL, "unknown"} and sum(consumed_by.values()) == n + m
    assert consumed_by.get(MODEL, 0.0) - n == invalid_by.get(MODEL, 0.0)
    assert consumed_by.get("unknown", 0.0) == invalid_by.get("unknown", 0.0) > 0
    assert nonzero(s.by_label(tel.EVENTS_INVALID_TOTAL.name, "reason")) == bad.invalid_reasons
    assert s.total(tel.EVENTS_INVALID_TOTAL.name) == m
    assert s.total(tel.EVENTS_DEAD_LETTERED_TOTAL.name) == m

    # sampling: scored == sampled <= valid, and the ratio gauge agrees with the counters
    sampled = s.total(tel.EVENTS_SAMPLED_TOTAL.name, model=MODEL)
    scored = s.total(tel.EVENTS_SCORED_TOTAL.name, model=MODEL)
    ratio = s.value(tel.EVENTS_SAMPLED_RATIO.name, model=MODEL)
    assert scored == sampled
    assert ratio is not None and ratio == pytest.approx(sampled / n, abs=0.02)
    if events_per_second == 0:
        assert scored == n
        assert ratio == 1.0
    else:
        # 400 events arrive in one burst well under a second long; the sampler accepts with probability
        # budget / offered rate, so it keeps a handful of them plus every forced shadow disagreement
        assert good.disagreeing <= scored < n, f"budget 50/s scored {scored} of {n}"
    assert set(s.by_label(tel.EVENTS_SCORED_TOTAL.name, "model_version")) == {"3"}
    segments = set(s.by_label(tel.EVENTS_SCORED_TOTAL.name, "segment"))
    assert segments <= {*SEGMENTS, "other"}
    if events_per_second == 0:
        assert segments == {*SEGMENTS, "other"}

    # one histogram observation per scored event (γ and flicker are finite for finite inputs)
    for histogram in (tel.GAMMA.name, tel.FLICKER.name, tel.P_ADJ.name):
        assert s.total(f"{histogram}_count", model=MODEL) == scored, histogram
    assert s.total("harmonic_gamma_sum", model=MODEL) >= 0.0

    # shadow agreement runs on every valid labelled event, sampled or not
    assert s.total(tel.SHADOW_COMPARED_TOTAL.name, model=MODEL) == good.labelled
    assert s.total(tel.SHADOW_DISAGREEMENTS_TOTAL.name, model=MODEL) == good.disagreeing

    # the dead-letter topic holds exactly the invalid records, unchanged, with their reason
    letters = read_topic(kafka_broker, dead_letters, lambda r: len(r) >= m, "dead letters", partitions=1)
    assert len(letters) == m
    assert sorted(r.value for r in letters) == sorted(value for _, value in bad.messages)
    # the reason is the record key on every broker, and also a header where the broker stores headers (>= 0.11)
    assert Counter((r.key or b"").decode() for r in letters) == bad.invalid_reasons
    if kafka_broker.api_version is None or kafka_broker.api_version >= (0, 11):
        assert all(r.headers.get(REASON_HEADER) == r.key for r in letters)


class _UnreachableSink:
    """A sink whose broker is gone: every send raises, as ``KafkaProducer.send`` does after ``max_block_ms``."""

    def send(
        self, topic: str, value: bytes, headers: Sequence[tuple[str, bytes]] = (), key: bytes | None = None
    ) -> None:
        raise SourceError(f"cannot reach topic {topic!r}")

    def flush(self, timeout_seconds: float) -> bool:
        return True

    def close(self) -> None:
        return None


def test_pipeline_that_fails_mid_poll_commits_no_record_it_did_not_apply(
    kafka_broker: Broker, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    # One poll brings [valid, invalid]; dead-lettering the invalid one fails and the loop stops. The valid event
    # was never scored, so its offset must not be committed on the way out (it would never be re-delivered).
    one = new_topic(kafka_broker, "crash", partitions=1)
    good, bad = valid_events(classifier, 1, prefix="unapplied"), invalid_events(classifier)
    produce(kafka_broker, one, [good.messages[0], bad.messages[0]])
    group = group_name()
    settings = load_settings(
        None,
        {
            "models": [{"name": MODEL, "path": str(classifier.onnx_path), "reference": str(classifier.reference_path)}],
            "kafka": {"topic": one, "group_id": group, "dead_letter_topic": "unreachable"},
            "state_dir": str(tmp_path / "state"),
        },
    )
    consumer = ConsumerConfig.from_settings(
        KafkaSettings(bootstrap_servers=kafka_broker.bootstrap, topic=one, group_id=group)
    )
    source = KafkaSource(
        replace(consumer, api_version=kafka_broker.api_version, session_timeout_ms=CONSUMER_SESSION_TIMEOUT_MS)
    )
    try:
        pipeline = Pipeline(
            settings, source, [load_model_runtime(settings.models[0])], KeepAllSampler(), sink=_UnreachableSink()
        )
        with pytest.raises(SourceError, match="cannot reach"):
            pipeline.run(threading.Event())
    finally:
        source.close()
    assert pipeline.state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 2
    assert pipeline.state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 0
    assert committed_offsets(kafka_broker, one, group, partitions=1) == {0: None}


def produce_slowly(broker: Broker, topic: str, messages: Sequence[Message], per_second: float) -> dict[int, int]:
    """Like :func:`produce`, in chunks of 10 paced at ``per_second``: a stream that is still running."""
    ends: dict[int, int] = {}
    producer = KafkaProducer(**broker.kafka_kwargs(), acks="all", linger_ms=5)
    try:
        for start in range(0, len(messages), 10):
            futures = [producer.send(topic, key=k, value=v) for k, v in messages[start : start + 10]]
            for future in futures:
                meta = future.get(timeout=30)
                ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
            time.sleep(10 / per_second)
    finally:
        producer.close(timeout=10)
    return ends


def consumer_children(parent: int, module: bytes = b"monitor.source.kafka_process") -> list[int]:
    """Pids of live ``module`` processes (the consumer process by default) whose parent is ``parent``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        state = stat.rsplit(")", 1)[1].split()[0]
        if module in cmdline and ppid == parent and state != "Z":
            found.append(int(entry.name))
    return found


def processes_alive(pids: Sequence[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


@pytest.mark.parametrize("consumer_process", ["true", "false"], ids=["consumer-process", "in-process"])
def test_run_survives_sigkill_and_sigterm_without_losing_events(
    kafka_broker: Broker, topic: str, classifier: ClassifierFiles, tmp_path: Path, consumer_process: str
) -> None:
    scores = new_topic(kafka_broker, "scores")
    group, state = group_name(), tmp_path / "state"

    def sidecar(**env: str) -> Sidecar:
        return Sidecar(
            kafka_broker,
            topic=topic,
            group_id=group,
            state_dir=state,
            log_path=tmp_path / "sidecar.log",
            model=classifier.onnx_path,
            model_name=MODEL,
            reference=classifier.reference_path,
            scores_topic=scores,
            env=run_env(0, HARMONIC_KAFKA__CONSUMER_PROCESS=consumer_process, **env),
        )

    before = valid_events(classifier, 200, prefix="before")
    during = valid_events(classifier, 300, prefix="during", start=200)
    after = valid_events(classifier, 100, prefix="after", start=500)
    expected = {*before.valid_ids, *during.valid_ids, *after.valid_ids}

    # 1. crash mid-stream: the first run scores and commits the first events, then is SIGKILLed while a producer
    # is still sending and a partial batch is in hand (2 s max wait): consumed, not scored, not committed
    with sidecar(HARMONIC_BATCH__MAX_WAIT_MS="2000") as first, ThreadPoolExecutor(1) as pool:
        first.wait_ready()
        ends = produce(kafka_broker, topic, before.messages)
        first.wait_until(
            lambda: committed_offsets(kafka_broker, topic, group) == ends,
            "the first events to be scored and committed",
            DRAIN_TIMEOUT_SECONDS,
        )
        streaming = pool.submit(produce_slowly, kafka_broker, topic, during.messages, per_second=50.0)
        at_kill = first.wait_for_metrics(
            lambda s: consumed(s) >= len(before.messages) + 50, "the stream to be under way", DRAIN_TIMEOUT_SECONDS
        )
        children = consumer_children(first.pid)
        assert len(children) == (1 if consumer_process == "true" else 0)
        servers = consumer_children(first.pid, b"monitor.exporters.http_process")
        assert len(servers) == 1, "the HTTP endpoint runs in a process of its own"
        children += servers
        assert first.kill() == -signal.SIGKILL
        assert not streaming.done(), "the stream ended before the crash; the kill was not mid-stream"
        # the consumer process dies with the sidecar: no orphan keeps the group's partitions
        deadline = time.monotonic() + 10.0
        while processes_alive(children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not processes_alive(children), f"child processes {children} outlived the killed sidecar"
        # the crash lost work in hand: records read beyond the last commit, which a restart must re-deliver
        committed = sum(offset or 0 for offset in committed_offsets(kafka_broker, topic, group).values())
        assert consumed(at_kill) - committed > 0, "the kill found nothing in flight"
        ends = merge_ends(ends, streaming.result())
    ends = merge_ends(ends, produce(kafka_broker, topic, after.messages))  # while nothing consumes

    # 2. restart with the same group and state dir: every event is scored, the committed ones exactly once
    with sidecar() as second:
        second.wait_ready()
        records = read_topic(
            kafka_broker, scores, lambda r: expected <= set(score_ids(r)), "every event id in the scores topic"
        )
        ids = score_ids(records)
        assert set(ids) == expected, f"unexpected ids: {sorted(set(ids) - expected)[:5]}"
        # at-least-once: only the crashed run's in-flight events may repeat; committed and later ones come once
        assert all(ids[i] == 1 for i in [*before.valid_ids, *after.valid_ids])
        settled = second.wait_for_metrics(
            lambda s: committed_offsets(kafka_broker, topic, group) == ends,
            "the group's committed offsets to reach the end of every partition",
            DRAIN_TIMEOUT_SECONDS,
            settle_seconds=0.5,
        )
        total = consumed(settled)
        code, seconds = second.terminate()
    # 0, not the watchdog's 3: the graceful path finished well inside shutdown_timeout_seconds (20 s)
    assert code == 0, f"SIGTERM exit status {code}\n{second.log_tail()}"
    assert seconds < 20.0

    # 3. SIGTERM committed the end of the log and persisted the counters it exported
    assert committed_offsets(kafka_broker, topic, group) == ends
    assert counters_in_state(state, tel.EVENTS_CONSUMED_TOTAL.name) == total
    assert counters_in_state(state, tel.EVENTS_SCORED_TOTAL.name) == settled.total(tel.EVENTS_SCORED_TOTAL.name)

    # 4. a restart restores them (nothing is re-delivered: the group is at the end of the log)
    with sidecar() as third:
        third.wait_ready()
        restored = third.wait_for_metrics(lambda s: True, "the restored counters", settle_seconds=1.0)
        assert consumed(restored) == total
        assert restored.total(tel.EVENTS_SCORED_TOTAL.name) == settled.total(tel.EVENTS_SCORED_TOTAL.name)
        code, _ = third.terminate()
    assert code == 0, third.log_tail()


def test_run_replicas_split_partitions_and_together_score_every_event(
    kafka_broker: Broker, topic: str, classifier: ClassifierFiles, tmp_path: Path
) -> None:
    scores = new_topic(kafka_broker, "scores")
    group = group_name()

    def replica(name: str) -> Sidecar:
        return Sidecar(
            kafka_broker,
            topic=topic,
            group_id=group,
            state_dir=tmp_path / f"state-{name}",  # replicas are separate pods: separate state
            log_path=tmp_path / f"sidecar-{name}.log",
            model=classifier.onnx_path,
            model_name=MODEL,
            reference=classifier.reference_path,
            scores_topic=scores,
            env=run_env(0),
        )

    everything = set(range(PARTITIONS))
    early = valid_events(classifier, 200, prefix="early")
    late = valid_events(classifier, 400, prefix="late", start=200)
    with replica("a") as a:
        assert partitions_of(a.wait_ready()) == everything
        early_ends = produce(kafka_broker, topic, early.messages)
        a.wait_until(
            lambda: committed_offsets(kafka_broker, topic, group) == early_ends,
            "the first replica to consume and commit the first events",
            DRAIN_TIMEOUT_SECONDS,
        )
        # scale out: the second replica's join makes the first one give up partitions (a rebalance in which
        # it flushes and commits from the consumer's rebalance callback)
        with replica("b") as b:
            b.wait_ready()
            split: list[set[int]] = []

            def settled() -> bool:
                split[:] = [partitions_of(a.readyz()[1]), partitions_of(b.readyz()[1])]
                return all(split) and not split[0] & split[1] and split[0] | split[1] == everything

            a.wait_until(settled, "the two replicas to split the 4 partitions between them")
            # produce only now: no rebalance during this stream, so every event is delivered exactly once
            ends = merge_ends(early_ends, produce(kafka_broker, topic, late.messages))
            expected = {*early.valid_ids, *late.valid_ids}
            records = read_topic(
                kafka_broker, scores, lambda r: expected <= set(score_ids(r)), "every id in the scores topic"
            )
            a.wait_until(
                lambda: committed_offsets(kafka_broker, topic, group) == ends,
                "the replicas to commit the end of every partition",
                DRAIN_TIMEOUT_SECONDS,
            )
            sa = a.wait_for_metrics(lambda s: True, "replica a's counters", settle_seconds=0.5)
            sb = b.wait_for_metrics(lambda s: True, "replica b's counters", settle_seconds=0.5)
            assert [partitions_of(a.readyz()[1]), partitions_of(b.readyz()[1])] == split, "a second rebalance"
            code_b, _ = b.terminate()
        # the survivor takes the partitions back (another rebalance) and still exits cleanly
        a.wait_until(lambda: partitions_of(a.readyz()[1]) == everything, "replica a to own all partitions again")
        code_a, _ = a.terminate()
    assert (code_a, code_b) == (0, 0), f"{a.log_tail()}\n{b.log_tail()}"

    # each replica consumed exactly the records of its own partitions (a: all of the early ones too)
    late_ends = {p: ends.get(p, 0) - early_ends.get(p, 0) for p in everything}
    assert consumed(sa) == len(early.messages) + sum(late_ends[p] for p in split[0])
    assert consumed(sb) == sum(late_ends[p] for p in split[1]) > 0
    assert consumed(sa) + consumed(sb) == len(expected)
    assert sa.total(tel.EVENTS_SCORED_TOTAL.name) + sb.total(tel.EVENTS_SCORED_TOTAL.name) == len(expected)
    assert score_ids(records) == Counter(expected), "each event scored exactly once"
