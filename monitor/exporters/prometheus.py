"""Stage 6: Prometheus export. The hot path updates a :class:`MetricsState` (plain numpy, one lock); a custom
collector reads a snapshot of it at scrape time, so the pipeline never touches prometheus_client.

Every series is declared once in :mod:`monitor.telemetry` (name, type, help, labels, buckets), written through its
typed handle there; this module is the store and the collector underneath.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from monitor.telemetry import METRICS, MODEL_VERSIONS_EVICTED_TOTAL, MetricSpec, MetricType

_M = "model"
_V = "model_version"

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
            key = (MODEL_VERSIONS_EVICTED_TOTAL.name, (model,))
            self._counters[key] = self._counters.get(key, 0.0) + 1.0

    @staticmethod
    def _check(name: str, labels: Labels, kind: MetricType) -> MetricSpec:
        spec = SPECS.get(name)
        if spec is None or spec.type != kind:
            raise KeyError(f"metric '{name}' is not declared as a {kind} in monitor.telemetry")
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
        self._put(self._counters, "counter", name, labels, value)

    def set(self, name: str, labels: Labels, value: float) -> None:
        self._put(self._gauges, "gauge", name, labels, value)

    def _put(
        self, table: dict[tuple[str, Labels], float], kind: MetricType, name: str, labels: Labels, value: float
    ) -> None:
        """Store ``value`` for (``name``, ``labels``) in ``table``, checked as a ``kind``; a model version noted."""
        self._check(name, labels, kind)
        with self._lock:
            table[(name, labels)] = float(value)
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
