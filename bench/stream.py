"""Streaming performance: decode+sample throughput against raw kafka-python, produce→/metrics latency, and RSS.

The subcommands, each printing markdown tables plus the command and the machine:

``throughput``
    Produces N plain JSON events (20 features, live ``prediction`` with label and probabilities, 4 segments) to a
    4-partition topic on a real broker (Kafka 0.9.0.1 and/or Tansu, from ``tests/integration/brokers.py``), then
    reads the whole topic again and again with fresh consumer groups, alternating the order of these variants
    repeat by repeat:

    - ``raw``: a plain ``KafkaConsumer`` (the same settings ``KafkaSource`` uses) touching every record's value;
    - ``raw-nocrc``: the same with ``check_crcs=False`` — what ``raw`` would be with a free CRC check (kafka-python
      checks v2 record batches, Tansu's format, with a pure-Python CRC-32C unless the ``crc32c`` package is there);
    - ``json``: the ``raw`` loop plus ``json.loads`` of every value — the floor for any stdlib-JSON decoder;
    - ``decode``: the same loop, each record through ``KServeJoiner.update`` (the pipeline's decoder entry);
    - ``decode+sample``: as ``decode``, then the poll's events through the sampler the service builds, in one
      ``sample_many`` call as the pipeline makes (``StratifiedSampler`` at the configured budget, default 200
      events/s: nearly every event is dropped);
    - ``source-proc``: ``ProcessKafkaSource`` (the kafka-python consumer in a child process, records shipped to
      this process in column batches) touching every record's value;
    - ``decode+sample-proc``: ``decode+sample`` over the records ``ProcessKafkaSource`` delivers — what the
      sidecar does by default with 2+ CPUs (``kafka.consumer_process``);
    - ``pipeline-noshadow``: the real ``Pipeline.step()`` over the source the service builds (``ProcessKafkaSource``
      with 2+ CPUs, else ``KafkaSource``) — RawRecord conversion, decode, counters, sampling, micro-batch scoring of
      what the sampler kept, windows/drift, commits — with the shadow check (one ONNX centre evaluation per poll
      batch for events carrying a live label) switched off;
    - ``pipeline``: the same, shadow check on (the production path);
    - ``pipeline-inproc``: ``pipeline`` over the in-process ``KafkaSource``;
    - ``pipeline-kafka-parse``: ``pipeline`` with kafka-python's own record parse (``kafka.lean_record_parse: false``),
      whatever ``--record-parse`` says: what the lean parse (``monitor/source/records.py``) is worth;
    - ``raw-librdkafka``: a plain confluent-kafka ``Consumer`` (librdkafka, the configuration ``RdKafkaSource``
      builds) in ``consume(max_poll_records)`` batches, touching every record's value;
    - ``pipeline-librdkafka``: ``pipeline`` over ``RdKafkaSource`` in this process (``kafka.client: librdkafka``,
      ``consumer_process: false``);
    - ``pipeline-librdkafka-proc``: ``pipeline`` over librdkafka in the consumer's child process
      (``ProcessKafkaSource`` with ``client="librdkafka"``: the default for librdkafka on 2+ CPUs);
    - ``pipeline-librdkafka-proc-noahead``: the same, the child decoding nothing (the pipeline's process decodes
      every poll as columns itself).

    - ``pipeline-default``: ``pipeline`` with the default sampler (no ``events_per_second`` cap: the CPU share,
      ingest first), the backlog-drain question: its rate over ``pipeline``'s at ``--budget 100`` (scoring nearly
      off) is printed per repeat;
    - ``pipeline-default-fixed``: the same with the ingest-first controller off (the CPU budget fixed at
      ``cpu_share`` of the CPUs, as before it).

    Rate = every record of the topic / time from the moment the consumer is subscribed, before it can fetch, to the
    last record processed (``flush`` included for the pipeline), the same rule for every variant: kafka-python (raw,
    ``KafkaSource``) fetches only inside ``poll``, so its clock starts after ``subscribe``; librdkafka fetches in
    its own threads from ``subscribe`` on, so its clock starts just before it (``RdKafkaSource`` subscribes when
    built: before it is built); a consumer child's clock starts when the child reports it has subscribed, before its
    poll loop (a librdkafka child may have sent its first group requests by then). The group join and the first
    fetch are thus inside every variant's time, and nothing is read before the clock starts; the seconds to the
    first record are printed per repeat, with the rate after the first poll (the join left out; a consumer child may
    have fetched up to 6 polls ahead by then), and so is each drain ratio. The model is loaded before the clock
    starts. Polls after the first record which return nothing, and the time they take, are printed per repeat: the
    topic holds every record before the first poll, so such a poll waited on the consumer's fetching
    (``--fetch-max-wait-ms`` sets ``kafka.fetch_max_wait_ms`` for every consumer). Ratios are taken per repeat (both
    sides timed in the same repeat) and the median is reported. CPU seconds (utime + stime from /proc, over the
    whole variant run including the group join) are reported for this process, the consumer child process where
    there is one, and the broker's processes, which share the machine's cores.

``latency``
    Runs the real sidecar (``python -m monitor run``) as a subprocess against a broker, produces events at a steady
    rate stamped with the send time, and scrapes ``/metrics`` every 50 ms. For each produced batch, produce→visible
    is the time from ``send()`` to the first scrape whose ``harmonic_events_consumed_total`` (resp.
    ``harmonic_events_scored_total``) covers it. The sidecar's own ``harmonic_event_lag_seconds`` histogram
    (event ts → scored) is reported as a cross-check, as bucket bounds.

``memory``
    An in-process ``Service`` (the same wiring as ``run``, metrics server on) over ``ReplaySource(loop=True)`` of
    a few thousand pre-encoded events without ``ts`` (so each event is stamped with the pipeline clock), sampling
    VmRSS from ``/proc/self/status`` every 100,000 events up to 1,000,000. The clock is simulated stream time,
    ``--offered-rate`` events per second (default 1,000/s against the 200/s budget: about a fifth is scored, the
    60 s and 300 s windows roll many times over, and probes fire every 300 s of it).

``cpu``
    CPU per event, no broker: the bench events in pre-fetched polls, decoded as columns by the "child" (timed with
    its pickling) or left to the pipeline, then ``Pipeline.step()`` over them (scoring nearly off, shadow check on).

``parse``
    kafka-python's record parse against the lean one (``monitor/source/records.py``) on the bench's events served
    as legacy messages (magic 0: Kafka 0.9; magic 1) and as v2 batches, CRCs checked: CPU µs per record, no broker.

``child``
    The consumer child's work alone against a real broker (the client's ``poll_columns``, ``--client``, the column
    decode, the pickling; no pipe, no parent): records/s and CPU per event per step, the most the child lets the
    pipeline read.

``memory-kafka``
    The real sidecar (``python -m monitor run``, its consumer child included, a dead-letter topic set) against a
    real broker while a producer thread sends ``--events`` values (a pool of pre-encoded events without ``ts``,
    every 100th one malformed: not JSON, wrong width, NaN, unknown model in turn), as fast as it can or at
    ``--rate``. Each time ``harmonic_events_consumed_total`` passes another 100,000 it records VmRSS/VmHWM of the
    sidecar and of its child processes (``/proc``) beside the scored, invalid and dead-lettered counters; then
    SIGTERM, and the exit code and how long the exit took.

Usage (the commands behind docs/BENCHMARKS.md; times on 2 cores)::

    .venv/bin/python bench/stream.py throughput --brokers kafka09 --events 200000 --repeats 3   # ~3 min
    .venv/bin/python bench/stream.py throughput --brokers tansu --events 50000 --repeats 3      # ~3 min
    .venv/bin/python bench/stream.py latency --brokers kafka09 tansu --seconds 60 --rate 200   # ~3 min
    .venv/bin/python bench/stream.py memory --events 1000000                                   # ~2.5 min
    .venv/bin/python bench/stream.py memory-kafka --brokers kafka09 tansu --events 1000000     # ~1 min
    .venv/bin/python bench/stream.py memory-kafka --brokers kafka09 --events 1000000 --rate 2500  # ~7 min
    .venv/bin/python bench/stream.py throughput --brokers kafka09 --events 100000 --profile pipeline  # cProfile
    .venv/bin/python bench/stream.py cpu --events 100000 --repeats 2                            # ~1 min
    .venv/bin/python bench/stream.py child --brokers tansu kafka09 --events 100000               # ~1 min
    .venv/bin/python bench/stream.py parse                                                      # ~10 s
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import io
import json
import os
import pickle
import pstats
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # for tests.integration.brokers

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "open_text is deprecated", DeprecationWarning)
    from kafka import KafkaConsumer, KafkaProducer

from machine import machine  # noqa: E402  (bench/machine.py: the script's folder is on sys.path)
from skl2onnx import to_onnx  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402
from sklearn.ensemble import GradientBoostingClassifier  # noqa: E402
from verdict import Verdict, verdict  # noqa: E402  (bench/verdict.py)

from monitor.allocator import freeze_startup_objects, tune_gc, tune_malloc  # noqa: E402
from monitor.config import KafkaSettings, Settings, load_settings  # noqa: E402
from monitor.events import InferenceEvent  # noqa: E402
from monitor.exporters.prometheus import MetricsState  # noqa: E402
from monitor.runtime.models import ModelRuntime, load_model_runtime  # noqa: E402
from monitor.runtime.pipeline import Pipeline  # noqa: E402
from monitor.runtime.service import Service, build_sampler  # noqa: E402
from monitor.source.base import Polled, RawRecord, Source  # noqa: E402
from monitor.source.columns import decode_columns  # noqa: E402
from monitor.source.decode import EventDecoder  # noqa: E402
from monitor.source.decode_ahead import DecodeAhead  # noqa: E402
from monitor.source.kafka import KafkaSource, records_of  # noqa: E402
from monitor.source.kafka_config import ConsumerConfig  # noqa: E402
from monitor.source.kafka_process import ProcessKafkaSource  # noqa: E402
from monitor.source.kserve_join import KServeJoiner  # noqa: E402
from monitor.source.rdkafka import RdKafkaSource, consumer_conf  # noqa: E402
from monitor.source.records import refusal  # noqa: E402
from monitor.source.replay import ReplaySource  # noqa: E402
from monitor.source.validate import ModelSchema  # noqa: E402
from tests.integration.brokers import Broker, Kafka09Broker, TansuBroker  # noqa: E402

MODEL = "credit"
N_FEATURES = 20
PARTITIONS = 4
SEGMENTS = ("eu", "us", "apac", "latam")
VARIANTS = (
    "raw",
    "raw-nocrc",
    "json",
    "decode",
    "decode+sample",
    "source-proc",
    "decode+sample-proc",
    "pipeline-noshadow",
    "pipeline",
    "pipeline-inproc",
    "pipeline-kafka-parse",
    "raw-librdkafka",
    "pipeline-librdkafka",
    "pipeline-librdkafka-proc",
    "pipeline-librdkafka-proc-noahead",
    "pipeline-default",
    "pipeline-default-fixed",
)
BROKERS: dict[str, type[Broker]] = {"kafka09": Kafka09Broker, "tansu": TansuBroker}
SESSION_TIMEOUT_MS = 6000  # Tansu holds every join for about half of this


# -- shared: machine line, model, events -----------------------------------------------------------------------
def workdir(prefix: str) -> Path:
    """A temporary directory removed when the script exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, True)
    return path


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass(frozen=True)
class Fixture:
    """The watched model (ONNX), its reference rows, and event rows with the live model's answers."""

    model_path: Path
    reference_path: Path
    rows: NDArray[np.float64]  # (n, 20): features of the events
    labels: NDArray[np.int64]  # (n,): live predicted class
    probabilities: NDArray[np.float64]  # (n, 2)


