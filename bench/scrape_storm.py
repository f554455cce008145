"""Scrape storm on the real sidecar: the ingest rate of ``harmonic-monitor run`` draining a backlog, with and without
``--loops`` scraper loops on its ``/metrics``.

One broker (Tansu by default, ``tests/integration/brokers.py``) and one 4-partition topic holding ``--events`` plain
JSON events (``bench/stream.py``'s events and GBDT model). Each repeat runs the sidecar twice on that topic, each time
with a fresh consumer group and state dir, once quiet and once under the storm, the order alternating repeat by
repeat (paired and interleaved: the machine's speed drifts). A measurer reads ``harmonic_events_consumed_total``
from ``/metrics`` every 0.1 s; the storm adds ``--loops`` - 1 threads in a separate process, each looping
``GET /metrics`` on a keep-alive connection, started once ``/healthz`` answers and before the first event is
consumed: ``--loops`` scrapers with the measurer, the default ``metrics.max_concurrent_scrapes`` (a 17th would take
a slot now and then and leave a loop spinning on 503s meanwhile). The rate is the events consumed between the first
reading at or above 5 % of the backlog and the first at or above 95 %, over the time between them. Reported: each
run's rate, each repeat's ratio (storm / quiet), the scrapes/s the storm got, the CPU used by each of the sidecar's
processes meanwhile (pipeline, HTTP server, consumer child; a share of one core), and the median ratio.

``--pythonpath DIR`` runs the sidecar from another checkout (e.g. ``git archive <commit> | tar -x -C DIR``), to
measure the server before the endpoint moved to its own process with the same script.

Usage (the command behind docs/BENCHMARKS.md, "Scrape storm on the real sidecar"; a few minutes on 2 cores)::

    .venv/bin/python bench/scrape_storm.py --events 100000 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import stream  # noqa: E402  (bench/stream.py: the script's folder is on sys.path)
from machine import machine  # noqa: E402  (bench/machine.py)
from stream import (  # noqa: E402  (bench/stream.py)
    PARTITIONS,
    build_fixture,
    encode_events,
    http_ok,
    load_average,
    produce,
    running_broker,
    running_sidecar,
    scrape,
    sidecar_argv,
    wait_for,
    workdir,
)

#: the storm: a stdlib-only script (it starts in milliseconds), ``loops`` threads each looping ``GET /metrics`` on
#: a keep-alive connection; prints "up" after its first answer and the number of 200s once SIGTERM arrives
STORM = """
import http.client, signal, sys, threading, time
host, port, loops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
stop, counts, up = threading.Event(), [0] * loops, threading.Event()
def loop(i):
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=5)
            conn.request("GET", "/metrics")
            resp = conn.getresponse()
            resp.read()
            if resp.status == 200:
                counts[i] += 1
                up.set()
        except (OSError, http.client.HTTPException):
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.01)
signal.signal(signal.SIGTERM, lambda *_: stop.set())
for i in range(loops):
    threading.Thread(target=loop, args=(i,), daemon=True).start()
up.wait(30)
print("up", flush=True)
while not stop.wait(0.1):
    pass
