"""The HTTP endpoint under abuse: ingest lost to scrapers, and what half-open connections cost.

Each server variant runs in its own process (so threads and RSS are its own) over a :class:`MetricsState` that an
ingest thread keeps updating the way the pipeline does: per micro-batch of 64 events, ``json.loads`` of each event,
then the counters, the three per-event histograms and, every 16th batch, the window and drift gauges, round-robin
over ``--models`` x ``--segments`` (4 x 8: about 1,300 samples, a /metrics body of about 100 KB that takes about 15 ms
to render on an idle core). Load comes from
client processes on 127.0.0.1 only, so their own CPU does not count against the server's GIL. Four phases of
``--seconds`` each:

``idle``
    ingest alone: the reference events/s.
``scrapers``
    ``--scrapers`` threads each looping ``GET /metrics`` on a keep-alive connection.
``half-open``
    ``--half-open`` connections that send a request line and one header and never finish; one the server closes is
    opened again at once (a slowloris keeps its count). Meanwhile a prober asks ``/healthz`` every 0.1 s and
    ``/metrics`` every 1 s on fresh connections.
``both``
    the two at once, prober included.

Before each phase ``--settle`` seconds pass without clients; ingest over their second half is that phase's baseline
(the machine's speed drifts, so each phase is compared with the seconds just before it). Reported per phase: ingest
events/s and its ratio to that baseline, scrapes/s with their p50 and max latency,
``/healthz`` p50 and max latency and failures (an error status, a refusal or no answer within 5 s), the slowest
``/metrics`` probe, the server process's most threads (``threading.active_count()``) and most VmRSS, how many
half-open connections the server closed, and /metrics renders.

Variants: ``new`` (``monitor.exporters.http.MetricsServer``, default limits), ``old`` (the server before these limits,
loaded from ``--old-module``: ``git show f842c1c:monitor/exporters/http.py > /tmp/old_http.py``), ``uvicorn`` and
``uvicorn-limited`` (uvicorn 0.54 with an ASGI app over the same :class:`~monitor.exporters.render_cache.RenderCache`,
``timeout_keep_alive=5``; the second with ``limit_concurrency=64``; needs ``pip install uvicorn==0.54.0``, the
``bench`` extra).

Usage (the command behind docs/BENCHMARKS.md, "HTTP endpoint under abuse"; about 5 min on 2 cores)::

    git show f842c1c:monitor/exporters/http.py > /tmp/old_http.py
    .venv/bin/python bench/abuse.py --variants new old uvicorn uvicorn-limited --old-module /tmp/old_http.py
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import importlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path

from monitor.config import MetricsSettings
from monitor.exporters.http import MetricsServer
from monitor.exporters.prometheus import MetricsState
from monitor.exporters.render_cache import RenderCache

HOST = "127.0.0.1"  # loopback only
PHASES = ("idle", "scrapers", "half-open", "both")
HALF_OPEN = ("half-open", "both")
VARIANTS = ("new", "old", "uvicorn", "uvicorn-limited")
BATCH = 64
WINDOWS = ("60s", "300s", "3600s")


# -- the server process ----------------------------------------------------------------------------------------
def ingest(state: MetricsState, stop: threading.Event, done: list[int], models: int, segments: int) -> None:
    """Imitates the pipeline's writes into ``state`` until ``stop``; ``done[0]`` counts events."""
    rng = np.random.default_rng(0)
    events = [json.dumps({"id": f"e{i}", "features": rng.normal(size=20).round(4).tolist()}) for i in range(BATCH)]
    keys = [(f"model{m}", f"seg{s}") for m in range(models) for s in range(segments)]
    gamma, flicker = rng.exponential(1e-3, BATCH), rng.uniform(0, 0.2, BATCH)
    batch = 0
    while not stop.is_set():
        model, seg = keys[batch % len(keys)]
        decoded = [json.loads(e) for e in events]
        state.inc("harmonic_events_consumed_total", (model,), len(decoded))
        state.inc("harmonic_events_sampled_total", (model,), len(decoded))
        state.inc("harmonic_events_scored_total", (model, "3", seg), len(decoded))
        state.observe("harmonic_gamma", (model, seg), gamma)
        state.observe("harmonic_flicker", (model, seg), flicker)
        state.observe("harmonic_p_adj", (model, seg), 1.0 - flicker)
        if batch % 16 == 0:
            for window in WINDOWS:
                for name in ("harmonic_window_gamma_mean", "harmonic_window_gamma_p95", "harmonic_window_flicker_mean"):
                    state.set(name, (model, seg, window), float(gamma.mean()))
                state.set("harmonic_window_events", (model, seg, window), float(batch))
            for signal in ("gamma_cusum", "gamma_ks", "flicker_cusum", "flicker_rate", "features_ks"):
                state.set("harmonic_drift_statistic", (model, seg, signal), float(batch % 7))
        batch += 1
        done[0] += len(decoded)


