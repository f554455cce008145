"""Traffic, the per-event signals, the shadow check and the cost of scoring: what each event did."""

from __future__ import annotations

from monitor.telemetry.series import (
    CONFIDENCE_BUCKETS,
    FLICKER_BUCKETS,
    GAMMA_BUCKETS,
    MARGIN_BUCKETS,
    SECONDS_BUCKETS,
    UNIT_BUCKETS,
    Counter,
    Gauge,
    Histogram,
    Model,
    ModelFeatureProblem,
    ModelModelVersionSegment,
    ModelPurpose,
    ModelReason,
    ModelSegment,
    ModelSegmentPBinGammaBin,
    NoLabels,
)

__all__ = [
    "EVENTS_CONSUMED_TOTAL",
    "EVENTS_SCORED_TOTAL",
    "SCORES_NONFINITE_TOTAL",
    "EVENTS_INVALID_TOTAL",
    "EVENTS_DEAD_LETTERED_TOTAL",
    "INPUT_INVALID_TOTAL",
    "KSERVE_DROPPED_TOTAL",
    "MODEL_VERSIONS_EVICTED_TOTAL",
    "EVENTS_SAMPLED_TOTAL",
    "EVENTS_SAMPLED_RATIO",
    "SAMPLER_CAPACITY_EVENTS_PER_SECOND",
    "CONSUMER_LAG_RECORDS",
    "SHADOW_CHECKED_SHARE",
    "GAMMA",
    "GAMMAMAP_EVENTS_TOTAL",
    "FLICKER",
    "P_ADJ",
    "CONFIDENCE",
    "MARGIN",
    "SHADOW_COMPARED_TOTAL",
    "SHADOW_DISAGREEMENTS_TOTAL",
    "SCORE_BATCH_DURATION_SECONDS",
    "OFFSETS_WENT_BACK_TOTAL",
    "EVENTS_MISTIMED_TOTAL",
    "EVENT_LAG_SECONDS",
    "MODEL_EVALUATIONS_TOTAL",
]

#: a usage note that several series share
_RATE_NOTE = "Scored counts are a sample: divide a scored rate by `harmonic_events_sampled_ratio` for live traffic."

