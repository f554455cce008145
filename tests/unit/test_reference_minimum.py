"""A reference ``run`` cannot use is refused at start (check-config and run read it through the same functions:
monitor/runtime/models.py), rows it leaves out are said, and an event that cannot be applied is counted neither
scored nor twice."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.cli import main
from monitor.config import load_settings
from monitor.errors import ConfigError, DataError
from monitor.rolling.reference import Reference
from monitor.runtime.models import MIN_REFERENCE_ROWS, load_model_runtime
from monitor.runtime.service import Service
from monitor.source.replay import ReplaySource
from tests.unit import onnx_graphs
from tests.unit.test_pipeline import MODEL, FakeClock, events, make_settings, rows


@pytest.fixture(autouse=True)
def _no_inherited_harmonic_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.upper().startswith("HARMONIC_"):
            monkeypatch.delenv(name)
    yield


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return onnx_graphs.linear_classifier(tmp_path / "clf.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2])


def reference_csv(tmp_path: Path, n: int, nan_rows: int = 0) -> Path:
    x = rows(n, seed=99)
    x[:nan_rows, 0] = np.nan
    path = tmp_path / f"ref-{n}-{nan_rows}.csv"
    np.savetxt(path, x, delimiter=",")
    return path


def test_min_reference_rows_is_what_the_detectors_need() -> None:
    from monitor.drift.cusum import Cusum

    assert MIN_REFERENCE_ROWS == 10
    with pytest.raises(DataError, match="needs >= 10 finite values"):
        Cusum(np.linspace(0, 1, MIN_REFERENCE_ROWS - 1), threshold=5.0)
    Cusum(np.linspace(0, 1, MIN_REFERENCE_ROWS), threshold=5.0)


@pytest.mark.parametrize("n", [1, 5, 9])
def test_check_config_refuses_a_reference_below_the_minimum_in_one_line(
    tmp_path: Path, model: Path, n: int, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check-config", "--model", str(model), "--reference", str(reference_csv(tmp_path, n))])
    err = capsys.readouterr().err
    (error,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and err.endswith(error + "\n")  # the refusal is the last line, and one line
    assert f"has {n} usable rows; the drift detectors need at least 10 (200 or more calibrate" in err
    assert "leave `reference` out to learn one from the first warmup_events events" in err


@pytest.mark.parametrize("space", ["standardized", "raw"])
def test_run_refuses_a_reference_below_the_minimum_before_its_source_is_built(tmp_path: Path, space: str) -> None:
    settings = make_settings(tmp_path)
    model = settings.models[0].model_copy(
        update={
            "reference": reference_csv(tmp_path, 5),
            "scoring": settings.models[0].scoring.model_copy(update={"space": space}),
        }
    )
    with pytest.raises(ConfigError, match="has 5 usable rows; the drift detectors need at least 10"):
        load_model_runtime(model)  # Service.from_settings loads every model before it builds the consumer


def test_check_config_passes_a_reference_of_the_minimum(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check-config", "--model", str(model), "--reference", str(reference_csv(tmp_path, 10))])
    assert code == 0, capsys.readouterr().err


def test_check_config_warns_of_rows_left_out_and_refuses_when_too_few_remain(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check-config", "--model", str(model), "--reference", str(reference_csv(tmp_path, 500, 72))])
    err = capsys.readouterr().err
    assert code == 0
    assert (
        "warning: model 'clf': 72 of 500 rows of reference" in err and "left out; the reference is the other 428" in err
    )
    code = main(["check-config", "--model", str(model), "--reference", str(reference_csv(tmp_path, 12, 4))])
    err = capsys.readouterr().err
    assert code == 2 and "has 8 usable rows (4 with NaN or infinite values left out); the drift detectors" in err


def test_run_logs_the_reference_rows_it_leaves_out(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = make_settings(tmp_path)
    ref = reference_csv(tmp_path, 500, 72)
    settings = settings.model_copy(update={"models": (settings.models[0].model_copy(update={"reference": ref}),)})
    runtimes = [load_model_runtime(m) for m in settings.models]
    with caplog.at_level(logging.WARNING):
        Service(settings, ReplaySource([]), runtimes, serve_metrics=False, clock=FakeClock())
    (line,) = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert line.startswith(f"model '{MODEL}': 72 of 500 rows of reference") and "the other 428" in line


def test_reference_command_warns_of_rows_left_out(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = reference_csv(tmp_path, 100, 7)
    code = main(["reference", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 0
    assert f"warning: 7 of 100 rows of '{data}' hold NaN or infinite values and are left out" in err


def test_run_refuses_a_reference_json_of_too_few_events(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    assert (
        main(["reference", "--model", str(model), "--data", str(reference_csv(tmp_path, 20)), "--out", str(out)]) == 0
    )
    doc = json.loads(out.read_text())
    doc["reference"]["n_events"] = 5  # an edited (or foreign) file: `reference` itself refuses fewer than 10 rows
    out.write_text(json.dumps(doc))
    settings = load_settings(None, {"models": [{"name": "m", "path": str(model), "reference": str(out)}]})
    with pytest.raises(ConfigError, match="was built from 5 events; the drift detectors need at least 10"):
        load_model_runtime(settings.models[0])


def test_an_event_the_watch_cannot_apply_is_dead_lettered_and_not_counted_scored(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 16})
    runtimes = [load_model_runtime(m) for m in settings.models]
    svc = Service(settings, ReplaySource(events(rows(64, seed=3))), runtimes, serve_metrics=False, clock=FakeClock())
    watch = svc.pipeline.runtimes[MODEL].watch
    assert watch is not None
    x = rows(5, seed=1)  # below the detectors' minimum: every batch, and every event alone, raises when applied
    watch.install_reference(Reference.from_arrays(gamma=np.abs(x[:, 0]), flicker=np.zeros(5), features=x))
    with svc:
        svc.run(threading.Event(), until_exhausted=True)
    state = svc.state
    assert state.counter_sum(tel.EVENTS_CONSUMED_TOTAL.name) == 64
    assert state.counter(tel.EVENTS_INVALID_TOTAL.name, (MODEL, "unscorable")) == 64
    assert state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 0
