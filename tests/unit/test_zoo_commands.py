"""Every model of the zoo through the offline commands, from the files a team would have: ``reference``,
``score`` and ``probe`` on an ``.npz`` of its inputs by name (the string column as a numpy str array)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from tests import model_zoo


def _inputs_file(zoo: model_zoo.ZooModel, path: Path, rows: int = 40) -> Path:
    """``rows`` rows around the zoo's sample: float inputs jittered (seeded), the others drawn from the sample."""
    rng = np.random.default_rng(0)
    pick = rng.integers(0, zoo.rows, size=rows)
    arrays = {}
    for name, values in zoo.inputs.items():
        chosen = values[pick]
        if chosen.dtype.kind == "f":
            spread = float(np.std(values)) or 1.0
            chosen = (chosen + 0.05 * spread * rng.standard_normal(chosen.shape)).astype(values.dtype)
        elif chosen.dtype == object:
            chosen = chosen.astype(str)
        arrays[name] = chosen
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return path


@pytest.mark.parametrize("name", model_zoo.NAMES)
def test_zoo_model_runs_through_reference_score_and_probe(tmp_path: Path, name: str) -> None:
    zoo = getattr(model_zoo, f"build_{name}")(tmp_path)
    data = _inputs_file(zoo, tmp_path / "inputs.npz")
    scale = ["--scale", "global"] if name == "cnn_digits" else []
    ref = tmp_path / "ref.json"
    assert main(["reference", "--model", str(zoo.path), "--data", str(data), "--out", str(ref), *scale]) == 0
    assert json.loads(ref.read_text())["n_features"] > 0
    scores = tmp_path / "scores.csv"
    assert main(["score", "--model", str(zoo.path), "--data", str(data), "--out", str(scores), *scale]) == 0
    table = np.genfromtxt(scores, delimiter=",", names=True)
    assert table.shape == (40,) and np.all(np.isfinite(table["gamma"])) and np.all(np.isfinite(table["flicker"]))
    report = tmp_path / "probe.json"
    probe = ["probe", "--model", str(zoo.path), "--data", str(data), "--json", str(report), "--budget", "200000"]
    assert main(probe) == 0
    assert "mri" in json.loads(report.read_text())
