"""Probes: the scheduler inside ``run`` — feeds the region index from scored batches and, every
``interval_seconds``, runs the funnel on the highest-ranked regions under an evaluation budget.

Budget: probes may use at most ``budget_share`` of all model rows evaluated (events + probes). The scheduler keeps
its own count of both: the event rows from every scored batch it is fed (and the shadow checks' rows from every
accept), the probe rows from its own runs. Before each run it computes the rows it has earned since start —
``share/(1−share) × event rows − probe rows so far``. A region is probed to completion or not started: its probe's
rows are planned first (:func:`~monitor.probes.plan.plan_probe`, an upper bound per stage from the points, the targets
and the settings), and it is admitted only when the rows earned cover the whole plan; otherwise it is *queued* (and
every region ranked below it this round with it), and the scheduler runs again as soon as the rows earned cover the
queue's first region (or at the next interval). An admitted probe runs every stage to the end, so no report is
half-searched. So over any stretch of time, probing never takes more than ``budget_share`` of the model's work from
event scoring.

Rows alone do not bound the cost (probe rows go through the model in small batches, and the region bookkeeping in
:meth:`ProbeScheduler.observe` costs time too), so ``tick`` also skips a run while the scheduler's own wall time —
observe plus runs — exceeds ``TIME_MARGIN × budget_share`` of the time since start (the margin covers what probing
costs outside its own time, e.g. caches evicted for the event path): scored events/s then drop by at most the share.

Which regions: the region index forms regions within a segment and ranks them by what moved
(:mod:`monitor.probes.regions`): each segment's *severity* is its drift verdict (harmful-shift over input-shift over
stable), then the detectors that fired, then the largest distance of the inputs that moved
(:func:`segment_severity`). Only the regions of the segments at the highest verdict are probed (the others are
skipped as ``outranked``), highest rank first, at most ``regions_per_run`` a round, and a region is probed again only
once new events joined it. Each region's outcome — completed, queued (budget), skipped (few exemplars, outranked,
evicted while queued) — is counted once per change in ``harmonic_probe_regions_total``; ``/probes`` shows the queue
and the budget.

Results become metrics (ε* per region and τ, MRI components, the profile's targets per status) and a JSON report
at ``/probes`` and in the state dir (``probes.json``). Each report carries the complete threshold profile (every
(τ, feature) pair with its status: :mod:`monitor.probes.profile`) in the model's feature names
(:attr:`~monitor.model.onnx.OnnxModel.feature_names`) with ε in raw units beside standardized ones; each region
its segment, its centre in raw units and its exemplars' held values; each report its ``rank`` and ``plan``; the index
says how it evicts (the lowest rank when full) and how many regions it has evicted.

A model that holds values fixed (int, bool and string inputs: :mod:`monitor.model.signature`): :meth:`observe` gets
the scored batch's held values, the region index keeps each exemplar's, and the funnel evaluates every exemplar's
rows with its own (:func:`~monitor.probes.funnel.run_funnel`'s ``held``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.config import ProbeSettings
from monitor.drift.verdict import Verdict, VerdictReport
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.probes.certify import certificate_report, certify_points
from monitor.probes.funnel import FunnelConfig, run_funnel
from monitor.probes.perturbations import PERTURBATION_NAMES
from monitor.probes.plan import ProbePlan, plan_probe
from monitor.probes.probe_report import (
    ProbeBudget,
    ProbeQueue,
    ProbeRows,
    ProbeRunDone,
    RegionDropped,
    RegionOutcome,
    RegionsTracked,
    SchedulerReport,
    region_probed,
)
from monitor.probes.profile import FeatureInfo, held_names
from monitor.probes.regions import Region, RegionIndex
from monitor.probes.report import build_report
from monitor.probes.trees import TreeSplits, tree_splits

if TYPE_CHECKING:
    from monitor.runtime.models import ModelRuntime
    from monitor.runtime.pipeline import Pipeline
    from monitor.runtime.stage_results import Accepted, ScoredBatch

log = logging.getLogger("monitor.probes")

#: fraction of budget_share the scheduler's own wall time may use (the rest is headroom for indirect costs)
TIME_MARGIN = 0.8

#: a region needs at least this many exemplars before it is probed
MIN_EXEMPLARS = 4

#: distinct held values listed per held input in a region's summary
HELD_SHOWN = 5

#: a segment's verdict as the first part of its severity: what moved most ranks first
VERDICT_LEVEL: dict[Verdict, float] = {Verdict.STABLE: 0.0, Verdict.INPUT_SHIFT: 1.0, Verdict.HARMFUL_SHIFT: 2.0}


def segment_severity(reports: Mapping[str, VerdictReport]) -> dict[str | None, tuple[float, ...]]:
    """segment → (verdict level, detectors fired, largest KS distance of the inputs that moved), from each segment's
    last verdict report: compared as tuples, the larger moved more."""
    return {
        segment: (
            VERDICT_LEVEL[rep.verdict],
            float(len(rep.fired)),
            max((float(d) for _, d in rep.top_features), default=0.0),
        )
        for segment, rep in reports.items()
    }


@dataclass
class _ModelProbes:
    index: RegionIndex
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: int = 0
    #: a tree ensemble's split thresholds (exact single-feature ε*), read once; None: bisection
    splits: TreeSplits | None = None
    #: the regions waiting for the row budget, highest rank first, with their plans
    queue: list[tuple[Region, ProbePlan]] = field(default_factory=list)
    #: region id → what the prober last did with it (``queued:budget``, ``skipped:<reason>``): counted once a change
    states: dict[str, str] = field(default_factory=dict)
    #: ``outcome:reason`` → regions, since start (``/probes``)
    outcomes: dict[str, int] = field(default_factory=dict)


class ProbeScheduler:
    """Keeps a region index per model and runs budgeted funnel probes periodically.

    Parameters
    ----------
    pipeline : the running pipeline (its models and standardizers); the scheduler feeds on its scored batches and
        hands its series to the pipeline's fan-out (:meth:`take_report`).
    settings : interval, regions per run, budget share, index size.
    clock : wall-clock seconds (injected in tests).
    funnel : funnel settings (ε, δ, ε_max, η).
    """

    def __init__(
        self,
        pipeline: Pipeline,
        settings: ProbeSettings,
        *,
        clock: Callable[[], float] = time.time,
        funnel: FunnelConfig | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.pipeline = pipeline
        self.settings = settings
        self.clock = clock
        # periodic probes skip the γ-ascent direction (B·m·(1+m) rows, most of a run's cost) and keep Algorithm 2
        # short; they search every target, as `harmonic-monitor probe` does
        self.funnel = funnel or FunnelConfig(
            perturbations=tuple(p for p in PERTURBATION_NAMES if p != "gamma_ascent"), steps=5
        )
        self._models: dict[str, _ModelProbes] = {}
        self._last_run = clock()
        self.timer = timer
        self._started = timer()
        #: wall seconds spent in observe() and run_once(): what probing costs the stream (time-share budget)
        self.busy_seconds = 0.0
        self._last_run_seconds = 0.0  # the next run is assumed to cost as much, so it fits before it starts
        #: model rows this scheduler's probes evaluated, and the rows live events took (scoring and shadow checks)
        #: since it started: its budget's own count (a restart starts both at 0, so it never probes past the share)
        self.probe_rows = 0
        self._event_rows = 0.0
        #: the series produced since the last take_report (:mod:`monitor.probes.probe_report`)
        self._report = SchedulerReport()
        pipeline.scored_hooks.append(self.observe)
        pipeline.fanout.probe_reporters.append(self.take_report)
        pipeline.stages.accepted_hooks.append(self._count_shadow)

    def take_report(self) -> SchedulerReport:
        """The series produced since the last call (region index sizes, probe results, rows, runs, regions dropped,
        outcomes, queues), in order, then the budget as it is now; a new report starts."""
        if self.settings.enabled:
            queued = sum(p.total for mp in self._models.values() for _, p in mp.queue)
            self._report.series.append(ProbeBudget(self._earned(), float(self.probe_rows), float(queued)))
        report, self._report = self._report, SchedulerReport()
        return report

    def _for(self, rt: ModelRuntime) -> _ModelProbes:
        mp = self._models.get(rt.name)
        if mp is None:
            mp = self._models[rt.name] = _ModelProbes(
                RegionIndex(rt.model.n_features, max_regions=self.settings.max_regions),
                splits=tree_splits(rt.model.path, rt.model.n_features, plain=rt.model.signature.plain),
            )
        return mp

    # -- fed by the pipeline after each scored batch --------------------------------------------------------
    def observe(self, batch: ScoredBatch) -> None:
        """Feed the flagged events of a scored batch to the model's region index, with the batch's held values (a
        model that holds values fixed) and the events' segments, both kept with the exemplars."""
        rt, rows, result, now, held = batch.rt, batch.rows, batch.result, batch.now, batch.held
        self._event_rows += batch.evaluations
        if not self.settings.enabled or rt.standardizer is None or rt.watch is None or rt.watch.reference is None:
            return
        standardizer, ref = rt.standardizer, rt.watch.reference
        started = self.timer()
        try:
            threshold = float(np.quantile(ref.gamma_sample, 0.95)) if ref.gamma_sample.size else 0.0
            flagged = result.valid & ((result.gamma > max(threshold, 1e-9)) | (result.flicker > 0))
            if not flagged.any():
                return
            mp = self._for(rt)
            mp.index.severity = segment_severity(rt.watch.last_reports)
            evicted = mp.index.evicted_total
            std = standardizer.to_standardized(rows)
            mp.index.update(std, rows, result.gamma, result.flicker, flagged, now, held, batch.segments)
            self._report.series.append(RegionsTracked(rt.name, len(mp.index), mp.index.evicted_total - evicted))
        finally:
            self.busy_seconds += self.timer() - started

    def _with_names(self, rt: ModelRuntime, mp: _ModelProbes) -> list[dict[str, Any]]:
        features = None if rt.standardizer is None else _features(rt, rt.standardizer)
        return [region_summary(r, features) for r in mp.index.worst(mp.index.max_regions)]

    # -- periodic -------------------------------------------------------------------------------------------
    def _count_shadow(self, accepted: Accepted) -> None:
        self._event_rows += float(sum(accepted.shadow_compared.values()))

    def event_rows(self) -> float:
        """Rows spent on live events (scoring and shadow checks) since the scheduler started: what earns probe
        budget. The one-off reference scoring at start-up does not, or probes could take more than their share of
        the stream's work."""
        return self._event_rows

    def _earned(self) -> float:
        """Rows probes have earned since start: ``share/(1−share)`` of the live events' rows (capped at 1e12)."""
        share = self.settings.budget_share
        return min(share / (1.0 - share) * self.event_rows(), 1e12) if share < 1.0 else 1e12

    def budget_rows(self) -> int:
        """Rows earned and not yet spent: what the next probe may take."""
        return int(max(0.0, self._earned() - self.probe_rows))

    def tick(self) -> None:
        """Run a probe round when the interval has passed, or the rows earned cover a queued region's whole probe
        (within the time share either way)."""
        if not self.settings.enabled:
            return
        now = self.clock()
        due = now - self._last_run >= self.settings.interval_seconds or self._queue_affordable()
        if not due or not self.time_allowed():
            return
        self._last_run = now
        self.run_once(now)

    def _queue_affordable(self) -> bool:
        """Whether the rows earned now cover the whole probe of some model's first queued region."""
        heads = [mp.queue[0][1].total for mp in self._models.values() if mp.queue]
        return bool(heads) and min(heads) <= self.budget_rows()

    def time_allowed(self) -> bool:
        """Whether the scheduler's wall time so far, plus a run like the last one, is within ``budget_share`` of the
        time since it started."""
        share = self.settings.budget_share
        # keep the scheduler's own time at TIME_MARGIN of the share: probing also costs outside its own wall time
        # (caches evicted for the event path), measured at ≈ 2 points of a 10 % share for the cheapest model
        allowed = TIME_MARGIN * share * (self.timer() - self._started)
        return share >= 1.0 or self.busy_seconds + self._last_run_seconds <= allowed

    def run_once(self, now: float) -> int:
        """Probe the worst regions of every model within budget. Returns the number of regions probed."""
        started = self.timer()
        try:
            return self._run_once(now)
        finally:
            self._last_run_seconds = self.timer() - started
            self.busy_seconds += self._last_run_seconds

    def _run_once(self, now: float) -> int:
        probed = 0
        for rt in self.pipeline.runtimes.values():
            mp = self._models.get(rt.name)
            if mp is None or rt.standardizer is None:
                continue
            done = self._probe_model(rt, mp, now)
            if done:
                mp.runs += 1
                self._report.series.append(ProbeRunDone(rt.name))
            probed += done
            self._forget_gone(rt.name, mp)
        if probed:
            self._write()
        return probed

    def _probe_model(self, rt: ModelRuntime, mp: _ModelProbes, now: float) -> int:
        """Probe ``rt``'s highest-ranked candidates whose whole plan the budget covers; queue the rest of this
        round's. Returns the number of regions probed."""
        assert rt.standardizer is not None
        if rt.watch is not None:
            mp.index.severity = segment_severity(rt.watch.last_reports)
        features = _features(rt, rt.standardizer)
        copies = self._certify_copies(rt)
        queue: list[tuple[Region, ProbePlan]] = []
        probed = 0
        for region in self._candidates(rt.name, mp)[: self.settings.regions_per_run]:
            plan = plan_probe(
                rt.model,
                rt.standardizer,
                region.points(),
                self.funnel,
                features=features,
                splits=mp.splits,
                certify_copies=copies,
            )
            if queue or plan.total > self.budget_rows():
                queue.append((region, plan))
                if self._mark(rt.name, mp, region, "queued", "budget"):
                    extra = {"model": rt.name, "region": region.region_id, "rows": plan.total}
                    log.info("probe queued until the budget covers it", extra={**extra, "budget": self.budget_rows()})
                continue
            self._probe(rt, mp, region, plan, features, now)
            probed += 1
        mp.queue = queue
        self._report.series.append(ProbeQueue(rt.name, len(queue)))
        return probed

    def _candidates(self, model: str, mp: _ModelProbes) -> list[Region]:
        """The regions to probe, highest rank first: new events since their last probe, enough exemplars, and a
        segment at the highest verdict level of the index (the others are marked skipped, with the reason)."""
        index = mp.index
        ranked = index.worst(len(index))
        top = max((_level(index.severity_of(r.segment)) for r in ranked), default=0.0)
        out: list[Region] = []
        for region in ranked:
            if region.probed_at is not None and region.events == region.probed_events:
                continue  # nothing new since its report
            if _level(index.severity_of(region.segment)) < top:
                self._mark(model, mp, region, "skipped", "outranked")
            elif region.points().shape[0] < MIN_EXEMPLARS:
                self._mark(model, mp, region, "skipped", "few_exemplars")
            else:
                out.append(region)
        return out

    def _mark(self, model: str, mp: _ModelProbes, region: Region, outcome: str, reason: str) -> bool:
        """Count ``region``'s outcome once per change (a completed probe every time); whether it was counted."""
        state = f"{outcome}:{reason}"
        if outcome != "completed":
            if mp.states.get(region.region_id) == state:
                return False
            mp.states[region.region_id] = state
        else:
            mp.states.pop(region.region_id, None)
        mp.outcomes[state] = mp.outcomes.get(state, 0) + 1
        self._report.series.append(RegionOutcome(model, outcome, reason))
        return True

    def _forget_gone(self, model: str, mp: _ModelProbes) -> None:
        """Drop the reports and states of regions no longer in the index; a queued one counts as skipped
        (evicted)."""
        live = {r.region_id for r in mp.index.regions}
        for rid in [k for k in mp.reports if k not in live]:
            del mp.reports[rid]
            self._report.series.append(RegionDropped(model, rid))
        for rid in [k for k in mp.states if k not in live]:
            if mp.states.pop(rid).startswith("queued"):
                mp.outcomes["skipped:evicted"] = mp.outcomes.get("skipped:evicted", 0) + 1
                self._report.series.append(RegionOutcome(model, "skipped", "evicted"))

    def _probe(
        self, rt: ModelRuntime, mp: _ModelProbes, region: Region, plan: ProbePlan, features: FeatureInfo, now: float
    ) -> None:
        """Probe ``region`` to the end (every stage; its plan was admitted) and publish its report."""
        assert rt.standardizer is not None
        points, held = region.points(), region.held()
        started = time.perf_counter()
        result = run_funnel(
            rt.model, rt.standardizer, points, self.funnel, held=held, features=features, splits=mp.splits
        )
        used = result.total_rows
        self.probe_rows += used
        self._report.series.append(ProbeRows(rt.name, used))
        region.probed_at = now  # before to_dict(), so the report's own region says when it was probed
        region.probed_events = region.events
        adv = result.adversarial
        if adv is not None and rt.watch is not None and adv.start_gamma.size == points.shape[0]:
            # the points Algorithm 2 ran on give the Gamma Map its unstable shares, model-wide and in the region's
            # segment
            rt.watch.gamma.add_probed(adv.start_probability, adv.start_gamma, ~adv.stable, region.segments())
        report = build_report(result, points=points)
        report["region"] = region_summary(region, features)
        report["certified"], cert_rows = self._certify(rt, points, held)
        if cert_rows:
            self.probe_rows += cert_rows
            self._report.series.append(ProbeRows(rt.name, cert_rows))
            evaluations = report.get("evaluations")
            if isinstance(evaluations, dict):
                evaluations["certify"] = cert_rows
                total = evaluations.get("total")
                evaluations["total"] = (total if isinstance(total, int) else 0) + cert_rows
        model_info = report.get("model")
        if isinstance(model_info, dict):
            model_info["name"] = rt.name
        verdict = None if rt.watch is None or region.segment is None else rt.watch.verdict(region.segment)
        report["rank"] = {
            "segment": region.segment,
            "verdict": None if verdict is None else verdict.value,
            "severity": list(mp.index.severity_of(region.segment)),
            "score": region.score,
        }
        report["plan"] = plan.to_dict()
        report["probed_at"] = now
        report["wall_seconds"] = time.perf_counter() - started
        mp.reports[region.region_id] = report
        self._report.series.append(region_probed(rt.name, region.region_id, report))
        self._mark(rt.name, mp, region, "completed", "probed")

    @staticmethod
    def _certify_copies(rt: ModelRuntime) -> int:
        """Noise copies per point of a region's certified radius (0: none: a regressor, or under 2 copies)."""
        copies = rt.scoring_config().flicker_copies
        return copies if rt.model.kind == "classifier" and copies >= 2 else 0

    def _certify(self, rt: ModelRuntime, points: NDArray[np.float64], held: Held | None) -> tuple[dict[str, Any], int]:
        """The region's certified radius (randomized smoothing at the model's flicker σ and copies; its rows are in
        the region's plan); a status and reason where it does not apply."""
        scoring = rt.scoring_config()
        copies = scoring.flicker_copies
        if rt.model.kind != "classifier":
            return {"status": "not_applicable", "reason": "a certified radius is for classifiers"}, 0
        if copies < 2:
            return {"status": "not_computed", "reason": f"flicker_copies is {copies}: too few noise copies"}, 0
        assert rt.standardizer is not None
        cert, rows = certify_points(
            rt.model, rt.standardizer, points, held=held, copies=copies, sigma=scoring.sigma, seed=scoring.seed
        )
        return {"status": "certified", **certificate_report(cert, rows)}, rows

    def report(self) -> dict[str, Any]:
        """The JSON served at ``/probes``."""
        return {
            "budget_share": self.settings.budget_share,
            "probe_rows": self.probe_rows,
            "event_rows": self.event_rows(),
            "budget": {
                "earned": self._earned(),
                "spent": self.probe_rows,
                "available": self.budget_rows(),
                "queued": sum(p.total for mp in self._models.values() for _, p in mp.queue),
            },
            "models": {
                name: {
                    "feature_names": list(self.pipeline.runtimes[name].model.feature_names)
                    if name in self.pipeline.runtimes
                    else None,
                    "regions": self._with_names(self.pipeline.runtimes[name], mp)
                    if name in self.pipeline.runtimes
                    else [r.to_dict() for r in mp.index.worst(mp.index.max_regions)],
                    "index": {
                        "regions": len(mp.index),
                        "max_regions": mp.index.max_regions,
                        "flagged_total": mp.index.flagged_total,
                        "evicted_total": mp.index.evicted_total,
                        "refused_total": mp.index.refused_total,
                        "half_life_seconds": mp.index.half_life_seconds,
                        "eviction": "regions are formed within a segment and ranked by their segment's severity "
                        "(verdict, detectors fired, largest input distance), then their score (γ + flicker of their "
                        f"events, halved every {mp.index.half_life_seconds:g} s); when full, a new region replaces "
                        "the lowest-ranked one unless that one's segment moved more (the event is then not kept)",
                    },
                    "queue": [
                        {"region": r.region_id, "segment": r.segment, "rows": p.total, "plan": p.to_dict()}
                        for r, p in mp.queue
                    ],
                    "outcomes": dict(mp.outcomes),
                    "reports": list(mp.reports.values()),
                    "runs": mp.runs,
                }
                for name, mp in self._models.items()
            },
        }

    def _write(self) -> None:
        """Keep the report in the state directory; one that cannot be written (read-only, full) is reported by the
        state store's degraded state, and the report stays served from memory (``GET /probes``)."""
        path = Path(self.pipeline.settings.state_dir) / "probes.json"
        tmp = path.with_suffix(".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(self.report(), default=float), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            log.warning("probe report not written to the state directory", extra={"path": str(path), "error": str(exc)})


def _level(severity: tuple[float, ...]) -> float:
    """The verdict level of a severity (0 for a segment with none)."""
    return severity[0] if severity else 0.0


def _features(rt: ModelRuntime, standardizer: Standardizer) -> FeatureInfo:
    """The model's feature names, raw units and reference range (from the reference's sample) for its reports."""
    ref = None if rt.watch is None else rt.watch.reference
    sample = None if ref is None or ref.feature_sample.size == 0 else ref.feature_sample
    return FeatureInfo.build(
        rt.model.feature_names,
        standardizer,
        reference=sample,
        std=None if ref is None else ref.feature_std,
        held=held_names(rt.model.signature),
        mark_zero_spread=rt.settings.scoring.space != "raw",
    )


def region_summary(region: Region, features: FeatureInfo | None) -> dict[str, Any]:
    """A region as ``/probes`` shows it: :meth:`Region.to_dict` plus its centre in raw units by feature name and the
    held values of its exemplars (a few distinct ones per held input)."""
    out = region.to_dict()
    if features is not None:
        out["centre_raw"] = dict(zip(features.names, features.to_raw(region.centre).tolist(), strict=True))
    held = region.held()
    if held is not None:
        shown: dict[str, list[Any]] = {}
        for key, values in held.values.items():
            distinct: list[Any] = []
            for v in values:
                item = v.tolist() if isinstance(v, np.ndarray) else (v.item() if isinstance(v, np.generic) else v)
                if item not in distinct:
                    distinct.append(item)
                if len(distinct) >= HELD_SHOWN:
                    break
            shown[key] = distinct
        out["held_values"] = shown
    return out
