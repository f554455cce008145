"""The HTTP endpoint in a process of its own, so that scrapers never take the pipeline's interpreter.

The pipeline (the parent) renders ``/metrics`` into bytes at most once per ``min_render_interval_seconds``, from its
own loop's tick, and writes them with ``/readyz``'s answer, ``/probes``' report, a sequence number and a heartbeat
into one snapshot file (written to a temporary name and renamed, so a reader sees a whole snapshot or the previous
one; in ``/dev/shm`` where there is one). A child process (``python -m monitor.exporters.http_process``) serves
that snapshot with :class:`~monitor.exporters.http.MetricsServer` — the same limits, TLS and basic auth — on the
listening socket the parent bound (so the port is known and a bind error raised before anything starts). Neither
side ever waits for the other: the parent writes a file and reads one, the child reads and writes its own.

- ``/healthz`` is the pipeline's liveness: 503 (``"status": "stalled"``) when the last snapshot is older than
  ``liveness_timeout_seconds`` (the pipeline's loop has not ticked), with the heartbeat's age in the body.
- The child counts its requests and refusals (``harmonic_http_requests_total``,
  ``harmonic_http_requests_rejected_total``) in its own state and writes them to a second file at most ten times a
  second; the parent copies them into its state, so they appear on ``/metrics`` about one render later. The
  parent observes ``harmonic_http_render_duration_seconds``: it renders.
- The child exits when its parent does, however the parent ends (``kill -9`` included): its stdin is a pipe from
  the parent, whose end of it closes only when the parent is gone, and it also watches its parent's pid. A child
  that dies is started again on the parent's next tick, from the counters it last wrote.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from monitor import telemetry as tel
from monitor.config import MetricsSettings, Settings, setting_default
from monitor.exporters.http import JsonProvider, MetricsServer, ReadyCheck, Routes
from monitor.exporters.listen import listen
from monitor.exporters.prometheus import MetricsState, StateCollector
from monitor.exporters.webconfig import load_web_config

log = logging.getLogger("monitor.exporters.http_process")

SNAPSHOT = "snapshot"
COUNTERS = "counters.json"
#: the counters the server process keeps and the pipeline exports
SERVER_COUNTERS = (tel.HTTP_REQUESTS_TOTAL.name, tel.HTTP_REQUESTS_REJECTED_TOTAL.name)
#: the default ``liveness_timeout_seconds``: a pipeline loop that has not ticked for this long is reported stalled
LIVENESS_TIMEOUT_SECONDS = 60.0


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary name beside ``path`` and rename it over ``path``: readers see all or nothing."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the pipeline hands the server process once per render interval.

    Examples
    --------
    >>> snap = Snapshot(seq=3, heartbeat=12.5, ready=True, detail={"partitions": ["t/0"]}, probes={"regions": []},
    ...                 metrics=b"harmonic_up 1\\n")
    >>> Snapshot.decode(snap.encode()) == snap
    True
    """

    seq: int
    #: ``time.monotonic()`` of the parent when written (system-wide on Linux and macOS)
    heartbeat: float
    ready: bool
    detail: dict[str, Any]
    probes: Any
    metrics: bytes
    #: further JSON documents by route name (another route served from the pipeline's data reads its own here)
    documents: dict[str, Any] = field(default_factory=dict)

    def encode(self) -> bytes:
        head = {"seq": self.seq, "heartbeat": self.heartbeat, "ready": self.ready, "detail": self.detail}
        head["probes"] = self.probes
        head["documents"] = self.documents
        return json.dumps(head, default=str).encode() + b"\n" + self.metrics

    @classmethod
    def decode(cls, data: bytes) -> Snapshot:
        head, sep, metrics = data.partition(b"\n")
        if not sep:
            raise ValueError(f"a snapshot is a JSON line and the metrics body; got {len(data)} bytes without a newline")
        h = json.loads(head)
        documents = dict(h.get("documents", {}))
        return cls(
            int(h["seq"]), float(h["heartbeat"]), bool(h["ready"]), dict(h["detail"]), h["probes"], metrics, documents
        )


