"""What the pipeline's stages return: named results that :class:`~monitor.runtime.stage_fanout.StageFanout` sends on.

:class:`~monitor.runtime.scoring.Scoring` yields a :class:`ScoredBatch` per micro-batch it scored (applied to the
model's watch, or not: then only its cost is reported) and an :class:`Unscorable` per event it could not apply;
:meth:`~monitor.runtime.scoring.Scoring.accept` returns :class:`Accepted` (what the warm-up, the shadow check and the
sampler did with a poll's events). :class:`~monitor.runtime.ingest.Ingest` fills an :class:`Ingested` per poll: the
events it decoded and the records it could not, each an :class:`Invalid` with its reason. One object per batch or
per call, never one per event (but one per event that is not applied).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from monitor.errors import InvalidEventError
from monitor.events import InferenceEvent
from monitor.model.signature import Held
from monitor.runtime.models import ModelRuntime
from monitor.signals.scorer import ScoreResult
from monitor.source.base import RawRecord
from monitor.source.columns import EventColumns


@dataclass(slots=True)
class ScoredBatch:
    """One micro-batch scored for ``rt``: its events, feature rows and held values, the scores and what they cost.

    ``applied`` is False when applying it to the model's watch raised: the scoring happened (its evaluations, time,
    non-finite scores and event lag are reported) but the events are taken again one at a time, and nothing else is
    sent on for this attempt.
    """

    rt: ModelRuntime
    events: list[InferenceEvent]
    rows: NDArray[np.float64]
    held: Held | None
    result: ScoreResult
    #: the clock's now once scored: each event's lag is measured against it, and the scored hooks get it
    now: float
    #: model rows evaluated (rows × the scorer's rows per event), counted under purpose ``events``
    evaluations: float
    #: wall seconds of the model call (the batch-duration histogram)
    score_seconds: float
    #: CPU seconds (all threads) and wall seconds of scoring and applying, once applied
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    applied: bool = False

    @property
    def model(self) -> str:
        return self.rt.name

    @property
    def segments(self) -> list[str]:
        return [ev.segment for ev in self.events]

    @property
    def nonfinite(self) -> NDArray[np.intp]:
        """Indices of valid events whose γ came out NaN or ±inf."""
        bad: NDArray[np.intp] = np.flatnonzero(self.result.valid & ~np.isfinite(self.result.gamma))
        return bad


@dataclass(frozen=True, slots=True)
class Unscorable:
    """An event that could not be checked, sampled or applied, with the record it came from and the error."""

    event: InferenceEvent
    record: RawRecord | None
    error: str
    #: the formatted traceback of the error, for the log
    traceback: str


@dataclass(frozen=True, slots=True)
class Evaluations:
    """Rows a model evaluated outside the event path's batches (the reference scored once at start)."""

    rt: ModelRuntime
    purpose: str
    rows: float


@dataclass(slots=True)
class Accepted:
    """What :meth:`~monitor.runtime.scoring.Scoring.accept` did with one call's events, per model."""

    #: events sampled for scoring (now pending)
    sampled: dict[str, int] = field(default_factory=dict)
    #: events whose live label was compared with the ONNX copy's (one centre-only model row each), and those that
    #: disagreed; a model with an entry here had at least one compared
    shadow_compared: dict[str, int] = field(default_factory=dict)
    shadow_disagreed: dict[str, int] = field(default_factory=dict)
    #: models whose warm-up completed (a standardizer fitted): a checkpoint is due soon
    warmed_up: list[str] = field(default_factory=list)
    unscorable: list[Unscorable] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SamplingLevel:
    """A model's sampled fraction and the sampler's capacity for it (events/s; +Inf: no limit)."""

    model: str
    fraction: float
    capacity: float | None


@dataclass(frozen=True, slots=True)
class Invalid:
    """A record (or event) that is not applied, with its reason (a ``harmonic_events_invalid_total`` label)."""

    #: the raw record it came from; None for a KServe request whose response never came
    record: RawRecord | None
    reason: str
    detail: str
    model: str = "unknown"
    event: InferenceEvent | None = None
    #: the formatted traceback, for an error that is a bug (logged with it)
    trace: str | None = None
    #: the decoder's error, naming the inputs at fault (``harmonic_input_invalid_total``)
    error: InvalidEventError | None = None


@dataclass(slots=True)
class Ingested:
    """What ingest made of one poll's records (or one record after an unclean exit)."""

    #: decoded events with the record each came from (None: a KServe half released without its partner)
    events: list[tuple[InferenceEvent, RawRecord | None]] = field(default_factory=list)
    #: decoded events as columns (decoded where the records were read), with the poll's records their rows count in
    columns: list[tuple[EventColumns, Sequence[RawRecord]]] = field(default_factory=list)
    invalid: list[Invalid] = field(default_factory=list)
    #: records read per model (one record counts once, under the model it belongs to; ``unknown`` when none)
    consumed: dict[str, int] = field(default_factory=dict)
    #: the KServe joiner's dropped halves so far, per (model, reason): totals, not increments
    dropped: dict[tuple[str, str], int] = field(default_factory=dict)

    def count(self, model: str) -> None:
        self.consumed[model] = self.consumed.get(model, 0) + 1

    def refuse(self, record: RawRecord, reason: str, detail: str, *, trace: str | None = None) -> None:
        """``record`` read and not applied: counted as consumed by no model, and invalid under ``reason``."""
        self.count("unknown")
        self.invalid.append(Invalid(record, reason, detail, trace=trace))


@dataclass(frozen=True, slots=True)
class LabelledWindowState:
    """A model's labelled window after labels joined: how many joined, and the window's measures."""

    model: str
    joined: int
    #: the window's name (``last_N``), the ``window`` label of its accuracy
    window: str
    accuracy: float
    resilience: float
    reliability: float
    #: the composite robustness; None while the model's stability is not known (no finite flicker yet)
    composite: float | None


@dataclass(slots=True)
class LabelReport:
    """What the label stage did with label records or with a scored batch's predictions."""

    #: label records read
    consumed: int = 0
    #: label records that did not decode or join, each (reason, detail)
    invalid: list[tuple[str, str]] = field(default_factory=list)
    #: model rows evaluated to keep predictions (purpose ``labels``), per model
    evaluations: dict[str, float] = field(default_factory=dict)
    #: the windows that labels joined, per model
    windows: list[LabelledWindowState] = field(default_factory=list)
    #: labels that never met their prediction so far (a total), once labels were joined or tried
    unmatched_total: float | None = None
