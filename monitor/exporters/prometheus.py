"""Stage 6: Prometheus export. The hot path updates a :class:`MetricsState` (plain numpy, one lock); a custom
collector reads a snapshot of it at scrape time, so the pipeline never touches prometheus_client.

Every series is declared once in :data:`METRICS` (name, type, help, label names, buckets): that table is the
documentation source for docs/METRICS.md and the only place a new metric is added.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

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
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


_M = "model"
_S = "segment"
_V = "model_version"

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("harmonic_events_consumed_total", "counter", "Raw events read from the source.", (_M,)),
    MetricSpec("harmonic_events_scored_total", "counter", "Events re-evaluated against the ONNX copy.", (_M, _V, _S)),
    MetricSpec(
        "harmonic_scores_nonfinite_total",
        "counter",
        "Scored events whose gamma came out NaN or inf: the model's outputs were not finite at or around the event.",
        (_M,),
    ),
    MetricSpec(
        "harmonic_events_invalid_total",
        "counter",
        "Events that could not be decoded, by reason (model 'unknown' when it could not be attributed).",
        (_M, "reason"),
    ),
    MetricSpec(
        "harmonic_events_dead_lettered_total", "counter", "Invalid events forwarded to the dead-letter topic.", (_M,)
    ),
    MetricSpec(
        "harmonic_input_invalid_total",
        "counter",
        "Events dead-lettered for one input's value, by input and problem: missing (absent or null), not_finite "
        "(NaN, inf) or out_of_range (beyond float32); past 64 inputs of a model, new ones as feature='other'.",
        (_M, "feature", "problem"),
    ),
    MetricSpec(
        "harmonic_kserve_dropped_total",
        "counter",
        "KServe CloudEvent halves the request/response joiner dropped, by reason (duplicate, orphan_response, "
        "mismatched_response).",
        (_M, "reason"),
    ),
    MetricSpec(
        "harmonic_model_versions_evicted_total",
        "counter",
        "model_version values aged out (beyond segments.max_versions, least recently seen first); their series "
        "were removed.",
        (_M,),
    ),
    MetricSpec("harmonic_events_sampled_total", "counter", "Valid events chosen for scoring by the sampler.", (_M,)),
    MetricSpec(
        "harmonic_events_sampled_ratio",
        "gauge",
        "Sampled fraction of valid events (recent horizon); divide scored rates by it to scale back up.",
        (_M,),
    ),
    MetricSpec(
        "harmonic_sampler_capacity_events_per_second",
        "gauge",
        "Events per second the sampler lets scoring take for the model: its CPU share over the measured cost per "
        "event (or the configured cap); offered traffic above it is sampled. Ingest first: while the consumer lags, "
        "the CPU budget is cut to what ingest leaves, and this falls with it.",
        (_M,),
    ),
    MetricSpec(
        "harmonic_consumer_lag_records",
        "gauge",
        "Records the assigned partitions hold past the pipeline's positions (log-end offsets as last fetched), all "
        "partitions together: above a few polls' worth, scoring yields CPU to ingest.",
        (),
    ),
    MetricSpec("harmonic_gamma", "histogram", "Anharmonicity γ per scored event.", (_M, _S), GAMMA_BUCKETS),
    MetricSpec(
        "harmonic_gammamap_events_total",
        "counter",
        "Gamma Map cells: scored classifier events by bin of the predicted class's probability (p_bin) and of γ "
        "(gamma_bin), both from the fixed edges of monitor.gammamap; the events that enter the windows.",
        (_M, _S, "p_bin", "gamma_bin"),
    ),
    MetricSpec(
        "harmonic_flicker", "histogram", "Flicker (class-flip fraction) per scored event.", (_M, _S), FLICKER_BUCKETS
    ),
    MetricSpec(
        "harmonic_p_adj", "histogram", "N-step adversarial robustness P·exp(−Nγ) per event.", (_M, _S), UNIT_BUCKETS
    ),
    MetricSpec(
        "harmonic_confidence",
        "histogram",
        "The model's confidence (max class probability) per scored event; classifiers only.",
        (_M, _S),
        CONFIDENCE_BUCKETS,
    ),
    MetricSpec(
        "harmonic_margin",
        "histogram",
        "The model's margin (top-1 minus top-2 class probability) per scored event; classifiers only.",
        (_M, _S),
        MARGIN_BUCKETS,
    ),
    MetricSpec(
        "harmonic_shadow_compared_total", "counter", "Scored events that carried the live server's prediction.", (_M,)
    ),
    MetricSpec(
        "harmonic_shadow_disagreements_total",
        "counter",
        "Events whose live predicted class differs from the ONNX copy's.",
        (_M,),
    ),
    MetricSpec(
        "harmonic_score_batch_duration_seconds",
        "histogram",
        "Wall time of one micro-batch through the scorer.",
        (_M,),
        SECONDS_BUCKETS,
    ),
    MetricSpec(
        "harmonic_offsets_went_back_total",
        "counter",
        "Partitions whose first record after a start lay below the position last committed (an operator's offset "
        "reset, a re-created topic, another cluster): read from the broker's position, not the saved one; or whose "
        "record just before the saved position is another one than the state saw there (a re-created topic grown "
        "past it): read from its start.",
        (),
    ),
    MetricSpec(
        "harmonic_events_mistimed_total",
        "counter",
        "Scored events whose timestamp was out of bounds, by reason: future_timestamp (beyond "
        "alerts.max_event_skew_seconds ahead; placed at arrival, or at the watermark in a replay), late (more than "
        "alerts.allowed_lag_seconds behind the model's watermark).",
        (_M, "reason"),
    ),
    MetricSpec(
        "harmonic_event_lag_seconds",
        "histogram",
        "Event timestamp to scored, per event.",
        (_M,),
        SECONDS_BUCKETS,
    ),
    MetricSpec(
        "harmonic_model_evaluations_total", "counter", "Rows evaluated by the model, by purpose.", (_M, "purpose")
    ),
    MetricSpec("harmonic_window_gamma_mean", "gauge", "Mean γ over the rolling window.", (_M, _S, "window")),
    MetricSpec(
        "harmonic_window_gamma_p95", "gauge", "95th percentile of γ over the rolling window.", (_M, _S, "window")
    ),
    MetricSpec("harmonic_window_flicker_mean", "gauge", "Mean flicker over the rolling window.", (_M, _S, "window")),
    MetricSpec("harmonic_window_stability", "gauge", "1 − mean flicker over the rolling window.", (_M, _S, "window")),
    MetricSpec("harmonic_window_p_adj_mean", "gauge", "Mean P_adj over the rolling window.", (_M, _S, "window")),
    MetricSpec(
        "harmonic_window_confidence_mean",
        "gauge",
        "Mean confidence (max class probability) over the rolling window; classifiers only.",
        (_M, _S, "window"),
    ),
    MetricSpec(
        "harmonic_window_margin_mean",
        "gauge",
        "Mean margin (top-1 minus top-2 class probability) over the rolling window; classifiers only.",
        (_M, _S, "window"),
    ),
    MetricSpec(
        "harmonic_window_shadow_disagreement_ratio",
        "gauge",
        "Live vs ONNX disagreement rate over the rolling window.",
        (_M, _S, "window"),
    ),
    MetricSpec("harmonic_window_events", "gauge", "Scored events in the rolling window.", (_M, _S, "window")),
    MetricSpec("harmonic_reference_gamma_mean", "gauge", "Mean γ of the reference distribution.", (_M,)),
    MetricSpec("harmonic_reference_flicker_mean", "gauge", "Mean flicker of the reference distribution.", (_M,)),
    MetricSpec(
        "harmonic_flicker_tolerance",
        "gauge",
        "Regressors: how far a flicker copy's output must move to flip, in the output's units "
        "(scoring.regression_tolerance × the output's reference IQR), per output column.",
        (_M, "output"),
    ),
    MetricSpec(
        "harmonic_scoring_scale",
        "gauge",
        "The flicker noise scale σ and ball radius r the scorer uses (scale=sigma|radius), in scoring.space units: "
        "fixed settings or chosen from the reference (scoring.scales).",
        (_M, "scale"),
    ),
    MetricSpec(
        "harmonic_drift_verdict",
        "gauge",
        "1 for the current verdict of the latest drift evaluation (stable, input-shift, harmful-shift).",
        (_M, _S, "verdict"),
    ),
    MetricSpec(
        "harmonic_drift_statistic",
        "gauge",
        "Latest drift statistic per signal (gamma_cusum, gamma_ks, flicker_cusum, flicker_rate, confidence_cusum, "
        "margin_cusum, features_ks).",
        (_M, _S, "signal"),
    ),
    MetricSpec(
        "harmonic_drift_p_value", "gauge", "Latest p-value per signal where the test has one.", (_M, _S, "signal")
    ),
    MetricSpec("harmonic_feature_drift_features", "gauge", "Input features flagged as drifted.", (_M, _S)),
    MetricSpec(
        "harmonic_feature_drift_statistic",
        "gauge",
        "Per-input KS distance to the segment's baseline at the last test (above 64 inputs: the 16 largest, the rest "
        "as feature='other').",
        (_M, _S, "feature"),
    ),
    MetricSpec(
        "harmonic_input_out_of_range_ratio",
        "gauge",
        "Per-input share of the last drift.window events outside the segment baseline's 0.1–99.9 percentiles "
        "(above 64 inputs: the 16 largest, the rest as feature='other').",
        (_M, _S, "feature"),
    ),
    MetricSpec(
        "harmonic_segment_warming_up",
        "gauge",
        "1 while a segment learns its own baseline from its first events (no verdict yet), 0 once it has one.",
        (_M, _S),
    ),
    MetricSpec("harmonic_alerts_firing", "gauge", "Alerts currently firing.", (_M, _S, "alertname")),
    MetricSpec("harmonic_alerts_fired_total", "counter", "Alerts that went to firing.", (_M, "alertname")),
    MetricSpec(
        "harmonic_alert_deliveries_failed_total",
        "counter",
        "Alert deliveries that failed after retries.",
        ("receiver",),
    ),
    MetricSpec(
        "harmonic_producer_failures_total",
        "counter",
        "Dead letters and scores the Kafka producer failed to deliver on one attempt (each is kept and re-sent), by "
        "topic_kind (dead_letter, scores).",
        ("topic_kind",),
    ),
    MetricSpec(
        "harmonic_producer_dropped_total",
        "counter",
        "Dead letters and scores given up, by topic_kind (dead_letter, scores) and reason (buffer_full: the buffer was "
        "full with kafka.producer_drop_when_full; too_large: the broker or max_request_size refuses its size).",
        ("topic_kind", "reason"),
    ),
    MetricSpec("harmonic_regions_tracked", "gauge", "Flagged feature regions in the bounded index.", (_M,)),
    MetricSpec(
        "harmonic_regions_evicted_total",
        "counter",
        "Regions evicted from the full index: a new region replaced the one with the lowest decayed score.",
        (_M,),
    ),
    MetricSpec("harmonic_probe_runs_total", "counter", "Threshold-probe runs completed.", (_M,)),
    MetricSpec(
        "harmonic_probe_eps_star",
        "gauge",
        "ε* per region and perturbation (standardized units); +Inf when never crossed below ε_max.",
        (_M, "region", "perturbation"),
    ),
    MetricSpec(
        "harmonic_probe_mri", "gauge", "MRI component per region and perturbation.", (_M, "region", "perturbation")
    ),
    MetricSpec(
        "harmonic_probe_targets",
        "gauge",
        "Probe targets ((perturbation, feature) pairs) of a region's last profile, by status: crossed, not_crossed, "
        "not_searched.",
        (_M, "region", "status"),
    ),
    MetricSpec("harmonic_labels_consumed_total", "counter", "Delayed-label messages read from the labels topic.", ()),
    MetricSpec(
        "harmonic_labels_invalid_total", "counter", "Label messages that could not be decoded, by reason.", ("reason",)
    ),
    MetricSpec("harmonic_labels_joined_total", "counter", "Delayed labels joined to scored events.", (_M,)),
    MetricSpec(
        "harmonic_labels_unmatched_total",
        "counter",
        "Delayed labels with no scored event (not sampled, expired, or unknown id).",
        (),
    ),
    MetricSpec("harmonic_window_accuracy", "gauge", "Accuracy over joined labels in the window.", (_M, _S, "window")),
    MetricSpec(
        "harmonic_estimated_accuracy",
        "gauge",
        "Label-free estimate of the model's accuracy over the window, by method (needs a reference built with labels).",
        (_M, _S, "window", "method"),
    ),
    MetricSpec(
        "harmonic_estimated_accuracy_lower",
        "gauge",
        "Lower end of the estimated accuracy's 90 % interval.",
        (_M, _S, "window", "method"),
    ),
    MetricSpec(
        "harmonic_estimated_accuracy_upper",
        "gauge",
        "Upper end of the estimated accuracy's 90 % interval.",
        (_M, _S, "window", "method"),
    ),
    MetricSpec(
        "harmonic_reference_accuracy",
        "gauge",
        "Accuracy of the model on its labelled reference (what the estimates are fitted on).",
        (_M,),
    ),
    MetricSpec("harmonic_resilience", "gauge", "min(acc under σ=0.1 noise / clean acc, 1) over joined labels.", (_M,)),
    MetricSpec("harmonic_reliability", "gauge", "1 − ECE (10 equal-width bins) over joined labels.", (_M,)),
    MetricSpec(
        "harmonic_robustness_composite",
        "gauge",
        "0.4·stability + 0.3·resilience + 0.3·reliability — always read beside its parts.",
        (_M,),
    ),
    MetricSpec("harmonic_up", "gauge", "1 while the process runs; labels describe the build.", ("version",)),
    MetricSpec("harmonic_ready", "gauge", "1 when every model is loaded and partitions are assigned.", ()),
    MetricSpec(
        "harmonic_degraded",
        "gauge",
        "1 while the sidecar runs degraded for this reason (state_dir, producer, alert_delivery, recovery, broker); /readyz lists them.",
        ("reason",),
    ),
    MetricSpec(
        "harmonic_http_requests_total",
        "counter",
        "HTTP requests answered, by path (metrics, healthz, readyz, probes, other).",
        ("path",),
    ),
    MetricSpec(
        "harmonic_http_requests_rejected_total",
        "counter",
        "Connections or requests the HTTP endpoint refused or dropped, by reason (read_timeout, write_timeout, "
        "too_many_connections, too_many_scrapes, pool_full, bad_request, unauthorized).",
        ("reason",),
    ),
    MetricSpec(
        "harmonic_http_render_duration_seconds",
        "histogram",
        "Wall time of one /metrics render (at most one per metrics.min_render_interval_seconds).",
        (),
        SECONDS_BUCKETS,
    ),
)

SPECS: dict[str, MetricSpec] = {m.name: m for m in METRICS}
Labels = tuple[str, ...]
#: per metric: label name → its position in the label tuple (to find series by one label's value)
_LABEL_AT: dict[str, dict[str, int]] = {m.name: {label: i for i, label in enumerate(m.labels)} for m in METRICS}
#: metrics whose series carry a model_version: (position of ``model``, position of ``model_version``)
_VERSIONED: dict[str, tuple[int, int]] = {
    m.name: (m.labels.index(_M), m.labels.index(_V)) for m in METRICS if _M in m.labels and _V in m.labels
}
#: model_version values kept per model by default (setting ``segments.max_versions``)
MAX_VERSIONS = 8


@dataclass
class _Hist:
    bounds: NDArray[np.float64]
    counts: NDArray[np.int64]  # per bucket (non-cumulative), len(bounds) + 1 (last = +Inf)
    total: float = 0.0


@dataclass
class MetricsState:
    """All exported values. Thread-safe; updates are cheap and vectorised.

    ``model_version`` is bounded here, where every series is written: per model, the
    ``max_versions`` most recently written versions are kept; writing a series with one more evicts the least
    recently written version and removes every series that carries it for that model (counted in
    ``harmonic_model_versions_evicted_total``). A new deployment appears at once; old ones age out. Events of an
    evicted version still in flight simply bring it back as the most recent, so the bound holds whatever the
    order of writes. Set ``max_versions`` above the number of versions served at once (a canary and its base).

    Raises
    ------
    ValueError
        ``max_versions < 1``.
    """

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _counters: dict[tuple[str, Labels], float] = field(default_factory=dict)
    _gauges: dict[tuple[str, Labels], float] = field(default_factory=dict)
    _hists: dict[tuple[str, Labels], _Hist] = field(default_factory=dict)
    max_versions: int = MAX_VERSIONS
    _versions: dict[str, OrderedDict[str, None]] = field(default_factory=dict)  # model → versions, least recent first

    def __post_init__(self) -> None:
        self.limit_versions(self.max_versions)

    def limit_versions(self, max_versions: int) -> None:
        """Keep at most ``max_versions`` model_version values per model from now on (evicting any excess now)."""
        if max_versions < 1:
            raise ValueError(f"max_versions must be >= 1; got {max_versions!r}")
        with self._lock:
            self.max_versions = max_versions
            for model, seen in self._versions.items():
                self._evict(model, seen)

    def forget(self, label_name: str, value: str, model: str | None = None) -> int:
        """Remove every series whose ``label_name`` label is ``value`` (and whose ``model`` is ``model``, if given).

        Returns
        -------
        int
            Series removed (counters, gauges and histograms together).
        """
        with self._lock:
            return self._forget(label_name, value, model)

    def _forget(self, label_name: str, value: str, model: str | None) -> int:  # lock held
        removed = 0
        stores: tuple[dict[tuple[str, Labels], Any], ...] = (self._counters, self._gauges, self._hists)
        for store in stores:
            doomed = [key for key in store if _carries(key, label_name, value, model)]
            for key in doomed:
                del store[key]
            removed += len(doomed)
        if label_name == _V:
            for name, seen in self._versions.items():
                if model is None or name == model:
                    seen.pop(value, None)
        return removed

    def _seen(self, name: str, labels: Labels) -> None:  # lock held; ``name`` is in _VERSIONED
        model_at, version_at = _VERSIONED[name]
        model, version = labels[model_at], labels[version_at]
        seen = self._versions.get(model)
        if seen is None:
            seen = self._versions[model] = OrderedDict()
        if version in seen:
            seen.move_to_end(version)
            return
        seen[version] = None
        self._evict(model, seen)

    def _evict(self, model: str, seen: OrderedDict[str, None]) -> None:  # lock held
        while len(seen) > self.max_versions:
            self._forget(_V, next(iter(seen)), model)
            key = ("harmonic_model_versions_evicted_total", (model,))
            self._counters[key] = self._counters.get(key, 0.0) + 1.0

    @staticmethod
    def _check(name: str, labels: Labels, kind: MetricType) -> MetricSpec:
        spec = SPECS.get(name)
        if spec is None or spec.type != kind:
            raise KeyError(f"metric '{name}' is not declared as a {kind} in monitor.exporters.prometheus.METRICS")
        if len(labels) != len(spec.labels):
            raise ValueError(f"metric '{name}' takes labels {spec.labels}; got {labels}")
        return spec

    def inc(self, name: str, labels: Labels, value: float = 1.0) -> None:
        self._check(name, labels, "counter")
        with self._lock:
            key = (name, labels)
            self._counters[key] = self._counters.get(key, 0.0) + value
            if name in _VERSIONED:
                self._seen(name, labels)

    def set_counter(self, name: str, labels: Labels, value: float) -> None:
        """Set a counter mirrored from a component that keeps its own monotone count."""
        self._check(name, labels, "counter")
        with self._lock:
            self._counters[(name, labels)] = float(value)
            if name in _VERSIONED:
                self._seen(name, labels)

    def set(self, name: str, labels: Labels, value: float) -> None:
        self._check(name, labels, "gauge")
        with self._lock:
            self._gauges[(name, labels)] = float(value)
            if name in _VERSIONED:
                self._seen(name, labels)

    def clear_gauges(self, name: str, match: Callable[[Labels], bool]) -> None:
        with self._lock:
            for key in [k for k in self._gauges if k[0] == name and match(k[1])]:
                del self._gauges[key]

    def observe(self, name: str, labels: Labels, values: NDArray[np.floating] | Iterable[float]) -> None:
        spec = self._check(name, labels, "histogram")
        arr = np.asarray(values, dtype=np.float64).ravel()
        arr = arr[np.isfinite(arr)]
        if arr.size == 0:
            return
        with self._lock:
            key = (name, labels)
            h = self._hists.get(key)
            if h is None:
                bounds = np.asarray(spec.buckets, dtype=np.float64)
                h = self._hists[key] = _Hist(bounds=bounds, counts=np.zeros(bounds.size + 1, dtype=np.int64))
            idx = np.searchsorted(h.bounds, arr, side="left")  # value <= bound goes in that bucket ("le")
            h.counts += np.bincount(idx, minlength=h.counts.size)
            h.total += float(arr.sum())
            if name in _VERSIONED:
                self._seen(name, labels)

    def counter(self, name: str, labels: Labels) -> float:
        with self._lock:
            return self._counters.get((name, labels), 0.0)

    def counter_sum(self, name: str) -> float:
        with self._lock:
            return sum(v for (n, _), v in self._counters.items() if n == name)

    def gauge(self, name: str, labels: Labels) -> float | None:
        with self._lock:
            return self._gauges.get((name, labels))

    # -- persistence of counters across restarts -----------------------------------------------------------
    def dump_counters(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{"name": n, "labels": list(lab), "value": v} for (n, lab), v in self._counters.items()]

    def load_counters(self, rows: Iterable[Mapping[str, Any]]) -> None:
        with self._lock:
            for row in rows:
                name = str(row["name"])
                if name in SPECS and SPECS[name].type == "counter":
                    labels = tuple(str(x) for x in row["labels"])
                    self._counters[(name, labels)] = float(row["value"])
                    if name in _VERSIONED and len(labels) == len(SPECS[name].labels):
                        self._seen(name, labels)  # a state saved before the bound held more versions

    # -- scrape ---------------------------------------------------------------------------------------------
    def families(self) -> Iterator[Metric]:
        with self._lock:
            counters = dict(self._counters)
            gauges = dict(self._gauges)
            hists = {k: (h.bounds.copy(), h.counts.copy(), h.total) for k, h in self._hists.items()}
        for spec in METRICS:
            if spec.type == "counter":
                cfam = CounterMetricFamily(spec.name.removesuffix("_total"), spec.help, labels=spec.labels)
                for (n, lab), v in counters.items():
                    if n == spec.name:
                        cfam.add_metric(list(lab), v)
                yield cfam
            elif spec.type == "gauge":
                gfam = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
                for (n, lab), v in gauges.items():
                    if n == spec.name:
                        gfam.add_metric(list(lab), v)
                yield gfam
            else:
                hfam = HistogramMetricFamily(spec.name, spec.help, labels=spec.labels)
                for (n, lab), (bounds, counts, total) in hists.items():
                    if n != spec.name:
                        continue
                    cum = np.cumsum(counts)
                    buckets = [(_fmt_bound(b), float(c)) for b, c in zip(bounds, cum[:-1], strict=True)]
                    buckets.append(("+Inf", float(cum[-1])))
                    hfam.add_metric(list(lab), buckets, total)
                yield hfam


def _carries(key: tuple[str, Labels], label_name: str, value: str, model: str | None) -> bool:
    """The series ``key`` has ``label_name`` = ``value`` (and ``model`` = ``model`` when given)."""
    name, labels = key
    at = _LABEL_AT.get(name, {})
    i = at.get(label_name)
    if i is None or labels[i] != value:
        return False
    if model is None:
        return True
    j = at.get(_M)
    return j is not None and labels[j] == model


def _fmt_bound(b: float) -> str:
    return repr(float(b))


class StateCollector:
    """A prometheus_client collector over a :class:`MetricsState` (pull model)."""

    def __init__(self, state: MetricsState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        yield from self._state.families()
