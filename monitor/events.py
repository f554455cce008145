"""The event types every stage shares: one decoded inference event and a micro-batch of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from monitor.model.signature import Held


# LivePrediction and InferenceEvent are built once per consumed event: slots without ``frozen`` (a frozen dataclass
# sets each field through object.__setattr__: both together 1.5 µs instead of 0.65 µs per event).
# Treat them as read-only.
@dataclass(slots=True)
class LivePrediction:
    """What the live model server answered for an event (optional in the event). Read-only by convention."""

    label: int | None = None
    probabilities: tuple[float, ...] | None = None
    value: tuple[float, ...] | None = None


class InferenceEvent:
    """One decoded, validated inference event. Read-only by convention (not frozen: see above).

    ``features`` has shape (n_features,) in raw units, float64, all finite and within float32's range (the model
    computes in float32). ``event_id``, ``model_version`` and ``segment`` encode as UTF-8 and carry no control
    characters (the decoders clean them: :func:`monitor.source.validate.clean_text`). ``features`` is the model's
    feature vector x (:mod:`monitor.model.signature`); ``held`` the values its model holds fixed — each held input's
    row (without the batch dimension) by input name, the ``fixed_features`` columns under
    :data:`~monitor.model.signature.HELD_COLUMNS` — or None for a model that holds nothing.

    The decoder hands over the JSON list it validated and the array is made on first access: most events are
    dropped by the sampler without their features being read, and ``np.array`` of 20 floats cost 0.83 µs per event
    against 9.13 for the whole decode in a slow spell of the benchmark machine; :func:`feature_rows` stacks many
    events' features in one call.
    """

    __slots__ = (
        "event_id",
        "model",
        "model_version",
        "_features",
        "timestamp_seconds",
        "segment",
        "prediction",
        "origin",
        "held",
    )

    # One parameter per field of the event's own data. ``origin`` is the reader's, not the event's: where the record
    # was read (topic or file, partition, offset), set by the decoder that read it (``with_origin``) and read by
    # ``replay`` to name the line of a change; it starts as None.
    def __init__(
        self,
        event_id: str,
        model: str,
        model_version: str,
        features: NDArray[np.float64] | list[float],
        timestamp_seconds: float,
        segment: str = "other",
        prediction: LivePrediction | None = None,
        held: dict[str, Any] | None = None,
    ) -> None:
        self.event_id = event_id
        self.model = model
        self.model_version = model_version
        self._features = features
        self.timestamp_seconds = timestamp_seconds
        self.segment = segment
        self.prediction = prediction
        self.origin: tuple[str, int, int] | None = None
        self.held = held

    def with_origin(self, origin: tuple[str, int, int] | None) -> InferenceEvent:
        """This event, marked as read at ``origin``; returns it so a decoder can mark and return in one line."""
        self.origin = origin
        return self

    @property
    def features(self) -> NDArray[np.float64]:
        values = self._features
        if type(values) is not np.ndarray:
            values = self._features = np.array(values, dtype=np.float64)
        return values

    @property
    def raw_features(self) -> NDArray[np.float64] | list[float]:
        """The features as the decoder gave them: the JSON list its fast path checked, until :attr:`features` is
        first read (then the array)."""
        return self._features

    def __repr__(self) -> str:
        return (
            f"InferenceEvent(event_id={self.event_id!r}, model={self.model!r}, model_version={self.model_version!r}, "
            f"features={self.features!r}, timestamp_seconds={self.timestamp_seconds!r}, segment={self.segment!r}, "
            f"prediction={self.prediction!r}, origin={self.origin!r}, held={self.held!r})"
        )


def feature_rows(events: Sequence[InferenceEvent], dtype: type[np.floating[Any]] = np.float64) -> NDArray[Any]:
    """The events' features as one (len(events), n) array of ``dtype`` (float64 by default), converted in one call
    (float32 straight from the values: the same rounding as through float64, without a second pass)."""
    return np.array([ev._features for ev in events], dtype=dtype)


def held_rows(events: Sequence[InferenceEvent]) -> Held | None:
    """The events' held values as one :class:`~monitor.model.signature.Held` (None when their model holds nothing)."""
    if not events or events[0].held is None:
        return None
    from monitor.model.signature import Held

    return Held.stack([ev.held for ev in events if ev.held is not None])


@dataclass(frozen=True, slots=True)
class LabelEvent:
    """A delayed ground-truth label, joined to an inference event by ``event_id``."""

    event_id: str
    label: int
    timestamp_seconds: float
