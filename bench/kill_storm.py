"""Duplicates under a kill storm: how far the summed counters of a consumer group's replicas run past the events.

Three ``harmonic-monitor run`` replicas (the real CLI, default consumer mode, every event scored) share one group on
a topic of ``--partitions`` partitions of a real broker (``tests/integration/brokers.py``). A producer sends
``--events`` events at ``--rate`` per second; every ``--kill-every`` seconds one replica, in turn, is killed with
SIGKILL (no flush, no commit, no state written) and started again at once on the same state dir. Once the producer
is done the storm stops, the group is left to commit up to the end of every partition, and every replica is stopped
with SIGTERM. The counters each replica saved in its ``state.json`` are then summed: what a dashboard summing the
replicas' ``harmonic_events_consumed_total`` and ``harmonic_events_scored_total`` would show. Their excess over the
events produced is the duplicates: events applied by one replica whose commit did not land (a kill between its save
and its commit, a commit refused during a rebalance) and applied again by the partition's next owner. None may be
missing (at-least-once): the script fails if a sum is below the events produced.

Usage (the command behind the figure in docs/OPERATIONS.md; about 3 min on 2 cores)::

    .venv/bin/python bench/kill_storm.py --broker kafka09 --events 9000 --rate 150 --kill-every 4
"""

from __future__ import annotations

import argparse
import atexit
import shlex
import shutil
import sys
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # for tests.integration

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "open_text is deprecated", DeprecationWarning)
    from kafka import KafkaProducer

from machine import machine  # noqa: E402  (bench/machine.py: the script's folder is on sys.path)

from tests.integration.brokers import Broker, Kafka09Broker, TansuBroker  # noqa: E402
from tests.integration.model_fixtures import build_classifier  # noqa: E402
from tests.integration.sidecar import Sidecar  # noqa: E402
from tests.integration.test_run_kafka import (  # noqa: E402
    MODEL,
    committed_offsets,
    counters_in_state,
    run_env,
    valid_events,
)

BROKERS: dict[str, type[Broker]] = {"kafka09": Kafka09Broker, "tansu": TansuBroker}
#: bound on the group catching up with the end of every partition once the storm is over
DRAIN_SECONDS = 300.0


def produce_at_rate(broker: Broker, topic: str, messages: list[tuple[bytes, bytes]], rate: float) -> dict[int, int]:
    """Send ``messages`` in chunks of 10 paced at ``rate`` per second; the end offset per partition."""
    ends: dict[int, int] = {}
    producer = KafkaProducer(**broker.kafka_kwargs(), acks="all", linger_ms=5)
    started = time.monotonic()
    try:
        for start in range(0, len(messages), 10):
            futures = [producer.send(topic, key=k, value=v) for k, v in messages[start : start + 10]]
            for future in futures:
                meta = future.get(timeout=60)
                ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
            time.sleep(max(0.0, started + (start + 10) / rate - time.monotonic()))
    finally:
        producer.close()
    return ends


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", choices=sorted(BROKERS), default="kafka09")
    parser.add_argument("--events", type=int, default=9000)
    parser.add_argument("--rate", type=float, default=150.0, help="events produced per second")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--kill-every", type=float, default=4.0, help="seconds between two SIGKILLs")
    parser.add_argument("--drain-seconds", type=float, default=DRAIN_SECONDS, help="bound on the commits after it")
    args = parser.parse_args(argv)
    if args.events < 10 or args.rate <= 0 or args.replicas < 2 or args.partitions < 1 or args.kill_every <= 0:
        parser.error("expected --events >= 10, --rate > 0, --replicas >= 2, --partitions >= 1, --kill-every > 0")
    command = "bench/kill_storm.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    work = Path(tempfile.mkdtemp(prefix="hm-kill-storm-"))
    atexit.register(shutil.rmtree, work, True)  # the replicas' logs and state dirs
    files = build_classifier(work / "model")
    batch = valid_events(files, args.events, prefix="ks")
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    with BROKERS[args.broker]() as broker:
        topic, group = f"storm-{uuid.uuid4().hex[:8]}", f"hm-storm-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, args.partitions)
        replicas = [
            Sidecar(
                broker,
                topic=topic,
                group_id=group,
                state_dir=work / f"r{i}" / "state",
                log_path=work / f"r{i}.log",
                model=files.onnx_path,
                model_name=MODEL,
                reference=files.reference_path,
                env=run_env(0),
            )
            for i in range(args.replicas)
        ]
        try:
            for replica in replicas:
                replica.start()
            for replica in replicas:
                replica.wait_ready(120.0)
            ends: dict[int, int] = {}
            producer = threading.Thread(
                target=lambda: ends.update(produce_at_rate(broker, topic, batch.messages, args.rate)), daemon=True
            )
            started = time.monotonic()
            producer.start()
            kills = 0
            while producer.is_alive():
                producer.join(args.kill_every)
                if producer.is_alive():
                    victim = replicas[kills % len(replicas)]
                    victim.kill()
                    victim.start()
                    kills += 1
            storm_seconds = time.monotonic() - started
            during = committed_offsets(broker, topic, group, args.partitions)  # how much the storm itself saw
            committed_in_storm = sum(v or 0 for v in during.values())
            if sum(ends.values()) != args.events:
                raise SystemExit(f"the producer did not deliver every event: end offsets {ends}")
            deadline = time.monotonic() + args.drain_seconds
            while (committed := committed_offsets(broker, topic, group, args.partitions)) != ends:
                if time.monotonic() > deadline:
                    raise SystemExit(
                        f"the group did not commit up to {ends} within {args.drain_seconds:.0f} s: {committed}"
                    )
                time.sleep(1.0)
            codes = [replica.terminate()[0] for replica in replicas]
        finally:
            for replica in replicas:
                if replica.running:
                    replica.kill()
    consumed = sum(counters_in_state(r.state_dir, "harmonic_events_consumed_total") for r in replicas)
    scored = sum(counters_in_state(r.state_dir, "harmonic_events_scored_total") for r in replicas)
    print(f"machine: {machine(load=True)}; load average before the run {' '.join(load_before)}")
    print(f"command: {command}\n")
    print(f"{args.replicas} replicas, {args.partitions} partitions on {args.broker}, {kills} SIGKILLs in "
          f"{storm_seconds:.0f} s ({committed_in_storm:,} events committed by its end), exit codes at the end "
          f"{codes}\n")  # fmt: skip
    print("| events | summed consumed | duplicates | summed scored | duplicates | duplicates per kill |")
    print("|---:|---:|---:|---:|---:|---:|")
    dup_c, dup_s = consumed - args.events, scored - args.events
    per_kill = dup_s / kills if kills else float("nan")
    print(f"| {args.events:,} | {consumed:,.0f} | {dup_c:,.0f} | {scored:,.0f} | {dup_s:,.0f} | {per_kill:.0f} |")
    if dup_c < 0 or dup_s < 0:
        print("events missing from the summed counters: at-least-once broken", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