def build_fixture(folder: Path) -> Fixture:
    """GradientBoosting (100 trees, depth 3) on make_classification, as in bench/engine_throughput.py."""
    x, y = make_classification(n_samples=6000, n_features=N_FEATURES, n_informative=12, random_state=0)
    est = GradientBoostingClassifier(n_estimators=100, random_state=0).fit(x[:4000], y[:4000])
    onx = to_onnx(est, x[:1].astype(np.float32), options={id(est): {"zipmap": False}}, target_opset=17)
    model_path = folder / f"{MODEL}.onnx"
    model_path.write_bytes(onx.SerializeToString())
    reference_path = folder / "reference.npy"
    np.save(reference_path, x[:2000])
    rows = x[4000:]
    proba = est.predict_proba(rows)
    return Fixture(model_path, reference_path, rows, proba.argmax(axis=1).astype(np.int64), proba)


def encode_events(fx: Fixture, n: int, *, start: int = 0, ts_ms: int | None = 0, prefix: str = "e") -> list[bytes]:
    """``n`` plain JSON events; ``ts_ms`` 0 = a fixed epoch-ms stamp, None = no ``ts`` (the pipeline stamps it)."""
    out: list[bytes] = []
    base_ts = 1_795_168_800_000
    m = fx.rows.shape[0]
    for i in range(start, start + n):
        j = i % m
        doc: dict[str, Any] = {"id": f"{prefix}{i}", "model": MODEL, "model_version": "3"}
        if ts_ms is not None:
            doc["ts"] = ts_ms or base_ts + i
        doc["features"] = fx.rows[j].tolist()
        doc["prediction"] = {"label": int(fx.labels[j]), "probabilities": [round(p, 6) for p in fx.probabilities[j]]}
        doc["segment"] = SEGMENTS[i % len(SEGMENTS)]
        out.append(json.dumps(doc).encode())
    return out


def settings_for(fx: Fixture, state_dir: Path, *, budget: float, **extra: Any) -> Settings:
    flags: dict[str, Any] = {
        "models": [{"name": MODEL, "path": str(fx.model_path), "reference": str(fx.reference_path)}],
        "sampler": {"events_per_second": budget},
        "state_dir": str(state_dir),
        **extra,
    }
    return load_settings(None, flags)


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


# -- throughput ------------------------------------------------------------------------------------------------
@contextmanager
def running_broker(name: str) -> Iterator[Broker]:
    with BROKERS[name]() as broker:
        yield broker


def produce(broker: Broker, topic: str, values: Sequence[bytes]) -> float:
    """Send every value (no key: spread over the partitions); returns seconds until all were acknowledged."""
    producer = KafkaProducer(
        **broker.kafka_kwargs(), acks=1, linger_ms=20, batch_size=512 * 1024, max_request_size=8 << 20
    )
    started = time.perf_counter()
    futures = [producer.send(topic, value=v) for v in values]
    producer.flush(timeout=300)
    for f in futures[-100:]:
        f.get(timeout=0)
    elapsed = time.perf_counter() - started
    producer.close(timeout=10)
    return elapsed


def send_at_rate(producer: KafkaProducer, topic: str, values: Sequence[bytes], count: int, rate: float) -> None:
    """Send ``count`` values, round-robin from ``values``: at ``rate`` events/s as a block of rate/20 values every
    50 ms, or as fast as the producer goes when ``rate`` is 0."""
    block = max(1, int(rate / 20)) if rate > 0 else count
    t0 = time.monotonic()
    for i0 in range(0, count, block):
        if rate > 0:
            time.sleep(max(0.0, t0 + i0 / rate - time.monotonic()))
        for i in range(i0, min(i0 + block, count)):
            producer.send(topic, value=values[i % len(values)])


def raw_consumer_kwargs(broker: Broker, group_id: str, max_poll_records: int, fetch_max_wait_ms: int) -> dict[str, Any]:
    """What ``KafkaSource`` passes to ``KafkaConsumer`` (group, no auto-commit, earliest, heartbeat = session/3,
    the fetch settings)."""
    return {
        **broker.kafka_kwargs(),
        "group_id": group_id,
        "client_id": "harmonic-bench",
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": SESSION_TIMEOUT_MS,
        "heartbeat_interval_ms": max(300, SESSION_TIMEOUT_MS // 3),
        "max_poll_records": max_poll_records,
        "fetch_max_wait_ms": fetch_max_wait_ms,
        "max_partition_fetch_bytes": KafkaSettings().max_partition_fetch_bytes,
    }


@dataclass
class Run:
    rate: float  # records/s
    seconds: float
    records: int
    #: seconds from the subscription to the first record (the group join and the first fetch)
    first_record: float = 0.0
    #: records after the first poll's / seconds after it: the rate with the group join left out (the consumer child
    #: may have fetched a few polls ahead by then: up to its outbox's 6 polls)
    after_first: float = 0.0
    scored: float = 0.0
    shadow_rows: float = 0.0
    # CPU seconds over the whole variant run (group join included): this process, the consumer child (the
    # ``-proc`` variants and the pipeline with the consumer process), the broker's processes
    cpu_main: float = 0.0
    cpu_child: float = 0.0
    cpu_broker: float = 0.0
    # polls that returned nothing after the first record, and the seconds they took (the topic was full all along)
    empty_polls: int = 0
    empty_seconds: float = 0.0
    # over the timed span, the main thread of this process and of the consumer child (where there is one): seconds on
    # a CPU, runnable but waiting for one (the scheduler), and neither (asleep: waiting for the other process, the
    # broker or a lock), from /proc/<pid>/task/<pid>/schedstat
    threads: str = ""


def thread_sched(pid: int) -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable waiting for a CPU) of process ``pid``'s main thread; None off Linux."""
    try:
        on_cpu, waiting, _ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return None
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def _threads_line(before: dict[str, tuple[float, float] | None], wall: float, pids: dict[str, int]) -> str:
    """ "name cpu/runnable/asleep" per main thread over ``wall`` seconds since ``before``."""
    parts = []
    for name, pid in pids.items():
        start, end = before.get(name), thread_sched(pid)
        if start is None or end is None:
            continue
        cpu, runq = end[0] - start[0], end[1] - start[1]
        parts.append(f"{name} {cpu:.2f}/{runq:.2f}/{max(0.0, wall - cpu - runq):.2f}")
    return ", ".join(parts)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc; 0.0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_cpu_seconds() -> float:
    from tests.integration import brokers

    return sum(cpu_seconds(p.pid) for p in list(brokers._LIVE_PROCESSES))


