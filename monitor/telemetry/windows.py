"""The rolling windows, the reference, drift, alerts and the producer: what each segment's window says."""

from __future__ import annotations

from monitor.telemetry.series import (
    Counter,
    Gauge,
    Model,
    ModelAlertname,
    ModelOutput,
    ModelScale,
    ModelSegment,
    ModelSegmentAlertname,
    ModelSegmentFeature,
    ModelSegmentSignal,
    ModelSegmentVerdict,
    ModelSegmentWindow,
    Receiver,
    TopicKind,
    TopicKindReason,
)

__all__ = [
    "WINDOW_GAMMA_MEAN",
    "WINDOW_GAMMA_P95",
    "WINDOW_FLICKER_MEAN",
    "WINDOW_STABILITY",
    "WINDOW_P_ADJ_MEAN",
    "WINDOW_CONFIDENCE_MEAN",
    "WINDOW_MARGIN_MEAN",
    "WINDOW_SHADOW_DISAGREEMENT_RATIO",
    "WINDOW_EVENTS",
    "REFERENCE_GAMMA_MEAN",
    "REFERENCE_FLICKER_MEAN",
    "FLICKER_TOLERANCE",
    "SCORING_SCALE",
    "DRIFT_VERDICT",
    "DRIFT_STATISTIC",
    "DRIFT_P_VALUE",
    "FEATURE_DRIFT_FEATURES",
    "FEATURE_DRIFT_STATISTIC",
    "INPUT_OUT_OF_RANGE_RATIO",
    "SEGMENT_WARMING_UP",
    "ALERTS_FIRING",
    "ALERTS_FIRED_TOTAL",
    "ALERT_DELIVERIES_FAILED_TOTAL",
    "PRODUCER_FAILURES_TOTAL",
    "PRODUCER_DROPPED_TOTAL",
]

