"""Stage 3: per-feature standardization, so radii and noise scales are in standardized units.

x̃ = (x − μ) / s with μ, s from reference data; a constant feature gets s = 1. Features may share one μ and s
(``groups``): every pixel of an image (``scale: global``), or the pixels of one channel (``scale: per_channel``) —
per-pixel scales would make a border pixel that is always 0 as wide as the digit's strokes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError

Space = Literal["standardized", "raw"]


@dataclass(frozen=True, slots=True)
class Standardizer:
    """Per-feature location and scale.

    Attributes
    ----------
    mean : (n,) float64
    scale : (n,) float64, strictly positive

    Examples
    --------
    >>> s = Standardizer.fit(np.array([[0.0, 5.0], [2.0, 5.0]]))
    >>> s.mean.tolist(), s.scale.tolist()
    ([1.0, 5.0], [1.0, 1.0])
    >>> s.to_standardized(np.array([[2.0, 6.0]])).tolist()
    [[1.0, 1.0]]
    """

    mean: NDArray[np.float64]
    scale: NDArray[np.float64]

    @classmethod
    def fit(
        cls,
        reference: NDArray[np.floating],
        *,
        min_scale: float = 1e-12,
        groups: NDArray[np.intp] | None = None,
    ) -> Standardizer:
        """Fit from a (N, n) reference array; constant (or near-constant) features get scale 1. ``groups``: (n,)
        group ids; the features of a group share the mean and standard deviation of all their values."""
        ref = np.asarray(reference, dtype=np.float64)
        if ref.ndim != 2 or ref.shape[0] == 0:
            raise DataError(f"reference data must be a non-empty 2-D array (rows × features); got shape {ref.shape}")
        if not np.all(np.isfinite(ref)):
            bad = int(np.count_nonzero(~np.all(np.isfinite(ref), axis=1)))
            raise DataError(f"reference data has {bad} row(s) with NaN or infinite values; clean them first")
        if groups is not None:
            if groups.shape != (ref.shape[1],):
                raise DataError(f"scale groups give {groups.shape[0]} features; the reference has {ref.shape[1]}")
            mean = np.empty(ref.shape[1])
            scale = np.empty(ref.shape[1])
            for g in np.unique(groups):
                cols = groups == g
                mean[cols] = ref[:, cols].mean()
                scale[cols] = ref[:, cols].std()
        else:
            mean = ref.mean(axis=0)
            scale = ref.std(axis=0)
        scale = np.where(scale > min_scale, scale, 1.0)
        return cls(mean=mean, scale=scale)

    @classmethod
    def identity(cls, n_features: int) -> Standardizer:
        """μ = 0, s = 1: standardized units equal raw units (``space: raw``)."""
        return cls(mean=np.zeros(n_features), scale=np.ones(n_features))

    @property
    def n_features(self) -> int:
        return int(self.mean.shape[0])

    def to_standardized(self, rows: NDArray[np.floating]) -> NDArray[np.float64]:
        return (np.asarray(rows, dtype=np.float64) - self.mean) / self.scale

    def to_raw(self, rows: NDArray[np.floating]) -> NDArray[np.float64]:
        return np.asarray(rows, dtype=np.float64) * self.scale + self.mean

    def to_dict(self) -> dict[str, list[float]]:
        return {"mean": self.mean.tolist(), "scale": self.scale.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, list[float]]) -> Standardizer:
        mean = np.asarray(data["mean"], dtype=np.float64)
        scale = np.asarray(data["scale"], dtype=np.float64)
        # NaN fails `scale > 0` but also `scale <= 0`, so check finiteness explicitly: a NaN scale would NaN every score
        if (
            mean.shape != scale.shape
            or mean.ndim != 1
            or not np.all(np.isfinite(mean))
            or not np.all(np.isfinite(scale))
            or np.any(scale <= 0)
        ):
            raise DataError(
                f"stored standardizer is inconsistent: mean {mean.shape}, scale {scale.shape}; expected equal 1-D "
                "shapes, finite values and every scale > 0. Rebuild the reference"
            )
        return cls(mean=mean, scale=scale)
