"""Stage 2: ``KeepAllSampler`` — score every valid event (budget 0 = unlimited), still counting for the metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from monitor.events import InferenceEvent
from monitor.sampler.base import ModelSamplingStats, sample_each


class KeepAllSampler:
    """Keeps every event with weight 1; the sampled fraction is 1.

    >>> from monitor.events import InferenceEvent
    >>> import numpy as np
    >>> s = KeepAllSampler()
    >>> s.sample(InferenceEvent("e", "m", "1", np.zeros(2), 0.0), now=0.0)
    1.0
    >>> s.snapshot()["m"].fraction
    1.0
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._seen: dict[str, int] = {}
        self._forced: dict[str, int] = {}

    def sample(self, event: InferenceEvent, now: float, *, force: bool = False) -> float:
        self._seen[event.model] = self._seen.get(event.model, 0) + 1
        if force:
            self._forced[event.model] = self._forced.get(event.model, 0) + 1
        return 1.0

    def sample_many(
        self, events: Sequence[InferenceEvent], now: float, forced: Sequence[bool] | None = None
    ) -> list[float]:
        return sample_each(self, events, now, forced)

    def release(self, now: float) -> list[tuple[InferenceEvent, float]]:
        """Nothing is ever held."""
        return []

    def observe_cost(self, model: str, events: int, seconds: float) -> None:
        """Nothing to budget: every event is scored whatever it costs."""

    def snapshot(self) -> Mapping[str, ModelSamplingStats]:
        return {
            m: ModelSamplingStats(
                model=m,
                target_per_second=float("inf"),
                offered_per_second=float("nan"),
                seen_total=n,
                kept_total=n,
                forced_total=self._forced.get(m, 0),
                seen_recent=n,
                kept_recent=n,
                fraction=1.0,
                weight=1.0,
                strata={},
            )
            for m, n in self._seen.items()
        }
