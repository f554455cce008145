"""Every Prometheus series the sidecar exports, declared once: name, type, help, labels (and buckets).

Each series is a typed handle: its labels are a :class:`~typing.NamedTuple` whose fields are the label names, so
a write with a missing or extra label fails at the call and in mypy::

    EVENTS_INVALID_TOTAL.inc(state, ModelReason("credit", "not_json"))

The values live in :class:`~monitor.exporters.prometheus.MetricsState` (plain numpy behind one lock, read by a
pull-based collector at scrape time: the hot path never touches prometheus_client). :data:`METRICS` is the list
``docs/METRICS.md`` is generated from (``scripts/gen_metrics_doc.py``). No other module spells a series name; tests
and scripts take ``HANDLE.name`` from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, Literal, NamedTuple, TypeVar

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from monitor.exporters.prometheus import MetricsState

MetricType = Literal["counter", "gauge", "histogram"]
GAMMA_BUCKETS = (0.0, 1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1.0)
FLICKER_BUCKETS = (0.0, 0.03125, 0.0625, 0.125, 0.25, 0.5, 0.75, 1.0)
UNIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
#: max-probability lies in [1/K, 1] and most of a healthy classifier's mass sits near 1: finer at the top
CONFIDENCE_BUCKETS = (0.1, 0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999, 1.0)
#: top-1 minus top-2 class probability lies in [0, 1]; for a binary model margin = 2·max-probability − 1, so these are
#: the confidence buckets from 0.5 up (0.5 → 0, 0.6 → 0.2, …, 0.999 → 0.998), with 0.05 and 0.1 for near-ties
MARGIN_BUCKETS = (0.0, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.98, 0.998, 1.0)
SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One series' declaration, as the store, the collector and the docs read it."""

    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


# -- label sets: one NamedTuple per shape; its fields are the label names, in the series' order ---------------------
class Model(NamedTuple):
    model: str


class ModelModelVersionSegment(NamedTuple):
    model: str
    model_version: str
    segment: str


class ModelReason(NamedTuple):
    model: str
    reason: str


class ModelFeatureProblem(NamedTuple):
    model: str
    feature: str
    problem: str


class NoLabels(NamedTuple):
    """No labels."""


class ModelSegment(NamedTuple):
    model: str
    segment: str


class ModelSegmentPBinGammaBin(NamedTuple):
    model: str
    segment: str
    p_bin: str
    gamma_bin: str


class ModelPurpose(NamedTuple):
    model: str
    purpose: str


class ModelSegmentWindow(NamedTuple):
    model: str
    segment: str
    window: str


class ModelOutput(NamedTuple):
    model: str
    output: str


class ModelScale(NamedTuple):
    model: str
    scale: str


class ModelSegmentVerdict(NamedTuple):
    model: str
    segment: str
    verdict: str


class ModelSegmentSignal(NamedTuple):
    model: str
    segment: str
    signal: str


class ModelSegmentFeature(NamedTuple):
    model: str
    segment: str
    feature: str


class ModelSegmentAlertname(NamedTuple):
    model: str
    segment: str
    alertname: str


class ModelAlertname(NamedTuple):
    model: str
    alertname: str


class Receiver(NamedTuple):
    receiver: str


class TopicKind(NamedTuple):
    topic_kind: str


class TopicKindReason(NamedTuple):
    topic_kind: str
    reason: str


class ModelRegionPerturbation(NamedTuple):
    model: str
    region: str
    perturbation: str


class ModelRegionStatus(NamedTuple):
    model: str
    region: str
    status: str


class Reason(NamedTuple):
    reason: str


class ModelOutcomeReason(NamedTuple):
    model: str
    outcome: str
    reason: str


class State(NamedTuple):
    state: str


class ModelSegmentWindowMethod(NamedTuple):
    model: str
    segment: str
    window: str
    method: str


class ModelSegmentWindowMethodLoss(NamedTuple):
    model: str
    segment: str
    window: str
    method: str
    loss: str


