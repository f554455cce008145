"""The consumer child's loop in this process at a steady rate: does anything Python-level grow? (issue 3, memory)

``stream.py memory-kafka`` shows the real consumer child's VmRSS creeping at steady rates (docs/BENCHMARKS.md,
memory). This script runs the child's own loop — ``KafkaSource.poll_columns`` of up to 2,000 records, pickling the
column batches as the child does before it sends them, ``TimedCollector`` — against a real Kafka 0.9 broker
(``tests/integration/brokers.py``) while a producer in a separate process (this script with ``--produce``, so it
does not share this process's GIL) sends a pool of SPEC §1 events at ``--rate``. After ``--warmup`` seconds it
starts ``tracemalloc`` (one frame: cheap enough to keep the rate) and every ``--every`` seconds prints VmRSS, the
memory tracemalloc sees as allocated by Python, and the number of objects the garbage collector tracks; at the
end, the allocation sites that grew most since the warm-up. ``--trim`` also calls glibc's ``malloc_trim(0)``
every 60 s (returns free heap pages to the system).

    .venv/bin/python bench/child_memory.py --rate 5000 --seconds 360
    .venv/bin/python bench/child_memory.py --rate 5000 --seconds 360 --trim
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import pickle
import subprocess
import sys
import time
import tracemalloc
import uuid

import stream  # bench/stream.py: the script's folder is on sys.path
from kafka import KafkaProducer
from machine import machine

from monitor.allocator import TimedCollector, freeze_startup_objects, tune_gc, tune_malloc
from monitor.source.kafka import KafkaSource


def produce(bootstrap: str, topic: str, rate: float, seconds: float) -> None:
    """Send the pool round-robin at ``rate`` events/s for ``seconds`` (the ``--produce`` process)."""
    fx = stream.build_fixture(stream.workdir("hm-bench-childmem-"))
    pool = stream.encode_events(fx, 5000, ts_ms=None)
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=(0, 9), acks=1, linger_ms=5)
    stream.send_at_rate(producer, topic, pool, int(rate * seconds), rate)
    producer.flush()
    producer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=5000.0, help="events/s produced")
    ap.add_argument("--seconds", type=float, default=360.0, help="how long the loop runs")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds before tracemalloc starts")
    ap.add_argument("--every", type=float, default=60.0, help="print a line this often (seconds)")
    ap.add_argument("--trim", action="store_true", help="glibc malloc_trim(0) every 60 s")
    ap.add_argument("--produce", nargs=2, metavar=("BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.produce:
        produce(args.produce[0], args.produce[1], args.rate, args.seconds)
        return 0
    tune_malloc()
    tune_gc()
    print(f"machine: {machine('kafka')}", flush=True)
    print(f"command: .venv/bin/python bench/child_memory.py {' '.join(sys.argv[1:] if argv is None else argv)}")
    libc = ctypes.CDLL("libc.so.6") if args.trim else None
    with stream.running_broker("kafka09") as broker:
        topic = f"bench-childmem-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, stream.PARTITIONS)
        producer = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--produce",
                broker.bootstrap,
                topic,
                "--rate",
                str(args.rate),
                "--seconds",
                str(args.seconds + 5),
            ]
        )
        source = KafkaSource(
            bootstrap_servers=broker.bootstrap,
            topic=topic,
            group_id=f"childmem-{uuid.uuid4().hex[:6]}",
            api_version=broker.api_version,
            session_timeout_ms=stream.SESSION_TIMEOUT_MS,
            max_poll_records=2000,
            fetch_max_wait_ms=100,
        )
        collector = TimedCollector()
        freeze_startup_objects()
        print(
            f"\n{args.rate:,.0f} events/s for {args.seconds:.0f} s; tracemalloc (1 frame) from {args.warmup:.0f} s"
            f"{'; malloc_trim(0) every 60 s' if args.trim else ''}\n"
        )
        print("| s | records | VmRSS MiB | Python-allocated MiB (tracemalloc) | GC-tracked objects |")
        print("|---:|---:|---:|---:|---:|")
        records, start = 0, time.monotonic()
        next_line, next_trim = start + args.every, start + 60.0
        baseline: tracemalloc.Snapshot | None = None
        try:
            while (now := time.monotonic()) - start < args.seconds:
                collector.maybe_collect()
                batches = source.poll_columns(0.2, 2000)
                if batches:
                    pickle.dumps(("records", batches), protocol=pickle.HIGHEST_PROTOCOL)  # as the child sends them
                    records += sum(len(b[2]) for b in batches)
                if libc is not None and now >= next_trim:
                    next_trim += 60.0
                    libc.malloc_trim(0)
                if baseline is None and now - start >= args.warmup:
                    gc.collect()
                    tracemalloc.start(1)
                    baseline = tracemalloc.take_snapshot()
                if now >= next_line:
                    next_line += args.every
                    traced = tracemalloc.get_traced_memory()[0] / 2**20 if tracemalloc.is_tracing() else float("nan")
                    print(
                        f"| {now - start:.0f} | {records:,} | {stream.rss_kib()[0] / 1024:.1f} | {traced:.2f} | {len(gc.get_objects()):,} |",
                        flush=True,
                    )
        finally:
            source.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                producer.wait(timeout=30)
            producer.kill()
        if baseline is not None:
            gc.collect()
            print("\nallocation sites that grew most since the warm-up (after a full collection):\n")
            for stat in tracemalloc.take_snapshot().compare_to(baseline, "lineno")[:8]:
                print(f"    {stat}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