#: the consumer child of the variant being run (its CPU is read just before it is closed)
_child_cpu: list[float] = [0.0]
#: and its CPU seconds per kind of thread: main, librdkafka's own ("rdk:*"), the other Python threads (the sender)
_child_threads: list[str] = [""]
#: its pid while it runs (0: none), for :func:`thread_sched`
_child_pid: list[int] = [0]


def thread_cpu_by_kind(pid: int) -> dict[str, float]:
    """CPU seconds (utime + stime) of process ``pid``'s threads: its main thread, librdkafka's threads (named
    "rdk:..."), and every other thread (the child's sender and command reader); empty off Linux."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kind = "main" if task.name == str(pid) else "librdkafka" if name.startswith("rdk:") else "other"
        out[kind] = out.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def _close_child(source: Any) -> None:
    _child_pid[0] = 0
    if isinstance(source, ProcessKafkaSource):
        _child_cpu[0] = cpu_seconds(source._process.pid)
        kinds = thread_cpu_by_kind(source._process.pid)
        _child_threads[0] = ", ".join(f"{k} {v:.2f}" for k, v in sorted(kinds.items()))
    source.close()


def timed_consume(step: Callable[[], int], total: int, started: float, finish: Callable[[], None] | None = None) -> Run:
    """Call ``step`` (poll + process, returns records processed) until ``total`` records; ``started`` is the
    ``perf_counter`` time the consumer was subscribed (see the module doc)."""
    pids = {"main": os.getpid(), **({"child": _child_pid[0]} if _child_pid[0] else {})}
    sched0 = {name: thread_sched(pid) for name, pid in pids.items()}
    deadline = time.monotonic() + 120.0
    n = 0
    while n == 0:
        n = step()
        if time.monotonic() > deadline:
            raise RuntimeError("no records within 120 s; is the topic empty?")
    first_n, first_record = n, time.perf_counter() - started
    empty, empty_seconds = 0, 0.0
    while n < total:
        s0 = time.perf_counter()
        got = step()
        if not got:  # a poll that waited for records the broker had (the topic holds them all)
            empty += 1
            empty_seconds += time.perf_counter() - s0
        n += got
        if time.monotonic() > deadline + 600:
            raise RuntimeError(f"only {n} of {total} records after 600 s")
    if finish is not None:
        finish()
    elapsed = time.perf_counter() - started
    return Run(
        rate=n / elapsed,
        seconds=elapsed,
        records=n,
        first_record=first_record,
        after_first=(n - first_n) / max(1e-9, elapsed - first_record),
        empty_polls=empty,
        empty_seconds=empty_seconds,
        threads=_threads_line(sched0, elapsed, pids),
    )


def _no_shadow(pipeline: Pipeline) -> None:
    """The real pipeline with the shadow check off: every event reads as "no live label" (NaN), none is forced."""

    def nothing(rt: ModelRuntime, evs: Sequence[InferenceEvent], accepted: Any) -> list[float]:
        return [float("nan")] * len(evs)

    pipeline.scoring._shadow = nothing  # type: ignore[method-assign]


def run_variant(variant: str, broker: Broker, topic: str, total: int, fx: Fixture, args: argparse.Namespace) -> Run:
    group = f"bench-{variant}-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="hm-bench-state-") as state_dir:
        settings = settings_for(
            fx,
            Path(state_dir),
            budget=args.budget,
            kafka={
                "max_poll_records": args.max_poll_records,
                "fetch_max_wait_ms": args.fetch_max_wait_ms,
                "lean_record_parse": args.record_parse == "lean",
            },
        )
        if variant.startswith("pipeline-default"):
            settings = settings.model_copy(
                update={"sampler": settings.sampler.model_copy(update={"events_per_second": None})}
            )
        if variant.startswith("pipeline"):
            return _run_pipeline(variant, broker, topic, total, settings, group)
        decoder = EventDecoder(
            {MODEL: ModelSchema(N_FEATURES, None, default_version="unknown")},
            default_model=MODEL,
            max_bytes=settings.max_event_bytes,
            segments=settings.segments.allowed,
            max_segments=settings.segments.max_segments,
        )
        joiner = KServeJoiner(decoder)
        sampler = build_sampler(settings)
        kept = 0

        def decode_and_sample(records: Iterable[tuple[bytes, Any, tuple[str, int, int]]], sample: bool) -> int:
            nonlocal kept
            n = 0
            now = time.time()
            events: list[InferenceEvent] = []
            for value, headers, origin in records:
                n += 1
                events.extend(joiner.update(value, headers, origin, now=now))
            if sample:  # one decision call per poll, as Pipeline._accept_many makes
                kept += sum(w > 0 for w in sampler.sample_many(events, now))
            return n

        if variant.endswith("-proc"):
            source = ProcessKafkaSource(
                _consumer(
                    broker,
                    topic,
                    group,
                    max_poll_records=args.max_poll_records,
                    fetch_max_wait_ms=args.fetch_max_wait_ms,
                    lean_record_parse=args.record_parse == "lean",
                ),
                log_level="info",
                log_format="plain",
                client="kafka-python",
            )
            started = time.perf_counter()  # the child has subscribed; it fetches once its poll loop runs
            _child_pid[0] = source._process.pid

            def proc_step() -> int:
                records = source.poll(0.2, args.max_poll_records)
                if variant == "source-proc":
                    return sum(len(r.value) > 0 for r in records)
                return decode_and_sample(((r.value, r.headers, r.origin) for r in records), True)

            try:
                run = timed_consume(proc_step, total, started)
            finally:
                _close_child(source)
            run.scored = float(kept)
            return run

        if variant == "raw-librdkafka":
            return _run_raw_librdkafka(broker, topic, total, group, args)
        kwargs = raw_consumer_kwargs(broker, group, args.max_poll_records, args.fetch_max_wait_ms)
        if variant == "raw-nocrc":
            kwargs["check_crcs"] = False
        consumer = KafkaConsumer(**kwargs)
        consumer.subscribe([topic])
        started = time.perf_counter()  # kafka-python fetches only inside poll

        def raw() -> int:
            n = 0
            for _tp, recs in consumer.poll(timeout_ms=200, max_records=args.max_poll_records).items():
                for r in recs:
                    n += len(r.value) > 0
            return n

        def parse() -> int:
            n = 0
            for _tp, recs in consumer.poll(timeout_ms=200, max_records=args.max_poll_records).items():
                for r in recs:
                    n += isinstance(json.loads(r.value), dict)
            return n

        def decode(sample: bool) -> int:
            n = 0
            for tp, recs in consumer.poll(timeout_ms=200, max_records=args.max_poll_records).items():
                origin_topic, partition = tp.topic, tp.partition
                n += decode_and_sample(
                    ((r.value, r.headers or (), (origin_topic, partition, r.offset)) for r in recs), sample
                )
            return n

        step: Callable[[], int]
        if variant in ("raw", "raw-nocrc"):
            step = raw
        elif variant == "json":
            step = parse
        else:
            step = lambda: decode(variant == "decode+sample")  # noqa: E731
        try:
            run = timed_consume(step, total, started)
        finally:
            consumer.close(autocommit=False)
        run.scored = float(kept)
        return run


def _consumer(broker: Broker, topic: str, group: str, **fields: Any) -> ConsumerConfig:
    """The sidecar's consumer settings (``kafka`` defaults) for ``topic`` in ``group``, with ``fields`` changed."""
    defaults = ConsumerConfig.from_settings(
        KafkaSettings(bootstrap_servers=broker.bootstrap, topic=topic, group_id=group)
    )
    return replace(defaults, api_version=broker.api_version, session_timeout_ms=SESSION_TIMEOUT_MS, **fields)


def _run_raw_librdkafka(broker: Broker, topic: str, total: int, group: str, args: argparse.Namespace) -> Run:
    import confluent_kafka

    conf = consumer_conf(
        broker.bootstrap,
        group,
        api_version=broker.api_version,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        fetch_max_wait_ms=args.fetch_max_wait_ms,
        client_id="harmonic-bench",
    )
    consumer = confluent_kafka.Consumer(conf)
    started = time.perf_counter()  # librdkafka joins and fetches in its own threads from subscribe on
    consumer.subscribe([topic])

    def step() -> int:
        n = 0
        for m in consumer.consume(num_messages=args.max_poll_records, timeout=0.2):
            if m.error() is None:
                n += len(m.value() or b"") > 0
        return n

    try:
        return timed_consume(step, total, started)
    finally:
        consumer.close()