WINDOW_GAMMA_MEAN = Gauge(
    "harmonic_window_gamma_mean",
    "Mean γ over the rolling window.",
    ModelSegmentWindow,
    group="Rolling windows and reference",
    unit="units of f (as `harmonic_gamma`)",
    use=(
        "Mean γ over each rolling window (`window` = `60s`, `300s`, `3600s`, … for time windows, `last_N` for the "
        "count window). Plot against `harmonic_reference_gamma_mean`: the ratio of the two is the simplest "
        '"how much less smooth is today\'s traffic" number. Updated every `drift.every` scored events.'
    ),
)
WINDOW_GAMMA_P95 = Gauge(
    "harmonic_window_gamma_p95",
    "95th percentile of γ over the rolling window.",
    ModelSegmentWindow,
    group="Rolling windows and reference",
    unit="units of f (as `harmonic_gamma`)",
    use=(
        "Exact (count window) or fine-grid (time windows) 95th percentile of γ: prefer it to `histogram_quantile` "
        "on `harmonic_gamma_bucket` when you need precision."
    ),
)
WINDOW_FLICKER_MEAN = Gauge(
    "harmonic_window_flicker_mean",
    "Mean flicker over the rolling window.",
    ModelSegmentWindow,
    group="Rolling windows and reference",
    unit="ratio (0–1)",
    use=("Mean flicker over the window; compare with `harmonic_reference_flicker_mean`."),
)
WINDOW_STABILITY = Gauge(
    "harmonic_window_stability",
    "1 − mean flicker over the rolling window.",
    ModelSegmentWindow,
    group="Rolling windows and reference",
    unit="ratio (0–1)",
    use=("Stability = 1 − mean flicker ('Model Robustness Metrics', A); the first part of the robustness composite."),
)
WINDOW_P_ADJ_MEAN = Gauge(
    "harmonic_window_p_adj_mean",
    "Mean P_adj over the rolling window.",
    ModelSegmentWindow,
    group="Rolling windows and reference",
    unit="probability (0–1)",
    use=("Mean P_adj over the window."),
)
WINDOW_CONFIDENCE_MEAN = Gauge(
    "harmonic_window_confidence_mean",
    "Mean confidence (max class probability) over the rolling window; classifiers only.",
    ModelSegmentWindow,
    group="Rolling windows and reference",
    unit="probability (1/K … 1)",
    use=(
        "Mean max class probability over the window (classifiers only; absent for regressors). Beside "
        "`harmonic_window_gamma_mean` and `harmonic_window_flicker_mean` it is the cheapest output-side signal: a "
        "falling mean means the model is less sure of today's traffic than of the reference."
    ),
)
WINDOW_MARGIN_MEAN = Gauge(
    "harmonic_window_margin_mean",
    "Mean margin (top-1 minus top-2 class probability) over the rolling window; classifiers only.",
    ModelSegmentWindow,
    group="Rolling windows and reference",
    unit="probability difference (0–1)",
    use=(
        "Mean top-1 minus top-2 class probability over the window (classifiers only; absent for regressors). Read it "
        "beside `harmonic_window_confidence_mean`: for a binary model it is 2·confidence − 1; for more classes a "
        "margin that falls while confidence holds means the runner-up class gained: events drift toward a tie "
        "between two classes."
    ),
)
WINDOW_SHADOW_DISAGREEMENT_RATIO = Gauge(
    "harmonic_window_shadow_disagreement_ratio",
    "Live vs ONNX disagreement rate over the rolling window.",
    ModelSegmentWindow,
    group="Rolling windows and reference",
    unit="ratio (0–1)",
    use=(
        "Live-vs-ONNX disagreement over the window, per segment (absent while no event in the window carried a "
        "live prediction). The sidecar's HarmonicShadowDisagreement alert uses the count window."
    ),
)
WINDOW_EVENTS = Gauge(
    "harmonic_window_events",
    "Scored events in the rolling window.",
    ModelSegmentWindow,
    group="Rolling windows and reference",
    unit="events",
    use=(
        "How many scored events the window holds: read every other window gauge with it — a window of 12 events "
        "says little."
    ),
)
REFERENCE_GAMMA_MEAN = Gauge(
    "harmonic_reference_gamma_mean",
    "Mean γ of the reference distribution.",
    Model,
    group="Rolling windows and reference",
    unit="units of f (as `harmonic_gamma`)",
    use=(
        "Mean γ of the reference distribution (scored reference file, or the warm-up window). Constant until the "
        "reference is rebuilt; absent during warm-up."
    ),
)
REFERENCE_FLICKER_MEAN = Gauge(
    "harmonic_reference_flicker_mean",
    "Mean flicker of the reference distribution.",
    Model,
    group="Rolling windows and reference",
    unit="ratio (0–1)",
    use=("Mean flicker of the reference distribution."),
)
FLICKER_TOLERANCE = Gauge(
    "harmonic_flicker_tolerance",
    "Regressors: how far a flicker copy's output must move to flip, in the output's units (scoring.regression_tolerance × the output's reference IQR), per output column.",
    ModelOutput,
    group="Rolling windows and reference",
    unit="the model output's own units (`output` = the output column, 0 … 15 at most)",
    use=(
        "Regressors only: a flicker copy counts as a flip when its output moves by more than this "
        "(`scoring.regression_tolerance`, a fraction, times the output's IQR over the reference; with several "
        "outputs, when the RMS of the moves in units of these tolerances exceeds 1). Set when the scorer is built "
        "(from the reference or the warm-up window) and constant until it is rebuilt; compare it with the changes "
        "of the prediction that matter to the model's users. An exactly linear model flickers at about 0.7 % with "
        "the defaults (σ = 0.05, tolerance 0.1): docs/SPEC-NOTES.md."
    ),
)
SCORING_SCALE = Gauge(
    "harmonic_scoring_scale",
    "The flicker noise scale σ and ball radius r the scorer uses (scale=sigma|radius), in scoring.space units: fixed settings or chosen from the reference (scoring.scales).",
    ModelScale,
    group="Rolling windows and reference",
    unit="`scoring.space` units (standardized by default; `scale` = `sigma` or `radius`)",
    use=(
        "The flicker noise scale σ and the γ ball radius r the scorer uses: `scoring.sigma`/`scoring.radius`, or "
        "those a reference JSON records (`reference --scales from-reference`: the σ at which a stated share of "
        "reference events flickers, r = σ) under `scoring.scales: from_reference`. Set when events are scored, "
        "constant until the scorer is rebuilt. γ and flicker are only comparable between models or releases scored "
        "at the same scales: docs/SPEC-NOTES.md (Signal scales)."
    ),
)
DRIFT_VERDICT = Gauge(
    "harmonic_drift_verdict",
    "1 for the current verdict of the latest drift evaluation (stable, input-shift, harmful-shift), or no-evidence "
    "while the segment received no event for its shortest time window (its last verdict rests on nothing current).",
    ModelSegmentVerdict,
    group="Drift",
    unit="1 (one series per model/segment: the current verdict)",
    use=(
        "Exactly one series per (model, segment) has value 1; its `verdict` label is the answer. **stable** — no "
        "evidence of change in inputs or outputs (not a claim that accuracy is fine); **input-shift** — inputs "
        "moved (per-feature KS) but no output-side detector fired: the monitor cannot tell from outputs whether "
        "accuracy suffered, check `harmonic_estimated_accuracy` or labels; **harmful-shift** — output-side "
        "evidence: γ or flicker rose, confidence or margin fell against the reference, or the accuracy estimate's upper "
        "bound is below its tolerance. Delayed labels override all three. **no-evidence** — the segment received no "
        "event for its shortest time window (a quiet stream): its last verdict rests on nothing current, so it is not "
        "shown as the answer; the next evaluation with events sets the verdict again. "
        '`harmonic_drift_verdict{verdict="harmful-shift"} == 1` lists affected segments.'
    ),
)
DRIFT_STATISTIC = Gauge(
    "harmonic_drift_statistic",
    "Latest drift statistic per signal (gamma_cusum, gamma_ks, flicker_cusum, flicker_rate, confidence_cusum, "
    "confidence_tail_cusum, confidence_jump_cusum, margin_cusum, features_ks).",
    ModelSegmentSignal,
    group="Drift",
    unit="per signal: CUSUM in log-likelihood units, KS as a distance (0–1), flicker_rate as a one-sided Welch z",
    use=(
        "What each detector currently reads: `gamma_cusum`/`flicker_cusum`/`confidence_cusum`/`margin_cusum` (the "
        "last two on 1 − max-probability and 1 − margin, classifiers only, margin with three classes or more; "
        "`confidence_tail_cusum` counts 1 − max-probability above the reference's median against a 1.3× "
        "rise, `confidence_jump_cusum` above its 90th against a 4× rise; each "
        "alarms at its threshold, calibrated for its share of `drift.false_alarms_per_million_events` unless "
        "`drift.cusum_threshold` pins it), "
        "`gamma_ks`/`features_ks` (alarm above `drift.ks_min_distance`/`drift.feature_min_distance` with "
        "significance), `flicker_rate`. Plotting a statistic against its threshold shows how close a segment is to "
        "alerting. A window test (`gamma_ks`, `flicker_rate`, `features_ks`, the range and PCA tests) reads NaN "
        "until its segment has scored the events its first test needs (`drift.first_test_events`, 200): not tested, "
        "which 0 would "
        "not say; `/readyz` lists such segments under `segments_untested` with their scored and needed counts."
    ),
)
DRIFT_P_VALUE = Gauge(
    "harmonic_drift_p_value",
    "Latest p-value per signal where the test has one.",
    ModelSegmentSignal,
    group="Drift",
    unit="probability (0–1)",
    use=(
        "p-values of the window tests where they exist (not for CUSUM). Small p with a small distance is a "
        "significant but irrelevant shift; the verdict needs both."
    ),
)
FEATURE_DRIFT_FEATURES = Gauge(
    "harmonic_feature_drift_features",
    "Input features flagged as drifted.",
    ModelSegment,
    group="Drift",
    unit="features",
    use=("How many input features the per-feature KS test flags. The alert annotations list the top ones by name."),
)
FEATURE_DRIFT_STATISTIC = Gauge(
    "harmonic_feature_drift_statistic",
    "Per-input KS distance to the segment's baseline at the last test (above 64 inputs: the 16 largest, the rest as feature='other').",
    ModelSegmentFeature,
    group="Drift",
    unit="KS distance (0–1)",
    use=(
        "Which inputs moved, by the model's input names (`x[3]`, `age`): each input's two-sample KS distance between "
        "the last `drift.window` events and the segment's baseline, at the last test; for a held input (string, int, "
        "bool) the total variation distance of its category frequencies. An input is flagged when its "
        "distance is at least `drift.feature_min_distance` and its adjusted p-value below `drift.feature_alpha`. "
        "One series per input up to 64 inputs; above that the 16 largest by name and the rest folded into "
        '`feature="other"` (their largest), so an image model does not export a series per pixel. '
        "`topk(5, harmonic_feature_drift_statistic)` lists the inputs that moved most."
    ),
)
INPUT_OUT_OF_RANGE_RATIO = Gauge(
    "harmonic_input_out_of_range_ratio",
    "Per-input share of the last drift.window events outside the segment baseline's 0.1–99.9 percentiles (above 64 inputs: the 16 largest, the rest as feature='other').",
    ModelSegmentFeature,
    group="Drift",
    unit="ratio 0–1",
    use=(
        "Data quality per input: the share of recent values beyond anything usual in the baseline (outside "
        "its k-th smallest to k-th largest value, about the 0.1th and 99.9th percentiles; a new draw from the"
        " baseline lands outside with probability about 2k/(N+1): 1 % at 200 rows, 0.2 % at 5,000). Noise "
        "added to inputs, a unit change or a broken upstream join shows here at once, even when the per-input"
        " KS distances stay under their floor. An input above `drift.range_min_share` (significantly) counts "
        "as input evidence: `input-shift`, named in the alert. For a held input (string, int, bool) it is the"
        " share of values whose category is not in the baseline's count table (unseen categories). `topk(5, "
        "harmonic_input_out_of_range_ratio)` lists the worst inputs."
    ),
)
SEGMENT_WARMING_UP = Gauge(
    "harmonic_segment_warming_up",
    "1 while a segment learns its own baseline from its first events (no verdict yet), 0 once it has one.",
    ModelSegment,
    group="Drift",
    unit="1 warming up / 0 has a baseline",
    use=(
        "Each segment is judged against its own baseline: from reference data that carries the segment, else learned "
        "from its first `warmup_events` events. While this is 1 the segment has no verdict and no drift alert; "
        "`/readyz` lists the warming segments with their progress."
    ),
)
ALERTS_FIRING = Gauge(
    "harmonic_alerts_firing",
    "Alerts currently firing.",
    ModelSegmentAlertname,
    group="Alerts",
    unit="1 firing / 0 not",
    use=(
        "The sidecar's own alert state (HarmonicHarmfulShift, HarmonicInputDrift, HarmonicShadowDisagreement) per "
        "model and segment, after `alerts.for_seconds` and with `alerts.resolve_after_seconds` hysteresis. Useful "
        "when Alertmanager delivery is broken (`harmonic_alert_deliveries_failed_total`)."
    ),
)
ALERTS_FIRED_TOTAL = Counter(
    "harmonic_alerts_fired_total",
    "Alerts that went to firing.",
    ModelAlertname,
    group="Alerts",
    unit="alerts",
    use=(
        "Transitions to firing; `increase(...[7d])` is the alert volume per model, the input for tuning "
        "thresholds (the verdict's false-alarm rates and delays on river streams: bench/verdict_quality.py)."
    ),
)
ALERT_DELIVERIES_FAILED_TOTAL = Counter(
    "harmonic_alert_deliveries_failed_total",
    "Alert deliveries that failed after retries.",
    Receiver,
    group="Alerts",
    unit="deliveries",
    use=(
        'Deliveries to Alertmanager (`receiver="alertmanager"`) or the webhook that failed after retries. Any '
        "increase means alerts may be firing unseen (Prometheus alert HarmonicAlertDeliveryFailing)."
    ),
)
PRODUCER_FAILURES_TOTAL = Counter(
    "harmonic_producer_failures_total",
    "Dead letters and scores the Kafka producer failed to deliver on one attempt (each is kept and re-sent), by topic_kind (dead_letter, scores).",
    TopicKind,
    group="Process",
    unit="records",
    use=(
        'Attempts to deliver a dead letter (`topic_kind="dead_letter"`) or a score (`"scores"`) that failed: '
        "the broker was away past `kafka.producer_delivery_timeout_ms`, a topic had no metadata, or the broker "
        "refused the request. Nothing is lost by it: the record is kept and sent again, and the offsets of its event "
        'are not committed until it is acknowledged. A rising rate with `harmonic_degraded{reason="producer"}` = 1 '
        "is an outage of the producer topics; the rate-limited log line says what failed."
    ),
)
PRODUCER_DROPPED_TOTAL = Counter(
    "harmonic_producer_dropped_total",
    "Dead letters and scores given up, by topic_kind (dead_letter, scores) and reason (buffer_full: the buffer was full with kafka.producer_drop_when_full; too_large: the broker or max_request_size refuses its size).",
    TopicKindReason,
    group="Process",
    unit="records",
    use=(
        'Dead letters and scores given up: `reason="buffer_full"` when `kafka.producer_drop_when_full` is true and '
        "`kafka.producer_buffer_bytes` was full (the pipeline kept reading instead of pausing), "
        '`reason="too_large"` when the broker or `max_request_size` (4 MiB) refuses the size of the record, so that '
        "re-sending could never succeed. Should stay at 0 with the default settings; each drop is logged "
        "(rate-limited)."
    ),
)
