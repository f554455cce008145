"""``replay``'s label-free estimate per period (monitor/offline/replay_estimate.py, ``ReplayTimeline.over_time``) and
a regressor's per-period MAE (``monitor.accuracy.periods.loss_over_time``).

The stream is the demo's (a logistic regression on breast-cancer data, its reference built with labels): 1,000
stationary events, then 1,000 of the harmful shift toward the decision boundary, with the demo's truth per event.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from monitor.accuracy.periods import PERIOD_COLUMNS, loss_over_time
from monitor.accuracy.regression import fit_loss
from monitor.cli import main
from monitor.cli.demo_data import build_demo
from monitor.errors import DataError
from monitor.offline.replay import ReplayTimeline, replay


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """(model, labelled reference, events, labels CSV with the first 100 events unlabelled)."""
    tmp = tmp_path_factory.mktemp("replay_estimate")
    data = build_demo(tmp / "demo", events=3000, seed=0)
    lines = data.phases["stationary"] + data.phases["harmful-shift"]
    truth = np.array(data.labels["stationary"] + data.labels["harmful-shift"], dtype=np.float64)
    truth[:100] = np.nan
    events = tmp / "events.jsonl"
    events.write_bytes(b"\n".join(lines) + b"\n")
    labels = tmp / "labels.csv"
    labels.write_text("\n".join("nan" if math.isnan(v) else str(int(v)) for v in truth) + "\n", encoding="utf-8")
    assert data.labelled_reference_path is not None
    return data.model_path, data.labelled_reference_path, events, labels


def test_replay_writes_the_estimate_per_period_with_the_realized_accuracy(
    log: tuple[Path, Path, Path, Path], tmp_path: Path
) -> None:
    model, reference, events, labels = log
    out = tmp_path / "timeline.json"
    argv = ["replay", "--model", str(model), "--model-name", "demo", "--reference", str(reference)]
    argv += ["--events", str(events), "--timeline", str(out), "--labels", str(labels), "--period-events", "500"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    assert code == 0, err.getvalue()
    assert "label-free estimate over 4 period(s), 4 with an estimate" in err.getvalue()
    doc = json.loads(out.read_text(encoding="utf-8"))
    rows = doc["accuracy"]
    assert [(r["model"], r["metric"], r["period"], r["end"]) for r in rows] == [
        ("demo", "accuracy", float(s), float(s + 500)) for s in range(0, 2000, 500)
    ]
    assert [r["n_labelled"] for r in rows] == [400, 500, 500, 500]
    for r in rows:
        assert r["lower"] <= r["estimate"] <= r["upper"] and r["n"] == 500
    stationary, shifted = rows[:2], rows[2:]
    assert all(r["lower"] <= r["realized"] <= r["upper"] for r in stationary), stationary
    # the harmful shift lowers both the realized accuracy and the estimate
    assert max(r["realized"] for r in shifted) < min(r["realized"] for r in stationary) - 0.05
    assert max(r["estimate"] for r in shifted) < min(r["estimate"] for r in stationary) - 0.02
    frame = ReplayTimeline.from_document(doc).over_time()
    assert list(frame.columns) == ["model", "metric", *PERIOD_COLUMNS]
    assert frame["estimate"].tolist() == pytest.approx([r["estimate"] for r in rows])


def test_the_api_cuts_by_event_time_and_says_when_a_period_is_too_small(log: tuple[Path, Path, Path, Path]) -> None:
    model, reference, events, _ = log
    tl = replay(model, events, str(reference), model_name="demo", batch_events=100, max_events=1010, period_seconds=5)
    frame = tl.over_time()
    # the demo spaces events 10 ms apart: 500 events per 5 s bucket, and the last bucket's few too few to estimate
    assert frame["n"].sum() == 1010
    small = frame[frame["n"] < 30]
    assert len(small) >= 1 and small["estimate"].isna().all()
    assert all("too few to estimate" in note for note in small["note"])
    assert frame["realized"].isna().all() and (frame["n_labelled"] == 0).all()
    with pytest.raises(DataError, match="give one per event"):
        replay(model, events, str(reference), model_name="demo", labels=[1, 0], max_events=50)


def test_a_regressors_mae_per_period_with_the_realized_mae() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1200, 3))
    pred = x @ np.array([1.0, -0.5, 0.2])
    truth = pred + rng.normal(scale=0.3, size=1200) * (1.0 + np.abs(x[:, 0]))  # the error grows with |x0|
    fit = fit_loss(x[:600], pred[:600], truth[:600], seed=0)
    window = x[600:].copy()
    window[300:, 0] *= 3.0  # the second half moves to where the error is larger
    w_pred = window @ np.array([1.0, -0.5, 0.2])
    w_truth = w_pred + rng.normal(scale=0.3, size=600) * (1.0 + np.abs(window[:, 0]))
    rows = loss_over_time(fit, window, w_pred, target=w_truth, period_events=300)
    assert [r["n"] for r in rows] == [300, 300]
    calm, moved = rows
    assert moved["estimate"] > calm["estimate"] and moved["realized"] > calm["realized"]
    assert all(r["lower"] <= r["realized"] <= r["upper"] for r in rows), rows
    tiny = loss_over_time(fit, window[:20], w_pred[:20], period_events=20)
    assert math.isnan(tiny[0]["estimate"]) and "too few" in tiny[0]["note"]
