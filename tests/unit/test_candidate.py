"""A candidate beside the served model (``models[].compare_with``): the paired window, the checks at start, and
the pipeline scoring one draw on both models."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.comparison.paired import normal_interval
from monitor.config import load_settings
from monitor.errors import ConfigError
from monitor.exporters.prometheus import MetricsState
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.runtime.candidate import (
    LIVE_AXES,
    MIN_EVENTS,
    RESHARE_BATCHES,
    Candidate,
    PairedRows,
    check_candidate,
    publish_comparison,
)
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from monitor.source.base import RawRecord
from tests.unit import onnx_graphs
from tests.unit.test_pipeline import RecordingSource, events, make_pipeline, make_settings, rows, run_to_end

AXES = LIVE_AXES["classifier"]


def _paired(n: int, shift: dict[str, float], seed: int = 0) -> PairedRows:
    """n paired events of one segment; the candidate's values are the served model's plus ``shift`` per axis and
    a little noise of its own (the served values vary a lot: only a paired interval sees a small shift)."""
    rng = np.random.default_rng(seed)
    a = rng.gamma(2.0, 0.05, size=(n, len(AXES)))
    b = a + np.array([shift.get(ax.name, 0.0) for ax in AXES]) + rng.normal(0, 0.002, size=a.shape)
    cls = rng.integers(0, 2, size=n)
    flips = rng.random(n) < 0.1
    return PairedRows([ax.name for ax in AXES]).update(
        np.array(["eu"] * n), np.arange(n, dtype=np.float64), a, b, cls, np.where(flips, 1 - cls, cls)
    )


def test_a_more_fragile_candidate_is_worse_with_an_interval_above_zero() -> None:
    got = _paired(400, {"gamma": 0.01, "flicker": 0.02}).compare("eu", 1e9, 399.0, AXES)
    assert got is not None and got.verdict == "candidate-worse" and got.events == 400
    gamma = next(d for d in got.differences if d.axis == "gamma")
    assert gamma.lower > 0 and abs(gamma.difference - 0.01) < 0.001 and gamma.favours == "served"
    assert 0.05 < got.disagreement < 0.15


def test_the_same_model_is_no_difference_and_each_winning_somewhere_is_incomparable() -> None:
    same = _paired(400, {}).compare("eu", 1e9, 399.0, AXES)
    assert same is not None and same.verdict == "no-difference"
    mixed = _paired(400, {"gamma": -0.01, "p_adj": -0.02}).compare("eu", 1e9, 399.0, AXES)
    assert mixed is not None and mixed.verdict == "incomparable"
    better = _paired(400, {"gamma": -0.01}).compare("eu", 1e9, 399.0, AXES)
    assert better is not None and better.verdict == "candidate-better"


def test_a_window_holds_its_seconds_and_needs_its_minimum() -> None:
    paired = _paired(400, {"gamma": 0.01})
    got = paired.compare("eu", 100.0, 399.0, AXES)  # events 300..399
    assert got is not None and got.events == 100 and got.window == "100s"
    assert paired.compare("eu", float(MIN_EVENTS - 1), 399.0, AXES) is None
    assert paired.compare("us", 1e9, 399.0, AXES) is None


def test_rows_kept_are_bounded() -> None:
    paired = PairedRows(["gamma"], max_rows=10)
    for _ in range(3):
        z = np.zeros((8, 1))
        paired.update(np.array(["x"] * 8), np.arange(8.0), z, z, np.zeros(8, np.int64), np.zeros(8, np.int64))
    assert paired.events("x") == 10


def test_a_window_is_its_events_whether_or_not_they_arrived_in_time_order() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.gamma(2.0, 0.05, size=(300, len(AXES))), rng.gamma(2.0, 0.05, size=(300, len(AXES)))
    t = np.arange(300.0)
    t[200:230] = rng.uniform(0, 100, 30)  # a late partition's events, older than the window
    cls = np.zeros(300, dtype=np.int64)
    paired = PairedRows([ax.name for ax in AXES])
    for i in range(0, 300, 100):  # three batches, one of them carrying both segments
        seg = np.array(["eu"] * 100) if i != 100 else np.array(["eu", "us"] * 50)
        paired.update(seg, t[i : i + 100], a[i : i + 100], b[i : i + 100], cls[i : i + 100], cls[i : i + 100])
    segment = np.array(["eu"] * 100 + ["eu", "us"] * 50 + ["eu"] * 100)
    for window in (60.0, 150.0, 250.0):
        sel = (segment == "eu") & (t > 299.0 - window)
        got = paired.compare("eu", window, 299.0, AXES)
        assert got is not None and got.events == int(sel.sum())
        mean, lo, hi = normal_interval(b[sel] - a[sel])  # candidate − served
        assert [d.difference for d in got.differences] == pytest.approx(mean.tolist())
        assert [d.lower for d in got.differences] == pytest.approx(lo.tolist())
        assert [d.upper for d in got.differences] == pytest.approx(hi.tolist())


# -- the checks at start -------------------------------------------------------------------------------------
def _settings(tmp_path: Path, models: list[dict[str, Any]]) -> Any:
    return load_settings(None, {"models": models, "state_dir": str(tmp_path / "s")})


@pytest.mark.parametrize(
    ("compare_with", "message"),
    [("nope", "not a configured model"), ("b", "must name a served model"), ("c", "'c' is a candidate too")],
)
def test_compare_with_must_name_a_served_model(tmp_path: Path, compare_with: str, message: str) -> None:
    p = str(tmp_path / "m.onnx")
    models = [
        {"name": "a", "path": p},
        {"name": "b", "path": p, "compare_with": compare_with},
        {"name": "c", "path": p, "compare_with": "a"},
    ]
    with pytest.raises(ConfigError, match=message):
        _settings(tmp_path, models)


def _labelled(path: Path, classes: tuple[str, str]) -> OnnxModel:
    """A logistic regression whose graph names its classes (sorted by scikit-learn: the map is what differs)."""
    from sklearn.linear_model import LogisticRegression

    x, y = onnx_graphs.training_blobs(0, 40)
    names = np.array(classes, dtype=object)[(y > 0).astype(int)]
    est = LogisticRegression().fit(x, names)
    if classes[0] > classes[1]:  # scikit-learn sorts its classes: present them the other way round
        est.classes_ = est.classes_[::-1]
    return OnnxModel(onnx_graphs.sklearn_to_onnx(path, est, x.shape[1]))


def test_check_candidate_refuses_another_kind_width_or_class_set(tmp_path: Path) -> None:
    served = OnnxModel(onnx_graphs.linear_classifier(tmp_path / "a.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2]))
    wider = OnnxModel(onnx_graphs.linear_classifier(tmp_path / "w.onnx", np.ones((3, 2)), [0.0, 0.0]))
    regressor = OnnxModel(onnx_graphs.linear_regressor(tmp_path / "r.onnx", [1.0, 2.0]))
    with pytest.raises(ConfigError, match=r"^model 'b' \(compare_with: a\): 'a' is a classifier and 'b' a regressor"):
        check_candidate("a", served, "b", regressor)
    with pytest.raises(ConfigError, match=r"'a' takes 2 inputs \(x\[0\], x\[1\]\) and 'b' takes 3"):
        check_candidate("a", served, "b", wider)
    yes_no = _labelled(tmp_path / "yn.onnx", ("no", "yes"))
    up_down = _labelled(tmp_path / "ud.onnx", ("down", "up"))
    swapped = _labelled(tmp_path / "ny.onnx", ("yes", "no"))
    with pytest.raises(ConfigError, match="a candidate must predict the served model's classes"):
        check_candidate("a", yes_no, "b", up_down)
    with pytest.raises(ConfigError, match=r"'a' predicts classes \{no, yes\} and 'b' \{0, 1\}"):
        served.name_features(["X[0]", "X[1]"], source="the test")  # the scikit-learn graphs' input names
        check_candidate("a", yes_no, "b", served)  # a graph without class labels: its probability columns
    mapped = check_candidate("a", yes_no, "b", swapped)
    assert mapped is not None and mapped.tolist() == [1, 0]
    assert check_candidate("a", served, "b", served) is None


def test_check_config_refuses_a_candidate_of_another_width(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.cli import main

    a = onnx_graphs.linear_classifier(tmp_path / "a.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2])
    b = onnx_graphs.linear_classifier(tmp_path / "b.onnx", np.ones((3, 2)), [0.0, 0.0])
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"models:\n  - {{name: a, path: {a}, scoring: {{space: raw}}}}\n  - {{name: b, path: {b}, compare_with: a}}\n"
        f"state_dir: {tmp_path / 's'}\nmetrics: {{port: 0}}\n"
    )
    assert main(["check-config", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert any("model 'b' (compare_with: a)" in line and "'b' takes 3" in line for line in err)


# -- the pipeline: one draw, two models ----------------------------------------------------------------------
def test_the_pipeline_scores_the_candidate_on_the_served_models_events(tmp_path: Path) -> None:
    base = make_settings(tmp_path)
    served = base.models[0].model_dump()
    fragile = tmp_path / "fragile.onnx"
    # the same decisions and probabilities, with curved logits: its γ_logit, and so its P_adj, is worse
    onnx_graphs.linear_classifier(fragile, [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2], curvature=[0.5, 0.5])
    cand = {**served, "name": "fragile", "path": str(fragile), "compare_with": served["name"], "reference": None}
    settings = make_settings(tmp_path, models=[served, cand])
    state = MetricsState()
    records = [RawRecord(ev, topic="t", partition=0, offset=i) for i, ev in enumerate(events(rows(2100, seed=3)))]
    pipeline = run_to_end(make_pipeline(settings, RecordingSource(records), state=state))
    assert list(pipeline.runtimes) == ["clf"]  # the candidate is not served: no watch, no events of its own
    verdict = {
        v: tel.COMPARE_VERDICT.get(state, tel.ModelCandidateSegmentVerdict("clf", "fragile", "other", v))
        for v in ("candidate-worse", "candidate-better", "no-difference", "incomparable")
    }
    assert verdict == {"candidate-worse": 1.0, "candidate-better": 0.0, "no-difference": 0.0, "incomparable": 0.0}
    axis = tel.ModelCandidateSegmentWindowAxis("clf", "fragile", "other", "60s", "p_adj")
    upper = tel.COMPARE_DIFFERENCE_UPPER.get(state, axis)
    assert upper is not None and upper < 0  # candidate − served: the candidate's P_adj is lower, and surely so
    window = tel.ModelCandidateSegmentWindow("clf", "fragile", "other", "60s")
    assert tel.COMPARE_DISAGREEMENT_RATIO.get(state, window) == 0.0  # the same decisions
    events_in = tel.COMPARE_EVENTS.get(state, window)
    assert events_in is not None and events_in >= 1000  # compared after 10 s of event time: every event paired
    assert tel.EVENTS_SCORED_TOTAL.total(state) == 2100  # the served model's events, counted once
    evaluated = tel.MODEL_EVALUATIONS_TOTAL.value(state, tel.ModelPurpose("fragile", "events"))
    assert evaluated > 0


def test_a_candidate_scorer_takes_the_served_scorers_flicker_copies(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(tmp_path / "m.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2])
    served_model, twin = OnnxModel(path), OnnxModel(path)
    config = ScoringConfig(flicker_copies=8, sigma=0.5, seed=3)
    served = RobustnessScorer(served_model, Standardizer.identity(2), config)
    rng = np.random.default_rng(0)
    served.score(rng.normal(0.0, 1.0, (300, 2)))  # a reference scored first: the served draws run ahead
    batches = [rng.normal(0.0, 0.3, (n, 2)) for n in (64, 200, 7)]
    first = served.score(batches[0])
    shared = RobustnessScorer(twin, served.standardizer, config, noise_from=served)
    own = RobustnessScorer(twin, served.standardizer, config)
    assert shared.score(batches[0]).flicker.tolist() == first.flicker.tolist()
    assert first.flicker.mean() > 0.1  # copies that flip: the same values are the same draws
    own_flicker = own.score(batches[0]).flicker
    assert own_flicker.tolist() != first.flicker.tolist()
    for batch in batches[1:]:  # in step batch after batch, the bank's refreshes included
        assert shared.score(batch).flicker.tolist() == served.score(batch).flicker.tolist()
        own.score(batch)
    assert shared.shares_noise(served) and not own.shares_noise(served)
    fewer = RobustnessScorer(twin, served.standardizer, dataclasses.replace(config, flicker_copies=4))
    assert not fewer.share_noise(served) and not fewer.shares_noise(served)


def test_a_candidate_takes_the_served_draws_again_once_they_ran_apart(tmp_path: Path) -> None:
    path = onnx_graphs.linear_classifier(tmp_path / "m.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2])
    served = RobustnessScorer(OnnxModel(path), Standardizer.identity(2), ScoringConfig(flicker_copies=8, seed=1))
    cand = Candidate("clf", "v2", OnnxModel(path), None, (60.0,), every=10**6)
    rng = np.random.default_rng(2)

    def batch() -> bool:
        """One batch scored on the served model, then on the candidate; whether their copies were the same."""
        x = rng.normal(0.0, 0.3, (32, 2))
        result = served.score(x)
        cand.score(served, None, x, None, result, np.zeros(32), np.array(["eu"] * 32), None)
        assert cand.scorer is not None
        return cand.scorer.shares_noise(served)

    assert all(batch() for _ in range(3))
    served.score(rng.normal(0.0, 1.0, (100, 2)))  # the served scorer draws for something else (a reference)
    apart = [batch() for _ in range(RESHARE_BATCHES + 2)]
    assert apart == [False] * RESHARE_BATCHES + [True, True]


def test_a_twin_candidate_in_the_pipeline_flickers_on_the_same_copies(tmp_path: Path) -> None:
    base = make_settings(tmp_path)
    served = base.models[0].model_dump()
    twin = tmp_path / "twin.onnx"
    twin.write_bytes(Path(served["path"]).read_bytes())
    cand = {**served, "name": "twin", "path": str(twin), "compare_with": served["name"], "reference": None}
    records = [RawRecord(ev, topic="t", partition=0, offset=i) for i, ev in enumerate(events(rows(600, seed=3)))]
    pipeline = run_to_end(make_pipeline(make_settings(tmp_path, models=[served, cand]), RecordingSource(records)))
    paired = pipeline.candidates["clf"][0].rows
    got = paired.compare("other", 1e9, paired.end(), AXES)
    assert got is not None and got.events == 600
    flicker = next(d for d in got.differences if d.axis == "flicker")
    assert flicker.mean_b > 0  # the served model flickers ...
    assert (flicker.difference, flicker.lower, flicker.upper) == (0.0, 0.0, 0.0)  # ... on the candidate's very copies
    assert got.verdict == "no-difference"


def test_a_failing_candidate_costs_the_served_model_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    base = make_settings(tmp_path)
    served = base.models[0].model_dump()
    cand = {**served, "name": "broken", "compare_with": served["name"], "reference": None}
    settings = make_settings(tmp_path, models=[served, cand])

    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("session lost")

    monkeypatch.setattr(Candidate, "score", fail)
    state = MetricsState()
    records = [RawRecord(ev, topic="t", partition=0, offset=i) for i, ev in enumerate(events(rows(300, seed=4)))]
    run_to_end(make_pipeline(settings, RecordingSource(records), state=state))
    assert tel.EVENTS_SCORED_TOTAL.total(state) == 300  # every served event applied, none dead-lettered
    assert tel.EVENTS_INVALID_TOTAL.total(state) == 0
    assert "candidate 'broken' could not score a batch of 'clf': RuntimeError: session lost" in caplog.text
    verdict = tel.ModelCandidateSegmentVerdict("clf", "broken", "other", "no-difference")
    assert tel.COMPARE_VERDICT.get(state, verdict) is None  # nothing compared: no verdict claimed


def test_a_segment_gone_quiet_loses_its_comparison_series(tmp_path: Path) -> None:
    model = OnnxModel(onnx_graphs.linear_classifier(tmp_path / "m.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2]))
    cand = Candidate("clf", "v2", model, None, (60.0,), every=1000)
    rng = np.random.default_rng(0)
    state = MetricsState()

    def feed(segment: str, start: float) -> None:
        a = rng.gamma(2.0, 0.05, size=(100, len(AXES)))
        cls = np.zeros(100, dtype=np.int64)
        worse = a + np.array([0.01 if ax.name == "gamma" else 0.0 for ax in AXES])  # more fragile, better on nothing
        cand.rows.update(np.array([segment] * 100), start + np.arange(100.0), a, worse, cls, cls)
        cand.compare()
        publish_comparison(state, cand.take_report())

    def verdicts(segment: str) -> dict[str, float | None]:
        return {
            v: tel.COMPARE_VERDICT.get(state, tel.ModelCandidateSegmentVerdict("clf", "v2", segment, v))
            for v in ("candidate-worse", "no-difference")
        }

    feed("eu", 0.0)
    assert verdicts("eu") == {"candidate-worse": 1.0, "no-difference": 0.0}
    feed("us", 1000.0)  # eu has had no event for far longer than its window
    assert verdicts("eu") == {"candidate-worse": None, "no-difference": None}
    assert tel.COMPARE_EVENTS.get(state, tel.ModelCandidateSegmentWindow("clf", "v2", "eu", "60s")) is None
    assert verdicts("us") == {"candidate-worse": 1.0, "no-difference": 0.0}


# -- the candidate's file replaced while the pipeline runs ---------------------------------------------------------
def _replace(path: Path, build: Any) -> None:
    """Write a new model beside ``path`` and move it over ``path`` (a new file at the path, as ``mv`` leaves it)."""
    fresh = path.with_name("fresh-" + path.name)
    build(fresh)
    fresh.replace(path)


def _look(pipeline: Any) -> None:
    """Two loop turns' looks at the candidates' files: the change, then the file holding still."""
    for cands in pipeline.candidates.values():
        for cand in cands:
            cand.file.every = 0.0
    pipeline.tick_alerts()
    pipeline.tick_alerts()


def test_a_replaced_candidate_file_is_loaded_again_or_refused(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base = make_settings(tmp_path)
    served = base.models[0].model_dump()
    fragile = tmp_path / "fragile.onnx"
    onnx_graphs.linear_classifier(fragile, [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2], curvature=[0.5, 0.5])
    cand = {**served, "name": "fragile", "path": str(fragile), "compare_with": served["name"], "reference": None}
    state = MetricsState()
    source = RecordingSource([])
    pipeline = make_pipeline(make_settings(tmp_path, models=[served, cand]), source, state=state)
    pair = tel.ModelCandidate("clf", "fragile")
    caplog.set_level(logging.INFO, logger="monitor.runtime.candidate")

    def feed(n: int, seed: int) -> None:
        start = len(source.records)
        batch = events(rows(n, seed=seed), start=start)
        source.records += [RawRecord(ev, topic="t", partition=0, offset=start + i) for i, ev in enumerate(batch)]
        while pipeline.step(0.0):
            pass

    def verdict() -> str | None:
        got = [
            v
            for v in ("candidate-worse", "candidate-better", "no-difference", "incomparable")
            if tel.COMPARE_VERDICT.get(state, tel.ModelCandidateSegmentVerdict("clf", "fragile", "other", v)) == 1.0
        ]
        return got[0] if got else None

    feed(2100, seed=3)
    assert verdict() == "candidate-worse" and tel.COMPARE_CANDIDATE_UP.get(state, pair) == 1.0
    # the same bytes written anew (a new inode, as a ConfigMap's swapped links leave it): no change
    same = fragile.read_bytes()
    _replace(fragile, lambda p: p.write_bytes(same))
    _look(pipeline)
    assert verdict() == "candidate-worse" and pipeline.readiness()[1]["candidate_files"]["fragile"]["reloads"] == 0
    # replaced by the served model's twin: loaded again, the comparison afresh (no verdict until its windows fill)
    _replace(fragile, lambda p: onnx_graphs.linear_classifier(p, [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2]))
    _look(pipeline)
    assert "candidate 'fragile' reloaded: its file" in caplog.text
    assert verdict() is None
    assert tel.COMPARE_EVENTS.get(state, tel.ModelCandidateSegmentWindow("clf", "fragile", "other", "60s")) is None
    assert pipeline.readiness()[1]["candidate_files"]["fragile"]["reloads"] == 1
    feed(2100, seed=5)
    assert verdict() == "no-difference"
    # replaced by a model of another width: refused, its series gone, nothing scored on it; the served model goes on
    _replace(fragile, lambda p: onnx_graphs.linear_classifier(p, np.ones((3, 2)), [0.0, 0.0]))
    _look(pipeline)
    assert tel.COMPARE_CANDIDATE_UP.get(state, pair) == 0.0 and verdict() is None
    refused = pipeline.readiness()[1]["candidate_files"]["fragile"]["refused"]
    assert "'clf' takes 2 inputs" in refused and "candidate 'fragile' refused" in caplog.text
    evaluated = tel.MODEL_EVALUATIONS_TOTAL.value(state, tel.ModelPurpose("fragile", "events"))
    feed(300, seed=6)
    assert tel.MODEL_EVALUATIONS_TOTAL.value(state, tel.ModelPurpose("fragile", "events")) == evaluated
    assert tel.EVENTS_SCORED_TOTAL.total(state) == 4500
    # the file gone: still refused; a file that fits again: compared again
    fragile.unlink()
    _look(pipeline)
    assert "does not exist" in pipeline.readiness()[1]["candidate_files"]["fragile"]["refused"]
    _replace(fragile, lambda p: onnx_graphs.linear_classifier(p, [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2]))
    _look(pipeline)
    assert tel.COMPARE_CANDIDATE_UP.get(state, pair) == 1.0
    assert "refused" not in pipeline.readiness()[1]["candidate_files"]["fragile"]
    pipeline.close()


def test_a_served_model_removed_from_the_settings_refuses_its_candidate(tmp_path: Path) -> None:
    p = str(tmp_path / "m.onnx")
    with pytest.raises(ConfigError, match=r"compare_with names 'a', which is not a configured model \(b\); .* drop"):
        _settings(tmp_path, [{"name": "b", "path": p, "compare_with": "a"}])
