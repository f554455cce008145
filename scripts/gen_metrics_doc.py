"""Generate docs/METRICS.md from the metric catalogue (``monitor.telemetry.METRICS``).

    .venv/bin/python scripts/gen_metrics_doc.py           # rewrite docs/METRICS.md
    .venv/bin/python scripts/gen_metrics_doc.py --check   # exit 1 when docs/METRICS.md is out of date

Name, type, labels, help text and buckets come from METRICS; the unit, the group and "how to use it" of each
metric come from :data:`USAGE` below. A metric in METRICS without an entry here (or an entry for a metric that no
longer exists) is an error, so tests/unit/test_metrics_doc.py fails until the new metric is documented.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from monitor.drift.verdict import Verdict
from monitor.exporters.http import PATHS as HTTP_PATHS
from monitor.exporters.http import REJECT_REASONS
from monitor.gammamap import GAMMA_BIN_LABELS, P_BIN_LABELS
from monitor.probes.perturbations import PERTURBATION_NAMES
from monitor.probes.probe_report import BUDGET_STATES, REGION_OUTCOMES
from monitor.source.kafka import DROP_REASONS as PRODUCER_DROP_REASONS
from monitor.source.kafka import TOPIC_KINDS
from monitor.source.kserve_join import KSERVE_DROP_REASONS
from monitor.source.validate import INVALID_REASONS, PROCESSING_REASONS
from monitor.telemetry import METRICS, MetricSpec

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "METRICS.md"


@dataclass(frozen=True)
class Usage:
    group: str
    unit: str
    use: str


GROUPS = (
    "Traffic and sampling",
    "Per-event robustness (histograms)",
    "Shadow agreement",
    "Rolling windows and reference",
    "Drift",
    "Alerts",
    "Probes on flagged regions",
    "Accuracy without labels",
    "With delayed labels",
    "Cost and latency",
    "Process",
)

_RATE_NOTE = "Scored counts are a sample: divide a scored rate by `harmonic_events_sampled_ratio` for live traffic."

USAGE: dict[str, Usage] = {
    # -- traffic ---------------------------------------------------------------------------------------------------
    "harmonic_events_consumed_total": Usage(
        "Traffic and sampling",
        "events",
        "Everything read from Kafka, valid or not, before sampling: `sum by (model) (rate(...[5m]))` is the "
        'topic\'s throughput as this sidecar sees it. Invalid records count under `model="unknown"` when they '
        "cannot be attributed. A flat line while producers are busy means the consumer is stuck or has no "
        "partitions (check `harmonic_ready`).",
    ),
    "harmonic_events_scored_total": Usage(
        "Traffic and sampling",
        "events",
        "Events re-evaluated against the ONNX copy, i.e. the denominator behind every robustness number. "
        + _RATE_NOTE
        + " Per-segment rates show whether small segments get enough samples for their windows to mean anything.",
    ),
    "harmonic_scores_nonfinite_total": Usage(
        "Per-event robustness (histograms)",
        "events",
        "Scored events (valid features) at which the ONNX copy's own outputs were NaN or ±inf — at the event, a ball "
        "point or a flicker copy — usually an overflow at extreme inputs. Where the probabilities are NaN at the event itself "
        "the event has no class (`predicted_class` −1 in the scores topic and `score` output) and all its scores "
        "are NaN. Their γ is NaN or inf, so they are left "
        "out of `harmonic_gamma` and the windows' statistics (a NaN γ also out of the drift tests; an inf γ counts "
        "there as a very large one), and counted here instead (and logged, rate-limited). "
        "Should stay at 0: any increase means the model breaks down somewhere in the traffic it serves (alert "
        "HarmonicModelOutputsNotFinite).",
    ),
    "harmonic_events_invalid_total": Usage(
        "Traffic and sampling",
        "events",
        "`sum by (reason) (rate(...[5m]))`: a new reason appearing, or a jump in `wrong_width`/`missing_field`, is "
        "almost always a producer-side schema change. The ratio to consumed events is recorded as "
        "`instance:harmonic_events_invalid:ratio_rate5m` (alert HarmonicInvalidEventsHigh).",
    ),
    "harmonic_events_dead_lettered_total": Usage(
        "Traffic and sampling",
        "events",
        "Should track `harmonic_events_invalid_total` when `kafka.dead_letter_topic` is set; the payloads and the "
        "reason (header `harmonic-invalid-reason`) are on that topic for replay or inspection.",
    ),
    "harmonic_input_invalid_total": Usage(
        "Traffic and sampling",
        "events",
        "Data quality per input, for the values the model cannot take: an event with a missing (absent or `null`), "
        "NaN/inf or beyond-float32 value is dead-lettered whole (the model cannot score it), and counted here under the "
        "input at fault (under the model it named; `harmonic_events_invalid_total` counts the same events by "
        "reason). `topk(5, sum by (model, feature, problem) (rate(...[5m])))` names the upstream column that broke: "
        'a join that stopped filling one input shows as `problem="missing"` on that input alone. A model\'s first 64 '
        'inputs get their own series; later ones count as `feature="other"` (the dead letter\'s '
        "`harmonic-invalid-detail` header names the element). Series appear on the first such event.",
    ),
    "harmonic_kserve_dropped_total": Usage(
        "Traffic and sampling",
        "CloudEvent halves",
        "KServe payload-logging messages the request/response joiner discarded. `duplicate`: a second request or "
        "response with a `ce_id` already waiting (a redelivery, or a logger that reuses ids: their events are not "
        "scored twice, and a reused id pairs the wrong halves); `orphan_response`: a response whose request never "
        "came within the join TTL (the request is lost upstream, or requests go to another topic); "
        "`mismatched_response`: a response whose prediction count differs from its request's instances (the "
        "request's events are scored without a live prediction, so shadow agreement misses them). A steady rate "
        "of any of them means the payload logger or the topics need fixing, not the sidecar.",
    ),
    "harmonic_model_versions_evicted_total": Usage(
        "Traffic and sampling",
        "versions",
        "`model_version` values aged out of the exported series: beyond `segments.max_versions` per model, the "
        "least recently seen version is evicted and every series that carries it is removed. A few per rollout is "
        "normal; a steady rate means versions churn (a build id or timestamp sent as the version) or more versions "
        "serve at once than `segments.max_versions` allows, and their counters keep restarting.",
    ),
    "harmonic_events_sampled_total": Usage(
        "Traffic and sampling",
        "events",
        "Valid events the sampler accepted (stratified by predicted class by default). Compare with consumed to see "
        "how much of the traffic the budget covers.",
    ),
    "harmonic_events_sampled_ratio": Usage(
        "Traffic and sampling",
        "ratio (0–1)",
        "**Scale sampled rates back up with it**: live rate ≈ `rate(harmonic_events_scored_total[5m]) / "
        "harmonic_events_sampled_ratio` (recorded as `model_segment:harmonic_events_scored_scaled:rate5m`). "
        "Histograms and window gauges are *distributions* and need no scaling. A ratio far below 1 lengthens the "
        "wall-clock time to detect drift (alert HarmonicSampledRatioLow); see docs/OPERATIONS.md.",
    ),
    "harmonic_sampler_capacity_events_per_second": Usage(
        "Traffic and sampling",
        "events/s",
        "What scoring can sustain for the model within `sampler.cpu_share`, from the measured cost per event (or "
        "the configured event cap, when one is set). Offered traffic below it is scored whole; above it, sampled evenly in "
        "event time. Absent until the cost is measured (the reference scored at start-up, or the first batch); +Inf "
        "when nothing limits scoring (`events_per_second: 0`: every event scored). Ingest first: while the consumer "
        "lags (`harmonic_consumer_lag_records` above five polls' worth, or growing) the CPU budget is cut to what "
        "ingest leaves, and this falls with it; it climbs back to the `cpu_share` figure once caught up.",
    ),
    "harmonic_consumer_lag_records": Usage(
        "Traffic and sampling",
        "records",
        "How far behind the log end the sidecar reads, all assigned partitions together (log-end offsets as the "
        "last fetches reported them, minus the pipeline's positions). A few polls' worth (`kafka.max_poll_records`) "
        "is normal; above five polls' worth scoring yields the loop to ingest (the sampled ratio drops) until it is "
        "back under one poll's worth. Growing for minutes at a steady rate: the input outruns ingest itself "
        "(add partitions and replicas). Absent for sources that cannot report log ends (replay).",
    ),
    # -- per-event histograms ------------------------------------------------------------------------------------
    "harmonic_gamma": Usage(
        "Per-event robustness (histograms)",
        "units of f (probability for `output: proba`, logit for `logit`, the output for `value`)",
        "Anharmonicity γ(x) = |f(x) − mean of f over a ball of radius r around x|: ~0 where the model is locally "
        "smooth, large near decision boundaries. `histogram_quantile(0.95, sum by (model, segment, le) "
        "(rate(harmonic_gamma_bucket[5m])))` is the p95 (recorded as `model_segment:harmonic_gamma:p95_5m`); "
        "the buckets grow ~3× each, so quantiles are coarse — the exact window quantile is "
        "`harmonic_window_gamma_p95`. Compare against `harmonic_reference_gamma_mean`, not an absolute number: "
        "γ's scale depends on the model and on r.",
    ),
    "harmonic_gammamap_events_total": Usage(
        "Per-event robustness (histograms)",
        "events",
        "The Gamma Map (predicted-class probability P × γ, after Fig. 5 of 'Harmonic Machine Learning Models are Robust') as counters, one per "
        "cell: `sum by (gamma_bin) (increase(...[$__rate_interval]))` is the γ-bucket-over-time heatmap, "
        "`sum by (p_bin, gamma_bin) (increase(...[1h]))` the map of the last hour. Mass moving toward high "
        "`gamma_bin` and low `p_bin` is traffic moving where predictions are fragile; `/gammamap` shows the same "
        "map beside the reference's. " + _RATE_NOTE,
    ),
    "harmonic_flicker": Usage(
        "Per-event robustness (histograms)",
        "ratio (0–1): share of noise copies whose class flips",
        "Per-event flicker under Gaussian noise σ (`scoring.sigma`, standardized units), K = "
        "`scoring.flicker_copies` copies, so values are multiples of 1/K. Mean flicker = "
        "`rate(harmonic_flicker_sum[5m]) / rate(harmonic_flicker_count[5m])`; most events sit in the 0 bucket, "
        "the tail above 0.25 is where the model is fragile.",
    ),
    "harmonic_p_adj": Usage(
        "Per-event robustness (histograms)",
        "probability (0–1)",
        "P_adj = P·exp(−N·γ_logit), N = `scoring.steps`: the predicted class's probability discounted by local "
        "anharmonicity ('Harmonic Machine Learning Models are Robust', eq. 5). Falling mean P_adj with unchanged raw confidence means the model stays "
        "confident in places where it is not robust.",
    ),
    "harmonic_confidence": Usage(
        "Per-event robustness (histograms)",
        "probability (1/K … 1, K classes)",
        "The model's own confidence: the largest class probability of each scored event (`ScoreResult.probability`; "
        "the margin between the top two classes is `harmonic_margin`). Classifiers only — a regressor has no series. "
        "Mean = `rate(harmonic_confidence_sum[5m]) / rate(harmonic_confidence_count[5m])`; a growing share below "
        '0.9 (`harmonic_confidence_bucket{le="0.9"}`) means the model is less sure of today\'s traffic. The drift '
        "detector `confidence_cusum` watches the same signal for a *fall* against the reference; a fall counts as "
        "output-side evidence for `harmful-shift`. A model that becomes confidently wrong keeps its confidence: "
        "only the accuracy estimate or labels can show that.",
    ),
    "harmonic_margin": Usage(
        "Per-event robustness (histograms)",
        "probability difference (0–1)",
        "The model's margin: top-1 minus top-2 class probability of each scored event (`ScoreResult.margin`), from "
        "the same probabilities as `harmonic_confidence`. Classifiers only. For a binary model it is "
        "2·confidence − 1 and carries nothing new; for more classes it separates two classes tied (margin near 0 "
        "at any confidence) from probability spread over many (low confidence, margin not small). A growing share "
        'below 0.1 (`harmonic_margin_bucket{le="0.1"}`) means more events sit between two classes. The drift detector '
        "`margin_cusum` watches it for a *fall* against the reference, as output-side evidence for `harmful-shift`.",
    ),
    # -- shadow ------------------------------------------------------------------------------------------------------
    "harmonic_shadow_compared_total": Usage(
        "Shadow agreement",
        "events",
        "Only events carrying the live server's `prediction.label` can be compared; if this is ~0 the shadow check "
        "is blind (producers do not send predictions).",
    ),
    "harmonic_shadow_checked_share": Usage(
        "Shadow agreement",
        "ratio",
        "1 while the sidecar keeps up: every event carrying a live prediction is compared. While the consumer lags "
        "(ingest first), a uniform draw of this share is compared, so `harmonic_shadow_compared_total` grows slower "
        "but the disagreement ratio stays an unbiased estimate; a stale copy is then seen on fewer events.",
    ),
    "harmonic_shadow_disagreements_total": Usage(
        "Shadow agreement",
        "events",
        "Disagreement ratio = `rate(harmonic_shadow_disagreements_total[15m]) / "
        "rate(harmonic_shadow_compared_total[15m])` (recorded as `model:harmonic_shadow_disagreement:ratio_rate15m`). "
        "**Anything above a percent or two means the ONNX copy is wrong or stale and every other harmonic metric "
        "for that model is suspect** (alert HarmonicShadowDisagreement).",
    ),
    # -- windows -----------------------------------------------------------------------------------------------------
    "harmonic_window_gamma_mean": Usage(
        "Rolling windows and reference",
        "units of f (as `harmonic_gamma`)",
        "Mean γ over each rolling window (`window` = `60s`, `300s`, `3600s`, … for time windows, `last_N` for the "
        "count window). Plot against `harmonic_reference_gamma_mean`: the ratio of the two is the simplest "
        '"how much less smooth is today\'s traffic" number. Updated every `drift.every` scored events.',
    ),
    "harmonic_window_gamma_p95": Usage(
        "Rolling windows and reference",
        "units of f (as `harmonic_gamma`)",
        "Exact (count window) or fine-grid (time windows) 95th percentile of γ: prefer it to `histogram_quantile` "
        "on `harmonic_gamma_bucket` when you need precision.",
    ),
    "harmonic_window_flicker_mean": Usage(
        "Rolling windows and reference",
        "ratio (0–1)",
        "Mean flicker over the window; compare with `harmonic_reference_flicker_mean`.",
    ),
    "harmonic_window_stability": Usage(
        "Rolling windows and reference",
        "ratio (0–1)",
        "Stability = 1 − mean flicker ('Model Robustness Metrics', A); the first part of the robustness composite.",
    ),
    "harmonic_window_p_adj_mean": Usage(
        "Rolling windows and reference",
        "probability (0–1)",
        "Mean P_adj over the window.",
    ),
    "harmonic_window_confidence_mean": Usage(
        "Rolling windows and reference",
        "probability (1/K … 1)",
        "Mean max class probability over the window (classifiers only; absent for regressors). Beside "
        "`harmonic_window_gamma_mean` and `harmonic_window_flicker_mean` it is the cheapest output-side signal: a "
        "falling mean means the model is less sure of today's traffic than of the reference.",
    ),
    "harmonic_window_margin_mean": Usage(
        "Rolling windows and reference",
        "probability difference (0–1)",
        "Mean top-1 minus top-2 class probability over the window (classifiers only; absent for regressors). Read it "
        "beside `harmonic_window_confidence_mean`: for a binary model it is 2·confidence − 1; for more classes a "
        "margin that falls while confidence holds means the runner-up class gained: events drift toward a tie "
        "between two classes.",
    ),
    "harmonic_window_shadow_disagreement_ratio": Usage(
        "Rolling windows and reference",
        "ratio (0–1)",
        "Live-vs-ONNX disagreement over the window, per segment (absent while no event in the window carried a "
        "live prediction). The sidecar's HarmonicShadowDisagreement alert uses the count window.",
    ),
    "harmonic_window_events": Usage(
        "Rolling windows and reference",
        "events",
        "How many scored events the window holds: read every other window gauge with it — a window of 12 events "
        "says little.",
    ),
    "harmonic_reference_gamma_mean": Usage(
        "Rolling windows and reference",
        "units of f (as `harmonic_gamma`)",
        "Mean γ of the reference distribution (scored reference file, or the warm-up window). Constant until the "
        "reference is rebuilt; absent during warm-up.",
    ),
    "harmonic_reference_flicker_mean": Usage(
        "Rolling windows and reference",
        "ratio (0–1)",
        "Mean flicker of the reference distribution.",
    ),
    "harmonic_flicker_tolerance": Usage(
        "Rolling windows and reference",
        "the model output's own units (`output` = the output column, 0 … 15 at most)",
        "Regressors only: a flicker copy counts as a flip when its output moves by more than this "
        "(`scoring.regression_tolerance`, a fraction, times the output's IQR over the reference; with several "
        "outputs, when the RMS of the moves in units of these tolerances exceeds 1). Set when the scorer is built "
        "(from the reference or the warm-up window) and constant until it is rebuilt; compare it with the changes "
        "of the prediction that matter to the model's users. An exactly linear model flickers at about 0.7 % with "
        "the defaults (σ = 0.05, tolerance 0.1): docs/SPEC-NOTES.md.",
    ),
    "harmonic_scoring_scale": Usage(
        "Rolling windows and reference",
        "`scoring.space` units (standardized by default; `scale` = `sigma` or `radius`)",
        "The flicker noise scale σ and the γ ball radius r the scorer uses: `scoring.sigma`/`scoring.radius`, or "
        "those a reference JSON records (`reference --scales from-reference`: the σ at which a stated share of "
        "reference events flickers, r = σ) under `scoring.scales: from_reference`. Set when events are scored, "
        "constant until the scorer is rebuilt. γ and flicker are only comparable between models or releases scored "
        "at the same scales: docs/SPEC-NOTES.md (Signal scales).",
    ),
    # -- drift -------------------------------------------------------------------------------------------------------
    "harmonic_drift_verdict": Usage(
        "Drift",
        "1 (one series per model/segment: the current verdict)",
        "Exactly one series per (model, segment) has value 1; its `verdict` label is the answer. **stable** — no "
        "evidence of change in inputs or outputs (not a claim that accuracy is fine); **input-shift** — inputs "
        "moved (per-feature KS) but no output-side detector fired: the monitor cannot tell from outputs whether "
        "accuracy suffered, check `harmonic_estimated_accuracy` or labels; **harmful-shift** — output-side "
        "evidence: γ or flicker rose, confidence or margin fell against the reference, or the accuracy estimate's upper "
        "bound is below its tolerance. Delayed labels override all three. **no-evidence** — the segment received no "
        "event for its shortest time window (a quiet stream): its last verdict rests on nothing current, so it is not "
        "shown as the answer; the next evaluation with events sets the verdict again. "
        '`harmonic_drift_verdict{verdict="harmful-shift"} == 1` lists affected segments.',
    ),
    "harmonic_drift_statistic": Usage(
        "Drift",
        "per signal: CUSUM in log-likelihood units, KS as a distance (0–1), flicker_rate as a one-sided Welch z",
        "What each detector currently reads: `gamma_cusum`/`flicker_cusum`/`confidence_cusum`/`margin_cusum` (the "
        "last two on 1 − max-probability and 1 − margin, classifiers only, margin with three classes or more; each "
        "alarms at its threshold, calibrated for its share of `drift.false_alarms_per_million_events` unless "
        "`drift.cusum_threshold` pins it), "
        "`gamma_ks`/`features_ks` (alarm above `drift.ks_min_distance`/`drift.feature_min_distance` with "
        "significance), `flicker_rate`. Plotting a statistic against its threshold shows how close a segment is to "
        "alerting.",
    ),
    "harmonic_drift_p_value": Usage(
        "Drift",
        "probability (0–1)",
        "p-values of the window tests where they exist (not for CUSUM). Small p with a small distance is a "
        "significant but irrelevant shift; the verdict needs both.",
    ),
    "harmonic_feature_drift_features": Usage(
        "Drift",
        "features",
        "How many input features the per-feature KS test flags. The alert annotations list the top ones by name.",
    ),
    "harmonic_feature_drift_statistic": Usage(
        "Drift",
        "KS distance (0–1)",
        "Which inputs moved, by the model's input names (`x[3]`, `age`): each input's two-sample KS distance between "
        "the last `drift.window` events and the segment's baseline, at the last test; for a held input (string, int, "
        "bool) the total variation distance of its category frequencies. An input is flagged when its "
        "distance is at least `drift.feature_min_distance` and its adjusted p-value below `drift.feature_alpha`. "
        "One series per input up to 64 inputs; above that the 16 largest by name and the rest folded into "
        '`feature="other"` (their largest), so an image model does not export a series per pixel. '
        "`topk(5, harmonic_feature_drift_statistic)` lists the inputs that moved most.",
    ),
    "harmonic_input_out_of_range_ratio": Usage(
        "Drift",
        "ratio 0–1",
        "Data quality per input: the share of recent values beyond anything usual in the baseline (outside its 0.1th "
        "and 99.9th percentiles; about 0.002 on the baseline itself). Noise added to inputs, a unit change or a "
        "broken upstream join shows here at once, even when the per-input KS distances stay under their floor. An "
        "input above `drift.range_min_share` (significantly) counts as input evidence: `input-shift`, named in the "
        "alert. For a held input (string, int, bool) it is the share of values whose category is not in the "
        "baseline's count table (unseen categories). `topk(5, harmonic_input_out_of_range_ratio)` lists the worst "
        "inputs.",
    ),
    "harmonic_segment_warming_up": Usage(
        "Drift",
        "1 warming up / 0 has a baseline",
        "Each segment is judged against its own baseline: from reference data that carries the segment, else learned "
        "from its first `warmup_events` events. While this is 1 the segment has no verdict and no drift alert; "
        "`/readyz` lists the warming segments with their progress.",
    ),
    # -- alerts ------------------------------------------------------------------------------------------------------
    "harmonic_alerts_firing": Usage(
        "Alerts",
        "1 firing / 0 not",
        "The sidecar's own alert state (HarmonicHarmfulShift, HarmonicInputDrift, HarmonicShadowDisagreement) per "
        "model and segment, after `alerts.for_seconds` and with `alerts.resolve_after_seconds` hysteresis. Useful "
        "when Alertmanager delivery is broken (`harmonic_alert_deliveries_failed_total`).",
    ),
    "harmonic_alerts_fired_total": Usage(
        "Alerts",
        "alerts",
        "Transitions to firing; `increase(...[7d])` is the alert volume per model, the input for tuning "
        "thresholds (the verdict's false-alarm rates and delays on river streams: bench/verdict_quality.py).",
    ),
    "harmonic_alert_deliveries_failed_total": Usage(
        "Alerts",
        "deliveries",
        'Deliveries to Alertmanager (`receiver="alertmanager"`) or the webhook that failed after retries. Any '
        "increase means alerts may be firing unseen (Prometheus alert HarmonicAlertDeliveryFailing).",
    ),
    "harmonic_producer_failures_total": Usage(
        "Process",
        "records",
        'Attempts to deliver a dead letter (`topic_kind="dead_letter"`) or a score (`"scores"`) that failed: '
        "the broker was away past `kafka.producer_delivery_timeout_ms`, a topic had no metadata, or the broker "
        "refused the request. Nothing is lost by it: the record is kept and sent again, and the offsets of its event "
        'are not committed until it is acknowledged. A rising rate with `harmonic_degraded{reason="producer"}` = 1 '
        "is an outage of the producer topics; the rate-limited log line says what failed.",
    ),
    "harmonic_producer_dropped_total": Usage(
        "Process",
        "records",
        'Dead letters and scores given up: `reason="buffer_full"` when `kafka.producer_drop_when_full` is true and '
        "`kafka.producer_buffer_bytes` was full (the pipeline kept reading instead of pausing), "
        '`reason="too_large"` when the broker or `max_request_size` (4 MiB) refuses the size of the record, so that '
        "re-sending could never succeed. Should stay at 0 with the default settings; each drop is logged "
        "(rate-limited).",
    ),
    # -- probes ------------------------------------------------------------------------------------------------------
    "harmonic_regions_tracked": Usage(
        "Probes on flagged regions",
        "regions",
        "Regions of feature space where sampled events showed high γ or flicker, each within one segment, in the "
        "bounded index (`probes.max_regions`). At the bound all the time: the index evicts by rank (the segment's "
        "drift verdict and evidence, then γ + flicker), so the regions kept are those of the segments that moved.",
    ),
    "harmonic_regions_evicted_total": Usage(
        "Probes on flagged regions",
        "regions",
        "Regions dropped because the index was full (`probes.max_regions`): each new region replaces the "
        "lowest-ranked one (its segment moved least, then the lowest score: γ + flicker of its events, halved every "
        "hour); never one of a segment that moved more than the new event's. A rate close to the rate of new regions "
        "means the index churns and a region rarely lives long enough to be probed: raise `probes.max_regions`.",
    ),
    "harmonic_probe_runs_total": Usage(
        "Probes on flagged regions",
        "runs",
        "Probe runs that probed at least one region (every `probes.interval_seconds`, or as soon as the budget covers "
        "the first queued region; within `probes.budget_share` of model evaluations). Flat while regions exist and "
        "`harmonic_probe_queue` > 0 = the probe budget grows too slowly for a whole probe: see "
        "`harmonic_probe_budget_rows`.",
    ),
    "harmonic_probe_regions_total": Usage(
        "Probes on flagged regions",
        "regions",
        'What the prober did with each region, counted once per change: `outcome="completed"` (`reason="probed"`: '
        'every stage run to the end, so the report has no target left unsearched for lack of budget), `"queued"` '
        '(`reason="budget"`: the rows earned do not yet cover its whole probe), `"skipped"` (`reason="few_exemplars"`: '
        'under 4 events; `"outranked"`: another segment\'s verdict is more severe, its regions go first; '
        '`"evicted"`: it left the index while queued). Many `evicted` = the budget is too small for the rate at '
        "which regions change: raise `probes.budget_share` or lower `probes.regions_per_run`.",
    ),
    "harmonic_probe_queue": Usage(
        "Probes on flagged regions",
        "regions",
        "Regions waiting until the rows earned cover their whole probe (at most `probes.regions_per_run`); each runs "
        'as soon as they do. Their planned rows: `harmonic_probe_budget_rows{state="queued"}`; the queue itself: '
        "`GET /probes` (`models.<name>.queue`).",
    ),
    "harmonic_probe_budget_rows": Usage(
        "Probes on flagged regions",
        "model rows",
        '`state="earned"`: `budget_share / (1 − budget_share)` of the rows live events took since start; `"spent"`: '
        'the rows probes evaluated since start (spent ≤ earned); `"queued"`: the planned rows of the queued regions. '
        "earned − spent is what the next probe may take; when it stays below queued the budget is the bottleneck.",
    ),
    "harmonic_probe_eps_star": Usage(
        "Probes on flagged regions",
        "perturbation intensity ε (standardized units; `+Inf` = never crossed below ε_max)",
        "Threshold profile: the smallest ε at which agreement under that perturbation drops by δ. Small ε* on "
        "`noise` or `shift` is a region where tiny input changes flip the model. Full report (exemplars, evaluation "
        "counts per funnel stage): `GET /probes`.",
    ),
    "harmonic_probe_mri": Usage(
        "Probes on flagged regions",
        "ratio (0–1): agreement",
        "Model Robustness Index component per perturbation at a fixed moderate ε: the share of the region's points "
        "whose prediction survives it. **Read it as a vector across `perturbation`**, never averaged into one number.",
    ),
    "harmonic_probe_targets": Usage(
        "Probes on flagged regions",
        "targets ((perturbation, feature) pairs)",
        "The region's last threshold profile counted by status: `crossed` (ε* found), `not_crossed` (robust up to the "
        "cap ε_max), `not_searched` (a feature of zero reference spread, a held element; never the budget: a region "
        "is probed to completion or queued). The three add up to every target, so a feature never looked at cannot "
        "pass for a robust one; each target's status and reason: `GET /probes`.",
    ),
    # -- labels ------------------------------------------------------------------------------------------------------
    "harmonic_labels_consumed_total": Usage(
        "With delayed labels",
        "labels",
        "Messages read from `kafka.labels_topic` ({id, label, ts}). Compare with the joined count: a large gap means "
        "labels for events that were not sampled, or ids that do not match the events' ids.",
    ),
    "harmonic_labels_invalid_total": Usage(
        "With delayed labels",
        "labels",
        "Label messages that could not be decoded, by the same bounded reasons as events. They are logged "
        "(rate-limited) and skipped; they never stop the loop.",
    ),
    "harmonic_labels_joined_total": Usage(
        "With delayed labels",
        "labels",
        "Labels from `kafka.labels_topic` joined to scored events by id within the time-to-live. The accuracy-based "
        "gauges below only exist when this moves.",
    ),
    "harmonic_labels_unmatched_total": Usage(
        "With delayed labels",
        "labels",
        "Labels that found no event: arrived after the time-to-live, or the event was not sampled/scored. A high "
        "share means the label delay exceeds the join window.",
    ),
    "harmonic_window_accuracy": Usage(
        "With delayed labels",
        "ratio (0–1)",
        "Accuracy over the labelled events in the window — the ground truth the label-free signals predict.",
    ),
    "harmonic_estimated_accuracy": Usage(
        "Accuracy without labels",
        "ratio (0–1)",
        "The model's accuracy over the window estimated from its own outputs (confidence; γ, flicker and P_adj for "
        '`method="harmonic"`; the weighted `iw`, `iw_atc` from a domain classifier on those outputs), by every method '
        "(`harmonic`, `ac`, `atc`, `doc`, `iw`, `iw_atc`); only for a model whose reference "
        "JSON was built with `reference --labels`. Recomputed every `accuracy.interval_seconds`. Read the primary "
        "method (`accuracy.method`, default `iw`) with its interval, beside `harmonic_window_accuracy` when labels "
        "arrive (they override it). Blind to a change of P(y|x) alone (docs/OPERATIONS.md, Accuracy without labels).",
    ),
    "harmonic_estimated_accuracy_lower": Usage(
        "Accuracy without labels",
        "ratio (0–1)",
        "Lower end of the estimate's 90 % interval (realized-accuracy noise + reference-fit noise + a shift margin).",
    ),
    "harmonic_estimated_accuracy_upper": Usage(
        "Accuracy without labels",
        "ratio (0–1)",
        "Upper end of the 90 % interval. HarmonicAccuracyDrop fires when the primary method's upper end over the count "
        "window is below `harmonic_reference_accuracy` − `accuracy.tolerance`.",
    ),
    "harmonic_reference_accuracy": Usage(
        "Accuracy without labels",
        "ratio (0–1)",
        "The model's accuracy on its labelled reference (the validation set `reference --labels` was given): what "
        "every estimate starts from, and what HarmonicAccuracyDrop compares with.",
    ),
    "harmonic_estimated_error": Usage(
        "Accuracy without labels",
        "the target's units",
        'A regressor\'s mean absolute (`loss="mae"`) or root mean squared (`loss="rmse"`) error over the window, '
        "estimated without labels by each method (`iw`, the default: the labelled reference's errors reweighted by "
        "a domain classifier; `dle`; `dr`). Blind to a change of the target given the inputs.",
    ),
    "harmonic_estimated_error_lower": Usage(
        "Accuracy without labels",
        "the target's units",
        "Lower end of the 90 % interval. HarmonicErrorRise fires when the primary method's MAE lower end over the "
        'count window exceeds `harmonic_reference_error{loss="mae"}` × (1 + `accuracy.error_tolerance`).',
    ),
    "harmonic_estimated_error_upper": Usage(
        "Accuracy without labels",
        "the target's units",
        "Upper end of the 90 % interval.",
    ),
    "harmonic_reference_error": Usage(
        "Accuracy without labels",
        "the target's units",
        "A regressor's MAE and RMSE on its labelled reference (`reference --labels` with true values): what every "
        "error estimate starts from, and what HarmonicErrorRise compares with.",
    ),
    "harmonic_resilience": Usage(
        "With delayed labels",
        "ratio (0–1)",
        "min(accuracy under σ = 0.1 Gaussian noise / clean accuracy, 1) over joined labels ('Model Robustness Metrics', B).",
    ),
    "harmonic_reliability": Usage(
        "With delayed labels",
        "ratio (0–1)",
        "1 − expected calibration error with 10 equal-width confidence bins ('Model Robustness Metrics', C).",
    ),
    "harmonic_robustness_composite": Usage(
        "With delayed labels",
        "ratio (0–1)",
        "0.4·stability + 0.3·resilience + 0.3·reliability. **Always show it beside its three parts** "
        "(`harmonic_window_stability`, `harmonic_resilience`, `harmonic_reliability`): one number hides which one "
        "moved.",
    ),
    # -- cost and latency ------------------------------------------------------------------------------------------
    "harmonic_score_batch_duration_seconds": Usage(
        "Cost and latency",
        "seconds",
        "Wall time to score one micro-batch: B events × (1 + ball points + flicker copies) model rows. p99 near "
        "`batch.max_wait_ms` or rising with constant batch size = CPU starvation (alert HarmonicScoreLatencyHigh).",
    ),
    "harmonic_offsets_went_back_total": Usage(
        "Traffic and sampling",
        "partitions",
        "`increase(...[1h]) > 0`: after a restart the broker handed out records below the last committed position, "
        "or the record just before the saved position was another one (a re-created topic grown past it). "
        "Expected after an operator's offset reset for reprocessing; otherwise the topic was re-created or the "
        "address now points at another cluster: check which. The log line names the partition and both offsets.",
    ),
    "harmonic_events_mistimed_total": Usage(
        "Cost and latency",
        "events",
        "`sum by (model, reason) (rate(...[5m]))`: `future_timestamp` above 0 means a producer's clock runs ahead "
        "(its events were placed at the watermark, so windows and alerts stay on time); `late` means events arrive more "
        "than `alerts.allowed_lag_seconds` behind the model's watermark (a lagging partition or producer).",
    ),
    "harmonic_event_lag_seconds": Usage(
        "Cost and latency",
        "seconds",
        "Event timestamp → scored. p50 ≈ batching delay plus producer-to-Kafka latency; a p99 that grows means "
        "the sidecar falls behind the topic (alert HarmonicEventLagHigh) — or producer clocks are wrong.",
    ),
    "harmonic_model_evaluations_total": Usage(
        "Cost and latency",
        "model rows",
        "Rows sent through onnxruntime by `purpose`: `events` (scoring), `shadow` (live comparison), `reference` "
        '(start-up), `probe`. `rate(...{purpose="events"}[5m])` divided by the per-row cost from '
        "docs/BENCHMARKS.md is the CPU the sidecar needs; probes stay under `probes.budget_share`.",
    ),
    # -- process -----------------------------------------------------------------------------------------------------
    "harmonic_up": Usage(
        "Process",
        "1",
        "Always 1 while the process runs; the `version` label tells which build is deployed "
        "(`count by (version) (harmonic_up)` during a rollout). Its absence is alert HarmonicSidecarAbsent.",
    ),
    "harmonic_ready": Usage(
        "Process",
        "1 ready / 0 not",
        "Mirrors `/readyz`: every model loaded and at least one Kafka partition assigned. 0 on a replica beyond "
        "the partition count is expected (it idles); 0 everywhere is alert HarmonicNotReady. Set when `/readyz` "
        "is probed.",
    ),
    "harmonic_degraded": Usage(
        "Process",
        "1 degraded / absent or 0 not",
        "The sidecar keeps running but something needs fixing: `state_dir` (the state directory is read-only or "
        "full: state is not saved, offsets are not committed), `producer` (the dead-letter or scores topic cannot "
        "be reached: records wait in a bounded buffer), `alert_delivery` (Alertmanager or the webhook does not "
        "answer), `recovery` (after an unclean exit, the partitions that had records in flight are re-processed one "
        "record at a time; it ends by itself, per partition, once those records are read again or revoked), `broker` (the consumer's Kafka broker cannot be reached, at start-up or later: the sidecar waits for it and consumes again when it is back). `/readyz` stays 200 and lists the reasons under `degraded`; the log says what to fix.",
    ),
    "harmonic_http_requests_total": Usage(
        "Process",
        "requests",
        "Requests the HTTP endpoint answered, by `path` (`metrics`, `healthz`, `readyz`, `probes`, `other`). "
        '`rate(...{path="metrics"})` against `rate(harmonic_http_render_duration_seconds_count[5m])` shows how '
        "many scrapes share each render; more scrapes than your Prometheus replicas make means someone else scrapes.",
    ),
    "harmonic_http_requests_rejected_total": Usage(
        "Process",
        "requests",
        "Connections or requests the endpoint refused or dropped, by `reason`: `read_timeout` (a request head did not "
        "arrive within `metrics.read_timeout_seconds`: slow or half-open clients), `write_timeout` (a client did not "
        "read its response), `too_many_connections` (over `metrics.max_connections`), `too_many_scrapes` (over "
        "`metrics.max_concurrent_scrapes`: 503), `pool_full` (`/readyz`, `/probes` or password checks queued beyond "
        "their pool: 503), `bad_request` (malformed, with a body, not GET/HEAD), `unauthorized` (missing or wrong "
        "basic-auth credentials: 401). A steady rate means a client misbehaves; "
        "docs/OPERATIONS.md, *HTTP endpoint*.",
    ),
    "harmonic_http_render_duration_seconds": Usage(
        "Process",
        "seconds",
        "Wall time of one `/metrics` render. Renders happen at most once per `metrics.min_render_interval_seconds` "
        "whatever the number of scrapers; a p99 approaching the scrape timeout means too many series (check the "
        "bounded labels) or a starved CPU.",
    ),
}

LABELS: dict[str, str] = {
    "model": "The model's name (`models[].name`; events' `model` field). `unknown` on invalid events that could "
    "not be attributed.",
    "model_version": "The event's `model_version`, else `models[].version`, else `unknown`; at most 128 "
    "characters, control characters removed. Bounded: the `segments.max_versions` (default 8) most recently seen "
    "per model are kept, the least recently seen is evicted with its series "
    "(`harmonic_model_versions_evicted_total`).",
    "segment": "The event's `segment`; bounded: beyond `segments.max_segments` distinct values (or outside "
    "`segments.allowed`) everything folds into `other`.",
    "reason": "Why an event was invalid: "
    + ", ".join(f"`{r}`" for r in (*INVALID_REASONS, *PROCESSING_REASONS))
    + ". Why a KServe half was dropped (`harmonic_kserve_dropped_total`): "
    + ", ".join(f"`{r}`" for r in KSERVE_DROP_REASONS)
    + ". Why the HTTP endpoint refused a request (`harmonic_http_requests_rejected_total`): "
    + ", ".join(f"`{r}`" for r in REJECT_REASONS)
    + ". Why the Kafka producer gave a record up (`harmonic_producer_dropped_total`): "
    + ", ".join(f"`{r}`" for r in PRODUCER_DROP_REASONS)
    + ". Why the prober completed, queued or skipped a region (`harmonic_probe_regions_total`): "
    + ", ".join(f"`{r}`" for reasons in REGION_OUTCOMES.values() for r in reasons)
    + ".",
    "outcome": "What the prober did with a region: "
    + ", ".join(f"`{o}` ({', '.join(f'`{r}`' for r in reasons)})" for o, reasons in REGION_OUTCOMES.items())
    + ".",
    "state": "The probe row budget's account: " + ", ".join(f"`{s}`" for s in BUDGET_STATES) + ".",
    "topic_kind": "Which output topic a producer record was for: "
    + ", ".join(f"`{k}`" for k in TOPIC_KINDS)
    + " (`kafka.dead_letter_topic`, `kafka.scores_topic`).",
    "path": "The HTTP endpoint's path without its slash: " + ", ".join(f"`{p}`" for p in HTTP_PATHS) + ".",
    "purpose": "What model rows were spent on: `events`, `shadow`, `reference`, `probe`.",
    "output": "A regressor's output column, `0` to `15` (the model's outputs concatenated in graph order; columns "
    "beyond 16 are not exported).",
    "scale": "`sigma` (flicker noise scale σ) or `radius` (γ ball radius r).",
    "window": "`<seconds>s` for each of `windows.time_windows_seconds` (default `60s`, `300s`, `3600s`) and "
    "`last_<N>` for the count window (`windows.count_window_events`, default `last_2000`).",
    "verdict": "One of " + ", ".join(f"`{v.value}`" for v in Verdict) + ".",
    "problem": "What was wrong with one input's value: `missing` (absent or null), `not_finite` (NaN, ±inf) or "
    "`out_of_range` (finite but beyond float32's ±3.4e38).",
    "feature": "One of the model's inputs by its per-element name (the model's signature, `x[3]`, `age`, or "
    "`models[].feature_names`); bounded: one per input up to 64 inputs, else the 16 largest and `other`.",
    "signal": "Drift detector: `gamma_cusum`, `gamma_ks`, `flicker_cusum`, `flicker_rate`, `confidence_cusum` and "
    "`margin_cusum` (classifiers), `features_ks`.",
    "alertname": "`HarmonicHarmfulShift`, `HarmonicInputDrift`, `HarmonicShadowDisagreement`, `HarmonicAccuracyDrop`, "
    "`HarmonicErrorRise`.",
    "loss": "A regressor's error: `mae` (mean absolute) or `rmse` (root mean squared).",
    "method": "Label-free accuracy estimator: `harmonic` (ours: confidence, γ, flicker, P_adj), `ac` (average "
    "calibrated confidence), `atc` (average thresholded confidence), `doc` (difference of confidences); a regressor's "
    "error: `iw` (importance-weighted reference error), `dle` (direct loss estimation), `dr` (DLE plus the weighted "
    "residual).",
    "p_bin": "Gamma Map bin of the predicted class's probability: "
    + ", ".join(f"`{b}`" for b in P_BIN_LABELS)
    + " (each `[lo, hi)`, the last closed).",
    "gamma_bin": "Gamma Map bin of γ (half-decades): " + ", ".join(f"`{b}`" for b in GAMMA_BIN_LABELS) + ".",
    "receiver": "Alert delivery target: `alertmanager` or `webhook`.",
    "region": "Region id in the model's region index (`r1`, `r2`, …); details at `GET /probes`.",
    "perturbation": "Perturbation type τ: " + ", ".join(f"`{p}`" for p in PERTURBATION_NAMES) + ".",
    "status": "A probe target's status in the threshold profile: `crossed`, `not_crossed`, `not_searched`.",
    "version": "harmonic-monitor's version.",
}

HEADER = """\
<!-- Generated by scripts/gen_metrics_doc.py from monitor/telemetry.py METRICS. Do not edit by hand:
     change the declaration in monitor/telemetry.py or the USAGE table in the script, then run `.venv/bin/python scripts/gen_metrics_doc.py`. -->