EVENTS_CONSUMED_TOTAL = Counter(
    "harmonic_events_consumed_total",
    "Raw events read from the source.",
    Model,
    group="Traffic and sampling",
    unit="events",
    use=(
        "Everything read from Kafka, valid or not, before sampling: `sum by (model) (rate(...[5m]))` is the "
        'topic\'s throughput as this sidecar sees it. Invalid records count under `model="unknown"` when they '
        "cannot be attributed. A flat line while producers are busy means the consumer is stuck or has no "
        "partitions (check `harmonic_ready`)."
    ),
)
EVENTS_SCORED_TOTAL = Counter(
    "harmonic_events_scored_total",
    "Events re-evaluated against the ONNX copy.",
    ModelModelVersionSegment,
    group="Traffic and sampling",
    unit="events",
    use=(
        "Events re-evaluated against the ONNX copy, i.e. the denominator behind every robustness number. "
        + _RATE_NOTE
        + " Per-segment rates show whether small segments get enough samples for their windows to mean anything."
    ),
)
SCORES_NONFINITE_TOTAL = Counter(
    "harmonic_scores_nonfinite_total",
    "Scored events whose gamma came out NaN or inf: the model's outputs were not finite at or around the event.",
    Model,
    group="Per-event robustness (histograms)",
    unit="events",
    use=(
        "Scored events (valid features) at which the ONNX copy's own outputs were NaN or ±inf — at the event, a ball "
        "point or a flicker copy — usually an overflow at extreme inputs. Where the probabilities are NaN at the event itself "
        "the event has no class (`predicted_class` −1 in the scores topic and `score` output) and all its scores "
        "are NaN. Their γ is NaN or inf, so they are left "
        "out of `harmonic_gamma` and the windows' statistics (a NaN γ also out of the drift tests; an inf γ counts "
        "there as a very large one), and counted here instead (and logged, rate-limited). "
        "Should stay at 0: any increase means the model breaks down somewhere in the traffic it serves (alert "
        "HarmonicModelOutputsNotFinite)."
    ),
)
EVENTS_INVALID_TOTAL = Counter(
    "harmonic_events_invalid_total",
    "Events that could not be decoded, by reason (model 'unknown' when it could not be attributed).",
    ModelReason,
    group="Traffic and sampling",
    unit="events",
    use=(
        "`sum by (reason) (rate(...[5m]))`: a new reason appearing, or a jump in `wrong_width`/`missing_field`, is "
        "almost always a producer-side schema change. The ratio to consumed events is recorded as "
        "`instance:harmonic_events_invalid:ratio_rate5m` (alert HarmonicInvalidEventsHigh)."
    ),
)
EVENTS_DEAD_LETTERED_TOTAL = Counter(
    "harmonic_events_dead_lettered_total",
    "Invalid events forwarded to the dead-letter topic.",
    Model,
    group="Traffic and sampling",
    unit="events",
    use=(
        "Should track `harmonic_events_invalid_total` when `kafka.dead_letter_topic` is set; the payloads and the "
        "reason (header `harmonic-invalid-reason`) are on that topic for replay or inspection."
    ),
)
INPUT_INVALID_TOTAL = Counter(
    "harmonic_input_invalid_total",
    "Events dead-lettered for one input's value, by input and problem: missing (absent or null), not_finite (NaN, inf) or out_of_range (beyond float32); past 64 inputs of a model, new ones as feature='other'.",
    ModelFeatureProblem,
    group="Traffic and sampling",
    unit="events",
    use=(
        "Data quality per input, for the values the model cannot take: an event with a missing (absent or `null`), "
        "NaN/inf or beyond-float32 value is dead-lettered whole (the model cannot score it), and counted here under the "
        "input at fault (under the model it named; `harmonic_events_invalid_total` counts the same events by "
        "reason). `topk(5, sum by (model, feature, problem) (rate(...[5m])))` names the upstream column that broke: "
        'a join that stopped filling one input shows as `problem="missing"` on that input alone. A model\'s first 64 '
        'inputs get their own series; later ones count as `feature="other"` (the dead letter\'s '
        "`harmonic-invalid-detail` header names the element). Series appear on the first such event."
    ),
)
KSERVE_DROPPED_TOTAL = Counter(
    "harmonic_kserve_dropped_total",
    "KServe CloudEvent halves the request/response joiner dropped, by reason (duplicate, orphan_response, mismatched_response).",
    ModelReason,
    group="Traffic and sampling",
    unit="CloudEvent halves",
    use=(
        "KServe payload-logging messages the request/response joiner discarded. `duplicate`: a second request or "
        "response with a `ce_id` already waiting (a redelivery, or a logger that reuses ids: their events are not "
        "scored twice, and a reused id pairs the wrong halves); `orphan_response`: a response whose request never "
        "came within the join TTL (the request is lost upstream, or requests go to another topic); "
        "`mismatched_response`: a response whose prediction count differs from its request's instances (the "
        "request's events are scored without a live prediction, so shadow agreement misses them). A steady rate "
        "of any of them means the payload logger or the topics need fixing, not the sidecar."
    ),
)
MODEL_VERSIONS_EVICTED_TOTAL = Counter(
    "harmonic_model_versions_evicted_total",
    "model_version values aged out (beyond segments.max_versions, least recently seen first); their series were removed.",
    Model,
    group="Traffic and sampling",
    unit="versions",
    use=(
        "`model_version` values aged out of the exported series: beyond `segments.max_versions` per model, the "
        "least recently seen version is evicted and every series that carries it is removed. A few per rollout is "
        "normal; a steady rate means versions churn (a build id or timestamp sent as the version) or more versions "
        "serve at once than `segments.max_versions` allows, and their counters keep restarting."
    ),
)
EVENTS_SAMPLED_TOTAL = Counter(
    "harmonic_events_sampled_total",
    "Valid events chosen for scoring by the sampler.",
    Model,
    group="Traffic and sampling",
    unit="events",
    use=(
        "Valid events the sampler accepted (stratified by predicted class by default). Compare with consumed to see "
        "how much of the traffic the budget covers."
    ),
)
EVENTS_SAMPLED_RATIO = Gauge(
    "harmonic_events_sampled_ratio",
    "Sampled fraction of valid events (recent horizon); divide scored rates by it to scale back up.",
    Model,
    group="Traffic and sampling",
    unit="ratio (0–1)",
    use=(
        "**Scale sampled rates back up with it**: live rate ≈ `rate(harmonic_events_scored_total[5m]) / "
        "harmonic_events_sampled_ratio` (recorded as `model_segment:harmonic_events_scored_scaled:rate5m`). "
        "Histograms and window gauges are *distributions* and need no scaling. A ratio far below 1 lengthens the "
        "wall-clock time to detect drift (alert HarmonicSampledRatioLow); see docs/OPERATIONS.md."
    ),
)
SAMPLER_CAPACITY_EVENTS_PER_SECOND = Gauge(
    "harmonic_sampler_capacity_events_per_second",
    "Events per second the sampler lets scoring take for the model: its CPU share over the measured cost per event (or the configured cap); offered traffic above it is sampled. Ingest first: while the consumer lags, the CPU budget is cut to what ingest leaves, and this falls with it.",
    Model,
    group="Traffic and sampling",
    unit="events/s",
    use=(
        "What scoring can sustain for the model within `sampler.cpu_share`, from the measured cost per event (or "
        "the configured event cap, when one is set). Offered traffic below it is scored whole; above it, sampled evenly in "
        "event time. Absent until the cost is measured (the reference scored at start-up, or the first batch); +Inf "
        "when nothing limits scoring (`events_per_second: 0`: every event scored). Ingest first: while the consumer "
        "lags (`harmonic_consumer_lag_records` above five polls' worth, or growing) the CPU budget is cut to what "
        "ingest leaves, and this falls with it; it climbs back to the `cpu_share` figure once caught up."
    ),
)
CONSUMER_LAG_RECORDS = Gauge(
    "harmonic_consumer_lag_records",
    "Records the assigned partitions hold past the pipeline's positions (log-end offsets as last fetched), all partitions together: above a few polls' worth, scoring yields CPU to ingest.",
    NoLabels,
    group="Traffic and sampling",
    unit="records",
    use=(
        "How far behind the log end the sidecar reads, all assigned partitions together (log-end offsets as the "
        "last fetches reported them, minus the pipeline's positions). A few polls' worth (`kafka.max_poll_records`) "
        "is normal; above five polls' worth scoring yields the loop to ingest (the sampled ratio drops) until it is "
        "back under one poll's worth. Growing for minutes at a steady rate: the input outruns ingest itself "
        "(add partitions and replicas). Absent for sources that cannot report log ends (replay)."
    ),
)
SHADOW_CHECKED_SHARE = Gauge(
    "harmonic_shadow_checked_share",
    "Share of events carrying a live prediction that the shadow check compares (a uniform draw): 1 while caught up; while the consumer lags, the fraction of its cap that ingest first leaves scoring's CPU budget.",
    NoLabels,
    group="Shadow agreement",
    unit="ratio",
    use=(
        "1 while the sidecar keeps up: every event carrying a live prediction is compared. While the consumer lags "
        "(ingest first), a uniform draw of this share is compared, so `harmonic_shadow_compared_total` grows slower "
        "but the disagreement ratio stays an unbiased estimate; a stale copy is then seen on fewer events."
    ),
)
GAMMA = Histogram(
    "harmonic_gamma",
    "Anharmonicity γ per scored event.",
    ModelSegment,
    GAMMA_BUCKETS,
    group="Per-event robustness (histograms)",
    unit="units of f (probability for `output: proba`, logit for `logit`, the output for `value`)",
    use=(
        "Anharmonicity γ(x) = |f(x) − mean of f over a ball of radius r around x|: ~0 where the model is locally "
        "smooth, large near decision boundaries. `histogram_quantile(0.95, sum by (model, segment, le) "
        "(rate(harmonic_gamma_bucket[5m])))` is the p95 (recorded as `model_segment:harmonic_gamma:p95_5m`); "
        "the buckets grow ~3× each, so quantiles are coarse — the exact window quantile is "
        "`harmonic_window_gamma_p95`. Compare against `harmonic_reference_gamma_mean`, not an absolute number: "
        "γ's scale depends on the model and on r."
    ),
)
GAMMAMAP_EVENTS_TOTAL = Counter(
    "harmonic_gammamap_events_total",
    "Gamma Map cells: scored classifier events by bin of the predicted class's probability (p_bin, 10 fixed bins) and of γ (gamma_bin, on the model's own edges: the deciles of its reference's γ, at most 11 bins; the fixed half-decade grid until it has a reference); the events that enter the windows.",
    ModelSegmentPBinGammaBin,
    group="Per-event robustness (histograms)",
    unit="events",
    use=(
        "The Gamma Map (predicted-class probability P × γ, after Fig. 5 of 'Harmonic Machine Learning Models "
        "are Robust') as counters, one per cell: `sum by (gamma_bin) (increase(...[$__rate_interval]))` is "
        "the γ-bucket-over-time heatmap, `sum by (p_bin, gamma_bin) (increase(...[1h]))` the map of the last "
        "hour. Mass moving toward high `gamma_bin` and low `p_bin` is traffic moving where predictions are "
        "fragile; `/gammamap` shows the same map beside the reference's. A model's `gamma_bin` values are its own "
        "(`00:0-0.0000123` … `10:>=0.000871`: index and range), so the reference fills about 10 % of the events "
        "into each of the first 10 and none into the last, which holds what lies beyond the reference's largest "
        "γ; sum them per model, not across models. Bounded: 10 `p_bin` × at most 11 `gamma_bin` per model and "
        "segment, plus the 18 fixed-grid values counted before the reference (warm-up). Scored counts are a "
        "sample: divide a scored rate by `harmonic_events_sampled_ratio` for live traffic."
    ),
)
FLICKER = Histogram(
    "harmonic_flicker",
    "Flicker (class-flip fraction) per scored event.",
    ModelSegment,
    FLICKER_BUCKETS,
    group="Per-event robustness (histograms)",
    unit="ratio (0–1): share of noise copies whose class flips",
    use=(
        "Per-event flicker under Gaussian noise σ (`scoring.sigma`, standardized units), K = "
        "`scoring.flicker_copies` copies, so values are multiples of 1/K. Mean flicker = "
        "`rate(harmonic_flicker_sum[5m]) / rate(harmonic_flicker_count[5m])`; most events sit in the 0 bucket, "
        "the tail above 0.25 is where the model is fragile."
    ),
)
P_ADJ = Histogram(
    "harmonic_p_adj",
    "N-step adversarial robustness P·exp(−Nγ) per event.",
    ModelSegment,
    UNIT_BUCKETS,
    group="Per-event robustness (histograms)",
    unit="probability (0–1)",
    use=(
        "P_adj = P·exp(−N·γ_logit), N = `scoring.steps`: the predicted class's probability discounted by "
        "local anharmonicity ('Harmonic Machine Learning Models are Robust', eq. 5). Falling mean P_adj with "
        "unchanged raw confidence means the model stays confident in places where it is not robust."
    ),
)
CONFIDENCE = Histogram(
    "harmonic_confidence",
    "The model's confidence (max class probability) per scored event; classifiers only.",
    ModelSegment,
    CONFIDENCE_BUCKETS,
    group="Per-event robustness (histograms)",
    unit="probability (1/K … 1, K classes)",
    use=(
        "The model's own confidence: the largest class probability of each scored event (`ScoreResult.probability`; "
        "the margin between the top two classes is `harmonic_margin`). Classifiers only — a regressor has no series. "
        "Mean = `rate(harmonic_confidence_sum[5m]) / rate(harmonic_confidence_count[5m])`; a growing share below "
        '0.9 (`harmonic_confidence_bucket{le="0.9"}`) means the model is less sure of today\'s traffic. The drift '
        "detectors `confidence_cusum`, `confidence_tail_cusum` (a gradual fall) and `confidence_jump_cusum` (a sudden "
        "one) watch the same signal for a *fall* against the reference; a fall counts as output-side evidence for `harmful-shift`. A model that becomes confidently wrong keeps its confidence: "
        "only the accuracy estimate or labels can show that."
    ),
)
MARGIN = Histogram(
    "harmonic_margin",
    "The model's margin (top-1 minus top-2 class probability) per scored event; classifiers only.",
    ModelSegment,
    MARGIN_BUCKETS,
    group="Per-event robustness (histograms)",
    unit="probability difference (0–1)",
    use=(
        "The model's margin: top-1 minus top-2 class probability of each scored event (`ScoreResult.margin`), from "
        "the same probabilities as `harmonic_confidence`. Classifiers only. For a binary model it is "
        "2·confidence − 1 and carries nothing new; for more classes it separates two classes tied (margin near 0 "
        "at any confidence) from probability spread over many (low confidence, margin not small). A growing share "
        'below 0.1 (`harmonic_margin_bucket{le="0.1"}`) means more events sit between two classes. The drift detector '
        "`margin_cusum` watches it for a *fall* against the reference, as output-side evidence for `harmful-shift`."
    ),
)
SHADOW_COMPARED_TOTAL = Counter(
    "harmonic_shadow_compared_total",
    "Scored events that carried the live server's prediction.",
    Model,
    group="Shadow agreement",
    unit="events",
    use=(
        "Only events carrying the live server's `prediction.label` can be compared; if this is ~0 the shadow check "
        "is blind (producers do not send predictions)."
    ),
)
SHADOW_DISAGREEMENTS_TOTAL = Counter(
    "harmonic_shadow_disagreements_total",
    "Events whose live predicted class differs from the ONNX copy's.",
    Model,
    group="Shadow agreement",
    unit="events",
    use=(
        "Disagreement ratio = `rate(harmonic_shadow_disagreements_total[15m]) / "
        "rate(harmonic_shadow_compared_total[15m])` (recorded as `model:harmonic_shadow_disagreement:ratio_rate15m`). "
        "**Anything above a percent or two means the ONNX copy is wrong or stale and every other harmonic metric "
        "for that model is suspect** (alert HarmonicShadowDisagreement)."
    ),
)
SCORE_BATCH_DURATION_SECONDS = Histogram(
    "harmonic_score_batch_duration_seconds",
    "Wall time of one micro-batch through the scorer.",
    Model,
    SECONDS_BUCKETS,
    group="Cost and latency",
    unit="seconds",
    use=(
        "Wall time to score one micro-batch: B events × (1 + ball points + flicker copies) model rows. p99 near "
        "`batch.max_wait_ms` or rising with constant batch size = CPU starvation (alert HarmonicScoreLatencyHigh)."
    ),
)
OFFSETS_WENT_BACK_TOTAL = Counter(
    "harmonic_offsets_went_back_total",
    "Partitions whose first record after a start lay below the position last committed (an operator's offset reset, a re-created topic, another cluster): read from the broker's position, not the saved one; or whose record just before the saved position is another one than the state saw there (a re-created topic grown past it): read from its start.",
    NoLabels,
    group="Traffic and sampling",
    unit="partitions",
    use=(
        "`increase(...[1h]) > 0`: after a restart the broker handed out records below the last committed position, "
        "or the record just before the saved position was another one (a re-created topic grown past it). "
        "Expected after an operator's offset reset for reprocessing; otherwise the topic was re-created or the "
        "address now points at another cluster: check which. The log line names the partition and both offsets."
    ),
)
EVENTS_MISTIMED_TOTAL = Counter(
    "harmonic_events_mistimed_total",
    "Scored events whose timestamp was out of bounds, by reason: future_timestamp (beyond alerts.max_event_skew_seconds ahead of the wall clock, in a replay of the watermark; placed at the watermark), late (more than alerts.allowed_lag_seconds behind the model's watermark).",
    ModelReason,
    group="Cost and latency",
    unit="events",
    use=(
        "`sum by (model, reason) (rate(...[5m]))`: `future_timestamp` above 0 means a producer's clock runs ahead "
        "(its events were placed at the watermark, so windows and alerts stay on time); `late` means events arrive more "
        "than `alerts.allowed_lag_seconds` behind the model's watermark (a lagging partition or producer)."
    ),
)
EVENT_LAG_SECONDS = Histogram(
    "harmonic_event_lag_seconds",
    "Event timestamp to scored, per event.",
    Model,
    SECONDS_BUCKETS,
    group="Cost and latency",
    unit="seconds",
    use=(
        "Event timestamp → scored. p50 ≈ batching delay plus producer-to-Kafka latency; a p99 that grows means "
        "the sidecar falls behind the topic (alert HarmonicEventLagHigh) — or producer clocks are wrong."
    ),
)
MODEL_EVALUATIONS_TOTAL = Counter(
    "harmonic_model_evaluations_total",
    "Rows evaluated by the model, by purpose.",
    ModelPurpose,
    group="Cost and latency",
    unit="model rows",
    use=(
        "Rows sent through onnxruntime by `purpose`: `events` (scoring), `shadow` (live comparison), `reference` "
        '(start-up), `probe`. `rate(...{purpose="events"}[5m])` divided by the per-row cost from '
        "docs/BENCHMARKS.md is the CPU the sidecar needs; probes stay under `probes.budget_share`."
    ),
)
