"""What the pipeline's stages return: named results that :class:`~monitor.runtime.stage_fanout.StageFanout` sends on.

:class:`~monitor.runtime.scoring.Scoring` yields a :class:`ScoredBatch` per micro-batch it scored (applied to the
model's watch, or not: then only its cost is reported) and an :class:`Unscorable` per event it could not apply;
:meth:`~monitor.runtime.scoring.Scoring.accept` returns :class:`Accepted` (what the warm-up, the shadow check and the
sampler did with a poll's events). One object per batch or per call, never one per event.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from monitor.events import InferenceEvent
from monitor.model.signature import Held
from monitor.runtime.models import ModelRuntime
from monitor.signals.scorer import ScoreResult
from monitor.source.base import RawRecord


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
