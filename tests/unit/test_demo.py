"""``harmonic-monitor demo`` end to end (monitor/cli/demo.py + monitor/cli/demo_data.py), run as a subprocess.

The full demo takes seconds, so it is marked slow; nothing here asserts on time. Every run points TMPDIR (and
``tempfile.tempdir`` in process) at the test's own directory: the tests leave nothing in /tmp.
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
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import build_parser
from monitor.cli.demo import _PhaseTally
from monitor.cli.demo_data import PHASES, DemoData
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


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One demo without --workdir (9000 events: enough micro-batches per phase for a moving window to differ)."""
    tmp = tmp_path_factory.mktemp("demo_default")
    return run_demo("--events", "9000", cwd=tmp), tmp


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
    assert summary["events_scored"] == 20000 and summary["events_invalid"] == 0
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
    default_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, tmp = default_run
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
    default_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    proc, _ = default_run
    lines = proc.stdout.splitlines()
    progress = {m.group(1): m.groups()[1:] for m in map(_PROGRESS.match, lines) if m}
    table = lines[lines.index("summary") + 2 :]
    summary = {m.group(1): m.groups()[1:] for m in map(_SUMMARY_ROW.match, table) if m and m.group(1) in PHASES}
    assert list(progress) == list(summary) == list(PHASES)
    assert progress == summary


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
