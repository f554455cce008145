"""Every Prometheus series the sidecar exports, declared once: name, type, help, labels (and buckets).

Each series is a typed handle: its labels are a :class:`~typing.NamedTuple` whose fields are the label names, so
a write with a missing or extra label fails at the call and in mypy::

    EVENTS_INVALID_TOTAL.inc(state, ModelReason("credit", "not_json"))

The values live in :class:`~monitor.exporters.prometheus.MetricsState` (plain numpy behind one lock, read by a
pull-based collector at scrape time: the hot path never touches prometheus_client). :data:`METRICS` is the list
``docs/METRICS.md`` is generated from (``scripts/gen_metrics_doc.py``), each series with the usage note of its
declaration (``group``, ``unit``, ``use``). No other module spells a series name; tests and scripts take
``HANDLE.name`` from here.
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
    """One series' declaration, as the store, the collector and the docs read it.

    ``group``, ``unit`` and ``use`` are its usage note in ``docs/METRICS.md``: the section it is listed under, the
    unit of its values, and how to read it (a query, what a change means, what to do).
    """

    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()
    group: str = ""
    unit: str = ""
    use: str = ""


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


class ModelCandidate(NamedTuple):
    model: str
    candidate: str


class ModelCandidateSegmentWindow(NamedTuple):
    model: str
    candidate: str
    segment: str
    window: str


class ModelCandidateSegmentWindowAxis(NamedTuple):
    model: str
    candidate: str
    segment: str
    window: str
    axis: str


class ModelCandidateSegmentVerdict(NamedTuple):
    model: str
    candidate: str
    segment: str
    verdict: str


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


class ModelSegmentLoss(NamedTuple):
    model: str
    segment: str
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

    def __init__(
        self,
        name: str,
        help: str,
        labels: type[L],
        buckets: tuple[float, ...] = (),
        *,
        group: str = "",
        unit: str = "",
        use: str = "",
    ) -> None:
        if any(s.name == name for s in _DECLARED):
            raise ValueError(f"metric {name!r} is declared twice")
        self.name = name
        fields: tuple[str, ...] = getattr(labels, "_fields")  # noqa: B009 - a NamedTuple class; L is bound to tuple
        self.spec = MetricSpec(name, self.kind, help, fields, buckets, group, unit, use)
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
        "until its segment has scored the events its first test needs (`drift.window`): not tested, which 0 would "
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
LABELS_CONSUMED_TOTAL = Counter(
    "harmonic_labels_consumed_total",
    "Delayed-label messages read from the labels topic.",
    NoLabels,
    group="With delayed labels",
    unit="labels",
    use=(
        "Messages read from `kafka.labels_topic` ({id, label, ts}). Compare with the joined count: a large gap means "
        "labels for events that were not sampled, or ids that do not match the events' ids."
    ),
)
LABELS_INVALID_TOTAL = Counter(
    "harmonic_labels_invalid_total",
    "Label messages that could not be decoded, by reason.",
    Reason,
    group="With delayed labels",
    unit="labels",
    use=(
        "Label messages that could not be decoded, by the same bounded reasons as events. They are logged "
        "(rate-limited) and skipped; they never stop the loop."
    ),
)
LABELS_JOINED_TOTAL = Counter(
    "harmonic_labels_joined_total",
    "Delayed labels joined to scored events.",
    Model,
    group="With delayed labels",
    unit="labels",
    use=(
        "Labels from `kafka.labels_topic` joined to scored events by id within the time-to-live. The accuracy-based "
        "gauges below only exist when this moves."
    ),
)
LABELS_UNMATCHED_TOTAL = Counter(
    "harmonic_labels_unmatched_total",
    "Delayed labels with no scored event (not sampled, expired, or unknown id).",
    NoLabels,
    group="With delayed labels",
    unit="labels",
    use=(
        "Labels that found no event: arrived after the time-to-live, or the event was not sampled/scored. A high "
        "share means the label delay exceeds the join window."
    ),
)
WINDOW_ACCURACY = Gauge(
    "harmonic_window_accuracy",
    "Accuracy over joined labels in the window.",
    ModelSegmentWindow,
    group="With delayed labels",
    unit="ratio (0–1)",
    use=("Accuracy over the labelled events in the window — the ground truth the label-free signals predict."),
)
ESTIMATED_ACCURACY = Gauge(
    "harmonic_estimated_accuracy",
    "Label-free estimate of the model's accuracy over the window, by method (needs a reference built with labels).",
    ModelSegmentWindowMethod,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=(
        "The model's accuracy over the window estimated from its own outputs (confidence; γ, flicker and "
        'P_adj for `method="harmonic"`; the weighted `iw`, `iw_atc` from a domain classifier on those '
        "outputs), by every method (`harmonic`, `ac`, `atc`, `doc`, `iw`, `iw_atc`); only for a model whose "
        "reference JSON was built with `reference --labels`. Recomputed every `accuracy.interval_seconds`. "
        "Read the primary method (`accuracy.method`, default `iw`) with its interval, beside "
        "`harmonic_window_accuracy` when labels arrive (they override it). Blind to a change of P(y|x) alone "
        "(docs/OPERATIONS.md, Accuracy without labels)."
    ),
)
ESTIMATED_ACCURACY_LOWER = Gauge(
    "harmonic_estimated_accuracy_lower",
    "Lower end of the estimated accuracy's 90 % interval.",
    ModelSegmentWindowMethod,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=("Lower end of the estimate's 90 % interval (realized-accuracy noise + reference-fit noise + a shift margin)."),
)
ESTIMATED_ACCURACY_UPPER = Gauge(
    "harmonic_estimated_accuracy_upper",
    "Upper end of the estimated accuracy's 90 % interval.",
    ModelSegmentWindowMethod,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=(
        "Upper end of the 90 % interval. HarmonicAccuracyDrop fires when the primary method's upper end over the count "
        "window is below `harmonic_reference_accuracy` − `accuracy.tolerance`."
    ),
)
REFERENCE_ACCURACY = Gauge(
    "harmonic_reference_accuracy",
    "Accuracy of the model on its labelled reference (what the estimates are fitted on).",
    Model,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=(
        "The model's accuracy on its labelled reference (the validation set `reference --labels` was given): what "
        "every estimate starts from, and what HarmonicAccuracyDrop compares with."
    ),
)
CONFIDENCE_HARM_EVIDENCE = Gauge(
    "harmonic_confidence_harm_evidence",
    "1 when a fall in the model's confidence counts as harm evidence in its verdict, 0 when it is fragility.",
    Model,
    group="Accuracy without labels",
    unit="0 or 1",
    use=(
        "Which rule the model's verdicts run under (`drift.confidence_harm`): 1, a fall of its confidence or margin "
        "(and of the accuracy estimate read from them) makes `harmful-shift`; 0, the labelled reference showed its "
        "least confident answers right within `accuracy.tolerance` (or the setting is `never`), and such a fall is "
        "reported as `input-shift` (fragility). The start-up log and `check-config` say why "
        "(docs/OPERATIONS.md, When confidence is not harm evidence)."
    ),
)
RESILIENCE = Gauge(
    "harmonic_resilience",
    "min(acc under σ=0.1 noise / clean acc, 1) over joined labels.",
    Model,
    group="With delayed labels",
    unit="ratio (0–1)",
    use=(
        "min(accuracy under σ = 0.1 Gaussian noise / clean accuracy, 1) over joined labels ('Model Robustness"
        " Metrics', B)."
    ),
)
RELIABILITY = Gauge(
    "harmonic_reliability",
    "1 − ECE (10 equal-width bins) over joined labels.",
    Model,
    group="With delayed labels",
    unit="ratio (0–1)",
    use=("1 − expected calibration error with 10 equal-width confidence bins ('Model Robustness Metrics', C)."),
)
ESTIMATED_ERROR = Gauge(
    "harmonic_estimated_error",
    "Label-free estimate of a regressor's error (loss: mae, rmse) over the window, by method (needs a reference "
    "built with true values).",
    ModelSegmentWindowMethodLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use=(
        'A regressor\'s mean absolute (`loss="mae"`) or root mean squared (`loss="rmse"`) error over the window, '
        "estimated without labels by each method (`gbdt`, the default: boosted trees' model of the labelled "
        "reference's errors; `iw`: those errors reweighted by a domain classifier; `dle`; `dr`). Blind to a change of "
        "the target given the inputs."
    ),
)
ESTIMATED_ERROR_LOWER = Gauge(
    "harmonic_estimated_error_lower",
    "Lower end of the estimated error's 90 % interval.",
    ModelSegmentWindowMethodLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use=(
        "Lower end of the 90 % interval. HarmonicErrorRise fires when the primary method's MAE lower end over the "
        'count window exceeds `harmonic_reference_error{loss="mae"}` × (1 + `accuracy.error_tolerance`).'
    ),
)
ESTIMATED_ERROR_UPPER = Gauge(
    "harmonic_estimated_error_upper",
    "Upper end of the estimated error's 90 % interval.",
    ModelSegmentWindowMethodLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use="Upper end of the 90 % interval.",
)
REFERENCE_ERROR = Gauge(
    "harmonic_reference_error",
    "A regressor's error (loss: mae, rmse) on its labelled reference (what the estimates start from).",
    ModelLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use=(
        "A regressor's MAE and RMSE on its labelled reference (`reference --labels` with true values): what every "
        "error estimate starts from, and what HarmonicErrorRise compares with."
    ),
)
SEGMENT_REFERENCE_ACCURACY = Gauge(
    "harmonic_segment_reference_accuracy",
    "Accuracy of the model on the labelled reference's rows of the segment (where the reference carries it).",
    ModelSegment,
    group="Accuracy without labels",
    unit="ratio (0–1)",
    use=(
        "The segment's own reference accuracy, for a reference built with labels and a segment column (at least 50 "
        "labelled rows of the segment): what the segment's estimates and its HarmonicAccuracyDrop compare with. "
        "A segment without one compares with `harmonic_reference_accuracy`."
    ),
)
SEGMENT_REFERENCE_ERROR = Gauge(
    "harmonic_segment_reference_error",
    "A regressor's error (loss: mae, rmse) on the labelled reference's rows of the segment (where it carries it).",
    ModelSegmentLoss,
    group="Accuracy without labels",
    unit="the target's units",
    use=(
        "The segment's own reference MAE and RMSE (a reference built with true values and a segment column, at "
        "least 50 labelled rows of the segment): what the segment's error estimates and its HarmonicErrorRise "
        "compare with. A segment without one compares with `harmonic_reference_error`."
    ),
)
ROBUSTNESS_COMPOSITE = Gauge(
    "harmonic_robustness_composite",
    "0.4·stability + 0.3·resilience + 0.3·reliability — always read beside its parts.",
    Model,
    group="With delayed labels",
    unit="ratio (0–1)",
    use=(
        "0.4·stability + 0.3·resilience + 0.3·reliability. **Always show it beside its three parts** "
        "(`harmonic_window_stability`, `harmonic_resilience`, `harmonic_reliability`): one number hides which one "
        "moved."
    ),
)
UP = Gauge(
    "harmonic_up",
    "1 while the process runs; labels describe the build.",
    Version,
    group="Process",
    unit="1",
    use=(
        "Always 1 while the process runs; the `version` label tells which build is deployed "
        "(`count by (version) (harmonic_up)` during a rollout). Its absence is alert HarmonicSidecarAbsent."
    ),
)
READY = Gauge(
    "harmonic_ready",
    "1 when every model is loaded and partitions are assigned.",
    NoLabels,
    group="Process",
    unit="1 ready / 0 not",
    use=(
        "Mirrors `/readyz`: every model loaded and at least one Kafka partition assigned. 0 on a replica beyond "
        "the partition count is expected (it idles); 0 everywhere is alert HarmonicNotReady. Set when `/readyz` "
        "is probed."
    ),
)
COMPARE_EVENTS = Gauge(
    "harmonic_compare_events",
    "Sampled events of the window scored on both the served model and its candidate (models[].compare_with).",
    ModelCandidateSegmentWindow,
    group="Candidate beside the served model",
    unit="events",
    use=(
        "Paired events in the window (both models valid, the windows' uniform share); a window is compared from 50 on. "
        "The newest 20,000 per segment are kept."
    ),
)
COMPARE_DIFFERENCE = Gauge(
    "harmonic_compare_difference",
    "Paired difference of the window means, candidate − served model, on the same sampled events (axis: gamma, "
    "flicker, p_adj, confidence).",
    ModelCandidateSegmentWindowAxis,
    group="Candidate beside the served model",
    unit="the axis's unit",
    use=(
        "Candidate − served on the same events: above 0 on `gamma`/`flicker` means the candidate is more fragile "
        "there; on `p_adj`/`confidence`, higher for the candidate. Read it with its interval (docs/COMPARE.md, Live)."
    ),
)
COMPARE_DIFFERENCE_LOWER = Gauge(
    "harmonic_compare_difference_lower",
    "Lower end of the paired difference's 90 % paired interval (normal, from the per-event differences).",
    ModelCandidateSegmentWindowAxis,
    group="Candidate beside the served model",
    unit="the axis's unit",
    use="An interval wholly above or below 0 is a difference the paired interval calls real at 90 %.",
)
COMPARE_DIFFERENCE_UPPER = Gauge(
    "harmonic_compare_difference_upper",
    "Upper end of the paired difference's 90 % paired interval (normal, from the per-event differences).",
    ModelCandidateSegmentWindowAxis,
    group="Candidate beside the served model",
    unit="the axis's unit",
    use="Upper end of the same interval.",
)
COMPARE_DISAGREEMENT_RATIO = Gauge(
    "harmonic_compare_disagreement_ratio",
    "Share of the window's paired events where the served model and the candidate predict different classes.",
    ModelCandidateSegmentWindow,
    group="Candidate beside the served model",
    unit="ratio (0–1)",
    use=(
        "How often replacing the served model would change the answer (classifiers): what a rollout changes, "
        "whichever model is right."
    ),
)
COMPARE_VERDICT = Gauge(
    "harmonic_compare_verdict",
    "1 for the candidate's current comparison verdict over the longest time window (candidate-better, "
    "candidate-worse, no-difference, incomparable), 0 for the others; separate from harmonic_drift_verdict.",
    ModelCandidateSegmentVerdict,
    group="Candidate beside the served model",
    unit="0/1",
    use=(
        "The Pareto statement over the ranked axes (γ, flicker, P_adj) of the longest window: `candidate-worse` "
        "fires HarmonicCandidateWorse; `incomparable` means each model wins somewhere (no composite score)."
    ),
)
COMPARE_CANDIDATE_UP = Gauge(
    "harmonic_compare_candidate_up",
    "1 while the candidate's file is loaded and compared with the served model, 0 while it is refused (its file "
    "replaced by one that is gone, unreadable or no longer fits the served model).",
    ModelCandidate,
    group="Candidate beside the served model",
    unit="1 compared / 0 refused",
    use=(
        "A candidate's file replaced while `run` runs is loaded again within about 2 s and its comparison starts "
        "afresh (its paired differences, disagreement and verdict go until its windows fill again); one that "
        "does not fit is "
        "refused until a file that does replaces it. `/readyz` `candidate_files` says why (docs/COMPARE.md, Live)."
    ),
)
DEGRADED = Gauge(
    "harmonic_degraded",
    "1 while the sidecar runs degraded for this reason (state_dir, producer, alert_delivery, recovery, broker); /readyz lists them.",
    Reason,
    group="Process",
    unit="1 degraded / absent or 0 not",
    use=(
        "The sidecar keeps running but something needs fixing: `state_dir` (the state directory is read-only or "
        "full: state is not saved, offsets are not committed), `producer` (the dead-letter or scores topic cannot "
        "be reached: records wait in a bounded buffer), `alert_delivery` (Alertmanager or the webhook does not "
        "answer), `recovery` (after an unclean exit, the partitions that had records in flight are re-processed one "
        "record at a time; it ends by itself, per partition, once those records are read again or revoked), `broker` (the consumer's Kafka broker cannot be reached, at start-up or later: the sidecar waits for it and consumes again when it is back). `/readyz` stays 200 and lists the reasons under `degraded`; the log says what to fix."
    ),
)
HTTP_REQUESTS_TOTAL = Counter(
    "harmonic_http_requests_total",
    "HTTP requests answered, by path (metrics, healthz, readyz, probes, other).",
    Path,
    group="Process",
    unit="requests",
    use=(
        "Requests the HTTP endpoint answered, by `path` (`metrics`, `healthz`, `readyz`, `probes`, `other`). "
        '`rate(...{path="metrics"})` against `rate(harmonic_http_render_duration_seconds_count[5m])` shows how '
        "many scrapes share each render; more scrapes than your Prometheus replicas make means someone else scrapes."
    ),
)
HTTP_REQUESTS_REJECTED_TOTAL = Counter(
    "harmonic_http_requests_rejected_total",
    "Connections or requests the HTTP endpoint refused or dropped, by reason (read_timeout, write_timeout, too_many_connections, too_many_scrapes, pool_full, bad_request, unauthorized).",
    Reason,
    group="Process",
    unit="requests",
    use=(
        "Connections or requests the endpoint refused or dropped, by `reason`: `read_timeout` (a request head did not "
        "arrive within `metrics.read_timeout_seconds`: slow or half-open clients), `write_timeout` (a client did not "
        "read its response), `too_many_connections` (over `metrics.max_connections`), `too_many_scrapes` (over "
        "`metrics.max_concurrent_scrapes`: 503), `pool_full` (`/readyz`, `/probes` or password checks queued beyond "
        "their pool: 503), `bad_request` (malformed, with a body, not GET/HEAD), `unauthorized` (missing or wrong "
        "basic-auth credentials: 401). A steady rate means a client misbehaves; "
        "docs/OPERATIONS.md, *HTTP endpoint*."
    ),
)
HTTP_RENDER_DURATION_SECONDS = Histogram(
    "harmonic_http_render_duration_seconds",
    "Wall time of one /metrics render (at most one per metrics.min_render_interval_seconds).",
    NoLabels,
    SECONDS_BUCKETS,
    group="Process",
    unit="seconds",
    use=(
        "Wall time of one `/metrics` render. Renders happen at most once per `metrics.min_render_interval_seconds` "
        "whatever the number of scrapers; a p99 approaching the scrape timeout means too many series (check the "
        "bounded labels) or a starved CPU."
    ),
)


#: every series, in declaration order (the order docs/METRICS.md and the scrape list them)
METRICS: tuple[MetricSpec, ...] = tuple(_DECLARED)
