"""The warm-up builder: a :class:`~monitor.rolling.reference.Reference` from a model's first N scored events, where
no reference data was given (or for a segment that learns its own baseline live)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.errors import ConfigError, DataError
from monitor.rolling.reference import Reference, check_sizes

__all__ = ["WarmupReferenceBuilder"]


class WarmupReferenceBuilder:
    """Collects the first ``events`` scored events and turns them into a :class:`Reference`.

    Memory is bounded by ``events`` rows; events past that are ignored (``ready`` stays True).

    Parameters
    ----------
    events : warm-up length N (>= 10).
    max_sample, max_feature_sample, seed : passed to :meth:`Reference.from_arrays`.
    feature_names : optional names of the features.
    gamma_edges : the Gamma Map's γ edges (:meth:`Reference.from_arrays`); None: the model's own from the events.

    Examples
    --------
    >>> b = WarmupReferenceBuilder(events=10)
    >>> _ = b.update(gamma=np.zeros(6), flicker=np.zeros(6), features=np.ones((6, 2)))
    >>> b.ready, b.count
    (False, 6)
    >>> _ = b.update(gamma=np.ones(6), flicker=np.zeros(6), features=np.ones((6, 2)))
    >>> b.ready, b.build().n_events, b.build().gamma_mean
    (True, 10, 0.4)
    """

    def __init__(
        self,
        events: int = 5000,
        *,
        max_sample: int = 5000,
        max_feature_sample: int = 2000,
        feature_names: Sequence[str] | None = None,
        seed: int = 0,  # not a setting: the reference sample's seed; run samples with 0 whatever scoring.seed is
        gamma_edges: Sequence[float] | None = None,
    ) -> None:
        if events < 10:
            raise ConfigError(f"warm-up needs events >= 10 to estimate a reference; got {events!r}")
        check_sizes(max_sample, max_feature_sample)
        self.events = int(events)
        self.max_sample = int(max_sample)
        self.max_feature_sample = int(max_feature_sample)
        self.feature_names = None if feature_names is None else tuple(feature_names)
        self.seed = seed
        self.gamma_edges = None if gamma_edges is None else tuple(gamma_edges)
        self.reset()

    def reset(self) -> None:
        """Drop everything collected."""
        self._gamma: list[NDArray[np.float64]] = []
        self._flicker: list[NDArray[np.float64]] = []
        self._features: list[NDArray[np.float64]] = []
        self._classes: list[NDArray[np.int64]] = []
        self._confidence: list[NDArray[np.float64]] = []
        self._margin: list[NDArray[np.float64]] = []
        self._held: dict[str, list[NDArray[np.str_]]] = {}
        self._count = 0

    @property
    def count(self) -> int:
        """Events collected so far (<= ``events``)."""
        return self._count

    @property
    def ready(self) -> bool:
        """True once ``events`` events have been collected."""
        return self._count >= self.events

    def update(
        self,
        *,
        gamma: ArrayLike,
        flicker: ArrayLike,
        features: ArrayLike,
        predicted_class: ArrayLike | None = None,
        confidence: ArrayLike | None = None,
        margin: ArrayLike | None = None,
        held: Mapping[str, NDArray[np.str_]] | None = None,
    ) -> Self:
        """Add a batch (``held``: ``{held element: (b,) values}``, or None): γ (b,), flicker (b,), features (b, n), predicted class (b,) or None, max-probability (b,)
        or None (NaN: none), margin (top-1 minus top-2 class probability, b,) or None (NaN: none).

        Raises
        ------
        DataError
            If the batch's arrays disagree in length or its feature count differs from earlier batches.
        """
        x = np.asarray(features, dtype=np.float64)
        g = np.asarray(gamma, dtype=np.float64).reshape(-1)
        f = np.asarray(flicker, dtype=np.float64).reshape(-1)
        if x.ndim != 2 or g.size != x.shape[0] or f.size != x.shape[0]:
            raise DataError(f"warm-up batch shapes disagree: features {x.shape}, γ {g.shape}, flicker {f.shape}")
        if self._features and x.shape[1] != self._features[0].shape[1]:
            raise DataError(
                f"warm-up batch has {x.shape[1]} features; earlier batches had {self._features[0].shape[1]}"
            )
        pc = (
            np.full(g.size, -1, dtype=np.int64)
            if predicted_class is None
            else np.asarray(predicted_class, dtype=np.int64).reshape(-1)
        )
        if pc.size != g.size:
            raise DataError(f"warm-up predicted_class has {pc.size} values; the batch has {g.size} events")
        conf = np.full(g.size, np.nan) if confidence is None else np.asarray(confidence, dtype=np.float64).reshape(-1)
        if conf.size != g.size:
            raise DataError(f"warm-up confidence has {conf.size} values; the batch has {g.size} events")
        marg = np.full(g.size, np.nan) if margin is None else np.asarray(margin, dtype=np.float64).reshape(-1)
        if marg.size != g.size:
            raise DataError(f"warm-up margin has {marg.size} values; the batch has {g.size} events")
        take = min(self.events - self._count, g.size)
        if take > 0:
            self._gamma.append(g[:take].copy())
            self._flicker.append(f[:take].copy())
            self._features.append(x[:take].copy())
            self._classes.append(pc[:take].copy())
            self._confidence.append(conf[:take].copy())
            self._margin.append(marg[:take].copy())
            for name, col in (held or {}).items():
                self._held.setdefault(name, []).append(np.asarray(col)[:take].astype(str))
            self._count += take
        return self

    def build(self) -> Reference:
        """The reference from the collected events.

        Raises
        ------
        DataError
            If fewer than ``events`` events have been collected (check :attr:`ready` first).
        """
        if not self.ready:
            raise DataError(f"warm-up has {self._count} of {self.events} events; keep feeding it until ready is True")
        return Reference.from_arrays(
            gamma=np.concatenate(self._gamma),
            flicker=np.concatenate(self._flicker),
            features=np.vstack(self._features),
            predicted_class=np.concatenate(self._classes),
            confidence=np.concatenate(self._confidence),
            margin=np.concatenate(self._margin),
            held={k: np.concatenate(v) for k, v in self._held.items()} if self._held else None,
            feature_names=self.feature_names,
            max_sample=self.max_sample,
            max_feature_sample=self.max_feature_sample,
            seed=self.seed,
            gamma_edges=self.gamma_edges,
        )