# Metrics

harmonic-monitor serves these series at `GET /metrics` on `metrics.port` (default 9108). Alerting and recording
rules over them: [`deploy/prometheus/harmonic-rules.yml`](../deploy/prometheus/harmonic-rules.yml); dashboard:
[`grafana/dashboards/harmonic-overview.json`](../grafana/dashboards/harmonic-overview.json); what to do when
an alert fires: [OPERATIONS.md](OPERATIONS.md).

## Reading them

- **Everything is prefixed `harmonic_`**, counters end in `_total`, durations are in seconds, ratios are 0–1.
- **Sampling.** Every event is scored while scoring fits in `sampler.cpu_share` of the CPUs; above that only a
  sample is (one budget shared by all models: an equal share of CPU time each under overload, and what a model does
  not use goes to the others; `sampler.events_per_second` optionally caps it). Counters of *scored*
  events then count the sample: to estimate live traffic divide by the sampled ratio,
  `rate(harmonic_events_scored_total[5m]) / on (model) group_left () harmonic_events_sampled_ratio`.
  Histograms (γ, flicker, P_adj) and the window gauges describe *distributions* and need no rescaling. The
  default sampler is stratified by the live predicted class, so rare classes are over-represented in the scored
  stream (by at most the sampler's boost factor); set `sampler.stratify: false` when you need the scored
  distribution to mirror the traffic's class mix.
- **Per replica.** Each replica exports what it scored from its share of the topic's partitions. Aggregate
  counters and histogram buckets with `sum`; do not sum window gauges or ratios (use `max`/`avg`, or
  recompute from the counters).
- **Counters survive restarts**: they are persisted in the state directory and restored, so `rate()` sees no
  reset when a sidecar restarts with its state.
- **Cardinality** is bounded: `segment` folds into `other` beyond `segments.max_segments`; `model_version` keeps
  the `segments.max_versions` most recently seen per model (older ones are removed); `region` is bounded
  by `probes.max_regions`; `reason`, `purpose`, `signal`, `verdict`, `perturbation` are fixed vocabularies.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _labels(spec: MetricSpec) -> str:
    return ", ".join(f"`{label}`" for label in spec.labels) or "—"


def _exposed(spec: MetricSpec) -> str:
    if spec.type == "histogram":
        return f"`{spec.name}_bucket{{le}}`, `{spec.name}_sum`, `{spec.name}_count`"
    return f"`{spec.name}`"


def render() -> str:
    """The full text of docs/METRICS.md.

    Raises
    ------
    KeyError
        A metric in METRICS has no USAGE entry, or USAGE documents a metric METRICS no longer declares.
    """
    names = [m.name for m in METRICS]
    missing = [n for n in names if n not in USAGE]
    stale = sorted(set(USAGE) - set(names))
    if missing or stale:
        raise KeyError(
            f"scripts/gen_metrics_doc.py USAGE is out of step with METRICS: undocumented {missing}, "
            f"no longer declared {stale}. Add (or remove) an entry: group, unit and how to use the metric."
        )
    bad_groups = sorted({u.group for u in USAGE.values()} - set(GROUPS))
    if bad_groups:
        raise KeyError(f"unknown groups {bad_groups}; use one of {GROUPS}")
    used_labels = {label for m in METRICS for label in m.labels}
    if used_labels - set(LABELS):
        raise KeyError(f"labels without a description in LABELS: {sorted(used_labels - set(LABELS))}")

    out = [HEADER, "\n## Labels\n\n| label | values |\n|---|---|\n"]
    out += [f"| `{label}` | {_cell(LABELS[label])} |\n" for label in sorted(used_labels)]
    out.append("\n## Catalogue\n\n| metric | type | labels | unit | meaning |\n|---|---|---|---|---|\n")
    for spec in METRICS:
        out.append(
            f"| [`{spec.name}`](#{spec.name}) | {spec.type} | {_labels(spec)} | {_cell(USAGE[spec.name].unit)} "
            f"| {_cell(spec.help)} |\n"
        )
    for group in GROUPS:
        specs = [m for m in METRICS if USAGE[m.name].group == group]
        if not specs:
            continue
        out.append(f"\n## {group}\n")
        for spec in specs:
            usage = USAGE[spec.name]
            out.append(f"\n### {spec.name}\n\n")
            out.append(f"- **Type:** {spec.type} — exposed as {_exposed(spec)}\n")
            out.append(f"- **Labels:** {_labels(spec)}\n")
            out.append(f"- **Unit:** {usage.unit}\n")
            if spec.buckets:
                out.append(f"- **Buckets (`le`):** {', '.join(f'{b:g}' for b in spec.buckets)}, +Inf\n")
            out.append(f"- **Meaning:** {spec.help}\n")
            out.append(f"\n{usage.use}\n")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/METRICS.md is not up to date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(REPO)} is out of date: run .venv/bin/python scripts/gen_metrics_doc.py")
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(REPO)} ({len(METRICS)} metrics)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
