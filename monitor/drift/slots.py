"""Stage 5b: detector slots — how a drift detector plugs into the verdict.

A :class:`DetectorSpec` says everything the verdict, the alerts and the metrics need to know about one detector:

- its ``name`` and ``role``: ``"output"`` (harm evidence: a firing makes the verdict ``harmful-shift``),
  ``"fragility"`` (γ, flicker: the predictions near these inputs grew fragile — a firing alone makes the verdict
  ``input-shift`` with fragility as its detail, never ``harmful-shift``) or ``"input"`` (a firing alone makes it
  ``input-shift``);
- the batch ``signal`` it is fed (``gamma``, ``flicker``, ``confidence``, ``margin``, ``features`` or ``held``), with
  an optional ``transform`` of it (1 − max-probability for a fall of confidence);
- ``watches``: what it is calibrated on, read from the reference and the settings (None: nothing to watch here,
  e.g. a regressor's confidence), and ``build``: the detector on that;
- ``stated_rate``: the false alarms per 10⁶ stationary events it is stated to stay under: every detector of a
  verdict takes an even share of ``drift.false_alarms_per_million_events`` (``shares_rate``: a sequential detector,
  its threshold calibrated to that share; a window test's level is capped by :meth:`SlotContext.alpha`);
- how its evidence reads: ``evidence`` (the clauses an alert's description gives when it fires), ``moved`` and
  ``names_in`` (the inputs a verdict report names, and in which of its fields), ``gauges`` (per-input gauges).

:data:`monitor.drift.registry.DETECTORS` lists the registered specs; the
:class:`~monitor.drift.verdict.VerdictEngine` builds a :class:`DetectorSlot` from each that has something to watch,
and everything downstream — the verdict rule, alert evidence, detector metrics — reads the slots, not the detectors'
names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from monitor.alerts import Evidence
from monitor.config import DriftSettings
from monitor.drift.base import CHANGES_KEPT, DriftState, FeatureShift, ReferenceLike, WindowPlan

if TYPE_CHECKING:
    from monitor.rolling.reference import Reference

#: what a firing is evidence of: harm (``output``), fragility (``fragility``: γ, flicker) or moved inputs (``input``)
Role = Literal["output", "fragility", "input"]
#: the batch field a detector is fed (the keywords of :meth:`~monitor.drift.verdict.VerdictEngine.update`)
Signal = Literal["gamma", "flicker", "confidence", "margin", "features", "held"]
#: the field of :class:`~monitor.drift.verdict.VerdictReport` that names a detector's moved inputs
ReportField = Literal["top_features", "out_of_range", "categories"]

#: moved inputs named (with their numbers) in an alert, per input test
ALERT_INPUTS = 5


class SlotDetector(Protocol):
    """What a slot needs from its detector (every :class:`~monitor.drift.base.DriftDetector` fits)."""

    def update(self, values: Any) -> object:
        """Feed one batch of the slot's signal."""
        ...

    def reset(self) -> None:
        """Return to the freshly constructed state."""
        ...

    @property
    def drift_detected(self) -> bool:
        """Whether the detector signals drift after its last update."""
        ...

    @property
    def state(self) -> DriftState:
        """A snapshot of the detector's state."""
        ...


@dataclass(frozen=True, slots=True)
class SlotContext:
    """What one slot's detector is built with: its name, the reference and settings, the window tests' shared plan,
    and ``rate``, each detector's even share of ``drift.false_alarms_per_million_events`` (per 10⁶ events)."""

    name: str
    reference: ReferenceLike
    settings: DriftSettings
    plan: WindowPlan
    rate: float

    def alpha(self, level: float) -> float:
        """A window test's level per test: its own setting ``level``, at most what keeps it within its share of the
        budget — a test every ``plan.every`` events false-alarms at most ``alpha`` per test (union bound over the
        overlapping windows), ``10⁶·alpha/every`` per 10⁶ events."""
        return min(level, self.rate * self.plan.every / 1e6)

    def window_rate(self, level: float) -> float:
        """The stated rate (per 10⁶ events) of a window test at :meth:`alpha` (``level``)."""
        return 1e6 * self.alpha(level) / self.plan.every


