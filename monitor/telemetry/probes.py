"""The probe regions and runs: where the model is fragile, and how far."""

from __future__ import annotations

from monitor.telemetry.series import (
    Counter,
    Gauge,
    Model,
    ModelOutcomeReason,
    ModelRegionPerturbation,
    ModelRegionStatus,
    State,
)

__all__ = [
    "REGIONS_TRACKED",
    "REGIONS_EVICTED_TOTAL",
    "PROBE_RUNS_TOTAL",
    "PROBE_EPS_STAR",
    "PROBE_MRI",
    "PROBE_TARGETS",
    "PROBE_REGIONS_TOTAL",
    "PROBE_QUEUE",
    "PROBE_BUDGET_ROWS",
]

REGIONS_TRACKED = Gauge(
    "harmonic_regions_tracked",
    "Flagged feature regions in the bounded index.",
    Model,
    group="Probes on flagged regions",
    unit="regions",
    use=(
        "Regions of feature space where sampled events showed high γ or flicker, each within one segment, in the "
        "bounded index (`probes.max_regions`). At the bound all the time: the index evicts by rank (the segment's "
        "drift verdict and evidence, then γ + flicker), so the regions kept are those of the segments that moved."
    ),
)
REGIONS_EVICTED_TOTAL = Counter(
    "harmonic_regions_evicted_total",
    "Regions evicted from the full index: a new region replaced the one with the lowest decayed score.",
    Model,
    group="Probes on flagged regions",
    unit="regions",
    use=(
        "Regions dropped because the index was full (`probes.max_regions`): each new region replaces the "
        "lowest-ranked one (its segment moved least, then the lowest score: γ + flicker of its events, halved every "
        "hour); never one of a segment that moved more than the new event's. A rate close to the rate of new regions "
        "means the index churns and a region rarely lives long enough to be probed: raise `probes.max_regions`."
    ),
)
PROBE_RUNS_TOTAL = Counter(
    "harmonic_probe_runs_total",
    "Threshold-probe runs completed.",
    Model,
    group="Probes on flagged regions",
    unit="runs",
    use=(
        "Probe runs that probed at least one region (every `probes.interval_seconds`, or as soon as the budget covers "
        "the first queued region; within `probes.budget_share` of model evaluations). Flat while regions exist and "
        "`harmonic_probe_queue` > 0 = the probe budget grows too slowly for a whole probe: see "
        "`harmonic_probe_budget_rows`."
    ),
)
PROBE_EPS_STAR = Gauge(
    "harmonic_probe_eps_star",
    "ε* per region and perturbation (standardized units); +Inf when never crossed below ε_max.",
    ModelRegionPerturbation,
    group="Probes on flagged regions",
    unit="perturbation intensity ε (standardized units; `+Inf` = never crossed below ε_max)",
    use=(
        "Threshold profile: the smallest ε at which agreement under that perturbation drops by δ. Small ε* on "
        "`noise` or `shift` is a region where tiny input changes flip the model. Full report (exemplars, evaluation "
        "counts per funnel stage): `GET /probes`."
    ),
)
PROBE_MRI = Gauge(
    "harmonic_probe_mri",
    "MRI component per region and perturbation.",
    ModelRegionPerturbation,
    group="Probes on flagged regions",
    unit="ratio (0–1): agreement",
    use=(
        "Model Robustness Index component per perturbation at a fixed moderate ε: the share of the region's points "
        "whose prediction survives it. **Read it as a vector across `perturbation`**, never averaged into one number."
    ),
)
PROBE_TARGETS = Gauge(
    "harmonic_probe_targets",
    "Probe targets ((perturbation, feature) pairs) of a region's last profile, by status: crossed, not_crossed, not_searched.",
    ModelRegionStatus,
    group="Probes on flagged regions",
    unit="targets ((perturbation, feature) pairs)",
    use=(
        "The region's last threshold profile counted by status: `crossed` (ε* found), `not_crossed` (robust up to the "
        "cap ε_max), `not_searched` (a feature of zero reference spread, a held element; never the budget: a region "
        "is probed to completion or queued). The three add up to every target, so a feature never looked at cannot "
        "pass for a robust one; each target's status and reason: `GET /probes`."
    ),
)
PROBE_REGIONS_TOTAL = Counter(
    "harmonic_probe_regions_total",
    "Regions by what the prober did with them: outcome completed (reason probed: probed to the end), queued (reason "
    "budget: waiting until the row budget covers the whole probe) or skipped (reason few_exemplars, outranked: "
    "another segment moved more, evicted: it left the index while queued).",
    ModelOutcomeReason,
    group="Probes on flagged regions",
    unit="regions",
    use=(
        'What the prober did with each region, counted once per change: `outcome="completed"` (`reason="probed"`: '
        'every stage run to the end, so the report has no target left unsearched for lack of budget), `"queued"` '
        '(`reason="budget"`: the rows earned do not yet cover its whole probe), `"skipped"` (`reason="few_exemplars"`: '
        'under 4 events; `"outranked"`: another segment\'s verdict is more severe, its regions go first; '
        '`"evicted"`: it left the index while queued). Many `evicted` = the budget is too small for the rate at '
        "which regions change: raise `probes.budget_share` or lower `probes.regions_per_run`."
    ),
)
PROBE_QUEUE = Gauge(
    "harmonic_probe_queue",
    "Regions waiting for the probe row budget to cover their whole probe.",
    Model,
    group="Probes on flagged regions",
    unit="regions",
    use=(
        "Regions waiting until the rows earned cover their whole probe (at most `probes.regions_per_run`); each runs "
        'as soon as they do. Their planned rows: `harmonic_probe_budget_rows{state="queued"}`; the queue itself: '
        "`GET /probes` (`models.<name>.queue`)."
    ),
)
PROBE_BUDGET_ROWS = Gauge(
    "harmonic_probe_budget_rows",
    "The probe row budget, all models: state earned (budget_share of the rows live events took), spent (rows probes "
    "evaluated), queued (rows the queued regions' probes will take).",
    State,
    group="Probes on flagged regions",
    unit="model rows",
    use=(
        '`state="earned"`: `budget_share / (1 − budget_share)` of the rows live events took since start; `"spent"`: '
        'the rows probes evaluated since start (spent ≤ earned); `"queued"`: the planned rows of the queued regions. '
        "earned − spent is what the next probe may take; when it stays below queued the budget is the bottleneck."
    ),
)
