"""The HTTP endpoint in its own process (monitor/exporters/http_process.py): the pipeline publishes snapshots, a
child serves them; ``/healthz`` is the pipeline's heartbeat; the child's counters come back; the child dies with
its parent and is restarted when it dies alone."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from monitor import telemetry as tel
from monitor.config import MetricsSettings
from monitor.exporters.http_process import ProcessMetricsServer, Published, Snapshot, SnapshotReader, write_atomic
from monitor.exporters.prometheus import MetricsState

DEADLINE_SECONDS = 30.0


def until(check: Callable[[], Any], what: str) -> Any:
    """Poll ``check`` (an external process's doing) until it is truthy; AssertionError naming ``what``."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {DEADLINE_SECONDS} s")


def get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE_SECONDS)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def alive(pid: int) -> bool:
    """Running (a zombie that no init has reaped yet has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def state() -> MetricsState:
    return MetricsState()


@pytest.fixture
def server(state: MetricsState) -> Iterator[ProcessMetricsServer]:
    ready = {"ok": False}
    srv = ProcessMetricsServer(
        state,
        settings=MetricsSettings(host="127.0.0.1", port=0, min_render_interval_seconds=0.05),
        published=Published(
            ready=lambda: (ready["ok"], {"partitions": ["t/0"] if ready["ok"] else []}),
            probes=lambda: {"regions": [{"name": "r1"}]},
            documents={"extra": lambda: {"n": 1}},
        ),
    )
    srv.ready_flag = ready  # type: ignore[attr-defined]
    with srv:
        yield srv


def test_snapshot_reader_sees_a_replaced_file_and_nothing_before_the_first(tmp_path: Path) -> None:
    now = [0.0]
    reader = SnapshotReader(tmp_path / "snap", recheck_seconds=1.0, clock=lambda: now[0])
    assert reader.current() is None
    write_atomic(tmp_path / "snap", Snapshot(1, 5.0, True, {}, {}, b"a 1\n").encode())
    assert reader.current() is None  # rechecked only once per second
    now[0] = 1.0
    first = reader.current()
    assert first is not None and first.seq == 1 and first.metrics == b"a 1\n"
    write_atomic(tmp_path / "snap", Snapshot(2, 6.0, False, {"x": 1}, {}, b"a 2\n").encode())
    now[0] = 2.0
    assert reader.current() == Snapshot(2, 6.0, False, {"x": 1}, {}, b"a 2\n")
    assert list(tmp_path.iterdir()) == [tmp_path / "snap"]  # no temporary left behind


def test_snapshot_decode_says_what_it_expected() -> None:
    with pytest.raises(ValueError, match="a JSON line and the metrics body"):
        Snapshot.decode(b"no newline")


def test_process_server_serves_the_published_snapshot_from_another_process(
    server: ProcessMetricsServer, state: MetricsState
) -> None:
    assert server.proc is not None and server.proc.pid != os.getpid()
    status, body = until(lambda: _try_get(server.port, "/metrics"), "/metrics answered")
    assert status == 200 and b'harmonic_up{version="9.9.9"}' not in body
    state.set(tel.UP.name, ("9.9.9",), 1.0)
    server.publish(force=True)
    until(lambda: b'harmonic_up{version="9.9.9"} 1.0' in get(server.port, "/metrics")[1], "the new render served")
    assert get(server.port, "/readyz") == (503, b'{"ready": false, "partitions": []}\n')
    server.ready_flag["ok"] = True  # type: ignore[attr-defined]
    server.publish(force=True)
    until(lambda: get(server.port, "/readyz")[0] == 200, "/readyz turned ready")
    assert json.loads(get(server.port, "/probes")[1]) == {"regions": [{"name": "r1"}]}
    snap = Snapshot.decode((server.directory / "snapshot").read_bytes())
    assert snap.documents == {"extra": {"n": 1}} and snap.seq >= 3


def _try_get(port: int, path: str) -> tuple[int, bytes] | None:
    try:
        return get(port, path)
    except ConnectionError:
        return None


def test_process_server_healthz_reports_the_pipelines_heartbeat(state: MetricsState) -> None:
    late = [0.0]
    srv = ProcessMetricsServer(
        state,
        settings=MetricsSettings(host="127.0.0.1", port=0),
        liveness_timeout_seconds=30.0,
        clock=lambda: time.monotonic() - late[0],
    )
    with srv:
        status, body = until(lambda: _try_get(srv.port, "/healthz"), "/healthz answered")
        assert status == 200 and json.loads(body)["status"] == "ok"
        late[0] = 120.0  # the pipeline's last snapshot is two minutes old: its loop has stopped ticking
        srv.publish(force=True)
        status, body = until(lambda: (r := get(srv.port, "/healthz"))[0] == 503 and r, "/healthz turned 503")
        detail = json.loads(body)
        assert detail["status"] == "stalled" and detail["pipeline_heartbeat_age_seconds"] >= 119.0


def test_process_server_counts_come_back_into_the_pipelines_state(
    server: ProcessMetricsServer, state: MetricsState
) -> None:
    until(lambda: _try_get(server.port, "/nowhere"), "the server answered")
    assert get(server.port, "/nowhere")[0] == 404

    def counted() -> bool:
        server.publish()
        return state.counter(tel.HTTP_REQUESTS_TOTAL.name, ("other",)) == 2

    until(counted, "two requests to /nowhere counted in the pipeline's state")


def test_process_server_restarts_a_dead_server_process_with_its_counts(
    server: ProcessMetricsServer, state: MetricsState
) -> None:
    until(lambda: _try_get(server.port, "/nowhere"), "the server answered")
    until(lambda: (server.publish(), state.counter(tel.HTTP_REQUESTS_TOTAL.name, ("other",)))[1], "counted")
    first = server.proc
    assert first is not None
    first.kill()
    first.wait(DEADLINE_SECONDS)

    def restarted() -> bool:
        server.publish()
        return server.proc is not first and _try_get(server.port, "/nowhere") is not None

    until(restarted, "a new server process answering")
    assert server.restarts == 1
    until(lambda: (server.publish(), state.counter(tel.HTTP_REQUESTS_TOTAL.name, ("other",)) >= 2)[1], "kept")


def test_process_server_rejects_a_non_positive_liveness_timeout(state: MetricsState) -> None:
    with pytest.raises(ValueError, match="liveness_timeout_seconds must be > 0"):
        ProcessMetricsServer(state, settings=MetricsSettings(host="127.0.0.1", port=0), liveness_timeout_seconds=0)


PARENT = """
import os, sys
from monitor.config import MetricsSettings
from monitor.exporters.http_process import ProcessMetricsServer
from monitor.exporters.prometheus import MetricsState
srv = ProcessMetricsServer(MetricsState(), settings=MetricsSettings(host="127.0.0.1", port=0)).start()
print(srv.proc.pid, srv.port, srv.directory, flush=True)
sys.stdin.readline()
os.kill(os.getpid(), 9)
"""


def test_the_server_process_dies_with_a_killed_parent() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ}
    )
    assert parent.stdout is not None and parent.stdin is not None
    pid, port_, directory = parent.stdout.readline().decode().split()
    child_pid, port = int(pid), int(port_)
    until(lambda: _try_get(port, "/healthz"), "the child answered")
    assert alive(child_pid)
    parent.stdin.write(b"\n")
    parent.stdin.flush()
    assert parent.wait(DEADLINE_SECONDS) == -signal.SIGKILL
    until(lambda: not alive(child_pid), "the server process gone after its parent's kill -9")
    until(lambda: not Path(directory).exists(), "the handover directory removed")
    parent.stdin.close()
    parent.stdout.close()


def test_handover_answers_from_the_snapshot_and_writes_the_counts_back(tmp_path: Path) -> None:
    from monitor.exporters.http_process import COUNTERS, SNAPSHOT, _Handover

    state = MetricsState()
    handover = _Handover(tmp_path, state, liveness_timeout_seconds=30.0)
    assert handover.ready() == (False, {"reason": "the pipeline has not published a snapshot yet"})
    assert handover.health()[0] is False and handover.probes() == {"regions": []}
    with pytest.raises(RuntimeError, match="has not published a snapshot yet"):
        handover.metrics()
    assert handover.document("gammamap") is None
    snap = Snapshot(7, time.monotonic(), True, {"p": 1}, {"r": 2}, b"m 1\n", {"gammamap": {"cells": [1]}})
    write_atomic(tmp_path / SNAPSHOT, snap.encode())
    handover.reader._checked = -float("inf")  # no waiting for the recheck interval
    assert handover.metrics() == b"m 1\n" and handover.ready() == (True, {"p": 1}) and handover.probes() == {"r": 2}
    assert handover.document("gammamap") == {"cells": [1]} and handover.document("other") is None
    ok, detail = handover.health()
    assert ok and detail["seq"] == 7 and 0.0 <= detail["pipeline_heartbeat_age_seconds"] < 30.0
    state.inc(tel.HTTP_REQUESTS_TOTAL.name, ("metrics",))
    rows = handover.write_counters(None)
    assert (
        json.loads((tmp_path / COUNTERS).read_bytes())
        == rows
        == [{"name": tel.HTTP_REQUESTS_TOTAL.name, "labels": ["metrics"], "value": 1.0}]
    )
    (tmp_path / COUNTERS).unlink()
    assert handover.write_counters(rows) == rows and not (tmp_path / COUNTERS).exists()  # unchanged: not rewritten