class ModelLoss(NamedTuple):
    model: str
    loss: str


class Version(NamedTuple):
    version: str


class Path(NamedTuple):
    path: str


L = TypeVar("L", bound=tuple[str, ...])
_DECLARED: list[MetricSpec] = []


class _Series(Generic[L]):
    """A declared series: ``name`` and ``spec``; the subclasses add the writes and reads of their type."""

    kind: ClassVar[MetricType]
    __slots__ = ("name", "spec")

    def __init__(self, name: str, help: str, labels: type[L], buckets: tuple[float, ...] = ()) -> None:
        if any(s.name == name for s in _DECLARED):
            raise ValueError(f"metric {name!r} is declared twice")
        self.name = name
        fields: tuple[str, ...] = getattr(labels, "_fields")  # noqa: B009 - a NamedTuple class; L is bound to tuple
        self.spec = MetricSpec(name, self.kind, help, fields, buckets)
        _DECLARED.append(self.spec)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class Counter(_Series[L]):
    """A monotone count (exported with the ``_total`` suffix)."""

    kind: ClassVar[MetricType] = "counter"
    __slots__ = ()

    def inc(self, state: MetricsState, labels: L, value: float = 1.0) -> None:
        state.inc(self.name, labels, value)

    def set_total(self, state: MetricsState, labels: L, value: float) -> None:
        """Mirror a component that keeps its own monotone count."""
        state.set_counter(self.name, labels, value)

    def value(self, state: MetricsState, labels: L) -> float:
        return state.counter(self.name, labels)

    def total(self, state: MetricsState) -> float:
        """The sum over every series."""
        return state.counter_sum(self.name)


class Gauge(_Series[L]):
    """A value that goes up and down."""

    kind: ClassVar[MetricType] = "gauge"
    __slots__ = ()

    def set(self, state: MetricsState, labels: L, value: float) -> None:
        state.set(self.name, labels, value)

    def get(self, state: MetricsState, labels: L) -> float | None:
        return state.gauge(self.name, labels)

    def clear(self, state: MetricsState, match: Callable[[tuple[str, ...]], bool]) -> None:
        """Remove the series whose labels ``match``."""
        state.clear_gauges(self.name, match)


class Histogram(_Series[L]):
    """Observations counted into fixed buckets."""

    kind: ClassVar[MetricType] = "histogram"
    __slots__ = ()

    def observe(self, state: MetricsState, labels: L, values: NDArray[np.floating] | Iterable[float]) -> None:
        state.observe(self.name, labels, values)


