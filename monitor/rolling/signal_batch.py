"""The per-event signals of one micro-batch of one model (:class:`SignalBatch`), as the rolling windows take them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.errors import DataError

Signal = Literal["gamma", "flicker", "p_adj", "shadow_disagreement", "confidence", "margin"]
SIGNALS: Final[tuple[Signal, ...]] = ("gamma", "flicker", "p_adj", "shadow_disagreement", "confidence", "margin")
#: the segment of events without one, and the one that segments past the bound fold into
OTHER: Final = "other"


def _signal_array(name: str, values: ArrayLike | None, size: int) -> NDArray[np.float64]:
    if values is None:
        return np.full(size, np.nan)
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    if arr.size != size:
        raise DataError(f"signal '{name}' has {arr.size} values but the batch has {size} events")
    return arr


@dataclass(frozen=True, slots=True)
class SignalBatch:
    """The per-event signals of one micro-batch of one model; row i of every array is event i.

    Build it with :meth:`of`, which checks shapes. Attributes: ``timestamps_seconds`` (b,);
    ``gamma``, ``flicker``, ``p_adj``, ``shadow_disagreement``, ``confidence`` (the model's max-probability; NaN
    for a regressor), ``margin`` (top-1 minus top-2 class probability; NaN for a regressor) (b,) float64,
    NaN = missing;
    ``predicted_class`` (b,) int64, -1 = missing; ``features`` (b, n) float64 raw units;
    ``segments`` (b,) str.
    """

    timestamps_seconds: NDArray[np.float64]
    gamma: NDArray[np.float64]
    flicker: NDArray[np.float64]
    p_adj: NDArray[np.float64]
    shadow_disagreement: NDArray[np.float64]
    predicted_class: NDArray[np.int64]
    features: NDArray[np.float64]
    segments: NDArray[np.str_]
    confidence: NDArray[np.float64]
    margin: NDArray[np.float64]

    @classmethod
    def of(
        cls,
        *,
        features: ArrayLike,
        timestamps_seconds: float | ArrayLike,
        gamma: ArrayLike | None = None,
        flicker: ArrayLike | None = None,
        p_adj: ArrayLike | None = None,
        shadow_disagreement: ArrayLike | None = None,
        predicted_class: ArrayLike | None = None,
        segment: str | Sequence[str] = OTHER,
        confidence: ArrayLike | None = None,
        margin: ArrayLike | None = None,
    ) -> SignalBatch:
        """Validate and pack one batch.

        Parameters
        ----------
        features : (b, n) raw feature values; b sets the batch size.
        timestamps_seconds : one event time for the whole batch, or (b,) per-event times (epoch seconds).
        gamma, flicker, p_adj, shadow_disagreement : (b,) or None (all missing).
        predicted_class : (b,) ints or None.
        segment : one segment for the batch or (b,) per-event segments.
        confidence : (b,) max-probability or None (all missing).
        margin : (b,) top-1 minus top-2 class probability or None (all missing).

        Raises
        ------
        DataError
            If a shape disagrees with ``features`` or a timestamp is not finite.

        >>> b = SignalBatch.of(features=np.zeros((2, 3)), timestamps_seconds=10.0, gamma=[0.0, 0.1])
        >>> b.size, b.flicker.tolist(), b.segments.tolist()
        (2, [nan, nan], ['other', 'other'])
        """
        x = np.asarray(features, dtype=np.float64)
        if x.ndim != 2:
            raise DataError(f"features must be a 2-D array (events × features); got shape {x.shape}")
        size = x.shape[0]
        ts = np.asarray(timestamps_seconds, dtype=np.float64).reshape(-1)
        if ts.size == 1:
            ts = np.full(size, ts[0])
        if ts.size != size:
            raise DataError(f"timestamps_seconds has {ts.size} values but the batch has {size} events")
        if not np.all(np.isfinite(ts)):
            raise DataError("timestamps_seconds has NaN or infinite values; events need a valid time")
        pc = (
            np.full(size, -1, dtype=np.int64)
            if predicted_class is None
            else np.asarray(predicted_class, dtype=np.int64).reshape(-1)
        )
        if pc.size != size:
            raise DataError(f"predicted_class has {pc.size} values but the batch has {size} events")
        seg = np.full(size, segment) if isinstance(segment, str) else np.asarray(segment, dtype=np.str_)
        if seg.shape != (size,):
            raise DataError(f"segment has {seg.size} values but the batch has {size} events")
        return cls(
            timestamps_seconds=ts,
            gamma=_signal_array("gamma", gamma, size),
            flicker=_signal_array("flicker", flicker, size),
            p_adj=_signal_array("p_adj", p_adj, size),
            shadow_disagreement=_signal_array("shadow_disagreement", shadow_disagreement, size),
            predicted_class=pc,
            features=x,
            segments=seg.astype(np.str_),
            confidence=_signal_array("confidence", confidence, size),
            margin=_signal_array("margin", margin, size),
        )

    @property
    def size(self) -> int:
        """Number of events b."""
        return int(self.timestamps_seconds.size)

    @property
    def n_features(self) -> int:
        """Number of input features n."""
        return int(self.features.shape[1])

    def signal(self, name: Signal) -> NDArray[np.float64]:
        """The (b,) array of one signal."""
        arr: NDArray[np.float64] = getattr(self, name)
        return arr

    def take(self, rows: NDArray[np.intp] | NDArray[np.bool_]) -> SignalBatch:
        """The sub-batch of the given rows (an index array or a boolean mask)."""
        return SignalBatch(
            timestamps_seconds=self.timestamps_seconds[rows],
            gamma=self.gamma[rows],
            flicker=self.flicker[rows],
            p_adj=self.p_adj[rows],
            shadow_disagreement=self.shadow_disagreement[rows],
            predicted_class=self.predicted_class[rows],
            features=self.features[rows],
            segments=self.segments[rows],
            confidence=self.confidence[rows],
            margin=self.margin[rows],
        )
