"""The building blocks of every series: label sets, the typed handles and the histograms' buckets.

Each label set is a :class:`~typing.NamedTuple` whose fields are the label names, in the series' order; a handle
(:class:`Counter`, :class:`Gauge`, :class:`Histogram`) registers its :class:`MetricSpec` when it is declared, in
the order :data:`monitor.telemetry.METRICS` lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, Literal, NamedTuple, TypeVar

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from monitor.exporters.prometheus import MetricsState

__all__ = [
    "MetricType",
    "GAMMA_BUCKETS",
    "FLICKER_BUCKETS",
    "UNIT_BUCKETS",
    "CONFIDENCE_BUCKETS",
    "MARGIN_BUCKETS",
    "SECONDS_BUCKETS",
    "MetricSpec",
    "Model",
    "ModelModelVersionSegment",
    "ModelReason",
    "ModelFeatureProblem",
    "NoLabels",
    "ModelSegment",
    "ModelSegmentPBinGammaBin",
    "ModelPurpose",
    "ModelSegmentWindow",
    "ModelOutput",
    "ModelScale",
    "ModelCandidate",
    "ModelCandidateSegmentWindow",
    "ModelCandidateSegmentWindowAxis",
    "ModelCandidateSegmentVerdict",
    "ModelSegmentVerdict",
    "ModelSegmentSignal",
    "ModelSegmentFeature",
    "ModelSegmentAlertname",
    "ModelAlertname",
    "Receiver",
    "TopicKind",
    "TopicKindReason",
    "ModelRegionPerturbation",
    "ModelRegionStatus",
    "Reason",
    "ModelOutcomeReason",
    "State",
    "ModelSegmentWindowMethod",
    "ModelSegmentWindowMethodLoss",
    "ModelLoss",
    "ModelSegmentLoss",
    "Version",
    "Path",
    "Counter",
    "Gauge",
    "Histogram",
]

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
