"""Runs ``harmonic-monitor reference`` in-process: the offline reference JSON of a model from rows of its inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from monitor.cli import main


def build_reference(model: Path, data: Path, out: Path, *extra: str) -> int:
    """``reference --model M --data D --out O [extra…]``; returns the exit code."""
    return main(["reference", "--model", str(model), "--data", str(data), "--out", str(out), *extra])


def reference_from_rows(root: Path, model: Path, rows: NDArray[np.float64], *extra: str) -> Path:
    """``rows`` saved as ``root/rows.npy``, then the reference built from them at ``root/ref.json`` (which must
    succeed); returns its path."""
    np.save(root / "rows.npy", rows)
    out = root / "ref.json"
    assert build_reference(model, root / "rows.npy", out, *extra) == 0
    return out