EVENTS_CONSUMED_TOTAL = Counter("harmonic_events_consumed_total", "Raw events read from the source.", Model)
EVENTS_SCORED_TOTAL = Counter(
    "harmonic_events_scored_total", "Events re-evaluated against the ONNX copy.", ModelModelVersionSegment
)
SCORES_NONFINITE_TOTAL = Counter(
    "harmonic_scores_nonfinite_total",
    "Scored events whose gamma came out NaN or inf: the model's outputs were not finite at or around the event.",
    Model,
)
EVENTS_INVALID_TOTAL = Counter(
    "harmonic_events_invalid_total",
    "Events that could not be decoded, by reason (model 'unknown' when it could not be attributed).",
    ModelReason,
)
EVENTS_DEAD_LETTERED_TOTAL = Counter(
    "harmonic_events_dead_lettered_total", "Invalid events forwarded to the dead-letter topic.", Model
)
INPUT_INVALID_TOTAL = Counter(
    "harmonic_input_invalid_total",
    "Events dead-lettered for one input's value, by input and problem: missing (absent or null), not_finite (NaN, inf) or out_of_range (beyond float32); past 64 inputs of a model, new ones as feature='other'.",
    ModelFeatureProblem,
)
KSERVE_DROPPED_TOTAL = Counter(
    "harmonic_kserve_dropped_total",
    "KServe CloudEvent halves the request/response joiner dropped, by reason (duplicate, orphan_response, mismatched_response).",
    ModelReason,
)
MODEL_VERSIONS_EVICTED_TOTAL = Counter(
    "harmonic_model_versions_evicted_total",
    "model_version values aged out (beyond segments.max_versions, least recently seen first); their series were removed.",
    Model,
)
EVENTS_SAMPLED_TOTAL = Counter(
    "harmonic_events_sampled_total", "Valid events chosen for scoring by the sampler.", Model
)
EVENTS_SAMPLED_RATIO = Gauge(
    "harmonic_events_sampled_ratio",
    "Sampled fraction of valid events (recent horizon); divide scored rates by it to scale back up.",
    Model,
)
SAMPLER_CAPACITY_EVENTS_PER_SECOND = Gauge(
    "harmonic_sampler_capacity_events_per_second",
    "Events per second the sampler lets scoring take for the model: its CPU share over the measured cost per event (or the configured cap); offered traffic above it is sampled. Ingest first: while the consumer lags, the CPU budget is cut to what ingest leaves, and this falls with it.",
    Model,
)
CONSUMER_LAG_RECORDS = Gauge(
    "harmonic_consumer_lag_records",
    "Records the assigned partitions hold past the pipeline's positions (log-end offsets as last fetched), all partitions together: above a few polls' worth, scoring yields CPU to ingest.",
    NoLabels,
)
SHADOW_CHECKED_SHARE = Gauge(
    "harmonic_shadow_checked_share",
    "Share of events carrying a live prediction that the shadow check compares (a uniform draw): 1 while caught up; while the consumer lags, the fraction of its cap that ingest first leaves scoring's CPU budget.",
    NoLabels,
)
GAMMA = Histogram("harmonic_gamma", "Anharmonicity γ per scored event.", ModelSegment, GAMMA_BUCKETS)
GAMMAMAP_EVENTS_TOTAL = Counter(
    "harmonic_gammamap_events_total",
    "Gamma Map cells: scored classifier events by bin of the predicted class's probability (p_bin) and of γ (gamma_bin), both from the fixed edges of monitor.gammamap; the events that enter the windows.",
    ModelSegmentPBinGammaBin,
)
FLICKER = Histogram(
    "harmonic_flicker", "Flicker (class-flip fraction) per scored event.", ModelSegment, FLICKER_BUCKETS
)
P_ADJ = Histogram("harmonic_p_adj", "N-step adversarial robustness P·exp(−Nγ) per event.", ModelSegment, UNIT_BUCKETS)
CONFIDENCE = Histogram(
    "harmonic_confidence",
    "The model's confidence (max class probability) per scored event; classifiers only.",
    ModelSegment,
    CONFIDENCE_BUCKETS,
)
MARGIN = Histogram(
    "harmonic_margin",
    "The model's margin (top-1 minus top-2 class probability) per scored event; classifiers only.",
    ModelSegment,
    MARGIN_BUCKETS,
)
SHADOW_COMPARED_TOTAL = Counter(
    "harmonic_shadow_compared_total", "Scored events that carried the live server's prediction.", Model
)
SHADOW_DISAGREEMENTS_TOTAL = Counter(
    "harmonic_shadow_disagreements_total", "Events whose live predicted class differs from the ONNX copy's.", Model
)
SCORE_BATCH_DURATION_SECONDS = Histogram(
    "harmonic_score_batch_duration_seconds", "Wall time of one micro-batch through the scorer.", Model, SECONDS_BUCKETS
)
OFFSETS_WENT_BACK_TOTAL = Counter(
    "harmonic_offsets_went_back_total",
    "Partitions whose first record after a start lay below the position last committed (an operator's offset reset, a re-created topic, another cluster): read from the broker's position, not the saved one; or whose record just before the saved position is another one than the state saw there (a re-created topic grown past it): read from its start.",
    NoLabels,
)
EVENTS_MISTIMED_TOTAL = Counter(
    "harmonic_events_mistimed_total",
    "Scored events whose timestamp was out of bounds, by reason: future_timestamp (beyond alerts.max_event_skew_seconds ahead of the wall clock, in a replay of the watermark; placed at the watermark), late (more than alerts.allowed_lag_seconds behind the model's watermark).",
    ModelReason,
)
EVENT_LAG_SECONDS = Histogram(
    "harmonic_event_lag_seconds", "Event timestamp to scored, per event.", Model, SECONDS_BUCKETS
)
MODEL_EVALUATIONS_TOTAL = Counter(
    "harmonic_model_evaluations_total", "Rows evaluated by the model, by purpose.", ModelPurpose
)
WINDOW_GAMMA_MEAN = Gauge("harmonic_window_gamma_mean", "Mean γ over the rolling window.", ModelSegmentWindow)
WINDOW_GAMMA_P95 = Gauge(
    "harmonic_window_gamma_p95", "95th percentile of γ over the rolling window.", ModelSegmentWindow
)
WINDOW_FLICKER_MEAN = Gauge("harmonic_window_flicker_mean", "Mean flicker over the rolling window.", ModelSegmentWindow)
WINDOW_STABILITY = Gauge("harmonic_window_stability", "1 − mean flicker over the rolling window.", ModelSegmentWindow)
WINDOW_P_ADJ_MEAN = Gauge("harmonic_window_p_adj_mean", "Mean P_adj over the rolling window.", ModelSegmentWindow)
WINDOW_CONFIDENCE_MEAN = Gauge(
    "harmonic_window_confidence_mean",
    "Mean confidence (max class probability) over the rolling window; classifiers only.",
    ModelSegmentWindow,
)
WINDOW_MARGIN_MEAN = Gauge(
    "harmonic_window_margin_mean",
    "Mean margin (top-1 minus top-2 class probability) over the rolling window; classifiers only.",
    ModelSegmentWindow,
)
WINDOW_SHADOW_DISAGREEMENT_RATIO = Gauge(
    "harmonic_window_shadow_disagreement_ratio",
    "Live vs ONNX disagreement rate over the rolling window.",
    ModelSegmentWindow,
)
WINDOW_EVENTS = Gauge("harmonic_window_events", "Scored events in the rolling window.", ModelSegmentWindow)
REFERENCE_GAMMA_MEAN = Gauge("harmonic_reference_gamma_mean", "Mean γ of the reference distribution.", Model)
REFERENCE_FLICKER_MEAN = Gauge("harmonic_reference_flicker_mean", "Mean flicker of the reference distribution.", Model)
FLICKER_TOLERANCE = Gauge(
    "harmonic_flicker_tolerance",
    "Regressors: how far a flicker copy's output must move to flip, in the output's units (scoring.regression_tolerance × the output's reference IQR), per output column.",
    ModelOutput,
)
SCORING_SCALE = Gauge(
    "harmonic_scoring_scale",
    "The flicker noise scale σ and ball radius r the scorer uses (scale=sigma|radius), in scoring.space units: fixed settings or chosen from the reference (scoring.scales).",
    ModelScale,
)
DRIFT_VERDICT = Gauge(
    "harmonic_drift_verdict",
    "1 for the current verdict of the latest drift evaluation (stable, input-shift, harmful-shift), or no-evidence "
    "while the segment received no event for its shortest time window (its last verdict rests on nothing current).",
    ModelSegmentVerdict,
)
DRIFT_STATISTIC = Gauge(
    "harmonic_drift_statistic",
    "Latest drift statistic per signal (gamma_cusum, gamma_ks, flicker_cusum, flicker_rate, confidence_cusum, margin_cusum, features_ks).",
    ModelSegmentSignal,
)
DRIFT_P_VALUE = Gauge("harmonic_drift_p_value", "Latest p-value per signal where the test has one.", ModelSegmentSignal)
FEATURE_DRIFT_FEATURES = Gauge("harmonic_feature_drift_features", "Input features flagged as drifted.", ModelSegment)
FEATURE_DRIFT_STATISTIC = Gauge(
    "harmonic_feature_drift_statistic",
    "Per-input KS distance to the segment's baseline at the last test (above 64 inputs: the 16 largest, the rest as feature='other').",
    ModelSegmentFeature,
)
INPUT_OUT_OF_RANGE_RATIO = Gauge(
    "harmonic_input_out_of_range_ratio",
    "Per-input share of the last drift.window events outside the segment baseline's 0.1–99.9 percentiles (above 64 inputs: the 16 largest, the rest as feature='other').",
    ModelSegmentFeature,
)
SEGMENT_WARMING_UP = Gauge(
    "harmonic_segment_warming_up",
    "1 while a segment learns its own baseline from its first events (no verdict yet), 0 once it has one.",
    ModelSegment,
)
ALERTS_FIRING = Gauge("harmonic_alerts_firing", "Alerts currently firing.", ModelSegmentAlertname)
ALERTS_FIRED_TOTAL = Counter("harmonic_alerts_fired_total", "Alerts that went to firing.", ModelAlertname)
ALERT_DELIVERIES_FAILED_TOTAL = Counter(
    "harmonic_alert_deliveries_failed_total", "Alert deliveries that failed after retries.", Receiver
)
PRODUCER_FAILURES_TOTAL = Counter(
    "harmonic_producer_failures_total",
    "Dead letters and scores the Kafka producer failed to deliver on one attempt (each is kept and re-sent), by topic_kind (dead_letter, scores).",
    TopicKind,
)
PRODUCER_DROPPED_TOTAL = Counter(
    "harmonic_producer_dropped_total",
    "Dead letters and scores given up, by topic_kind (dead_letter, scores) and reason (buffer_full: the buffer was full with kafka.producer_drop_when_full; too_large: the broker or max_request_size refuses its size).",
    TopicKindReason,
)
REGIONS_TRACKED = Gauge("harmonic_regions_tracked", "Flagged feature regions in the bounded index.", Model)
REGIONS_EVICTED_TOTAL = Counter(
    "harmonic_regions_evicted_total",
    "Regions evicted from the full index: a new region replaced the one with the lowest decayed score.",
    Model,
)
PROBE_RUNS_TOTAL = Counter("harmonic_probe_runs_total", "Threshold-probe runs completed.", Model)
PROBE_EPS_STAR = Gauge(
    "harmonic_probe_eps_star",
    "ε* per region and perturbation (standardized units); +Inf when never crossed below ε_max.",
    ModelRegionPerturbation,
)
PROBE_MRI = Gauge("harmonic_probe_mri", "MRI component per region and perturbation.", ModelRegionPerturbation)
PROBE_TARGETS = Gauge(
    "harmonic_probe_targets",
    "Probe targets ((perturbation, feature) pairs) of a region's last profile, by status: crossed, not_crossed, not_searched.",
    ModelRegionStatus,
)
PROBE_REGIONS_TOTAL = Counter(
    "harmonic_probe_regions_total",
    "Regions by what the prober did with them: outcome completed (reason probed: probed to the end), queued (reason "
    "budget: waiting until the row budget covers the whole probe) or skipped (reason few_exemplars, outranked: "
    "another segment moved more, evicted: it left the index while queued).",
    ModelOutcomeReason,
)
PROBE_QUEUE = Gauge(
    "harmonic_probe_queue", "Regions waiting for the probe row budget to cover their whole probe.", Model
)
PROBE_BUDGET_ROWS = Gauge(
    "harmonic_probe_budget_rows",
    "The probe row budget, all models: state earned (budget_share of the rows live events took), spent (rows probes "
    "evaluated), queued (rows the queued regions' probes will take).",
    State,
)
LABELS_CONSUMED_TOTAL = Counter(
    "harmonic_labels_consumed_total", "Delayed-label messages read from the labels topic.", NoLabels
)
LABELS_INVALID_TOTAL = Counter(
    "harmonic_labels_invalid_total", "Label messages that could not be decoded, by reason.", Reason
)
LABELS_JOINED_TOTAL = Counter("harmonic_labels_joined_total", "Delayed labels joined to scored events.", Model)
LABELS_UNMATCHED_TOTAL = Counter(
    "harmonic_labels_unmatched_total",
    "Delayed labels with no scored event (not sampled, expired, or unknown id).",
    NoLabels,
)
WINDOW_ACCURACY = Gauge("harmonic_window_accuracy", "Accuracy over joined labels in the window.", ModelSegmentWindow)
ESTIMATED_ACCURACY = Gauge(
    "harmonic_estimated_accuracy",
    "Label-free estimate of the model's accuracy over the window, by method (needs a reference built with labels).",
    ModelSegmentWindowMethod,
)
ESTIMATED_ACCURACY_LOWER = Gauge(
    "harmonic_estimated_accuracy_lower",
    "Lower end of the estimated accuracy's 90 % interval.",
    ModelSegmentWindowMethod,
)
ESTIMATED_ACCURACY_UPPER = Gauge(
    "harmonic_estimated_accuracy_upper",
    "Upper end of the estimated accuracy's 90 % interval.",
    ModelSegmentWindowMethod,
)
REFERENCE_ACCURACY = Gauge(
    "harmonic_reference_accuracy",
    "Accuracy of the model on its labelled reference (what the estimates are fitted on).",
    Model,
)
ESTIMATED_ERROR = Gauge(
    "harmonic_estimated_error",
    "Label-free estimate of a regressor's error (loss: mae, rmse) over the window, by method (needs a reference "
    "built with true values).",
    ModelSegmentWindowMethodLoss,
)
ESTIMATED_ERROR_LOWER = Gauge(
    "harmonic_estimated_error_lower",
    "Lower end of the estimated error's 90 % interval.",
    ModelSegmentWindowMethodLoss,
)
ESTIMATED_ERROR_UPPER = Gauge(
    "harmonic_estimated_error_upper",
    "Upper end of the estimated error's 90 % interval.",
    ModelSegmentWindowMethodLoss,
)
REFERENCE_ERROR = Gauge(
    "harmonic_reference_error",
    "A regressor's error (loss: mae, rmse) on its labelled reference (what the estimates start from).",
    ModelLoss,
)
RESILIENCE = Gauge("harmonic_resilience", "min(acc under σ=0.1 noise / clean acc, 1) over joined labels.", Model)
RELIABILITY = Gauge("harmonic_reliability", "1 − ECE (10 equal-width bins) over joined labels.", Model)
ROBUSTNESS_COMPOSITE = Gauge(
    "harmonic_robustness_composite",
    "0.4·stability + 0.3·resilience + 0.3·reliability — always read beside its parts.",
    Model,
)
UP = Gauge("harmonic_up", "1 while the process runs; labels describe the build.", Version)
READY = Gauge("harmonic_ready", "1 when every model is loaded and partitions are assigned.", NoLabels)
DEGRADED = Gauge(
    "harmonic_degraded",
    "1 while the sidecar runs degraded for this reason (state_dir, producer, alert_delivery, recovery, broker); /readyz lists them.",
    Reason,
)
HTTP_REQUESTS_TOTAL = Counter(
    "harmonic_http_requests_total", "HTTP requests answered, by path (metrics, healthz, readyz, probes, other).", Path
)
HTTP_REQUESTS_REJECTED_TOTAL = Counter(
    "harmonic_http_requests_rejected_total",
    "Connections or requests the HTTP endpoint refused or dropped, by reason (read_timeout, write_timeout, too_many_connections, too_many_scrapes, pool_full, bad_request, unauthorized).",
    Reason,
)
HTTP_RENDER_DURATION_SECONDS = Histogram(
    "harmonic_http_render_duration_seconds",
    "Wall time of one /metrics render (at most one per metrics.min_render_interval_seconds).",
    NoLabels,
    SECONDS_BUCKETS,
)


#: every series, in declaration order (the order docs/METRICS.md and the scrape list them)
METRICS: tuple[MetricSpec, ...] = tuple(_DECLARED)
