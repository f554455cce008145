"""``harmonic-monitor demo`` end to end (monitor/cli/demo.py + monitor/cli/demo_data.py), run as a subprocess.

The full demo takes seconds, so it is marked slow; nothing here asserts on time but generous liveness bounds.
Every run points TMPDIR (and ``tempfile.tempdir`` in process) at the test's own directory: the tests leave nothing
in /tmp.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.cli import build_parser
from monitor.cli.demo import _PhaseTally
from monitor.cli.demo_data import PHASES, DemoData
from monitor.cli.demo_regressor import EVERY as REGRESSOR_EVERY
from monitor.cli.demo_regressor import NAME as REGRESSOR
from monitor.errors import ModelError


def demo_env(tmp: Path) -> dict[str, str]:
    """The environment with TMPDIR in ``tmp`` (the demo's default workdir goes there) and unbuffered output."""
    return {**os.environ, "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"}


def run_demo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "demo", "--no-serve", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=demo_env(cwd),
    )


#: liveness bounds: on the serving demo reaching its linger (training and scoring), and then on its endpoints
#: showing what the summary printed (a snapshot is published once per render interval, 1 s)
_LINGER_TIMEOUT_SECONDS = 300.0
_COUNTED_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class Served:
    """What the lingering demo's HTTP endpoints answered once ``/metrics`` counted the events the summary printed."""

    metrics: dict[str, list[tuple[dict[str, str], float]]]
    gammamap: dict[str, Any]
    probes: dict[str, Any]
    readyz: dict[str, Any]
    healthz: dict[str, Any]


def _get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return bytes(response.read())


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def _consumed(samples: dict[str, list[tuple[dict[str, str], float]]], model: str | None = None) -> float:
    """Events consumed, of ``model`` (None: of every model: the classifier's and the regressor's)."""
    rows = samples.get("harmonic_events_consumed_total", [])
    return sum(v for labels, v in rows if model is None or labels.get("model") == model)


def _scrape_when_counted(port: int, events: int) -> Served:
    """Poll ``/metrics`` until it counts ``events`` consumed (the snapshot is published once per render interval) or
    the liveness bound passes, then read the other endpoints; the test judges what they answered."""
    deadline = time.monotonic() + _COUNTED_TIMEOUT_SECONDS
    metrics = _samples(_get(port, "/metrics").decode())
    while _consumed(metrics) != events and time.monotonic() < deadline:
        time.sleep(0.2)
        metrics = _samples(_get(port, "/metrics").decode())
    return Served(
        metrics,
        json.loads(_get(port, "/gammamap")),
        json.loads(_get(port, "/probes")),
        json.loads(_get(port, "/readyz")),
        json.loads(_get(port, "/healthz")),
    )


def serve_demo(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], Served]:
    """The demo serving on a free port with a long ``--linger``: its endpoints are scraped once the summary is out,
    then Ctrl-C (SIGINT) ends the linger, and the demo exits 0 as after a linger run out."""
    argv = [sys.executable, "-m", "monitor", "demo", "--metrics-port", "0", "--linger", "600", *args]
    # SIGINT as in a terminal, even where the test runner's own parent ignores it (Python keeps an ignored SIGINT)
    with (cwd / "demo.stderr").open("w") as err:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=demo_env(cwd),
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    lines: list[str] = []
    lingering = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("serving /metrics for"):
                lingering.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + _LINGER_TIMEOUT_SECONDS
        while not lingering.wait(0.2) and proc.poll() is None and time.monotonic() < deadline:
            pass
        out = "".join(lines)
        assert lingering.is_set(), f"the demo did not reach its linger (status {proc.poll()}):\n{out}"
        port = re.search(r"^metrics: http://127\.0\.0\.1:(\d+)/metrics", out, re.M)
        scored = re.search(r"^(\d+) events scored", out, re.M)
        assert port and scored, out
        served = _scrape_when_counted(int(port.group(1)), int(scored.group(1)))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    stderr = (cwd / "demo.stderr").read_text(encoding="utf-8")
    (cwd / "demo.stderr").unlink()
    return subprocess.CompletedProcess(argv, proc.returncode, "".join(lines), stderr), served


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Served]:
    """One demo without --workdir (9000 events: enough micro-batches per phase for a moving window to differ),
    serving its endpoints and scraped while it lingers."""
    tmp = tmp_path_factory.mktemp("demo_default")
    proc, served = serve_demo("--events", "9000", cwd=tmp)
    return proc, tmp, served