@dataclass(frozen=True, slots=True)
class InputValues:
    """One per-input gauge of a segment at an evaluation: each input's value by name."""

    kind: Literal["drift", "out_of_range"]
    names: Sequence[str]
    values: NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Recent:
    """What an alert's clause compares a fired detector with: the segment's count window (its last
    ``settings.window`` events are the recent ones) and the segment's baseline."""

    count: Any
    baseline: Reference
    settings: DriftSettings

    def values(self, signal: str) -> NDArray[np.float64]:
        """The finite values of ``signal`` among the recent events."""
        v = np.asarray(self.count.values(signal), dtype=np.float64)[-self.settings.window :]
        return v[np.isfinite(v)]

    def rows(self) -> NDArray[np.float64]:
        """The recent events' feature rows (as held: rows may hold NaN)."""
        return np.asarray(self.count.features(), dtype=np.float64)[-self.settings.window :]


T = TypeVar("T")
D = TypeVar("D", bound=SlotDetector)


def finite_mean(values: NDArray[np.float64]) -> float:
    """The mean of ``values`` (already finite), NaN for none: the window side of an alert's clause."""
    return float(values.mean()) if values.size else float("nan")


def per_window_test(level: Callable[[DriftSettings], float]) -> Callable[[SlotContext], float]:
    """A window test's ``stated_rate`` at its level setting ``level`` (capped by its share of the budget,
    :meth:`SlotContext.window_rate`): at most one false alarm per test, a test every ``drift.every`` events."""
    return lambda ctx: ctx.window_rate(level(ctx.settings))


class MovedInputs(Protocol):
    """An input test as its clauses read it: its state's name and the inputs it flagged, ranked."""

    @property
    def state(self) -> DriftState: ...

    @property
    def moved(self) -> Sequence[FeatureShift]: ...


def moved_evidence(
    det: MovedInputs,
    floor: float,
    statistic_name: str,
    measure: Callable[[FeatureShift], str],
    window: Callable[[FeatureShift], float],
    reference: Callable[[FeatureShift], float],
) -> Iterable[Evidence]:
    """An input test's clauses: one per flagged input (at most :data:`ALERT_INPUTS`), each its statistic against
    ``floor``, ``window`` against ``reference`` and ``"<test>: <measure>"``."""
    for m in det.moved[:ALERT_INPUTS]:
        yield Evidence(
            m.name, m.statistic, floor, window(m), reference(m), f"{det.state.name}: {measure(m)}", statistic_name
        )


def _no_gauges(detector: Any) -> tuple[InputValues, ...]:
    return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DetectorSpec(Generic[T, D]):
    """One registered detector: how it is built, fed and read (see the module's description).

    ``clause_rank`` orders the clauses of an alert's description: by rank, then in registration order.
    """

    name: str
    role: Role
    signal: Signal
    watches: Callable[[ReferenceLike, DriftSettings], T | None]
    build: Callable[[T, SlotContext], D]
    stated_rate: Callable[[SlotContext], float]
    evidence: Callable[[D, Recent], Iterable[Evidence]]
    shares_rate: bool = False
    transform: Callable[[Any], Any] | None = None
    moved: Callable[[D], Sequence[FeatureShift]] | None = None
    names_in: ReportField | None = None
    gauges: Callable[[D], Iterable[InputValues]] = _no_gauges
    clause_rank: int = 0

    def slot(self, watched: T, context: SlotContext) -> DetectorSlot[T, D]:
        """This spec's slot, its detector built on ``watched`` (what :attr:`watches` returned)."""
        return DetectorSlot(self, self.build(watched, context), self.stated_rate(context))