class SnapshotReader:
    """The server process's view of the snapshot file: re-read when the file was replaced, at most once per
    ``recheck_seconds`` (a ``stat`` otherwise), so a storm of ``/healthz`` costs no reads."""

    def __init__(
        self, path: Path, *, recheck_seconds: float = 0.05, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = path
        self._recheck = recheck_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._key: tuple[int, int] | None = None
        self._snapshot: Snapshot | None = None

    def current(self) -> Snapshot | None:
        """The newest whole snapshot, or None before the first one."""
        with self._lock:
            now = self._clock()
            if now - self._checked >= self._recheck:
                self._checked = now
                try:
                    st = os.stat(self.path)
                    key = (st.st_ino, st.st_mtime_ns)
                    if key != self._key:
                        self._snapshot, self._key = Snapshot.decode(self.path.read_bytes()), key
                except FileNotFoundError:
                    pass
            return self._snapshot


@dataclass(frozen=True, slots=True)
class Published:
    """What the pipeline publishes to the server process, called once per render interval on the pipeline's thread;
    each None: the route's default.

    Attributes
    ----------
    ready, probes : ``/readyz``'s check (default: ready) and ``/probes``' report (default: no regions).
    documents : further JSON documents by name; the server process reads them with ``_Handover.document(name)``
        (the provider of a further route).
    """

    ready: ReadyCheck | None = None
    probes: JsonProvider | None = None
    documents: Mapping[str, JsonProvider] | None = None


class ProcessMetricsServer:
    """The HTTP endpoint served by a child process from snapshots the pipeline publishes: the interface of
    :class:`~monitor.exporters.http.MetricsServer` (``port``, ``scheme``, ``start``, ``close``, a context manager)
    plus :meth:`publish`, which the pipeline's loop calls on every tick.

    Parameters
    ----------
    state : MetricsState
        What ``/metrics`` exposes; the server process's request counters are copied into it.
    settings : MetricsSettings, optional
        ``metrics.*``: where to listen, bound here, at construction (port 0: a free one, read back from
        :attr:`port`); the limits, as for :class:`~monitor.exporters.http.MetricsServer`
        (``min_render_interval_seconds`` is the publish interval); ``web_config_file``, loaded here (so a bad one
        fails at construction) and again by the child. Default: the settings' defaults.
    published : Published, optional
        ``/readyz``'s check, ``/probes``' report and further documents (default: each route's default).
    liveness_timeout_seconds : float
        ``/healthz`` answers 503 once the last published snapshot is older than this.
    log_level, log_format : str
        The child's logging (the sidecar's own settings).
    listener : socket.socket, optional
        A socket already listening where ``settings`` say (:func:`~monitor.exporters.listen.listen`; ``run`` binds
        it before the consumer joins its group), owned from here on; default: bound here.
    """

    def __init__(
        self,
        state: MetricsState,
        *,
        settings: MetricsSettings | None = None,
        published: Published | None = None,
        liveness_timeout_seconds: float = LIVENESS_TIMEOUT_SECONDS,
        log_level: str = setting_default(Settings, "log_level"),
        log_format: str = setting_default(Settings, "log_format"),
        clock: Callable[[], float] = time.monotonic,
        listener: socket.socket | None = None,
    ) -> None:
        if not liveness_timeout_seconds > 0:
            raise ValueError(f"liveness_timeout_seconds must be > 0; got {liveness_timeout_seconds!r}")
        self.settings = settings = settings or MetricsSettings()
        published = published or Published()
        web_config_file = settings.web_config_file
        web_config = load_web_config(web_config_file) if web_config_file is not None else None
        if web_config is not None and web_config.ssl_context is None and web_config.tls is not None:
            web_config.tls.context(web_config.source)  # the certificate and key load here, or fail here
        self.scheme = "https" if web_config is not None and web_config.tls is not None else "http"
        self._state = state
        self._ready: ReadyCheck = published.ready or (lambda: (True, {}))
        self._probes: JsonProvider = published.probes or (lambda: {"regions": []})
        self._documents = dict(published.documents or {})
        self._liveness = liveness_timeout_seconds
        self._log_args = (log_level, log_format)
        self._clock = clock
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StateCollector(state))
        self._sock = listener if listener is not None else listen(settings.host, settings.port)
        shm = Path("/dev/shm")
        self.directory = Path(tempfile.mkdtemp(prefix="harmonic-http-", dir=shm if shm.is_dir() else None))
        self._seq = 0
        self._published = -float("inf")
        self._counters_checked = -float("inf")
        self._counters_key: tuple[int, int] | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._spawned = -float("inf")
        self._closed = False

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> ProcessMetricsServer:
        # the child starts from the counts the state already holds (restored from the state dir, or a dead child's)
        rows = [r for r in self._state.dump_counters() if r["name"] in SERVER_COUNTERS]
        write_atomic(self.directory / COUNTERS, json.dumps(rows).encode())
        self.publish(force=True)
        self._spawn()
        return self

    def _spawn(self) -> None:
        fd = self._sock.fileno()
        argv = [sys.executable, "-m", "monitor.exporters.http_process", "--fd", str(fd), "--dir", str(self.directory)]
        argv += ["--settings", self.settings.model_dump_json()]
        argv += ["--liveness-timeout", repr(self._liveness), "--log-level", self._log_args[0]]
        argv += ["--log-format", self._log_args[1], "--parent", str(os.getpid())]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, pass_fds=(fd,))
        self._spawned = self._clock()

    def publish(self, *, force: bool = False) -> bool:
        """On the pipeline's tick: once per render interval, copy the server's counters in, render, and write a
        snapshot (True when it did). Restarts a server process that died."""
        now = self._clock()
        if now - self._counters_checked >= 0.1:
            self._counters_checked = now
            self._import_counters()
            dead = self.proc is not None and self.proc.poll() is not None
            if dead and not self._closed and now - self._spawned >= 1.0:  # at most one restart a second
                log.error(
                    "the HTTP server process exited; starting it again",
                    extra={"returncode": self.proc and self.proc.returncode, "restarts": self.restarts + 1},
                )
                self.restarts += 1
                self._spawn()
        if not force and now - self._published < self.settings.min_render_interval_seconds:
            return False
        started = time.perf_counter()
        body: bytes = generate_latest(self.registry)
        tel.HTTP_RENDER_DURATION_SECONDS.observe(self._state, tel.NoLabels(), [time.perf_counter() - started])
        ok, detail = self._ready()
        self._seq += 1
        documents = {name: provide() for name, provide in self._documents.items()}
        snap = Snapshot(self._seq, self._clock(), ok, detail, self._probes(), body, documents)
        write_atomic(self.directory / SNAPSHOT, snap.encode())
        self._published = self._clock()
        return True

    def _import_counters(self) -> None:
        path = self.directory / COUNTERS
        try:
            st = os.stat(path)
            key = (st.st_ino, st.st_mtime_ns)
            if key == self._counters_key:
                return
            rows = json.loads(path.read_bytes())
        except (FileNotFoundError, ValueError):  # not yet written (a child never writes a partial file)
            return
        self._counters_key = key
        for row in rows:
            if row["name"] in SERVER_COUNTERS:
                self._state.set_counter(row["name"], tuple(row["labels"]), float(row["value"]))

    def close(self) -> None:
        self._closed = True
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        self._import_counters()
        self._sock.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ProcessMetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the server process -----------------------------------------------------------------------------------------