def _run_pipeline(variant: str, broker: Broker, topic: str, total: int, settings: Settings, group: str) -> Run:
    consumer = _consumer(
        broker,
        topic,
        group,
        max_poll_records=settings.kafka.max_poll_records,
        lean_record_parse=settings.kafka.lean_record_parse and variant != "pipeline-kafka-parse",
    )
    runtime = load_model_runtime(settings.models[0])  # before the clock starts, as the service before it consumes
    # as Service.from_settings: the consumer in a child process when 2+ CPUs are available, unless "-inproc"
    source: Source
    started = time.perf_counter()  # RdKafkaSource subscribes when built, and librdkafka fetches from then on
    if variant == "pipeline-librdkafka":
        source = RdKafkaSource(replace(consumer, fetch_max_wait_ms=settings.kafka.fetch_max_wait_ms))
    elif variant.startswith("pipeline-librdkafka-proc"):
        source = ProcessKafkaSource(
            replace(consumer, fetch_max_wait_ms=settings.kafka.fetch_max_wait_ms),
            log_level="info",
            log_format="plain",
            client="librdkafka",
        )
    elif variant != "pipeline-inproc" and settings.kafka.use_consumer_process():
        source = ProcessKafkaSource(consumer, log_level="info", log_format="plain", client="kafka-python")
    else:
        source = KafkaSource(consumer)  # kafka-python fetches only inside poll
        started = time.perf_counter()
    if isinstance(source, ProcessKafkaSource):  # the child has subscribed; it fetches once its poll loop runs
        started = time.perf_counter()
    _child_pid[0] = source._process.pid if isinstance(source, ProcessKafkaSource) else 0
    state = MetricsState()
    pipeline = Pipeline(settings, source, [runtime], build_sampler(settings), state=state)
    if variant == "pipeline-noshadow":
        _no_shadow(pipeline)
    if variant.endswith("-noahead") and isinstance(source, ProcessKafkaSource):
        source.decode_ahead = lambda spec: None  # type: ignore[method-assign]
    if variant == "pipeline-default-fixed":  # the CPU budget stays at cpu_share of the CPUs: no controller
        pipeline.budget.control = pipeline.ingest_first = None
    try:
        seen: list[tuple[float | None, float]] = []

        def step() -> int:
            n = pipeline.step(0.2)
            control = pipeline.ingest_first
            if control is not None:
                seen.append((control.lag, control.budget))
            return n

        run = timed_consume(step, total, started, finish=pipeline.flush)
        lags = [lag for lag, _ in seen if lag is not None]
        if seen:
            print(
                f"    ingest first: lag max {max(lags, default=0):,.0f} records, CPU budget min "
                f"{min(b for _, b in seen):.2f} / cap {pipeline.ingest_first.cap if pipeline.ingest_first else 0:.2f}",
                flush=True,
            )
    finally:
        _close_child(source)
    run.scored = state.counter_sum("harmonic_events_scored_total")
    run.shadow_rows = state.counter("harmonic_model_evaluations_total", (MODEL, "shadow"))
    return run


def throughput(args: argparse.Namespace) -> None:
    fx_dir = workdir("hm-bench-")
    fx = build_fixture(fx_dir)
    values = encode_events(fx, args.events)
    mean_bytes = sum(map(len, values)) / len(values)
    print(f"machine: {machine('kafka', 'numpy', 'onnxruntime', 'sklearn')}", flush=True)
    print(f"load average at start: {load_average()}", flush=True)
    print(
        f"events: {args.events:,} of {mean_bytes:.0f} bytes mean; budget {args.budget:g} events/s; "
        f"max_poll_records {args.max_poll_records}; fetch_max_wait_ms {args.fetch_max_wait_ms}",
        flush=True,
    )
    variants = [v for v in VARIANTS if v in args.variants]
    freeze_startup_objects()  # as `harmonic-monitor run` does once started (monitor/allocator.py)
    print(f"GC: {'CPython defaults' if os.environ.get('HARMONIC_GC_TUNING') == '0' else 'the sidecar settings'}")
    lean = f"lean (usable: {refusal() or 'yes'})" if args.record_parse == "lean" else "kafka-python's"
    print(f"the sidecar consumer's record parse: {lean}", flush=True)
    table: list[list[str]] = []
    verdicts: list[tuple[str, str, Verdict]] = []
    for name in args.brokers:
        with running_broker(name) as broker:
            topic = f"bench-stream-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, PARTITIONS)
            seconds = produce(broker, topic, values)
            print(
                f"\n{name}: produced {args.events:,} events in {seconds:.1f} s ({args.events / seconds:,.0f}/s)",
                flush=True,
            )
            if args.profile:
                _profile(args.profile, broker, topic, args.events, fx, args)
                continue
            runs: dict[str, list[Run]] = {v: [] for v in variants}
            for rep in range(args.repeats):
                order = variants if rep % 2 == 0 else variants[::-1]
                for v in order:
                    _child_cpu[0], _child_threads[0] = 0.0, ""
                    main0, broker0 = cpu_seconds(os.getpid()), broker_cpu_seconds()
                    r = run_variant(v, broker, topic, args.events, fx, args)
                    r.cpu_main = cpu_seconds(os.getpid()) - main0
                    r.cpu_broker = broker_cpu_seconds() - broker0
                    r.cpu_child = _child_cpu[0]
                    runs[v].append(r)
                    print(
                        f"  repeat {rep} {v:18s} {r.rate:10,.0f} records/s  ({r.seconds:.2f} s, "
                        f"scored {r.scored:,.0f}, shadow rows {r.shadow_rows:,.0f}; CPU s: this process "
                        f"{r.cpu_main:.2f}, consumer child {r.cpu_child:.2f}, broker {r.cpu_broker:.2f}; "
                        f"first record after {r.first_record:.2f} s, then {r.after_first:,.0f} records/s; empty polls {r.empty_polls} taking {r.empty_seconds:.2f} s)",
                        flush=True,
                    )
                    if r.threads:
                        print(f"    main threads' s on CPU/runnable/asleep: {r.threads}", flush=True)
                    if _child_threads[0]:
                        print(f"    consumer child's CPU s per thread kind: {_child_threads[0]}", flush=True)
            table.extend(_summarize(name, variants, runs))
            for v in variants:  # librdkafka's pipelines against raw librdkafka, repeat by repeat
                if v.startswith("pipeline-librdkafka") and "raw-librdkafka" in runs:
                    per_rep = ", ".join(f"{x:.3f}" for x in paired_ratios(runs, v, "raw-librdkafka"))
                    after = ", ".join(f"{x:.3f}" for x in paired_ratios(runs, v, "raw-librdkafka", after_first=True))
                    print(f"{name}: {v} ÷ raw-librdkafka per repeat: {per_rep}; after each first poll: {after}")
            for v in ("pipeline-default", "pipeline-default-fixed"):
                if v in runs and "pipeline" in runs:
                    per_rep = ", ".join(f"{x:.2f}" for x in paired_ratios(runs, v, "pipeline"))
                    print(f"{name}: {v} ÷ pipeline (budget {args.budget:g} events/s), per repeat: {per_rep}")
                    after = ", ".join(f"{x:.2f}" for x in paired_ratios(runs, v, "pipeline", after_first=True))
                    print(f"{name}: the same after each first poll (group join left out), per repeat: {after}")
            if "raw" in runs and args.repeats >= 2:  # ingest alone, and every whole pipeline, against raw kafka-python
                for v in variants:
                    if v == "decode+sample-proc" or v.startswith("pipeline"):
                        verdicts.append((name, v, verdict(paired_ratios(runs, v, "raw"), args.target)))
    if args.profile:
        return
    print(f"\nload average at end: {load_average()}\n")
    nocrc = "raw-nocrc" in variants
    print(
        "| broker | path | records/s (median) | min – max | ÷ raw, same repeat: median (worst) | "
        + ("÷ raw-nocrc: median (worst) | " if nocrc else "")
        + "kept/scored per pass | CPU s: this process / consumer child / broker |"
    )
    print("|---|---|---:|---:|---:|" + ("---:|" if nocrc else "") + "---:|---:|")
    for row in table:
        print("| " + " | ".join(row if nocrc else row[:5] + row[6:]) + " |")
    if verdicts:
        print(
            f"\neach path ÷ raw kafka-python over the repeats, judged against {args.target:g}: median [95 % bootstrap "
            "interval of the median], repeats at or above the target, verdict\n"
        )
        print("| broker | path | ÷ raw |\n|---|---|---|")
        for name, path, judged in verdicts:
            print(f"| {name} | {path} | {judged} |")


def paired_ratios(runs: dict[str, list[Run]], variant: str, base: str, *, after_first: bool = False) -> list[float]:
    """``variant``'s rate over ``base``'s, repeat by repeat (both timed in the same repeat); ``after_first``: the
    rates after the first poll (:attr:`Run.after_first`)."""
    if after_first:
        return [r.after_first / b.after_first for r, b in zip(runs[variant], runs[base], strict=True)]
    return [r.rate / b.rate for r, b in zip(runs[variant], runs[base], strict=True)]