def _load_old(path: str) -> type[Any]:
    spec = importlib.util.spec_from_file_location("old_http", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--old-module {path!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server: type[Any] = module.MetricsServer
    return server


@contextmanager
def uvicorn_server(state: MetricsState, limit: int | None) -> Iterator[tuple[int, RenderCache]]:
    """uvicorn serving the same routes over the same :class:`RenderCache`; yields (port, cache)."""
    from concurrent.futures import ThreadPoolExecutor

    from prometheus_client import CollectorRegistry, generate_latest

    from monitor.exporters.prometheus import StateCollector

    uvicorn = importlib.import_module("uvicorn")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(state))
    cache = RenderCache(lambda: bytes(generate_latest(registry)), min_interval_seconds=1.0)
    render_pool = ThreadPoolExecutor(max_workers=1)

    async def app(scope: dict[str, Any], receive: Callable[[], Any], send: Callable[[Any], Any]) -> None:
        if scope["path"] == "/metrics":
            body = cache.fresh() or await asyncio.get_running_loop().run_in_executor(render_pool, cache.get)
            status = 200
        elif scope["path"] == "/healthz":
            status, body = 200, b'{"status": "ok"}\n'
        else:
            status, body = 404, b"not found\n"
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": body})

    sock = socket.create_server((HOST, 0))
    config = uvicorn.Config(
        app, log_config=None, access_log=False, lifespan="off", loop="asyncio", http="h11",
        timeout_keep_alive=5, limit_concurrency=limit,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield int(sock.getsockname()[1]), cache
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def serve(variant: str, state: MetricsState, old_module: str | None) -> Iterator[tuple[int, RenderCache | None]]:
    if variant == "new":
        with MetricsServer(state, settings=MetricsSettings(host=HOST, port=0)) as srv:
            yield srv.port, srv.cache
    elif variant == "old":
        if old_module is None:
            raise SystemExit("variant 'old' needs --old-module (git show f842c1c:monitor/exporters/http.py > FILE)")
        with _load_old(old_module)(state, host=HOST, port=0) as srv:
            yield int(srv.port), None
    else:
        with uvicorn_server(state, 64 if variant == "uvicorn-limited" else None) as (port, cache):
            yield port, cache


def vm_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def run_server(args: argparse.Namespace) -> None:
    """One variant, all phases; one JSON line per phase on stdout."""
    state = MetricsState()
    stop, done = threading.Event(), [0]
    worker = threading.Thread(target=ingest, args=(state, stop, done, args.models, args.segments), daemon=True)
    worker.start()
    server: AbstractContextManager[tuple[int, RenderCache | None]] = serve(args.variant, state, args.old_module)
    with server as (port, cache):
        time.sleep(1.0)  # warm-up: every series exists before the first phase
        for phase in PHASES:
            # the server drops what the previous client left behind; the quiet second half is this phase's
            # baseline, measured just before it so that the machine's drift hits both alike
            time.sleep(args.settle / 2)
            events0, started = done[0], time.perf_counter()
            time.sleep(args.settle / 2)
            baseline = (done[0] - events0) / (time.perf_counter() - started)
            scrapers = args.scrapers if phase in ("scrapers", "both") else 0
            half_open = args.half_open if phase in HALF_OPEN else 0
            client = subprocess.Popen(
                [sys.executable, __file__, "--role", "client", "--port", str(port), "--seconds", str(args.seconds),
                 "--scrapers", str(scrapers), "--half-open", str(half_open), "--probe", str(int(half_open > 0))],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            assert client.stdout is not None
            client.stdout.readline()  # "ready": the client's start-up is not part of the phase
            renders0, events0, started = cache.renders if cache else 0, done[0], time.perf_counter()
            threads, rss = 0, 0
            while client.poll() is None:
                threads, rss = max(threads, threading.active_count()), max(rss, vm_rss_kib())
                time.sleep(0.1)
            elapsed = time.perf_counter() - started
            out = client.stdout.read()
            if client.returncode != 0 or not out.strip():
                raise SystemExit(f"{phase}: the client process exited {client.returncode} (its stderr is above)")
            row = json.loads(out)
            row.update(
                variant=args.variant, phase=phase, events_per_second=(done[0] - events0) / elapsed, baseline=baseline,
                threads=threads, rss_mib=rss / 1024, renders=(cache.renders - renders0) if cache else None,
            )  # fmt: skip
            print(json.dumps(row), flush=True)
    stop.set()
    worker.join(5)


# -- the client process ----------------------------------------------------------------------------------------
def _get(port: int, path: str, timeout: float) -> tuple[int, float]:
    """(status or -1 on error, seconds) of one GET on a fresh connection."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        return resp.status, time.perf_counter() - started
    except (OSError, http.client.HTTPException):
        return -1, time.perf_counter() - started
    finally:
        conn.close()


def _scraper(port: int, deadline: float, out: list[tuple[int, float]]) -> None:
    conn: http.client.HTTPConnection | None = None
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(HOST, port, timeout=max(0.1, deadline - started))
            conn.request("GET", "/metrics")
            resp = conn.getresponse()
            resp.read()
            out.append((resp.status, time.perf_counter() - started))
            if resp.will_close:
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            out.append((-1, time.perf_counter() - started))
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.01)
    if conn is not None:
        conn.close()


def _half_open(port: int, count: int, deadline: float, stats: dict[str, int]) -> None:
    """Keeps ``count`` connections with an unfinished request open until ``deadline``; reopens closed ones."""
    socks: list[socket.socket | None] = [None] * count
    partial = f"GET /metrics HTTP/1.1\r\nHost: {HOST}\r\n".encode()
    while time.perf_counter() < deadline:
        for i, sock in enumerate(socks):
            if sock is not None:
                try:
                    if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b"":
                        continue  # an answer to a half request: still counts as open
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                sock.close()
                stats["closed_by_server"] += 1
            try:
                fresh = socket.create_connection((HOST, port), timeout=1.0)
            except OSError:
                socks[i] = None
                stats["connect_failures"] += 1
                continue
            try:
                fresh.sendall(partial)
                fresh.setblocking(False)  # the MSG_PEEK check above must not wait
                socks[i] = fresh
            except OSError:
                fresh.close()
                socks[i] = None
                stats["closed_by_server"] += 1
        time.sleep(0.25)
    for sock in socks:
        if sock is not None:
            sock.close()


def _pct(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def run_client(args: argparse.Namespace) -> None:
    print("ready", flush=True)
    deadline = time.perf_counter() + args.seconds
    scrapes: list[tuple[int, float]] = []
    stats = {"closed_by_server": 0, "connect_failures": 0}
    threads = [threading.Thread(target=_scraper, args=(args.port, deadline, scrapes)) for _ in range(args.scrapers)]
    if args.half_open:
        threads.append(threading.Thread(target=_half_open, args=(args.port, args.half_open, deadline, stats)))
    for t in threads:
        t.start()
    health: list[tuple[int, float]] = []
    probes: list[tuple[int, float]] = []
    if args.probe:
        time.sleep(min(1.0, args.seconds / 4))  # let the half-open connections pile up first
        next_metrics = 0.0
        while time.perf_counter() < deadline:
            health.append(_get(args.port, "/healthz", timeout=5.0))
            if time.perf_counter() >= next_metrics:
                probes.append(_get(args.port, "/metrics", timeout=max(1.0, deadline - time.perf_counter() + 5)))
                next_metrics = time.perf_counter() + 1.0
            time.sleep(0.1)
    while time.perf_counter() < deadline:  # the idle phase too lasts --seconds
        time.sleep(0.05)
    for t in threads:
        t.join(args.seconds + 30)
    ok = [s for code, s in scrapes if code == 200]
    good_health = [s for code, s in health if code == 200]
    result = {
        "scrapes_per_second": len(ok) / args.seconds,
        "scrape_errors": len(scrapes) - len(ok),
        "scrape_p50_ms": _pct([s * 1e3 for s in ok], 50),
        "scrape_max_ms": max(ok, default=0.0) * 1e3 if ok else None,
        "healthz_p50_ms": _pct([s * 1e3 for s in good_health], 50),
        "healthz_max_ms": max((s * 1e3 for _, s in health), default=None),
        "healthz_failed": f"{len(health) - len(good_health)}/{len(health)}" if health else None,
        "metrics_probe_max_ms": max((s * 1e3 for _, s in probes), default=None),
        **stats,
    }
    print(json.dumps(result))


# -- the parent: one server process per variant, then the tables ---------------------------------------------
def _cell(value: Any, fmt: str = "{:,.0f}") -> str:
    if value is None:
        return "—"
    return fmt.format(value) if isinstance(value, float | int) else str(value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=["new"], help="servers to compare")
    parser.add_argument("--old-module", help="file holding the pre-issue-30 MetricsServer (variant 'old')")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase (default 10)")
    parser.add_argument(
        "--settle", type=float, default=8.0, help="quiet time before each phase; its second half is the baseline (8)"
    )
    parser.add_argument("--scrapers", type=int, default=16, help="concurrent scraper loops (default 16)")
    parser.add_argument("--half-open", type=int, default=300, help="half-open connections held (default 300)")
    parser.add_argument("--models", type=int, default=4, help="models in the imitated state (default 4)")
    parser.add_argument("--segments", type=int, default=8, help="segments per model (default 8)")
    # internal: the roles the parent starts
    parser.add_argument("--role", choices=("parent", "server", "client"), default="parent", help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=VARIANTS, default="new", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--probe", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.seconds > 120 or not 0 <= args.half_open <= 1000 or not 0 <= args.scrapers <= 64:
        parser.error("bounded run: --seconds in (0, 120], --half-open in [0, 1000], --scrapers in [0, 64]")
    if args.role == "server":
        run_server(args)
        return
    if args.role == "client":
        run_client(args)
        return
    print(f"machine: {machine('numpy', 'uvicorn', load=True)}, prometheus_client {version('prometheus_client')}")
    print(f"command: {' '.join([os.path.relpath(sys.executable), *sys.argv])}\n", flush=True)
    rows: list[dict[str, Any]] = []
    for variant in args.variants:
        done = subprocess.run(
            [sys.executable, __file__, "--role", "server", "--variant", variant, *(argv or sys.argv[1:])],
            capture_output=True, text=True, timeout=len(PHASES) * (args.seconds + args.settle + 40) + 60, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"variant {variant} exited {done.returncode}:\n{done.stderr[-3000:]}")
        rows.extend(json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
    print(
        "| server | phase | ingest events/s | vs just before | scrapes/s | scrape p50 / max ms | renders | /healthz p50 / max ms "
        "| /healthz failed | slowest /metrics probe ms | threads (max) | VmRSS MiB (max) | half-open closed by server / connects failed |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        share = r["events_per_second"] / r["baseline"] if r["baseline"] else None
        print(
            f"| {r['variant']} | {r['phase']} | {_cell(r['events_per_second'])} | {_cell(share, '{:.0%}')} "
            f"| {_cell(r['scrapes_per_second'] or None, '{:,.1f}')} "
            f"| {_cell(r['scrape_p50_ms'], '{:,.0f}')} / {_cell(r['scrape_max_ms'], '{:,.0f}')} "
            f"| {_cell(r['renders'])} "
            f"| {_cell(r['healthz_p50_ms'], '{:,.1f}')} / {_cell(r['healthz_max_ms'], '{:,.0f}')} "
            f"| {_cell(r['healthz_failed'])} | {_cell(r['metrics_probe_max_ms'])} | {r['threads']} "
            f"| {r['rss_mib']:,.0f} | {_cell(r['closed_by_server'] if r['phase'] in HALF_OPEN else None)} "
            f"/ {_cell(r['connect_failures'] if r['phase'] in HALF_OPEN else None)} |"
        )


if __name__ == "__main__":
    main()
