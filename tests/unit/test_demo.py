"""``harmonic-monitor demo`` end to end (monitor/cli/demo.py + monitor/cli/demo_data.py), run as a subprocess.

The full demo takes tens of seconds, so it is marked slow; nothing here asserts on time.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.cli.demo_data import PHASES


def run_demo(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", "demo", "--no-serve", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_demo_three_phases_get_their_own_verdicts(tmp_path: Path) -> None:
    summary_path = tmp_path / "s.json"
    proc = run_demo(
        "--events", "20000", "--summary-json", str(summary_path), "--workdir", str(tmp_path / "work"), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    phases = summary["phases"]
    assert [p["name"] for p in phases] == ["stationary", "benign-shift", "harmful-shift"] == list(PHASES)
    assert sum(p["events"] for p in phases) == 20000
    # the verdict of each phase names it; the stationary phase's verdict is the Verdict enum's "stable"
    assert [p["verdict"] for p in phases] == ["stable", "benign-shift", "harmful-shift"]
    for p in phases:
        assert isinstance(p["gamma_mean"], float) and math.isfinite(p["gamma_mean"])
        assert isinstance(p["flicker_mean"], float) and math.isfinite(p["flicker_mean"])
    stationary, benign, harmful = phases
    assert stationary["alerts"] == []
    assert "HarmonicHarmfulShift" in harmful["alerts"]
    assert "HarmonicHarmfulShift" not in benign["alerts"]
    assert harmful["flicker_mean"] > stationary["flicker_mean"]
    assert summary["events_scored"] == 20000 and summary["events_invalid"] == 0
    assert "summary" in proc.stdout and "harmful-shift" in proc.stdout


def test_demo_too_few_events_fails_with_a_clear_message(tmp_path: Path) -> None:
    proc = run_demo("--events", "100", "--workdir", str(tmp_path / "work"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "--events must be >= 3000" in proc.stderr and "got 100" in proc.stderr
    assert not (tmp_path / "work").exists()  # refused before any work