def _summarize(broker: str, variants: Sequence[str], runs: dict[str, list[Run]]) -> list[list[str]]:
    """One row per variant; ratios are per repeat (both sides timed in the same repeat), then the median."""

    def ratio(v: str, base: str) -> str:
        if base not in runs or v in ("raw", base):
            return "—"
        per_rep = paired_ratios(runs, v, base)
        return f"{statistics.median(per_rep):.2f} ({min(per_rep):.2f})"

    rows = []
    for v in variants:
        rates = [r.rate for r in runs[v]]
        scored = statistics.median(r.scored for r in runs[v])
        rows.append(
            [
                broker,
                v,
                f"{statistics.median(rates):,.0f}",
                f"{min(rates):,.0f} – {max(rates):,.0f}",
                ratio(v, "raw"),
                ratio(v, "raw-nocrc"),
                f"{scored:,.0f}" if v.endswith(("sample", "shadow", "pipeline")) or "default" in v else "—",
                " / ".join(
                    f"{statistics.median(getattr(r, k) for r in runs[v]):.1f}"
                    for k in ("cpu_main", "cpu_child", "cpu_broker")
                ),
            ]
        )
    return rows


def _profile(variant: str, broker: Broker, topic: str, total: int, fx: Fixture, args: argparse.Namespace) -> None:
    prof = cProfile.Profile()
    prof.enable()
    r = run_variant(variant, broker, topic, total, fx, args)
    prof.disable()
    print(f"  profiled {variant}: {r.rate:,.0f} records/s under cProfile (slower than unprofiled)")
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(
        r"monitor/|bench/stream|kafka/consumer/group|fetcher.py.*fetched_records|onnxruntime", 40
    )
    print(buf.getvalue())


# -- cpu per event ---------------------------------------------------------------------------------------------
class _Polls:
    """A source of pre-fetched polls (``cpu``): each ``poll`` returns the next one, then nothing."""

    ready, exhausted = True, False

    def __init__(self) -> None:
        self.polls: list[list[RawRecord]] = []
        self.next = 0

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawRecord]:
        self.next += 1
        return self.polls[self.next - 1] if self.next <= len(self.polls) else []

    def commit(self, positions: Any) -> None:
        return None

    def close(self) -> None:
        return None


#: the steps of the pipeline's process ``cpu`` times apart: (label, class, method)
_STEPS = (
    ("decode", "monitor.runtime.ingest.Ingest", "_columns_here"),
    ("in-flight marker", "monitor.runtime.state.InFlight", "write"),
    ("sampling", "monitor.sampler.uniform.UniformSampler", "sample_columns"),
    ("shadow check", "monitor.runtime.scoring.Scoring", "_shadow_columns"),
)


@contextmanager
def _timed_steps(spent: dict[str, float]) -> Iterator[None]:
    """Each of :data:`_STEPS` wrapped to add its CPU seconds to ``spent`` while inside."""
    import importlib

    saved = []
    for label, where, name in _STEPS:
        module, cls_name = where.rsplit(".", 1)
        cls = getattr(importlib.import_module(module), cls_name)
        original = getattr(cls, name)

        def timed(*a: Any, _f: Any = original, _label: str = label, **kw: Any) -> Any:
            t = time.process_time()
            try:
                return _f(*a, **kw)
            finally:
                spent[_label] = spent.get(_label, 0.0) + time.process_time() - t

        saved.append((cls, name, original))
        setattr(cls, name, timed)
    try:
        yield
    finally:
        for cls, name, original in saved:
            setattr(cls, name, original)


def cpu_per_event(args: argparse.Namespace) -> None:
    """CPU per event of the consumer child's decoding (with pickling) and of the pipeline's process (unpickling, the
    records, ``Pipeline.step``) on pre-fetched polls: no broker, so CPU time and not the scheduler is measured. The
    pipeline's process is also given per step: receiving (unpickling, the records), its own decoding (the records
    the child left), the in-flight marker, sampling, the shadow check, and the rest of ``Pipeline.step``."""
    fx = build_fixture(workdir("hm-bench-"))
    values = encode_events(fx, args.events)
    print(f"machine: {machine('numpy', 'onnxruntime')}; load average at start: {load_average()}", flush=True)
    steps = ["receive", *(label for label, _, _ in _STEPS), "rest"]
    print(
        f"| who decodes | child µs/event (decode + pickle) | pipeline's process µs/event | {' | '.join(steps)} | shadow rows |"
    )
    print("|---|---:|---:|" + "---:|" * len(steps) + "---:|")
    for _ in range(args.repeats):
        for ahead in (True, False):
            settings = settings_for(fx, workdir("hm-bench-state-"), budget=args.budget)
            source = _Polls()
            pipeline = Pipeline(settings, source, [load_model_runtime(settings.models[0])], build_sampler(settings))
            pipeline.ingest.decoder.admit_segments(SEGMENTS)
            spec = DecodeAhead.of(pipeline.ingest.decoder).columns()
            assert spec is not None
            child = receive = main = 0.0
            n = args.max_poll_records
            payloads = []  # bytes: the child's timing is not charged for the collector walking the parent's objects
            freeze_startup_objects()  # as the child does once started
            for k in range(0, len(values), n):
                batch = ("events", k // n % PARTITIONS, values[k : k + n], None, list(range(k, k + n)), [None] * n)
                t = time.process_time()
                cols = decode_columns(spec, batch[2], None, batch[5]) if ahead else None
                payloads.append(pickle.dumps(([batch], [cols]), 5))
                child += time.process_time() - t
            for payload in payloads:
                t = time.process_time()
                got, decoded = pickle.loads(payload)
                source.polls.append(Polled(records_of(got[0]), decoded[0] or []))
                receive += time.process_time() - t
            freeze_startup_objects()
            spent: dict[str, float] = {}
            with _timed_steps(spent):
                t = time.process_time()
                while pipeline.step(0.0):
                    pass
                pipeline.flush()
                main = receive + time.process_time() - t
            shadow = pipeline.state.counter_sum("harmonic_shadow_compared_total")
            who = "the child, as columns" if ahead else "the pipeline, as columns"
            spent["receive"] = receive
            spent["rest"] = main - sum(spent.values())
            per = " | ".join(f"{spent.get(step, 0.0) / len(values) * 1e6:.2f}" for step in steps)
            print(
                f"| {who} | {child / len(values) * 1e6:.1f} | {main / len(values) * 1e6:.1f} | {per} | {shadow:,.0f} |",
                flush=True,
            )


def record_parse(args: argparse.Namespace) -> None:
    """kafka-python's record parse against the lean one (``monitor/source/records.py``) on the bench's events as a
    broker serves them: legacy messages of magic 0 (Kafka 0.9) and 1 (0.10), v2 batches of 200 (Tansu, Kafka ≥ 0.11);
    CRCs checked, as the consumer does. The best of the repeats, CPU µs per record."""
    from kafka.consumer.fetcher import Fetcher
    from kafka.protocol.consumer import IsolationLevel
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords
    from kafka.structs import TopicPartition

    from monitor.source.records import lean_partition_records

    values = encode_events(build_fixture(workdir("hm-bench-")), args.events)
    fetches: dict[str, bytes] = {}
    for magic in (0, 1):
        legacy = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 30)
        for i, value in enumerate(values):
            legacy.append(i, timestamp=1_795_168_800_000 if magic else None, key=None, value=value)
        fetches[f"legacy, magic {magic}"] = bytes(legacy.build())
    batches = []
    for start in range(0, len(values), 200):
        v2 = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 30)
        for i, value in enumerate(values[start : start + 200]):
            v2.append(i, timestamp=1_795_168_800_000, key=None, value=value, headers=[])
        batch = bytearray(v2.build())
        batch[:8] = start.to_bytes(8, "big")  # the base offset (the CRC does not cover it)
        batches.append(bytes(batch))
    fetches["v2, batches of 200"] = b"".join(batches)
    print(f"machine: {machine()}; load average at start: {load_average()}", flush=True)
    print("| records served as | kafka-python µs/record | lean µs/record | ratio |")
    print("|---|---:|---:|---:|")
    for name, data in fetches.items():
        best = {}
        for label, cls in (("kafka-python", Fetcher.PartitionRecords), ("lean", lean_partition_records())):
            times = []
            for _ in range(args.repeats):
                parsed = cls(
                    0, TopicPartition("events", 0), MemoryRecords(data), check_crcs=True,
                    isolation_level=IsolationLevel.READ_UNCOMMITTED, aborted_transactions=[], on_drain=lambda _: None,
                )  # fmt: skip
                t = time.process_time()
                got = parsed.take(None)
                times.append(time.process_time() - t)
                assert len(got) == len(values), (name, label, len(got))
            best[label] = min(times) / len(values) * 1e6
        ratio = best["lean"] / best["kafka-python"]
        print(f"| {name} | {best['kafka-python']:.2f} | {best['lean']:.2f} | {ratio:.2f} |", flush=True)


