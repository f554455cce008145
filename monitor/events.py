"""The event types every stage shares: one decoded inference event and a micro-batch of them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray


# LivePrediction and InferenceEvent are built once per consumed event: slots without ``frozen`` (a frozen dataclass
# sets each field through object.__setattr__: both together 1.5 µs instead of 0.65 µs per event,
# bench/ingest_parts.py). Treat them as read-only.
@dataclass(slots=True)
class LivePrediction:
    """What the live model server answered for an event (optional in the event). Read-only by convention."""

    label: int | None = None
    probabilities: tuple[float, ...] | None = None
    value: tuple[float, ...] | None = None


@dataclass(slots=True)
class InferenceEvent:
    """One decoded, validated inference event. Read-only by convention (not frozen: see above).

    ``features`` has shape (n_features,) in raw units, float64, all finite.
    """

    event_id: str
    model: str
    model_version: str
    features: NDArray[np.float64]
    timestamp_seconds: float
    segment: str = "other"
    prediction: LivePrediction | None = None
    # where it came from, for at-least-once commits: (topic, partition, offset) or None
    origin: tuple[str, int, int] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class LabelEvent:
    """A delayed ground-truth label, joined to an inference event by ``event_id``."""

    event_id: str
    label: int
    timestamp_seconds: float
