"""Every input watched: held inputs (string, int, bool) get category-frequency tests against a count table of the
whole reference (monitor/drift/categories.py), named in verdicts, alerts and metrics; input evidence only."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.cli import main
from monitor.config import Settings
from monitor.drift.base import WindowPlan
from monitor.drift.categories import OTHER_KEY, CategoryDrift, count_table
from monitor.drift.verdict import Verdict
from monitor.events import InferenceEvent
from monitor.exporters.prometheus import MetricsState
from monitor.rolling.reference import Reference
from monitor.runtime.models import load_model_runtime
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.service import build_sampler
from monitor.runtime.watch import INPUT_ALERT, ModelWatch
from monitor.source.replay import ReplaySource
from tests.model_zoo import build_column_transformer_classifier
from tests.unit.test_watch import MODEL, Stream, make_watch

COLOURS = ("red", "green", "blue")

CITIES = ["paris", "oslo", "rome", "lima"]
SHARES = [0.5, 0.3, 0.195, 0.005]  # lima is rare: the reference must still know it


def held_reference(n: int = 5000) -> Reference:
    s = Stream(100)
    gamma, flicker = s.signals(n)
    rng = np.random.default_rng(7)
    return Reference.from_arrays(
        gamma=gamma,
        flicker=flicker,
        features=s.features(n),
        predicted_class=np.zeros(n, dtype=np.int64),
        held={"city": rng.choice(CITIES, size=n, p=SHARES)},
    )


def feed(watch: ModelWatch, stream: Stream, batches: int, cities: list[str], p: list[float] | None = None) -> None:
    for _ in range(batches):
        events, x, result, shadow = stream.batch()
        picked = stream.rng.choice(cities, size=len(events), p=p)
        held = [
            InferenceEvent(e.event_id, e.model, e.model_version, x[i], e.timestamp_seconds, held={"city": np.array(c)})
            for i, (e, c) in enumerate(zip(events, picked, strict=True))
        ]
        watch.update(held, x, result, shadow)


def watch_with_held() -> tuple[ModelWatch, object]:
    watch, state = make_watch(for_seconds=1.0, with_reference=False)
    watch.install_reference(held_reference())
    return watch, state


def test_the_reference_keeps_a_count_table_per_held_input_and_round_trips() -> None:
    ref = held_reference()
    table = ref.held_tables["city"]
    assert set(table) == {*CITIES, OTHER_KEY} and table[OTHER_KEY] == 0 and table["lima"] > 0
    again = Reference.from_dict(json.loads(json.dumps(ref.to_dict())))
    assert again.held_tables == ref.held_tables
    assert count_table(["a"] * 3 + ["b"], top=1) == {"a": 3, OTHER_KEY: 1}


def test_a_stationary_held_input_stays_stable_and_a_rare_category_is_not_unseen() -> None:
    watch, state = watch_with_held()
    stream = Stream(seed=31)
    feed(watch, stream, 40, CITIES, SHARES)
    assert watch.verdict("other") == Verdict.STABLE
    engine = watch.verdicts.engines["other"]
    assert engine.detector("held_inputs") is not None and engine.detector("held_inputs").state.alarms == 0
    feed(watch, stream, 1, ["lima"])  # a rare but known category: not unseen
    assert engine.detector("held_inputs").unseen_shares[0] == 0.0


def test_a_one_category_stream_leaves_stable_and_names_the_input() -> None:
    watch, state = watch_with_held()
    stream = Stream(seed=32)
    feed(watch, stream, 10, CITIES, SHARES)
    assert watch.verdict("other") == Verdict.STABLE
    feed(watch, stream, 12, ["paris"])
    report = watch.last_reports["other"]
    assert report.verdict == Verdict.INPUT_SHIFT and "held_inputs" in report.fired
    assert [n for n, _ in report.categories] == ["city"] and "held inputs moved: city" in report.message
    alert = watch.alerts.get(INPUT_ALERT, model=MODEL, segment="other")
    assert alert is not None and [e.detector for e in alert.evidence] == ["city"]
    tv = state.gauge(tel.FEATURE_DRIFT_STATISTIC.name, (MODEL, "other", "city"))  # type: ignore[attr-defined]
    assert tv == pytest.approx(0.5, abs=0.05)


def test_an_unseen_category_leaves_stable_and_names_the_input() -> None:
    watch, state = watch_with_held()
    stream = Stream(seed=33)
    feed(watch, stream, 10, CITIES, SHARES)
    feed(watch, stream, 12, [*CITIES, "tokyo"], [0.35, 0.2, 0.145, 0.005, 0.3])
    report = watch.last_reports["other"]
    assert report.verdict == Verdict.INPUT_SHIFT and [n for n, _ in report.categories] == ["city"]
    unseen = state.gauge(tel.INPUT_OUT_OF_RANGE_RATIO.name, (MODEL, "other", "city"))  # type: ignore[attr-defined]
    assert unseen == pytest.approx(0.3, abs=0.05)
    alert = watch.alerts.get(INPUT_ALERT, model=MODEL, segment="other")
    assert alert is not None and alert.evidence[0].window == pytest.approx(unseen)


def test_replay_of_a_string_input_model_names_the_held_input(tmp_path: Path) -> None:
    """End to end: `reference` keeps the count table of a ColumnTransformer model's string input; from event 2,000
    every event has one colour: the verdict leaves stable and names `colour`."""
    zoo = build_column_transformer_classifier(tmp_path)
    rng = np.random.default_rng(0)

    def row() -> dict[str, object]:
        x = rng.normal(size=3)
        return {"x1": float(x[0]), "x2": float(x[1]), "x3": float(x[2]), "colour": COLOURS[int(rng.integers(0, 3))]}

    with (tmp_path / "ref.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["x1", "x2", "x3", "colour"])
        writer.writeheader()
        writer.writerows(row() for _ in range(2000))
    ref = tmp_path / "ref.json"
    with contextlib.redirect_stderr(io.StringIO()):
        assert (
            main(["reference", "--model", str(zoo.path), "--data", str(tmp_path / "ref.csv"), "--out", str(ref)]) == 0
        )
    table = json.loads(ref.read_text(encoding="utf-8"))["reference"]["held_tables"]["colour"]
    assert sum(table.values()) == 2000 and set(table) == {*COLOURS, OTHER_KEY}
    lines = []
    for i in range(3500):
        r = row()
        if i >= 2000:
            r["colour"] = "red"
        lines.append(json.dumps({"id": f"e{i}", "model": "ct", "ts": 1_795_000_000_000 + 10 * i, "features": r}))
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "cfg.yaml").write_text("alerts:\n  for_seconds: 1\nbatch:\n  max_events: 100\n", encoding="utf-8")
    out = tmp_path / "timeline.json"
    args = ["replay", "--model", str(zoo.path), "--model-name", "ct", "--reference", str(ref)]
    args += ["--events", str(tmp_path / "events.jsonl"), "--config", str(tmp_path / "cfg.yaml"), "--timeline", str(out)]
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(args) == 0
    changes = json.loads(out.read_text(encoding="utf-8"))["changes"]
    assert changes and changes[0]["index"] >= 2000 and changes[0]["verdict"] != "stable", changes
    assert "held_inputs" in changes[0]["detectors"] and "colour" in changes[0]["features"]


def test_a_held_input_of_many_categories_keeps_quiet_when_stationary() -> None:
    rng = np.random.default_rng(5)
    cats = [f"c{i}" for i in range(80)]  # more than the table keeps: 64 and other
    p = rng.dirichlet(np.ones(80))
    drift = CategoryDrift(
        {"shop": count_table(rng.choice(cats, size=20_000, p=p))}, plan=WindowPlan(window=1000, every=100)
    )
    for _ in range(50):
        drift.update({"shop": rng.choice(cats, size=1000, p=p)})
    assert drift.state.alarms == 0 and drift.state.events == 50_000
    drift.update({"shop": rng.choice(cats[:10], size=1000)})  # and it still sees a real move
    assert drift.drift_detected


def test_run_counts_the_held_tables_over_every_reference_row_not_the_scored_sample(tmp_path: Path) -> None:
    zoo = build_column_transformer_classifier(tmp_path)
    rng = np.random.default_rng(3)
    with (tmp_path / "ref.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["x1", "x2", "x3", "colour"])
        writer.writeheader()
        for i in range(600):
            colour = "purple" if i < 3 else COLOURS[i % 3]  # a rare colour the scored sample of 100 likely misses
            writer.writerow({"x1": rng.normal(), "x2": rng.normal(), "x3": rng.normal(), "colour": colour})
    event = {"id": "e0", "model": "ct", "ts": 1_795_000_000_000, "features": {"x1": 0.1, "x2": 0.2, "x3": 0.3}}
    event["features"]["colour"] = "red"  # type: ignore[index]
    (tmp_path / "events.jsonl").write_text(json.dumps(event) + "\n", encoding="utf-8")
    (tmp_path / "cfg.yaml").write_text("drift:\n  reference_max_events: 100\n", encoding="utf-8")
    state = tmp_path / "state"
    args = ["replay", "--model", str(zoo.path), "--model-name", "ct", "--reference", str(tmp_path / "ref.csv")]
    args += ["--events", str(tmp_path / "events.jsonl"), "--config", str(tmp_path / "cfg.yaml")]
    args += ["--timeline", str(tmp_path / "t.json"), "--state-dir", str(state)]
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(args) == 0
    saved = json.loads((state / "state.json").read_text(encoding="utf-8"))["models"]["ct"]["watch"]["reference"]
    assert saved["n_events"] == 100
    assert saved["held_tables"]["colour"]["purple"] == 3 and sum(saved["held_tables"]["colour"].values()) == 600


def test_readyz_lists_the_inputs_the_held_ones_and_their_reference_categories(tmp_path: Path) -> None:
    zoo = build_column_transformer_classifier(tmp_path)
    rng = np.random.default_rng(5)
    with (tmp_path / "ref.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["x1", "x2", "x3", "colour"])
        writer.writeheader()
        for i in range(200):
            writer.writerow({"x1": rng.normal(), "x2": rng.normal(), "x3": rng.normal(), "colour": COLOURS[i % 3]})
    settings = Settings.model_validate(
        {
            "models": [{"name": "ct", "path": str(zoo.path), "reference": str(tmp_path / "ref.csv")}],
            "sampler": {"events_per_second": 0},
            "probes": {"enabled": False},
        }
    )
    pipeline = Pipeline(
        settings,
        ReplaySource([]),
        [load_model_runtime(m) for m in settings.models],
        build_sampler(settings),
        state=MetricsState(),
        clock=lambda: 1_795_000_000.0,
    )
    detail = pipeline.readiness()[1]["models"]["ct"]
    assert detail["kind"] == "classifier"
    assert detail["inputs"] == [
        "'x1' float [batch, 1]",
        "'x2' float [batch, 1]",
        "'x3' float [batch, 1]",
        "'colour' string [batch, 1]",
    ]
    assert detail["held"] == ["colour"]
    assert detail["held_categories"] == {"colour": 3}  # red, green, blue: the values themselves are not listed
    json.dumps(detail)  # the endpoint serves it as JSON
