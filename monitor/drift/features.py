"""Stage 5b: per-feature input drift, reported beside the γ/flicker detectors.

Every ``every`` events each feature of the last ``window`` rows is compared with the same feature of the
reference sample by a two-sided KS test. With n features tested at once the p-values are adjusted by
Benjamini–Hochberg (:func:`~monitor.drift.calibrate.benjamini_hochberg`), so ``alpha`` is the false
discovery rate across features: among the features reported as moved, at most that share is expected to
be noise, and when no feature moved it is the chance that a window test reports any (the per-window
false-alarm rate). A feature *moved* when its adjusted p < alpha and its distance D >= ``min_distance``; while the
alarm is on, D >= ``clear_ratio``·``min_distance`` keeps a feature moved (hysteresis: a shift whose distance sits
near the floor does not flap the verdict between input-shift and stable). Moved features are ranked by D, so an
alert can name the top ones. Input drift alone is an ``input-shift`` (harm unknown without labels or the accuracy
estimate) unless output-side evidence (γ, flicker, confidence, the accuracy estimate) says the model is affected.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.drift.base import FeatureShift as FeatureShift
from monitor.drift.base import PerFeatureTest, WindowPlan, as_rows, ks_two_sample, require
from monitor.errors import DataError


class FeatureDrift(PerFeatureTest):
    """Per-feature two-sided KS against a reference sample, false discovery rate controlled across features.

    Parameters
    ----------
    reference : (m, n) reference feature rows, m >= 10, n >= 1.
    feature_names : n names (default ``"f0"``, ``"f1"``, …).
    plan : the window and the test cadence, in rows (default :class:`WindowPlan`'s: the last 1000, every 100).
    alpha : false discovery rate across features, Benjamini–Hochberg (0 < alpha < 1).
    min_distance : minimum KS distance for a feature to count as moved (0 <= min_distance < 1).
    clear_ratio : while the alarm is on, a feature stays moved down to ``clear_ratio``·``min_distance`` (still
        significant at ``alpha``) (0 <= clear_ratio <= 1).
    name : label reported in :class:`DriftState`.

    ``statistics`` and the ``statistic`` of each feature in ``moved``: KS distance per feature.

    Raises
    ------
    ConfigError
        On a parameter out of range.
    DataError
        On a malformed reference or names, or rows of the wrong width in :meth:`update`.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> fd = FeatureDrift(rng.normal(size=(2000, 3)), feature_names=["age", "income", "debt"], plan=WindowPlan(window=500))
    >>> fd.update(rng.normal(size=(1000, 3))).drift_detected
    False
    >>> [m.name for m in fd.update(rng.normal(size=(500, 3)) + [0.0, 1.0, 0.5]).moved]
    ['income', 'debt']
    """

    def __init__(
        self,
        reference: ArrayLike,
        *,
        feature_names: Sequence[str] | None = None,
        plan: WindowPlan | None = None,
        alpha: float = 0.01,
        min_distance: float = 0.1,
        clear_ratio: float = 0.5,
        name: str = "features_ks",
    ) -> None:
        require(0.0 <= min_distance < 1.0, f"min_distance must be in [0, 1); got {min_distance!r}")
        require(0.0 <= clear_ratio <= 1.0, f"clear_ratio must be in [0, 1]; got {clear_ratio!r}")
        ref = np.asarray(reference, dtype=np.float64)
        if ref.ndim != 2 or ref.shape[0] < 10 or ref.shape[1] < 1:
            raise DataError(f"feature reference must be a 2-D array with >= 10 rows and >= 1 column; got {ref.shape}")
        if not np.all(np.isfinite(ref)):
            raise DataError("feature reference has NaN or infinite values; clean them first")
        n = ref.shape[1]
        names = tuple(f"f{j}" for j in range(n)) if feature_names is None else tuple(map(str, feature_names))
        if len(names) != n:
            raise DataError(f"{len(names)} feature names given for {n} reference features")
        self.reference = np.sort(ref, axis=0)
        self.feature_names = names
        self._init_window(plan, alpha, width=n)
        self.min_distance, self.clear_ratio, self.name = min_distance, clear_ratio, name
        self.reset()

    def _threshold(self) -> float:
        return self.min_distance

    def update(self, values: ArrayLike) -> Self:
        """Feed feature rows, shape (b, n) (or (n,) for one event); rows with NaN are skipped."""
        n = self.n_features
        self._feed(
            as_rows(
                values,
                n,
                f"feature drift expects rows of {n} features; got shape {{shape}}. Was the feature list changed?",
            )
        )
        return self

    def _test(self, event: int) -> None:
        w = self._buffer.values()
        p = np.empty(self.n_features)
        for j in range(self.n_features):
            self._stat[j], p[j] = ks_two_sample(w[:, j], self.reference[:, j], "two-sided")
        self._flag(p, self.min_distance * (self.clear_ratio if self._moved else 1.0), event)

    @property
    def p_values(self) -> NDArray[np.float64]:
        """(n,) Benjamini–Hochberg adjusted p-value per feature at the last test (a copy; NaN before the first)."""
        return self._p.copy()

    @property
    def statistic(self) -> float:
        """Largest per-feature KS distance at the last test."""
        return float(self._stat.max())

    @property
    def p_value(self) -> float:
        """Smallest adjusted p-value at the last test (NaN before the first)."""
        return float(np.min(self._p)) if np.all(np.isfinite(self._p)) else float("nan")
