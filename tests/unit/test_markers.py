"""The README's fast unit-test command never starts a real service: every test under tests/integration is marked
``integration`` by that folder's conftest, whatever its file says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_markers_every_integration_test_is_deselected_by_the_fast_command() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "not integration",
            "tests/integration",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert collected == [], f"integration tests without the marker: {collected[:5]}"
    assert "deselected" in done.stdout, done.stdout[-2000:]