@dataclass(frozen=True, slots=True)
class SlotState:
    """One slot as the verdict rule reads it: its detector's state, its role, and the inputs it names in the
    report (``moved``, ranked, in the report's field ``names_in``)."""

    state: DriftState
    role: Role
    moved: Sequence[FeatureShift] = ()
    names_in: ReportField | None = None
    #: the signal the detector watches (``gamma``, ``confidence``, …; empty: not said)
    signal: str = ""


@dataclass(frozen=True, slots=True)
class DetectorSlot(Generic[T, D]):
    """A registered detector of one verdict engine: its spec, the detector, and its stated false-alarm rate (per 10⁶
    stationary events)."""

    spec: DetectorSpec[T, D]
    detector: D
    stated_rate: float

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def role(self) -> Role:
        return self.spec.role

    def feed(self, signals: Mapping[str, Any], size: int | None = None) -> tuple[int, ...]:
        """Feed the detector its signal from one batch of ``size`` events' ``signals`` (absent or None: not scored,
        nothing fed; ``size`` None: its signal's length); the batch positions (0-based, ascending) at which its alarm
        changed, each where the detector crossed: the event whose value it was reading then."""
        values = signals.get(self.spec.signal)
        if values is None:
            return ()
        size = batch_length(self.spec.signal, values) if size is None else size
        before = self.detector.state.events
        self.detector.update(values if self.spec.transform is None else self.spec.transform(values))
        after = self.detector.state
        fresh = [e - before - 1 for e in after.changes if e > before]
        if not fresh:
            return ()
        # every change of this batch is remembered unless the memory is full of them
        complete = len(after.changes) < CHANGES_KEPT or after.changes[0] <= before
        return tuple(_positions(values, size, after.events - before, fresh) if complete else [size - 1])

    @property
    def moved(self) -> Sequence[FeatureShift]:
        """The inputs the detector flagged at its last test, ranked (none for a detector that names no inputs)."""
        return () if self.spec.moved is None else self.spec.moved(self.detector)

    def reading(self) -> SlotState:
        """The slot as the verdict rule reads it now."""
        return SlotState(self.detector.state, self.spec.role, self.moved, self.spec.names_in, self.spec.signal)

    def evidence(self, recent: Recent) -> tuple[Evidence, ...]:
        """The clauses an alert gives for this detector (none while it does not fire)."""
        return tuple(self.spec.evidence(self.detector, recent)) if self.detector.drift_detected else ()

    def gauges(self) -> tuple[InputValues, ...]:
        """The detector's per-input gauges now."""
        return tuple(self.spec.gauges(self.detector))


def batch_length(signal: str, values: Any) -> int:
    """Events in one batch of ``signal``'s ``values``: a per-event signal's length, the feature rows (one 1-D row:
    one event), a held column's length.

    >>> batch_length("gamma", [0.1, 0.2]), batch_length("features", [0.1, 0.2]), batch_length("held", {"c": ["a"]})
    (2, 1, 1)
    """
    if isinstance(values, Mapping):
        return len(next(iter(values.values()), ()))
    v = np.asarray(values)
    if signal == "features":
        return 1 if v.ndim == 1 else int(v.shape[0])
    return int(v.size)


def _positions(values: Any, size: int, fed: int, counts: Sequence[int]) -> list[int]:
    """Batch positions of the 0-based ``counts`` among the ``fed`` values a detector took of a batch of ``size``
    events: the same where it took every event; else among the events with finite values (a detector skips NaN
    values and rows with NaN), as it skips them. Where that cannot be told (another count), the batch's last event:
    no change is placed earlier than it happened."""
    last = size - 1
    if fed == size:
        return [min(c, last) for c in counts]
    if isinstance(values, Mapping) or fed > size:
        return [last]
    v = np.asarray(values, dtype=np.float64)
    finite = np.flatnonzero(~np.isnan(v) if v.ndim == 1 else np.all(np.isfinite(v), axis=1))
    if finite.size != fed:
        return [last]
    return [int(finite[c]) for c in counts]