@pytest.mark.slow
def test_demo_three_phases_get_their_own_verdicts(tmp_path: Path) -> None:
    summary_path = tmp_path / "s.json"
    proc = run_demo(
        "--events", "20000", "--summary-json", str(summary_path), "--workdir", str(tmp_path / "work"), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    phases = summary["phases"]
    assert [p["name"] for p in phases] == ["stationary", "input-shift", "harmful-shift"] == list(PHASES)
    assert sum(p["events"] for p in phases) == 20000
    # the verdict of each phase names it; the stationary phase's verdict is the Verdict enum's "stable"
    assert [p["verdict"] for p in phases] == ["stable", "input-shift", "harmful-shift"]
    for p in phases:
        assert isinstance(p["gamma_mean"], float) and math.isfinite(p["gamma_mean"])
        assert isinstance(p["flicker_mean"], float) and math.isfinite(p["flicker_mean"])
    stationary, shifted, harmful = phases
    assert stationary["alerts"] == []
    assert "HarmonicHarmfulShift" in harmful["alerts"]
    assert "HarmonicHarmfulShift" not in shifted["alerts"]
    assert harmful["flicker_mean"] > stationary["flicker_mean"]
    # each phase beside the reference: ratios of its means to the reference's, printed and in the JSON
    ref = summary["reference"]
    assert stationary["gamma_ratio"] == pytest.approx(stationary["gamma_mean"] / ref["gamma_mean"])
    assert harmful["gamma_ratio"] > stationary["gamma_ratio"] and harmful["flicker_ratio"] > 1.0
    assert f"γ {harmful['gamma_ratio']:.2f}×" in proc.stdout and "each phase beside the reference" in proc.stdout

    # the harmful phase moves the Gamma Map's mass toward low P and high γ; the input shift barely moves it
    s_c, h_c = stationary["gamma_map"]["centroid"], harmful["gamma_map"]["centroid"]
    assert h_c["p"] < s_c["p"] and h_c["gamma_bin"] > s_c["gamma_bin"]
    assert harmful["gamma_map"]["total"] == harmful["events"]
    assert "mean γ bin" in proc.stdout
    regressor = [p["regressor_error"] for p in phases]
    assert summary["events_scored"] == 20000 + sum(r["events"] for r in regressor)
    assert summary["events_invalid"] == 0
    # the regressor's stationary MAE estimate covers what it realized
    assert regressor[0]["lower"] <= regressor[0]["realized"] <= regressor[0]["upper"], regressor
    assert "summary" in proc.stdout and "harmful-shift" in proc.stdout
    assert f"files kept in {tmp_path / 'work'} (--workdir)" in proc.stdout
    assert (summary["workdir"], summary["workdir_kept"]) == (str(tmp_path / "work"), True)


def test_demo_too_few_events_fails_with_a_clear_message(tmp_path: Path) -> None:
    proc = run_demo("--events", "100", "--workdir", str(tmp_path / "work"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "--events must be >= 3000" in proc.stderr and "got 100" in proc.stderr
    assert not (tmp_path / "work").exists()  # refused before any work


# -- the temporary workdir goes on every exit path ----------------------------------------------
@pytest.mark.slow
def test_demo_without_workdir_removes_its_temporary_one_and_says_so(
    default_run: tuple[subprocess.CompletedProcess[str], Path, Served],
) -> None:
    proc, tmp, _ = default_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list(tmp.glob("harmonic-demo-*")) == []
    assert re.search(
        r"temporary files in \S+harmonic-demo-\S+ are removed at exit \(pass --workdir DIR to keep them\)", proc.stdout
    )


def test_demo_removes_its_temporary_workdir_when_it_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_build(workdir: Path, *, events: int, seed: int) -> DemoData:
        (workdir / "demo-model.onnx").write_bytes(b"half written")
        raise ModelError("training failed")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr("monitor.cli.demo_data.build_demo", failing_build)
    args = build_parser().parse_args(["demo", "--no-serve", "--events", "3000"])
    with pytest.raises(ModelError, match="training failed"):
        args.func(args)
    assert list(tmp_path.iterdir()) == []


def test_demo_removes_its_temporary_workdir_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "demo", "--no-serve"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=demo_env(tmp_path),
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once the workdir exists
        assert "harmonic-demo-" in first
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert list(tmp_path.glob("harmonic-demo-*")) == []


# -- one number per thing: the summary repeats the progress line's last values -----------------
_PROGRESS = re.compile(r"^\[\s*(\S+)\]\s+(\d+)/\d+\s+events\s+\d+ ev/s\s+γ (\S+)\s+flicker (\S+)\s+verdict (\S+)$")
_SUMMARY_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)\s+\S+$")


@pytest.mark.slow
def test_demo_summary_repeats_the_last_progress_values_of_each_phase(
    default_run: tuple[subprocess.CompletedProcess[str], Path, Served],
) -> None:
    proc, _, _ = default_run
    lines = proc.stdout.splitlines()
    progress = {m.group(1): m.groups()[1:] for m in map(_PROGRESS.match, lines) if m}
    table = lines[lines.index("summary") + 2 :]
    summary = {m.group(1): m.groups()[1:] for m in map(_SUMMARY_ROW.match, table) if m and m.group(1) in PHASES}
    assert list(progress) == list(summary) == list(PHASES)
    assert progress == summary


# -- the endpoints serve the live state: what the summary prints -------------------------------
@pytest.mark.slow
def test_demo_endpoints_serve_the_events_windows_verdict_and_gamma_map_the_summary_prints(
    default_run: tuple[subprocess.CompletedProcess[str], Path, Served],
) -> None:
    proc, _, served = default_run
    assert proc.returncode == 0, proc.stdout + proc.stderr  # Ctrl-C ends the linger, not the demo
    lines = proc.stdout.splitlines()
    table = lines[lines.index("summary") + 2 :]
    last = [m for m in map(_SUMMARY_ROW.match, table) if m and m.group(1) in PHASES][-1]
    scored = re.search(r"^(\d+) events scored", proc.stdout, re.M)
    assert scored is not None, proc.stdout
    events = int(scored.group(1))
    demo = {
        name: [(labels, v) for labels, v in rows if labels.get("model") == "demo"]
        for name, rows in served.metrics.items()
    }
    regressor = 3 * len(range(0, 3000, REGRESSOR_EVERY))  # one regressor event per EVERY of each phase's 3000
    assert _consumed(served.metrics, "demo") == 9000 and _consumed(served.metrics, REGRESSOR) == regressor
    assert _consumed(served.metrics) == events == 9000 + regressor
    assert sum(v for _, v in demo["harmonic_events_scored_total"]) == 9000
    # the windows hold events, and the verdict series names the last phase's verdict
    windows = {labels["window"]: v for labels, v in demo["harmonic_window_events"]}
    assert windows and all(v > 0 for v in windows.values()), windows
    verdicts = {labels["verdict"]: v for labels, v in demo["harmonic_drift_verdict"]}
    assert verdicts == {last.group(5): 1.0}
    assert demo["harmonic_drift_statistic"]
    # the Gamma Map counts every event, on /metrics and on /gammamap
    assert sum(v for _, v in demo["harmonic_gammamap_events_total"]) == 9000
    assert served.gammamap["models"]["demo"]["cumulative"]["total"] == 9000
    assert "demo" in served.probes["models"]
    assert served.readyz["ready"] is True and served.healthz["status"] == "ok"
    # the regressor: its error estimated without labels per window and method, beside its reference error
    errors = [labels for labels, _ in served.metrics["harmonic_estimated_error"] if labels["model"] == REGRESSOR]
    assert {(e["method"], e["loss"]) for e in errors} >= {("iw", "mae"), ("dle", "rmse")}, errors
    ref = {
        labels["loss"]: v for labels, v in served.metrics["harmonic_reference_error"] if labels["model"] == REGRESSOR
    }
    assert set(ref) == {"mae", "rmse"} and 0 < ref["mae"] < ref["rmse"]
    assert "regressor's MAE without labels (demo-regressor" in proc.stdout


def test_phase_tally_means_are_over_every_batch_and_leave_nan_out() -> None:
    rng = np.random.default_rng(0)
    batches = [(rng.random(512), rng.random(512)) for _ in range(6)]
    tally = _PhaseTally()
    for gamma, flicker in batches:
        tally.update(gamma, flicker)
    tally.update(np.array([np.nan]), np.array([np.nan]))
    assert tally.gamma_mean == pytest.approx(np.concatenate([g for g, _ in batches]).mean())
    assert tally.flicker_mean == pytest.approx(np.concatenate([f for _, f in batches]).mean())
    assert tally.gamma_p95() == pytest.approx(np.quantile(np.concatenate([g for g, _ in batches]), 0.95))


def test_phase_tally_of_no_events_is_nan() -> None:
    tally = _PhaseTally()
    assert math.isnan(tally.gamma_mean) and math.isnan(tally.flicker_mean) and math.isnan(tally.gamma_p95())
