"""Every model of the zoo through the ``run`` pipeline: ``harmonic-monitor replay`` (the same Service as
``run``, events from a file in event time) over a JSON-lines stream whose events carry the model's inputs by name
(strings for the string column, nested lists for the image), with a reference JSON written by ``reference``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from tests import model_zoo
from tests.unit.test_zoo_commands import _inputs_file


def _jsonl(data: Path, path: Path, model: str, t0_ms: int = 1_700_000_000_000) -> int:
    arrays = dict(np.load(data))
    rows = len(next(iter(arrays.values())))
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(rows):
            features = {name: values[i].tolist() for name, values in arrays.items()}
            fh.write(json.dumps({"id": f"e{i}", "model": model, "ts": t0_ms + 1000 * i, "features": features}) + "\n")
    return rows


@pytest.mark.parametrize("name", model_zoo.NAMES)
def test_zoo_model_runs_through_the_run_pipeline(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    zoo = getattr(model_zoo, f"build_{name}")(tmp_path)
    data = _inputs_file(zoo, tmp_path / "inputs.npz")
    scale = ["--scale", "global"] if name == "cnn_digits" else []
    ref = tmp_path / "ref.json"
    assert main(["reference", "--model", str(zoo.path), "--data", str(data), "--out", str(ref), *scale]) == 0
    events = tmp_path / "events.jsonl"
    rows = _jsonl(data, events, name)
    timeline = tmp_path / "timeline.json"
    args = ["replay", "--model", str(zoo.path), "--model-name", name, "--reference", str(ref)]
    assert main([*args, "--events", str(events), "--timeline", str(timeline)]) == 0
    assert json.loads(timeline.read_text())["events"] == rows
    summary = capsys.readouterr().err
    assert f"{rows} events, {rows} scored, 0 invalid" in summary, summary
