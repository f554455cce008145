"""What the probe scheduler produced since it was last asked: its series, as named records, in the order it produced
them. :class:`~monitor.probes.scheduler.ProbeScheduler` adds to a :class:`SchedulerReport` and hands it over with
``take_report``; the pipeline's :class:`~monitor.runtime.fanout.Fanout` writes it into the metrics state with
:func:`publish_probe_report` whenever it drains the watches' reports. The scheduler holds no metrics store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from monitor import telemetry as tel
from monitor.exporters.prometheus import MetricsState

#: the statuses of the profile, each a ``harmonic_probe_targets`` series
STATUSES: tuple[str, ...] = ("crossed", "not_crossed", "not_searched")

#: what the prober does with a region (``harmonic_probe_regions_total``): outcome → its reasons
REGION_OUTCOMES: dict[str, tuple[str, ...]] = {
    "completed": ("probed",),
    "queued": ("budget",),
    "skipped": ("few_exemplars", "outranked", "evicted"),
}

#: the ``state`` of ``harmonic_probe_budget_rows``
BUDGET_STATES: tuple[str, ...] = ("earned", "spent", "queued")


@dataclass(frozen=True, slots=True)
class RegionsTracked:
    """A model's region index after a scored batch fed it: its size, and the regions it evicted for that batch."""

    model: str
    tracked: int
    evicted: int


@dataclass(frozen=True, slots=True)
class RegionProbed:
    """One region's probe results: MRI per perturbation, the smallest ε* per perturbation among the targets measured
    (+inf: none crossed), and the profile's targets per status."""

    model: str
    region_id: str
    mri: Mapping[str, float]
    eps_star: Mapping[str, float]
    targets: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class ProbeRows:
    """Model rows a probe run (the funnel, the certificate) evaluated for ``model``."""

    model: str
    rows: int


@dataclass(frozen=True, slots=True)
class ProbeRunDone:
    """A run that probed at least one of ``model``'s regions."""

    model: str


@dataclass(frozen=True, slots=True)
class RegionDropped:
    """A region that left the index: its probe series go."""

    model: str
    region_id: str


@dataclass(frozen=True, slots=True)
class RegionOutcome:
    """Regions of ``model`` that the prober completed, queued or skipped, with the reason."""

    model: str
    outcome: str
    reason: str
    regions: int = 1


@dataclass(frozen=True, slots=True)
class ProbeQueue:
    """``model``'s regions waiting for the row budget."""

    model: str
    regions: int


@dataclass(frozen=True, slots=True)
class ProbeBudget:
    """The row budget of every model's probes: earned, spent, and what the queued probes will take."""

    earned: float
    spent: float
    queued: float


ProbeSeries = (
    RegionsTracked | RegionProbed | ProbeRows | ProbeRunDone | RegionDropped | RegionOutcome | ProbeQueue | ProbeBudget
)


@dataclass
class SchedulerReport:
    """The scheduler's series since the last ``take_report``, in order."""

    series: list[ProbeSeries] = field(default_factory=list)


def publish_probe_report(state: MetricsState, report: SchedulerReport) -> None:
    """Write ``report``'s series into ``state``, in the order they were produced."""
    for item in report.series:
        if isinstance(item, RegionsTracked):
            tel.REGIONS_TRACKED.set(state, tel.Model(item.model), float(item.tracked))
            if item.evicted:
                tel.REGIONS_EVICTED_TOTAL.inc(state, tel.Model(item.model), float(item.evicted))
        elif isinstance(item, RegionProbed):
            for tau, r in item.mri.items():
                tel.PROBE_MRI.set(state, tel.ModelRegionPerturbation(item.model, item.region_id, tau), r)
            for tau, eps in item.eps_star.items():
                tel.PROBE_EPS_STAR.set(state, tel.ModelRegionPerturbation(item.model, item.region_id, tau), eps)
            for status, n in item.targets.items():
                tel.PROBE_TARGETS.set(state, tel.ModelRegionStatus(item.model, item.region_id, status), float(n))
        elif isinstance(item, ProbeRows):
            tel.MODEL_EVALUATIONS_TOTAL.inc(state, tel.ModelPurpose(item.model, "probe"), float(item.rows))
        elif isinstance(item, ProbeRunDone):
            tel.PROBE_RUNS_TOTAL.inc(state, tel.Model(item.model))
        elif isinstance(item, RegionOutcome):
            labels = tel.ModelOutcomeReason(item.model, item.outcome, item.reason)
            tel.PROBE_REGIONS_TOTAL.inc(state, labels, float(item.regions))
        elif isinstance(item, ProbeQueue):
            tel.PROBE_QUEUE.set(state, tel.Model(item.model), float(item.regions))
        elif isinstance(item, ProbeBudget):
            for name, value in zip(BUDGET_STATES, (item.earned, item.spent, item.queued), strict=True):
                tel.PROBE_BUDGET_ROWS.set(state, tel.State(name), value)
        else:
            prefix = (item.model, item.region_id)
            for metric in (tel.PROBE_EPS_STAR, tel.PROBE_MRI, tel.PROBE_TARGETS):
                metric.clear(state, _starts_with(prefix))


def region_probed(model: str, region_id: str, report: Mapping[str, object]) -> RegionProbed:
    """The series of one region's probe report (:func:`~monitor.probes.report.build_report`'s dict)."""
    mri_doc = report.get("mri")
    mri = {str(k): float(v) for k, v in mri_doc.items() if v is not None} if isinstance(mri_doc, dict) else {}
    thresholds = report.get("thresholds")
    rows = [t for t in thresholds if isinstance(t, dict)] if isinstance(thresholds, list) else []
    worst: dict[str, float] = {}
    for t in rows:
        if t.get("status", "crossed") == "not_searched":
            continue  # nothing measured: no ε* to export (its status is counted below)
        eps = t["eps_star"]
        val = float("inf") if eps is None else float(eps)
        worst[t["perturbation"]] = min(worst.get(t["perturbation"], float("inf")), val)
    counts = dict.fromkeys(STATUSES, 0)
    for t in rows:
        if t.get("status") in counts:
            counts[t["status"]] += 1
    return RegionProbed(model, region_id, mri, worst, counts)


def _starts_with(prefix: tuple[str, ...]) -> Callable[[tuple[str, ...]], bool]:
    return lambda labels: labels[: len(prefix)] == prefix