class _Handover:
    """The child's side: the snapshot's fields as :class:`MetricsServer` callbacks, and the counters written back."""

    def __init__(self, directory: Path, state: MetricsState, liveness_timeout_seconds: float) -> None:
        self.reader = SnapshotReader(directory / SNAPSHOT)
        self._counters = directory / COUNTERS
        self._state = state
        self._liveness = liveness_timeout_seconds

    def metrics(self) -> bytes:
        snap = self.reader.current()
        if snap is None:
            raise RuntimeError("the pipeline has not published a snapshot yet")
        return snap.metrics

    def ready(self) -> tuple[bool, dict[str, Any]]:
        snap = self.reader.current()
        if snap is None:
            return False, {"reason": "the pipeline has not published a snapshot yet"}
        return snap.ready, snap.detail

    def probes(self) -> Any:
        snap = self.reader.current()
        return {"regions": []} if snap is None else snap.probes

    def document(self, name: str) -> Any:
        """The pipeline's latest document ``name`` (None before the first snapshot or when it publishes none)."""
        snap = self.reader.current()
        return None if snap is None else snap.documents.get(name)

    def health(self) -> tuple[bool, dict[str, Any]]:
        snap = self.reader.current()
        if snap is None:
            return False, {"reason": "the pipeline has not published a snapshot yet"}
        age = max(0.0, time.monotonic() - snap.heartbeat)
        return age <= self._liveness, {"pipeline_heartbeat_age_seconds": round(age, 3), "seq": snap.seq}

    def write_counters(self, last: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        rows = [r for r in self._state.dump_counters() if r["name"] in SERVER_COUNTERS]
        if rows != last:
            write_atomic(self._counters, json.dumps(rows).encode())
        return rows


def _exit_with_parent(parent: int, directory: Path) -> None:
    """End this process when the parent is gone (stdin reaches EOF, or the parent pid changes), removing the
    handover directory that a killed parent could not remove."""

    def orphaned() -> None:
        shutil.rmtree(directory, ignore_errors=True)
        os._exit(0)

    def on_eof() -> None:
        while os.read(0, 4096):  # the raw descriptor: no buffer lock held at interpreter shutdown
            pass
        orphaned()

    def on_reparent() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        orphaned()

    threading.Thread(target=on_eof, name="parent-eof", daemon=True).start()
    threading.Thread(target=on_reparent, name="parent-pid", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    from monitor.logs import setup_logging
    from monitor.runtime.gammamap_view import gamma_map_document_handler

    p = argparse.ArgumentParser(prog="python -m monitor.exporters.http_process", description=__doc__)
    p.add_argument("--fd", type=int, required=True, help="the listening socket, inherited")
    p.add_argument("--dir", type=Path, required=True, help="where the snapshot and the counters live")
    p.add_argument(
        "--settings", type=MetricsSettings.model_validate_json, default=MetricsSettings(), help="metrics.* as JSON"
    )
    p.add_argument("--liveness-timeout", type=float, default=LIVENESS_TIMEOUT_SECONDS)
    p.add_argument("--parent", type=int, default=None, help="exit when this process is no longer the parent")
    p.add_argument("--log-level", default="info")
    p.add_argument("--log-format", default="plain")
    args = p.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C: the parent stops us, after its own work
    _exit_with_parent(args.parent if args.parent is not None else os.getppid(), args.dir)
    state = MetricsState()
    with contextlib.suppress(FileNotFoundError):
        state.load_counters(json.loads((args.dir / COUNTERS).read_bytes()))
    handover = _Handover(args.dir, state, args.liveness_timeout)
    sock = socket.socket(fileno=args.fd)
    settings: MetricsSettings = args.settings
    routes = Routes(
        metrics=handover.metrics,
        ready=handover.ready,
        probes=handover.probes,
        gammamap=gamma_map_document_handler(lambda: handover.document("gammamap")),
        health=handover.health,
    )
    web_config = load_web_config(settings.web_config_file) if settings.web_config_file is not None else None
    server = MetricsServer(state, sock=sock, settings=settings, routes=routes, web_config=web_config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        last: list[dict[str, Any]] | None = None
        while not stop.wait(0.1):
            last = handover.write_counters(last)
        handover.write_counters(last)
    return 0


if __name__ == "__main__":
    sys.exit(main())