print(sum(counts), flush=True)
"""


def roles(pid: int) -> dict[str, int]:
    """The sidecar's processes: ``pipeline`` (``pid``), ``server`` (the HTTP server process, when there is one) and
    ``consumer`` (the consumer child, when there is one)."""
    out = {"pipeline": pid}
    for child in stream.child_pids(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        out["server" if b"http_process" in cmdline else "consumer"] = child
    return out


def cpu(pids: dict[str, int]) -> dict[str, float]:
    return {role: stream.cpu_seconds(pid) for role, pid in pids.items()}


def measure(port: int, total: int, proc: subprocess.Popen[bytes], timeout_seconds: float) -> tuple[float, dict[str, float]]:  # fmt: skip
    """Events/s between the first reading of the consumed counter at >= 5 % of ``total`` and the first at >= 95 %,
    and each of the sidecar's processes' CPU use over that time (a share of one core)."""
    url = f"http://127.0.0.1:{port}/metrics"
    first: tuple[float, float, dict[str, float]] | None = None
    pids = roles(proc.pid)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the sidecar exited with {proc.returncode}")
        try:
            consumed = scrape(url).get("harmonic_events_consumed_total", 0.0)
        except OSError:
            consumed = 0.0
        now = time.monotonic()
        if first is None and consumed >= 0.05 * total:
            first = (now, consumed, cpu(pids))
        if first is not None and consumed >= 0.95 * total:
            if now == first[0]:
                raise RuntimeError(
                    f"{total} events went from under 5 % to over 95 % consumed within one render of /metrics: "
                    "the rate cannot be measured; give a larger --events (or a shorter --render-interval)"
                )
            used = cpu(pids)
            shares = {role: (used[role] - first[2][role]) / (now - first[0]) for role in used}
            return (consumed - first[1]) / (now - first[0]), shares
        time.sleep(0.1)
    raise RuntimeError(f"the backlog of {total} was not 95 % consumed within {timeout_seconds} s")


def one_run(args: argparse.Namespace, broker: object, topic: str, fx: object, work: Path, stormy: bool, name: str) -> tuple[float, float, dict[str, float]]:  # fmt: skip
    """(ingest events/s, scrapes/s, CPU share by process) of one sidecar draining the topic with a fresh group."""
    from tests.integration.brokers import free_port

    port = free_port()
    argv = sidecar_argv(fx, broker, topic, port, work / f"state-{name}", f"storm-{uuid.uuid4().hex[:8]}")  # type: ignore[arg-type]
    if args.pythonpath:  # `python -m` puts its working directory first on sys.path: run it from there too
        os.environ["PYTHONPATH"] = args.pythonpath
        stream.REPO_ROOT = Path(args.pythonpath)
    try:
        with running_sidecar(argv, name, work, args.budget) as proc:
            wait_for(lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), 120, "/healthz", proc)
            storm_proc = None
            started = time.monotonic()
            if stormy:
                storm_proc = subprocess.Popen(
                    [sys.executable, "-c", STORM, "127.0.0.1", str(port), str(args.loops - 1)], stdout=subprocess.PIPE
                )
                assert storm_proc.stdout is not None
                storm_proc.stdout.readline()  # "up": the loops are scraping
            try:
                rate, shares = measure(port, args.events, proc, args.timeout)
            finally:
                scrapes = 0.0
                if storm_proc is not None:
                    storm_proc.terminate()
                    out, _ = storm_proc.communicate(timeout=30)
                    scrapes = int(out.decode().split()[-1]) / (time.monotonic() - started)
    finally:
        os.environ["PYTHONPATH"] = str(REPO_ROOT)
        stream.REPO_ROOT = REPO_ROOT
    return rate, scrapes, shares


def _shares(shares: dict[str, float]) -> str:
    return " / ".join(f"{shares[r]:.0%}" if r in shares else "—" for r in ("pipeline", "server", "consumer"))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", default="tansu", choices=["tansu", "kafka09"])
    p.add_argument("--events", type=int, default=200_000, help="the backlog")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--loops", type=int, default=16, help="scraper loops in the storm")
    p.add_argument("--budget", type=float, default=100.0, help="sampler.events_per_second (100: scoring nearly off)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds for one drain")
    p.add_argument(
        "--render-interval", type=float, default=None, help="metrics.min_render_interval_seconds (default: its default)"
    )
    p.add_argument("--pythonpath", default="", help="run the sidecar from this checkout instead")
    args = p.parse_args(argv)
    os.environ["PYTHONPATH"] = str(REPO_ROOT)
    if args.render_interval is not None:
        os.environ["HARMONIC_METRICS__MIN_RENDER_INTERVAL_SECONDS"] = str(args.render_interval)
    work = workdir("hm-bench-storm-")
    fx = build_fixture(work)
    print(f"machine: {machine('kafka', 'numpy', 'onnxruntime')}", flush=True)
    print(f"load average at start: {load_average()}", flush=True)
    print(f"command: python {' '.join(sys.argv)}", flush=True)
    rows: list[str] = []
    ratios: list[float] = []
    with running_broker(args.broker) as broker:
        topic = f"bench-storm-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, PARTITIONS)
        seconds = produce(broker, topic, encode_events(fx, args.events))
        print(f"backlog: {args.events} events produced in {seconds:.1f} s", flush=True)
        for r in range(args.repeats):
            order = (False, True) if r % 2 == 0 else (True, False)
            got: dict[bool, tuple[float, float, dict[str, float]]] = {}
            for stormy in order:
                got[stormy] = one_run(args, broker, topic, fx, work, stormy, f"r{r}-{'storm' if stormy else 'quiet'}")
            ratio = got[True][0] / got[False][0]
            ratios.append(ratio)
            rows.append(
                f"| {r + 1} | {'quiet first' if not order[0] else 'storm first'} | {got[False][0]:,.0f} | "
                f"{got[True][0]:,.0f} | {ratio:.2f} | {got[True][1]:,.0f} | {_shares(got[False][2])} | "
                f"{_shares(got[True][2])} |"
            )
            print(rows[-1], flush=True)
    print(f"\nload average at end: {load_average()}")
    print(f"\n{args.loops} scraper loops, backlog {args.events:,} on {args.broker}, sampler budget {args.budget:g}/s")
    print(
        "| repeat | order | quiet events/s | storm events/s | ratio | scrapes/s "
        "| CPU quiet: pipeline / server / consumer | CPU storm: pipeline / server / consumer |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nmedian ratio {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
