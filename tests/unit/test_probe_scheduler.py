"""Probes: the scheduler (monitor/probes/scheduler.py) on a real Pipeline, a tiny ONNX model and a fake clock.

Events are placed near the tiny model's decision boundary (x0 − x1 + 0.2 = 0) so that flicker flags them and
regions form; the budget test checks probe rows against the scored rows over several runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.drift.verdict import Verdict, VerdictReport
from monitor.exporters.prometheus import MetricsState
from monitor.probes.scheduler import ProbeScheduler
from monitor.runtime.pipeline import Pipeline
from monitor.source.replay import ReplaySource
from tests.unit.test_pipeline import MODEL, FakeClock, event, make_pipeline, make_settings, model_class

EVALS = tel.MODEL_EVALUATIONS_TOTAL.name


def boundary_events(n: int, seed: int, start: int = 0) -> list[bytes]:
    """Events within ~0.05 of the decision boundary, around two places: (0, 0.2) and (2, 2.2)."""
    rng = np.random.default_rng(seed)
    u = np.where(rng.random(n) < 0.5, 0.0, 2.0) + rng.normal(0.0, 0.1, n)
    x = np.column_stack([u, u + 0.2 + rng.normal(0.0, 0.03, n)])
    cls = model_class(x)
    return [event(start + i, x[i], label=int(cls[i])) for i in range(n)]


class FakeTimer:
    """Wall seconds for the time-share budget: fixed unless the test moves them, or +``step`` per reading."""

    def __init__(self, step: float = 0.0) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def make(
    tmp_path: Path,
    *,
    share: float = 0.5,
    interval: float = 60.0,
    enabled: bool = True,
    timer: FakeTimer | None = None,
    **settings: Any,
) -> tuple[Pipeline, ProbeScheduler, FakeClock]:
    s = make_settings(
        tmp_path,
        probes={"enabled": enabled, "interval_seconds": interval, "budget_share": share, "regions_per_run": 2},
        **settings,
    )
    clock = FakeClock()
    pipeline = make_pipeline(s, ReplaySource([]), state=MetricsState(), clock=clock)
    probes = PublishingProbes(pipeline, s.probes, clock=clock, timer=timer or FakeTimer())
    return pipeline, probes, clock


class PublishingProbes(ProbeScheduler):
    """The scheduler as the service runs it: its series published (``Pipeline.publish``, each loop turn) after a run."""

    def run_once(self, now: float) -> int:
        probed = super().run_once(now)
        self.pipeline.publish()
        return probed


def score(pipeline: Pipeline, lines: list[bytes]) -> None:
    pipeline.source = ReplaySource(lines)
    while pipeline.step(0.0):
        pass
    pipeline.flush()


def event_rows(state: MetricsState) -> float:
    """Rows evaluated for live events (scoring + shadow checks); the reference scored at start-up is not one."""
    return state.counter(EVALS, (MODEL, "events")) + state.counter(EVALS, (MODEL, "shadow"))


# ---------------------------------------------------------------------- regions from scored batches


def test_probe_scheduler_observes_flagged_events_into_regions(tmp_path: Path) -> None:
    pipeline, probes, _ = make(tmp_path)
    score(pipeline, boundary_events(400, seed=1))
    regions = probes.report()["models"][MODEL]["regions"]
    assert 1 <= len(regions) <= 64
    assert pipeline.state.gauge(tel.REGIONS_TRACKED.name, (MODEL,)) == len(regions)
    assert sum(r["events"] for r in regions) > 100  # most boundary events flicker
    assert all(r["flicker_mean"] > 0 or r["gamma_mean"] > 0 for r in regions)
    scores = [r["score"] for r in regions]
    assert scores == sorted(scores, reverse=True)  # worst first


def test_probe_scheduler_ignores_stable_events(tmp_path: Path) -> None:
    pipeline, probes, _ = make(tmp_path)
    rng = np.random.default_rng(2)
    x = np.column_stack([rng.normal(5.0, 0.1, 200), rng.normal(-5.0, 0.1, 200)])  # far from the boundary
    score(pipeline, [event(i, x[i]) for i in range(200)])
    assert probes.report()["models"] == {}
    assert probes.run_once(0.0) == 0


def test_probe_scheduler_disabled_does_nothing(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path, enabled=False, interval=1.0)
    score(pipeline, boundary_events(300, seed=3))
    clock.now += 10.0
    probes.tick()
    assert probes.report()["models"] == {}
    assert pipeline.state.counter(EVALS, (MODEL, "probe")) == 0
    assert not (tmp_path / "state" / "probes.json").exists()


# ---------------------------------------------------------------------- runs, metrics, report


def test_probe_scheduler_run_once_probes_the_worst_regions_and_sets_metrics(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path)
    score(pipeline, boundary_events(600, seed=4))
    probed = probes.run_once(clock.now)
    assert 1 <= probed <= 2  # regions_per_run
    state = pipeline.state
    assert state.counter(tel.PROBE_RUNS_TOTAL.name, (MODEL,)) == 1
    report = probes.report()
    mp = report["models"][MODEL]
    assert mp["runs"] == 1 and len(mp["reports"]) == probed
    worst = {r["id"] for r in mp["regions"][:probed]}
    assert {rep["region"]["id"] for rep in mp["reports"]} == worst
    rep = mp["reports"][0]
    rid = rep["region"]["id"]
    assert rep["model"]["name"] == MODEL and rep["probed_at"] == clock.now and rep["wall_seconds"] >= 0
    assert rep["region"]["probed_at"] == clock.now
    assert set(rep["mri"]) >= {"noise", "shift", "dropout", "scale", "quantize"}
    for tau, r in rep["mri"].items():
        if r is not None:
            assert 0.0 <= r <= 1.0
            assert state.gauge(tel.PROBE_MRI.name, (MODEL, rid, tau)) == pytest.approx(r)
    taus = {t["perturbation"] for t in rep["thresholds"] if t["status"] != "not_searched"}
    assert taus, "boundary points are fragile: some threshold search must run"
    for tau in taus:
        eps = state.gauge(tel.PROBE_EPS_STAR.name, (MODEL, rid, tau))
        assert eps is not None and eps > 0  # +Inf when never crossed below ε_max
    assert sum(r["evaluations"]["total"] for r in mp["reports"]) == state.counter(EVALS, (MODEL, "probe"))
    assert report["probe_rows"] == state.counter(EVALS, (MODEL, "probe"))
    assert report["budget_share"] == 0.5


def test_probe_scheduler_reports_the_complete_profile_in_the_models_names_and_units(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path)
    rt = pipeline.runtimes[MODEL]
    rt.model.name_features(("temperature", "pressure"), source="the test")
    score(pipeline, boundary_events(600, seed=4))
    assert probes.run_once(clock.now) >= 1
    mp = probes.report()["models"][MODEL]
    assert mp["feature_names"] == ["temperature", "pressure"]
    assert mp["index"]["max_regions"] == 16 and mp["index"]["evicted_total"] == 0
    assert "lowest-ranked" in mp["index"]["eviction"]
    std = rt.standardizer
    assert std is not None
    for region in mp["regions"]:
        raw = [region["centre_raw"]["temperature"], region["centre_raw"]["pressure"]]
        assert raw == pytest.approx((std.mean + std.scale * np.asarray(region["centre_standardized"])).tolist())
    rep = mp["reports"][0]
    rid = rep["region"]["id"]
    # every (τ, feature) pair, each with a status; shift targets carry the feature's name and raw units
    keys = [t["key"] for t in rep["thresholds"]]
    assert keys == list(rep["mri_by_target"]) and {"shift[0]", "shift[1]"} <= set(keys)
    for t in rep["thresholds"]:
        assert t["status"] in ("crossed", "not_crossed", "not_searched")
        assert (t["reason"] is None) == (t["status"] != "not_searched")
        if t["perturbation"] == "shift":
            j = t["feature"]
            assert t["name"] == ("temperature", "pressure")[j]
            assert t["raw_per_unit"] == pytest.approx(std.scale[j])
            if t["eps_star"] is not None:
                assert t["eps_star_raw"] == pytest.approx(t["eps_star"] * std.scale[j])
    state = pipeline.state
    counts = {
        s: state.gauge(tel.PROBE_TARGETS.name, (MODEL, rid, s)) for s in ("crossed", "not_crossed", "not_searched")
    }
    assert sum(v or 0 for v in counts.values()) == len(keys)
    assert counts == {s: rep["profile"]["status"][s] for s in counts}
    # the region's certified radius at the model's flicker σ and copies (8 here), with its caveat and cap
    cert = rep["certified"]
    assert cert["status"] == "certified" and "smoothed classifier" in cert["caveat"]
    assert cert["copies"] == 8 and cert["sigma"] == pytest.approx(rt.scoring_config().sigma)
    assert cert["cap"] == 0.0 and cert["min_copies_to_certify"] == 10  # 8 copies certify nothing at α = 0.001
    assert all(0.0 <= p["radius"] <= cert["cap"] + 1e-12 for p in cert["points"])
    assert rep["evaluations"]["certify"] == cert["rows"] == len(cert["points"]) * 9


def test_probe_scheduler_writes_probes_json_to_the_state_dir(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path)
    score(pipeline, boundary_events(600, seed=5))
    assert probes.run_once(clock.now) >= 1
    written = json.loads((tmp_path / "state" / "probes.json").read_text(encoding="utf-8"))
    assert written["models"][MODEL]["runs"] == 1
    assert [r["region"]["id"] for r in written["models"][MODEL]["reports"]] == [
        r["region"]["id"] for r in probes.report()["models"][MODEL]["reports"]
    ]


def test_probe_scheduler_tick_waits_for_the_interval(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path, interval=60.0)
    score(pipeline, boundary_events(600, seed=6))
    clock.now += 59.0
    probes.tick()
    assert pipeline.state.counter(tel.PROBE_RUNS_TOTAL.name, (MODEL,)) == 0
    clock.now += 1.0
    probes.tick()
    assert pipeline.state.counter(tel.PROBE_RUNS_TOTAL.name, (MODEL,)) == 1
    probes.tick()  # the next run is another interval away
    assert pipeline.state.counter(tel.PROBE_RUNS_TOTAL.name, (MODEL,)) == 1


# ---------------------------------------------------------------------- the budget


@pytest.mark.parametrize("share", [0.1, 0.3, 0.5])
def test_probe_scheduler_probe_rows_stay_within_the_budget_share(tmp_path: Path, share: float) -> None:
    pipeline, probes, clock = make(tmp_path, share=share, interval=1.0)
    state = pipeline.state
    for k in range(6):
        score(pipeline, boundary_events(600, seed=10 + k, start=600 * k))
        clock.now += 1.0
        probes.tick()
        probe_rows = state.counter(EVALS, (MODEL, "probe"))
        assert probe_rows <= share / (1.0 - share) * event_rows(state)
        assert probe_rows == probes.probe_rows
    assert state.counter(EVALS, (MODEL, "probe")) > 0  # the budget does let probes run
    assert all(rep["complete"] for rep in probes.report()["models"][MODEL]["reports"])


def test_probe_scheduler_defers_regions_when_the_budget_is_spent(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path, share=0.001)
    score(pipeline, boundary_events(200, seed=20))
    assert probes.budget_rows() < 16
    assert probes.run_once(clock.now) == 0
    assert pipeline.state.counter(EVALS, (MODEL, "probe")) == 0


def test_probe_scheduler_budget_counts_probe_rows_restored_from_state(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path, share=0.5)
    score(pipeline, boundary_events(600, seed=21))
    probes.run_once(clock.now)
    pipeline.close()  # persists the counters, probe rows included
    assert pipeline.state.counter(EVALS, (MODEL, "probe")) > 0
    restarted, again, _ = make(tmp_path, share=0.1)
    state = restarted.state
    assert state.counter(EVALS, (MODEL, "probe")) == pipeline.state.counter(EVALS, (MODEL, "probe"))
    # the budget's own count starts again at the restart: never more than the history's earned rows less every probe row
    assert again.budget_rows() <= 0.5 / 0.5 * event_rows(state) - state.counter(EVALS, (MODEL, "probe")) + 1


def test_probe_scheduler_skips_runs_while_its_wall_time_exceeds_the_share(tmp_path: Path) -> None:
    timer = FakeTimer()
    pipeline, probes, clock = make(tmp_path, share=0.5, interval=1.0, timer=timer)
    score(pipeline, boundary_events(600, seed=30))
    timer.now = 10.0
    probes.busy_seconds = 6.0  # 60 % of the 10 s since start: over the 50 % share
    assert not probes.time_allowed()
    clock.now += 5.0
    probes.tick()
    assert pipeline.state.counter(tel.PROBE_RUNS_TOTAL.name, (MODEL,)) == 0
    timer.now = 12.0  # 6 s of 12 s = the share, but over TIME_MARGIN (0.8) of it: still waiting
    assert not probes.time_allowed()
    timer.now = 15.0  # 6 s of 15 s = 40 % = 0.8 × the 50 % share: allowed again
    assert probes.time_allowed()
    probes.tick()
    assert pipeline.state.counter(tel.PROBE_RUNS_TOTAL.name, (MODEL,)) == 1


def test_probe_scheduler_counts_observe_and_run_time_as_busy(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path, timer=FakeTimer(step=1.0))  # every reading is 1 s later
    assert probes.busy_seconds == 0.0
    score(pipeline, boundary_events(300, seed=31))  # 2 scored batches: observe() read the timer twice each
    assert probes.busy_seconds == 2.0
    probes.run_once(clock.now)
    assert probes.busy_seconds > 2.0


def test_probe_scheduler_counts_regions_evicted_from_a_full_index(tmp_path: Path) -> None:
    s = make_settings(tmp_path, probes={"enabled": True, "interval_seconds": 60.0, "max_regions": 1})
    clock = FakeClock()
    pipeline = make_pipeline(s, ReplaySource([]), state=MetricsState(), clock=clock)
    probes = PublishingProbes(pipeline, s.probes, clock=clock, timer=FakeTimer())
    score(pipeline, boundary_events(400, seed=8))  # two places, one slot: they keep replacing each other
    index = probes.report()["models"][MODEL]["index"]
    assert index["regions"] == 1 and index["max_regions"] == 1 and index["evicted_total"] >= 1
    assert pipeline.state.counter(tel.REGIONS_EVICTED_TOTAL.name, (MODEL,)) == index["evicted_total"]


# ---------------------------------------------------------------------- admission: probed to completion or queued


def test_probe_scheduler_admits_a_region_only_when_the_budget_covers_its_whole_probe(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path, share=0.1, interval=60.0)
    state = pipeline.state
    score(pipeline, boundary_events(600, seed=40))  # earns ~1,070 rows; a region's probe plans ~5,600
    assert probes.run_once(clock.now) == 0
    report = probes.report()
    mp = report["models"][MODEL]
    assert mp["reports"] == [] and state.counter(EVALS, (MODEL, "probe")) == 0  # nothing started half-way
    queue = mp["queue"]
    assert 1 <= len(queue) <= 2  # regions_per_run
    head = queue[0]
    assert head["rows"] == head["plan"]["total"] == sum(head["plan"]["rows"].values()) > report["budget"]["available"]
    assert head["segment"] == "other" and head["region"] == mp["regions"][0]["id"]  # the highest-ranked region
    assert report["budget"]["queued"] == sum(q["rows"] for q in queue)
    assert tel.PROBE_QUEUE.get(state, tel.Model(MODEL)) == len(queue)
    assert tel.PROBE_REGIONS_TOTAL.value(state, tel.ModelOutcomeReason(MODEL, "queued", "budget")) == len(queue)
    assert tel.PROBE_BUDGET_ROWS.get(state, tel.State("earned")) == pytest.approx(report["budget"]["earned"])
    assert tel.PROBE_BUDGET_ROWS.get(state, tel.State("queued")) == report["budget"]["queued"]
    # more events earn rows: the first queued region runs as soon as they cover it (before the interval), to the end
    for k in range(1, 12):
        score(pipeline, boundary_events(600, seed=40 + k, start=600 * k))
        probes.tick()
        if probes.report()["models"][MODEL]["reports"]:
            break
    mp = probes.report()["models"][MODEL]
    (rep,) = mp["reports"]
    assert rep["region"]["id"] == head["region"]
    assert rep["complete"] and rep["stopped_at"] is None
    assert [t for t in rep["thresholds"] if t["status"] == "not_searched"] == []  # every target searched
    assert rep["evaluations"]["total"] <= rep["plan"]["total"]
    assert state.counter(EVALS, (MODEL, "probe")) == rep["evaluations"]["total"]
    assert state.counter(EVALS, (MODEL, "probe")) <= 0.1 / 0.9 * event_rows(state)
    assert tel.PROBE_REGIONS_TOTAL.value(state, tel.ModelOutcomeReason(MODEL, "completed", "probed")) == 1
    assert tel.PROBE_BUDGET_ROWS.get(state, tel.State("spent")) == rep["evaluations"]["total"]
    # a region waiting for many rounds is counted as queued once
    assert tel.PROBE_REGIONS_TOTAL.value(state, tel.ModelOutcomeReason(MODEL, "queued", "budget")) <= 2


def test_probe_scheduler_probes_the_regions_of_the_segment_that_moved(tmp_path: Path) -> None:
    pipeline, probes, clock = make(tmp_path, share=0.5)
    rng = np.random.default_rng(50)
    x = np.column_stack([rng.normal(0.0, 0.1, 800), rng.normal(0.2, 0.03, 800)])  # one place, on the boundary
    x[:, 1] += x[:, 0]
    lines = [
        event(i, x[i], label=int(model_class(x[i : i + 1])[0]), segment=("calm", "moved")[i % 2]) for i in range(800)
    ]
    score(pipeline, lines)
    regions = probes.report()["models"][MODEL]["regions"]
    assert {r["segment"] for r in regions} == {"calm", "moved"}  # the same place, one region per segment
    rt = pipeline.runtimes[MODEL]
    assert rt.watch is not None
    rt.watch.verdicts.last_reports.update(
        {
            "calm": VerdictReport(Verdict.STABLE),
            "moved": VerdictReport(Verdict.HARMFUL_SHIFT, ("gamma_cusum",), (("x1", 0.4),)),
        }
    )
    assert probes.run_once(clock.now) >= 1
    mp = probes.report()["models"][MODEL]
    assert mp["regions"][0]["segment"] == "moved"  # ranked by what moved, then γ
    assert {rep["region"]["segment"] for rep in mp["reports"]} == {"moved"}
    for rep in mp["reports"]:
        assert rep["rank"]["verdict"] == "harmful-shift" and rep["rank"]["severity"] == [2.0, 1.0, 0.4]
    state = pipeline.state
    outranked = tel.PROBE_REGIONS_TOTAL.value(state, tel.ModelOutcomeReason(MODEL, "skipped", "outranked"))
    assert outranked == sum(1 for r in mp["regions"] if r["segment"] == "calm") >= 1
    assert mp["outcomes"]["skipped:outranked"] == outranked
    probes.run_once(clock.now)  # nothing new joined: no region is probed again, no outcome counted again
    assert tel.PROBE_REGIONS_TOTAL.value(state, tel.ModelOutcomeReason(MODEL, "skipped", "outranked")) == outranked
    assert probes.report()["models"][MODEL]["runs"] == 1
