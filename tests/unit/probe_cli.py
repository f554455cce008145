"""Runs ``harmonic-monitor probe`` in-process (only the probe sub-command registered) and reads its JSON report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from monitor.cli.probe import register


def run_probe(argv: list[str]) -> int:
    """Parse ``argv`` (starting with ``probe``) as the CLI does and run it; returns the exit code."""
    parser = argparse.ArgumentParser(prog="harmonic-monitor")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def probe_argv(model: Path, data: Path, reference: Path | None = None) -> list[str]:
    """The argv stem ``probe --model M --data D [--reference R]``."""
    argv = ["probe", "--model", str(model), "--data", str(data)]
    return argv if reference is None else [*argv, "--reference", str(reference)]


def read_report(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