def child_alone(args: argparse.Namespace) -> None:
    """The consumer child's work in this one process against a real broker, as fast as it goes: the client's
    ``poll_columns`` (``--client``), the column decode of every record, the pickling of the message (the pipe and the parent left
    out): the most the child lets the pipeline read. CPU per event per step, librdkafka's threads included in poll."""
    fx = build_fixture(workdir("hm-bench-"))
    values = encode_events(fx, args.events)
    settings = settings_for(fx, workdir("hm-bench-state-"), budget=100.0)
    pipeline = Pipeline(settings, _Polls(), [load_model_runtime(settings.models[0])], build_sampler(settings))
    pipeline.ingest.decoder.admit_segments(SEGMENTS)
    spec = DecodeAhead.of(pipeline.ingest.decoder).columns()
    assert spec is not None
    print(f"machine: {machine('numpy')}; load average at start: {load_average()}", flush=True)
    print("| broker, client | records/s | records per poll | poll µs/event | decode µs/event | pickle µs/event |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.brokers:
        with running_broker(name) as broker:
            topic = f"bench-child-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, PARTITIONS)
            produce(broker, topic, values)
            config = _consumer(broker, topic, f"bench-child-{uuid.uuid4().hex[:8]}")
            source: KafkaSource | RdKafkaSource = (
                RdKafkaSource(config) if args.client == "librdkafka" else KafkaSource(config)
            )
            while not (batches := source.poll_columns(0.2, args.max_poll_records)):  # the group joined
                pass
            n, spent, started = sum(len(b[2]) for b in batches), [0.0, 0.0, 0.0], time.perf_counter()
            first, polls = n, 0
            while n < len(values) and time.perf_counter() - started < 120:
                t0 = time.process_time()
                batches = source.poll_columns(0.2, args.max_poll_records)
                t1 = time.process_time()
                columns = [decode_columns(spec, b[2], b[3], b[5]) for b in batches]
                t2 = time.process_time()
                pickle.dumps(("records", (batches, columns)), 5)
                for k, dt in enumerate((t1 - t0, t2 - t1, time.process_time() - t2)):
                    spent[k] += dt
                n += sum(len(b[2]) for b in batches)
                polls += 1
            rate = (n - first) / (time.perf_counter() - started)
            source.close()
            per = " | ".join(f"{x / max(1, n - first) * 1e6:.2f}" for x in spent)
            print(f"| {name}, {args.client} | {rate:,.0f} | {(n - first) / max(1, polls):,.0f} | {per} |", flush=True)


# -- latency ---------------------------------------------------------------------------------------------------
_SAMPLE = re.compile(r"^(harmonic_[a-z_]+?)(?:\{([^}]*)\})? ([0-9.eE+-]+|NaN|\+Inf)$")


def scrape(url: str) -> dict[str, float]:
    """Sums over label sets of every sample (and ``le``-keyed buckets of the lag histogram)."""
    with urllib.request.urlopen(url, timeout=2) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None:
            continue
        name, labels, value = m.groups()
        if name == "harmonic_event_lag_seconds_bucket":
            le = re.search(r'le="([^"]+)"', labels or "")
            name = f"{name}:{le.group(1) if le else '?'}"
        out[name] = out.get(name, 0.0) + float(value)
    return out


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as resp:
            return int(resp.status) == 200
    except OSError:
        return False


def wait_for(cond: Callable[[], bool], seconds: float, what: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + seconds
    while not cond():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"sidecar exited with {proc.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.05)


def sidecar_argv(fx: Fixture, broker: Broker, topic: str, port: int, state_dir: Path, group: str) -> list[str]:
    """``python -m monitor run`` for the fixture's model against ``broker``, as an operator would start it."""
    argv = [
        sys.executable, "-m", "monitor", "run",
        "--model", str(fx.model_path), "--model-name", MODEL, "--reference", str(fx.reference_path),
        "--bootstrap-servers", broker.bootstrap, "--topic", topic, "--group-id", group,
        "--metrics-port", str(port), "--state-dir", str(state_dir),
    ]  # fmt: skip
    if broker.api_version is not None:
        argv += ["--api-version", ".".join(map(str, broker.api_version))]
    return argv


@contextmanager
def running_sidecar(argv: list[str], name: str, work: Path, budget: float) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` (see :func:`sidecar_argv`) with the sampler budget and quick group joins, its output in a log;
    on an error print the log's tail; at the end stop it (SIGTERM, then SIGKILL after 30 s) if it still runs."""
    env = {
        **os.environ,
        "HARMONIC_SAMPLER__EVENTS_PER_SECOND": str(budget),
        "HARMONIC_KAFKA__SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
        "HARMONIC_LOG_LEVEL": "warning",
    }
    if budget < 0:  # the default sampler: no event cap, the CPU share (ingest first)
        del env["HARMONIC_SAMPLER__EVENTS_PER_SECOND"]
    env_shown = " ".join(f"{k}={env[k]}" for k in sorted(env) if k.startswith("HARMONIC_"))
    print(f"\n{name}: sidecar: {env_shown} python {shlex.join(argv[1:])}", flush=True)
    log_path = work / f"sidecar-{name}.log"
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(argv, env=env, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        try:
            yield proc
        except BaseException:
            print(log_path.read_text()[-3000:])
            raise
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def latency(args: argparse.Namespace) -> None:
    from tests.integration.brokers import free_port

    work = workdir("hm-bench-lat-")
    fx = build_fixture(work)
    print(f"machine: {machine('kafka', 'numpy', 'onnxruntime', 'sklearn')}", flush=True)
    print(f"load average at start: {load_average()}", flush=True)
    rows: list[str] = []
    for name in args.brokers:
        with running_broker(name) as broker:
            topic = f"bench-latency-{uuid.uuid4().hex[:8]}"
            broker.create_topic(topic, PARTITIONS)
            port = free_port()
            argv = sidecar_argv(fx, broker, topic, port, work / f"state-{name}", f"lat-{uuid.uuid4().hex[:6]}")
            with running_sidecar(argv, name, work, args.budget) as proc:
                rows.append(_measure_latency(name, broker, topic, port, fx, proc, args))
    print(f"\nload average at end: {load_average()}\n")
    print(
        "| broker | events (rate × s) | produce → consumed visible p50 / p99 / max | "
        "produce → scored visible p50 / p99 / max | scored / produced | lag histogram p50 / p99 (bucket ≤) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)


def _measure_latency(
    name: str, broker: Broker, topic: str, port: int, fx: Fixture, proc: subprocess.Popen[bytes],
    args: argparse.Namespace,
) -> str:  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: http_ok(f"{base}/readyz"), 90, "/readyz (partitions assigned)", proc)
    producer = KafkaProducer(**broker.kafka_kwargs(), acks=1, linger_ms=0)
    # warm-up: a first batch through every partition, scored, before measuring
    warm = encode_events(fx, 100, ts_ms=int(time.time() * 1000), prefix="w")
    for v in warm:
        producer.send(topic, value=v)
    producer.flush()
    wait_for(lambda: scrape(f"{base}/metrics").get("harmonic_events_scored_total", 0) >= 100 * (args.budget == 0),
             60, "warm-up events scored", proc)  # fmt: skip
    time.sleep(1.0)
    start = scrape(f"{base}/metrics")
    c0, s0 = start.get("harmonic_events_consumed_total", 0.0), start.get("harmonic_events_scored_total", 0.0)

    # (time the scrape answered, consumed, scored) minus baseline, and the consumer lag in records
    samples: list[tuple[float, float, float, float]] = []
    stop = threading.Event()

    def scraper() -> None:
        while not stop.is_set():
            t_next = time.time() + args.scrape_seconds
            got = scrape(f"{base}/metrics")
            samples.append(
                (
                    time.time(),
                    got.get("harmonic_events_consumed_total", 0.0) - c0,
                    got.get("harmonic_events_scored_total", 0.0) - s0,
                    got.get("harmonic_consumer_lag_records", 0.0),
                )
            )
            time.sleep(max(0.0, t_next - time.time()))

    thread = threading.Thread(target=scraper, daemon=True)
    thread.start()
    per_batch = max(1, round(args.rate * args.batch_seconds))
    n_batches = int(args.seconds / args.batch_seconds)
    sent: list[tuple[float, int]] = []  # (send time, cumulative events after this batch)
    t_start = time.time()
    total = 0
    for k in range(n_batches):
        target = t_start + k * args.batch_seconds
        time.sleep(max(0.0, target - time.time()))
        t_send = time.time()
        for v in encode_events(fx, per_batch, start=total, ts_ms=int(t_send * 1000), prefix=f"l{k}-"):
            producer.send(topic, value=v)
        total += per_batch
        sent.append((t_send, total))
    producer.flush()
    expect_scored = total if args.budget == 0 else 0
    deadline = time.time() + 30
    while time.time() < deadline and (not samples or samples[-1][1] < total or samples[-1][2] < expect_scored):
        time.sleep(0.1)
    time.sleep(0.5)
    stop.set()
    thread.join()
    end = scrape(f"{base}/metrics")
    producer.close(timeout=5)

    def lags(col: int) -> list[float]:
        out: list[float] = []
        j = 0
        for t_send, cum in sent:
            while j < len(samples) and samples[j][col] < cum:
                j += 1
            if j == len(samples):
                break
            out.append(samples[j][0] - t_send)
        return out

    consumed, scored = lags(1), lags(2)
    hist = _lag_quantiles(start, end)
    scored_total = end.get("harmonic_events_scored_total", 0.0) - s0

    def fmt(xs: list[float]) -> str:
        if not xs:
            return "n/a"
        return f"{pct(xs, 50) * 1000:,.0f} / {pct(xs, 99) * 1000:,.0f} / {max(xs) * 1000:,.0f} ms"

    print(f"  {name}: {total} events in {n_batches} batches; {len(samples)} scrapes; "
          f"consumed batches seen {len(consumed)}, scored batches seen {len(scored)}", flush=True)  # fmt: skip
    sending = [lag for t, *_, lag in samples if t <= sent[-1][0]] if sent else []
    if sending:
        half = sending[len(sending) // 2 :]
        print(
            f"  {name}: consumer lag while producing (records, /metrics every {args.scrape_seconds:g} s): max "
            f"{max(sending):,.0f}; second half: median {statistics.median(half):,.0f}, max {max(half):,.0f}",
            flush=True,
        )
    return (
        f"| {name} | {total:,} ({args.rate:g}/s × {args.seconds:g} s) | {fmt(consumed)} | {fmt(scored)} | "
        f"{scored_total:,.0f} / {total:,} | {hist} |"
    )


def _lag_quantiles(start: dict[str, float], end: dict[str, float]) -> str:
    prefix = "harmonic_event_lag_seconds_bucket:"
    buckets = sorted(
        ((float(k[len(prefix):]), end[k] - start.get(k, 0.0)) for k in end if k.startswith(prefix)),
        key=lambda b: b[0],
    )  # fmt: skip
    if not buckets or buckets[-1][1] <= 0:
        return "n/a"
    total = buckets[-1][1]

    def q(p: float) -> str:
        for bound, cum in buckets:
            if cum >= p * total:
                return f"{bound * 1000:g} ms" if bound != float("inf") else "+Inf"
        return "+Inf"

    return f"{q(0.5)} / {q(0.99)}"


# -- memory ----------------------------------------------------------------------------------------------------
def rss_kib() -> tuple[int, int]:
    """(VmRSS, VmHWM) of this process in KiB."""
    fields = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("Vm")
    )
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def memory_setup(prefix: str, pool_size: int) -> tuple[Path, Fixture, list[bytes]]:
    """A memory run's work directory, fixture and pool of ``pool_size`` events without ``ts``, after printing the
    machine and its load."""
    work = workdir(prefix)
    fx = build_fixture(work)
    print(f"machine: {machine('kafka', 'numpy', 'onnxruntime', 'sklearn')}", flush=True)
    print(f"load average at start: {load_average()}", flush=True)
    return work, fx, encode_events(fx, pool_size, ts_ms=None)


def memory(args: argparse.Namespace) -> None:
    work, fx, pool = memory_setup("hm-bench-mem-", args.pool)
    settings = settings_for(fx, work / "state", budget=args.budget, metrics={"port": 0, "host": "127.0.0.1"})
    source = ReplaySource(pool, loop=True)
    # Simulated stream time: the pipeline's clock (events without ts are stamped with it, the sampler budgets
    # against it, windows roll and probes fire on it) advances 1/offered_rate per event replayed.
    base = time.time()
    clock: Callable[[], float] = time.time
    if args.offered_rate > 0:
        clock = lambda: base + source.emitted / args.offered_rate  # noqa: E731
    print(
        f"pool {args.pool:,} events of {sum(map(len, pool)) / len(pool):.0f} bytes mean, no ts; budget "
        f"{args.budget:g} events/s; clock: "
        + (f"simulated, {args.offered_rate:g} events/s offered" if args.offered_rate > 0 else "wall"),
        flush=True,
    )
    svc = Service(settings, source, [load_model_runtime(settings.models[0])], serve_metrics=True, clock=clock)
    stop = threading.Event()
    rows: list[tuple[int, float, float, int, int, int, int]] = []
    started = time.perf_counter()
    next_mark = 0
    assert svc.server is not None

    def tick() -> None:
        nonlocal next_mark
        if source.emitted < next_mark:
            return
        rss, hwm = rss_kib()
        body = urllib.request.urlopen(f"http://127.0.0.1:{svc.server.port}/metrics", timeout=5).read()  # type: ignore[union-attr]
        scored = svc.state.counter_sum("harmonic_events_scored_total")
        rows.append((source.emitted, time.perf_counter() - started, scored, rss, hwm, len(body), body.count(b"\n")))
        print(f"  {source.emitted:>9,} events  {time.perf_counter() - started:6.1f} s  scored {scored:>8,.0f}  "
              f"RSS {rss / 1024:7.1f} MiB  HWM {hwm / 1024:7.1f} MiB  /metrics {len(body):,} B", flush=True)  # fmt: skip
        next_mark += args.every
        if source.emitted >= args.events:
            stop.set()

    with svc:
        svc.run(stop, tick=tick)
    print(f"\nload average at end: {load_average()}\n")
    base_rss = next((r[3] for r in rows if r[0] >= args.warmup), rows[0][3])
    print(
        "| events | elapsed s | events/s (since start) | scored | VmRSS MiB | Δ vs warm-up | VmHWM MiB | "
        "/metrics bytes |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for emitted, secs, scored, rss, hwm, nbytes, _lines in rows:
        delta = "" if emitted < args.warmup else f"{(rss - base_rss) / 1024:+.1f}"
        rate = f"{emitted / secs:,.0f}" if secs > 0 else "—"
        print(f"| {emitted:,} | {secs:.1f} | {rate} | {scored:,.0f} | {rss / 1024:.1f} | {delta} | {hwm / 1024:.1f} | "
              f"{nbytes:,} |")  # fmt: skip


def proc_rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of process ``pid`` in KiB; (0, 0) when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    fields = dict(line.split(":", 1) for line in text.splitlines() if line.startswith("Vm"))
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (from each process's /proc/PID/stat)."""
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the field after the parenthesised command name: state, then ppid
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def malformed_values(n: int) -> list[bytes]:
    """Invalid events of four kinds, in turn: not JSON, wrong width, NaN feature, unknown model."""
    kinds = [
        lambda i: b"\xff\xfe not json " + str(i).encode(),
        lambda i: json.dumps({"id": f"bad{i}", "model": MODEL, "features": [1.0, 2.0]}).encode(),
        lambda i: f'{{"id": "bad{i}", "model": "{MODEL}", "features": [NaN{", 0.5" * (N_FEATURES - 1)}]}}'.encode(),
        lambda i: json.dumps({"id": f"bad{i}", "model": "other", "features": [0.5] * N_FEATURES}).encode(),
    ]
    return [kinds[i % len(kinds)](i) for i in range(n)]


def memory_kafka(args: argparse.Namespace) -> None:
    """RSS of the real sidecar (and its consumer child) against a real broker, every ``--every`` events consumed."""
    from tests.integration.brokers import free_port

    work, fx, pool = memory_setup("hm-bench-memk-", args.pool)
    bad = malformed_values(max(1, args.pool // args.invalid_every))
    # every --invalid-every-th value is malformed (the kinds in turn); the rest cycle through the pool
    values = [bad[(i // args.invalid_every) % len(bad)] if i % args.invalid_every == 0 else pool[i % len(pool)]
              for i in range(len(pool))]  # fmt: skip
    n_invalid = sum(1 for i in range(args.events) if i % len(values) % args.invalid_every == 0)
    print(f"{args.events:,} events ({n_invalid:,} malformed: not JSON, wrong width, NaN, unknown model in turn), "
          f"a pool of {len(values):,} values of {sum(map(len, values)) / len(values):.0f} bytes mean, no ts; "
          f"produced while the sidecar consumes, "
          + (f"at {args.rate:,.0f} events/s" if args.rate > 0 else "as fast as the producer goes"), flush=True)  # fmt: skip
    tables: list[tuple[str, list[tuple[int, float, float, float, int, int, int, int]], str]] = []
    for name in args.brokers:
        with running_broker(name) as broker:
            topic = f"bench-memory-{uuid.uuid4().hex[:8]}"
            dead = f"{topic}-dead"
            broker.create_topic(topic, PARTITIONS)
            broker.create_topic(dead, 1)
            port = free_port()
            argv = sidecar_argv(fx, broker, topic, port, work / f"state-{name}", f"mem-{uuid.uuid4().hex[:6]}")
            argv += ["--dead-letter-topic", dead]
            with running_sidecar(argv, name, work, args.budget) as proc:
                rows, exit_line = _measure_memory(broker, topic, port, values, proc, args)
            tables.append((name, rows, exit_line))
    print(f"\nload average at end: {load_average()}")
    for name, rows, exit_line in tables:
        base = next((r for r in rows if r[0] >= args.warmup), rows[0])
        print(f"\n{name}: {exit_line}\n")
        print(
            "| consumed | elapsed s | scored | invalid | dead-lettered | sidecar VmRSS MiB | consumer child VmRSS MiB | "
            "sum MiB | Δ sum vs warm-up | sidecar VmHWM MiB |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for consumed, secs, scored, invalid, rss, child, hwm, dead_n in rows:
            delta = "" if consumed < args.warmup else f"{(rss + child - base[4] - base[5]) / 1024:+.1f}"
            print(f"| {consumed:,} | {secs:.1f} | {scored:,.0f} | {invalid:,.0f} | {dead_n:,} | {rss / 1024:.1f} | "
                  f"{child / 1024:.1f} | {(rss + child) / 1024:.1f} | {delta} | {hwm / 1024:.1f} |")  # fmt: skip


def _measure_memory(
    broker: Broker, topic: str, port: int, values: Sequence[bytes], proc: subprocess.Popen[bytes],
    args: argparse.Namespace,
) -> tuple[list[tuple[int, float, float, float, int, int, int, int]], str]:  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: http_ok(f"{base}/readyz"), 90, "/readyz (partitions assigned)", proc)
    failure: list[BaseException] = []

    def producer_thread() -> None:
        try:
            producer = KafkaProducer(**broker.kafka_kwargs(), acks=1, linger_ms=20, batch_size=512 * 1024)
            send_at_rate(producer, topic, values, args.events, args.rate)
            producer.flush(timeout=600)
            producer.close(timeout=10)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failure.append(exc)

    thread = threading.Thread(target=producer_thread, daemon=True)
    started = time.perf_counter()
    thread.start()
    rows: list[tuple[int, float, float, float, int, int, int, int]] = []
    next_mark = args.every
    deadline = time.monotonic() + args.timeout
    while True:
        if failure:
            raise RuntimeError(f"producer failed: {failure[0]!r}")
        if proc.poll() is not None:
            raise RuntimeError(f"sidecar exited with {proc.returncode} at {rows[-1][0] if rows else 0:,} events")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {args.timeout} s; last: {rows[-1] if rows else None}")
        got = scrape(f"{base}/metrics")
        consumed = int(got.get("harmonic_events_consumed_total", 0.0))
        if consumed >= next_mark or consumed >= args.events:
            rss, hwm = proc_rss_kib(proc.pid)
            child = sum(proc_rss_kib(c)[0] for c in child_pids(proc.pid))
            row = (consumed, time.perf_counter() - started, got.get("harmonic_events_scored_total", 0.0),
                   got.get("harmonic_events_invalid_total", 0.0), rss, child, hwm,
                   int(got.get("harmonic_events_dead_lettered_total", 0.0)))  # fmt: skip
            rows.append(row)
            print(f"  {consumed:>9,} consumed  {row[1]:6.1f} s  scored {row[2]:>7,.0f}  invalid {row[3]:>6,.0f}  "
                  f"RSS {rss / 1024:6.1f} + child {child / 1024:6.1f} MiB  HWM {hwm / 1024:6.1f} MiB", flush=True)  # fmt: skip
            while next_mark <= consumed:
                next_mark += args.every
            if consumed >= args.events:
                break
        time.sleep(0.2)
    thread.join(timeout=60)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=60)
    return rows, f"SIGTERM after the last event: exit code {code} in {time.monotonic() - t0:.1f} s"


# -- command line ----------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("throughput", help="decode+sample (and whole-pipeline) rate vs raw kafka-python")
    t.add_argument("--brokers", nargs="+", choices=sorted(BROKERS), default=["kafka09"])
    t.add_argument(
        "--events",
        type=int,
        default=1_200_000,
        help="the backlog each variant drains (default: ~5 s or more after the group join, on 2 cores, for every "
        "variant but raw-librdkafka)",
    )
    t.add_argument("--repeats", type=int, default=3)
    t.add_argument("--budget", type=float, default=200.0, help="sampler events/s (the service default: 200)")
    t.add_argument("--max-poll-records", type=int, default=2000, help="the service default: 2000")
    t.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    t.add_argument("--profile", choices=VARIANTS, help="profile one pass of this variant instead of timing")
    t.add_argument(
        "--target",
        type=float,
        default=0.8,
        help="the decode+sample-proc ÷ raw target the verdict judges, over the repeats (bench/verdict.py); "
        "it needs both variants and at least 2 repeats",
    )
    t.add_argument(
        "--fetch-max-wait-ms",
        type=int,
        default=KafkaSettings().fetch_max_wait_ms,
        help="kafka.fetch_max_wait_ms for every consumer (raw and the sidecar's; default: the setting's default)",
    )
    t.add_argument(
        "--record-parse",
        choices=["lean", "kafka-python"],
        default="lean" if KafkaSettings().lean_record_parse else "kafka-python",
        help="the sidecar consumer's record parse (kafka.lean_record_parse; default: the setting's default); "
        "the raw variants always use kafka-python's",
    )
    t.add_argument(
        "--gc",
        choices=["tuned", "default"],
        default="tuned",
        help="the sidecar's GC settings (monitor/allocator.py; this process and the consumer child) or CPython's",
    )
    t.set_defaults(func=throughput)
    c = sub.add_parser("cpu", help="CPU per event of the child's decoding and the pipeline's process, no broker")
    c.add_argument("--events", type=int, default=100_000)
    c.add_argument("--repeats", type=int, default=2)
    c.add_argument("--budget", type=float, default=100.0, help="sampler events/s (scoring nearly off)")
    c.add_argument("--max-poll-records", type=int, default=2000)
    c.set_defaults(func=cpu_per_event)
    rp = sub.add_parser("parse", help="kafka-python's record parse against the lean one, legacy and v2, no broker")
    rp.add_argument("--events", type=int, default=2000)
    rp.add_argument("--repeats", type=int, default=9)
    rp.set_defaults(func=record_parse)
    ca = sub.add_parser("child", help="the consumer child's work alone against a real broker")
    ca.add_argument("--brokers", nargs="+", choices=sorted(BROKERS), default=["tansu"])
    ca.add_argument("--events", type=int, default=100_000)
    ca.add_argument("--max-poll-records", type=int, default=2000)
    ca.add_argument("--client", choices=["librdkafka", "kafka-python"], default="librdkafka")
    ca.set_defaults(func=child_alone)
    la = sub.add_parser("latency", help="produce → visible in /metrics, against the real sidecar")
    la.add_argument("--brokers", nargs="+", choices=sorted(BROKERS), default=["kafka09"])
    la.add_argument("--rate", type=float, default=200.0, help="events/s produced")
    la.add_argument("--seconds", type=float, default=60.0)
    la.add_argument("--batch-seconds", type=float, default=0.05, help="produce a batch this often")
    la.add_argument("--scrape-seconds", type=float, default=0.05, help="scrape /metrics this often")
    la.add_argument(
        "--budget",
        type=float,
        default=0.0,
        help="sampler events/s; 0 (default) scores every event; -1: the default sampler (no cap, the CPU share, ingest first), and the consumer lag is reported",
    )
    la.set_defaults(func=latency)
    m = sub.add_parser("memory", help="RSS every 100k events up to 1M (in-process, ReplaySource)")
    m.add_argument("--events", type=int, default=1_000_000)
    m.add_argument("--every", type=int, default=100_000)
    m.add_argument("--warmup", type=int, default=200_000, help="growth is measured from here")
    m.add_argument("--pool", type=int, default=5000, help="distinct pre-encoded events replayed in a loop")
    m.add_argument("--budget", type=float, default=200.0, help="sampler events/s")
    m.add_argument(
        "--offered-rate", type=float, default=1000.0, help="simulated events/s of stream time; 0 = the wall clock"
    )
    m.set_defaults(func=memory)
    mk = sub.add_parser("memory-kafka", help="RSS of the real sidecar and its consumer child against a real broker")
    mk.add_argument("--brokers", nargs="+", choices=sorted(BROKERS), default=["kafka09"])
    mk.add_argument("--events", type=int, default=1_000_000)
    mk.add_argument("--every", type=int, default=100_000)
    mk.add_argument("--warmup", type=int, default=200_000, help="growth is measured from here")
    mk.add_argument("--pool", type=int, default=5000, help="distinct pre-encoded values produced in a loop")
    mk.add_argument("--invalid-every", type=int, default=100, help="every N-th value is malformed")
    mk.add_argument("--budget", type=float, default=200.0, help="sampler events/s (the service default: 200)")
    mk.add_argument("--rate", type=float, default=0.0, help="events/s produced; 0 (default) = as fast as possible")
    mk.add_argument("--timeout", type=float, default=900.0, help="give up after this many seconds per broker")
    mk.set_defaults(func=memory_kafka)
    args = p.parse_args(argv)
    if getattr(args, "gc", "tuned") == "default":
        os.environ["HARMONIC_GC_TUNING"] = "0"  # read by tune_gc, freeze_startup_objects and the consumer child
    tune_malloc()  # as `harmonic-monitor` does at start (monitor/allocator.py)
    tune_gc()
    print(f"command: .venv/bin/python bench/stream.py {shlex.join(sys.argv[1:] if argv is None else argv)}")
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
