"""Stage 5b: a multivariate input test where per-feature tests are blind — PCA reconstruction error.

Each per-input test looks at one input at a time: a change in how inputs go *together* (a correlation that flips
sign, a mix of two populations with the same marginals) moves no single input's distribution. As NannyML's
data-reconstruction drift does, :class:`ReconstructionDrift` learns the baseline's principal components (inputs
standardized by the baseline, the fewest components that explain :data:`VARIANCE_KEPT` of the variance) and watches
each event's reconstruction error: the squared distance between the event and its projection on those components.
Events that break the baseline's correlations land off its principal plane and reconstruct badly.

Every ``every`` events the last ``window`` events' errors are compared with the baseline's own errors by a one-sided
two-sample KS test (errors larger than the baseline's): drift when p < ``alpha`` and the KS distance reaches
``min_distance``. Input evidence only (``input-shift``); cost: one (n × k) projection per event.
"""

from __future__ import annotations

from typing import Final, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.drift.base import SingleWindowTest, WindowPlan, as_rows, ks_two_sample, require
from monitor.errors import DataError

#: the components kept explain at least this share of the baseline's variance
VARIANCE_KEPT: Final = 0.65
#: inputs beyond this many are not tested (the SVD of a baseline this wide costs too much at start-up)
MAX_INPUTS: Final = 512


class ReconstructionDrift(SingleWindowTest):
    """PCA reconstruction error of the window against the baseline's.

    Parameters
    ----------
    reference : (m, n) baseline rows, m >= 10, 2 <= n <= :data:`MAX_INPUTS`: the components are fitted on every
        other row, the null errors are the remaining rows' (out of sample, as a new draw's are).
    plan : the window and the test cadence (default :class:`WindowPlan`'s: the last 1000 events, every 100).
    alpha, min_distance : the KS test's level and distance floor.
    name : label reported in :class:`DriftState`.

    ``statistic`` is the KS distance of the window's errors over the baseline's at the last test, ``p_value`` its
    p-value (NaN before the first).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(2000, 1))
    >>> ref = np.hstack([z, z + 0.3 * rng.normal(size=(2000, 1))])  # two inputs that go together
    >>> rd = ReconstructionDrift(ref, plan=WindowPlan(window=500))
    >>> rd.components
    1
    >>> rd.update(np.hstack([z[:1000], z[:1000] + 0.3 * rng.normal(size=(1000, 1))])).drift_detected
    False
    >>> flipped = np.hstack([z[:500], -z[:500] + 0.3 * rng.normal(size=(500, 1))])  # same marginals
    >>> rd.update(flipped).drift_detected
    True
    """

    def __init__(
        self,
        reference: ArrayLike,
        *,
        plan: WindowPlan | None = None,
        alpha: float = 1e-4,
        min_distance: float = 0.1,
        name: str = "inputs_pca",
    ) -> None:
        require(0.0 <= min_distance < 1.0, f"min_distance must be in [0, 1); got {min_distance!r}")
        ref = np.asarray(reference, dtype=np.float64)
        if ref.ndim != 2 or ref.shape[0] < 10 or not 2 <= ref.shape[1] <= MAX_INPUTS:
            raise DataError(
                f"reconstruction drift needs >= 10 baseline rows of 2..{MAX_INPUTS} inputs; got shape {ref.shape}"
            )
        if not np.all(np.isfinite(ref)):
            raise DataError("reconstruction drift baseline has NaN or infinite values")
        # fitted on half the baseline, its reference errors from the other half: out-of-sample errors, as the
        # window's are (in-sample ones would be smaller and make every window look worse)
        fit, held_out = ref[0::2], ref[1::2]
        self.mean = fit.mean(axis=0)
        std = fit.std(axis=0)
        self.scale = np.where(std > 0, std, 1.0)
        z = (fit - self.mean) / self.scale
        _, sv, vt = np.linalg.svd(z, full_matrices=False)
        var = sv**2
        share = np.cumsum(var) / var.sum() if var.sum() > 0 else np.ones_like(var)
        k = int(min(np.searchsorted(share, VARIANCE_KEPT) + 1, ref.shape[1] - 1))
        self.components = k
        self._basis = vt[:k].T  # (n, k)
        self.reference_errors = np.sort(self.errors(held_out))
        self.reference_mean_error = float(self.reference_errors.mean())
        self._init_window(plan, alpha)
        self.min_distance, self.name = min_distance, name
        self.reset()

    def errors(self, rows: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each row's squared reconstruction error (in baseline-standardized units)."""
        z = (np.asarray(rows, dtype=np.float64) - self.mean) / self.scale
        kept = z @ self._basis  # the basis is orthonormal: |z − z·B·Bᵀ|² = |z|² − |z·B|²
        return np.asarray(np.maximum(np.square(z).sum(axis=1) - np.square(kept).sum(axis=1), 0.0), dtype=np.float64)

    def update(self, values: ArrayLike) -> Self:
        """Feed rows (b, n); rows with NaN are skipped."""
        x = as_rows(
            values, self.mean.size, f"reconstruction drift expects rows of {self.mean.size} inputs; got shape {{shape}}"
        )
        self._feed(self.errors(x))
        return self

    def _threshold(self) -> float:
        return self.min_distance

    def _evaluate(self, window: NDArray[np.float64]) -> tuple[float, float, bool]:
        self._mean = float(window.mean())
        # one-sided: the window's errors larger than the baseline's
        d, p = ks_two_sample(window, self.reference_errors, "greater")
        return d, p, p < self.alpha and d >= self.min_distance

    @property
    def window_mean_error(self) -> float:
        """Mean reconstruction error of the window at the last test (NaN before the first)."""
        return self._mean
