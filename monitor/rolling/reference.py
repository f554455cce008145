"""Stage 5a: the reference distribution the drift detectors compare against.

A :class:`Reference` comes from reference data (γ, flicker and features computed offline) or from the first N
scored events (:class:`~monitor.rolling.warmup.WarmupReferenceBuilder`). It is bounded whatever N was: γ and flicker
keep a sorted, quantile-thinned sample (≤ ``max_sample`` order statistics, so KS and tail rates read the same
distribution), features keep a seeded random subset of rows (≤ ``max_feature_sample``); means, variances and counts
are exact over all N. It round-trips through a JSON-able dict so the app can persist it in its state directory and
restore it on restart.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.errors import ConfigError, DataError
from monitor.gammamap import GAMMA_EDGES, GammaMap, gamma_map, model_gamma_edges

#: the reference range of an input (the data-quality range test, monitor/drift/quality.py): about these quantiles,
#: taken as order statistics (:func:`range_rank`)
RANGE_QUANTILES: Final = (0.001, 0.999)


def range_rank(n_rows: int) -> int:
    """k: an input's reference range of ``n_rows`` rows runs from its k-th smallest to its k-th largest value
    (k/(n_rows+1) ≈ ``RANGE_QUANTILES[0]``, at least 1: the minimum and maximum below 1,999 rows).

    >>> range_rank(206), range_rank(2000), range_rank(5000)
    (1, 2, 5)
    """
    return max(1, int(RANGE_QUANTILES[0] * (n_rows + 1)))


def order_range(x: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per column of rows ``x`` (N, n), its k-th smallest and k-th largest value, k = :func:`range_rank` (N).

    >>> low, high = order_range(np.arange(5000.0).reshape(-1, 1))
    >>> float(low[0]), float(high[0])
    (4.0, 4995.0)
    """
    v = np.sort(np.asarray(x, dtype=np.float64), axis=0)
    k = range_rank(v.shape[0])
    return v[k - 1], v[v.shape[0] - k]


FORMAT: Final = "harmonic-monitor/reference/v1"


@dataclass(frozen=True, slots=True)
class EncodedJSON:
    """JSON text encoded once, written into a larger document as it is (:meth:`monitor.runtime.state.StateStore.save`)."""

    text: str


def thin_sorted(values: NDArray[np.float64], max_size: int) -> NDArray[np.float64]:
    """Sorted finite values, thinned to at most ``max_size`` evenly spaced order statistics.

    Order statistic i of m sits at rank (i + ½)·N/m, so every quantile of the thinned sample is
    within 1/m of the full sample's (ties, such as many exact zeros, keep their share).

    >>> thin_sorted(np.arange(10.0)[::-1], 5).tolist()
    [1.0, 3.0, 5.0, 7.0, 9.0]
    """
    v = np.sort(values[np.isfinite(values)])
    if v.size <= max_size:
        return v
    ranks = ((np.arange(max_size) + 0.5) * v.size / max_size).astype(np.intp)
    return v[ranks]


def check_sizes(max_sample: int, max_feature_sample: int) -> None:
    if max_sample < 10 or max_feature_sample < 10:
        raise ConfigError(
            f"max_sample and max_feature_sample must be >= 10; got {max_sample!r}, {max_feature_sample!r}"
        )


#: how a segment's baseline was made from reference rows (:mod:`monitor.rolling.segment_baselines`)
BasisKind = Literal["own", "shrunk", "borrowed"]


@dataclass(frozen=True, slots=True)
class Basis:
    """What a segment's baseline is made of: ``own`` (its own ``rows``), ``shrunk`` (its own rows with model-wide
    rows mixed in, its own a share ``weight`` of the mix) or ``borrowed`` (the model-wide rows; it had ``rows``).

    >>> Basis("shrunk", 80, 0.4).describe(), Basis("borrowed", 1, 0.0).describe()
    ('shrunk (80 rows, weight 0.40)', 'borrowed (1 row)')
    """

    kind: BasisKind
    rows: int
    weight: float

    def describe(self) -> str:
        rows = f"{self.rows} row" if self.rows == 1 else f"{self.rows} rows"
        return f"shrunk ({rows}, weight {self.weight:.2f})" if self.kind == "shrunk" else f"{self.kind} ({rows})"

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind, "rows": self.rows, "weight": self.weight}

    @classmethod
    def from_json(cls, value: object) -> Basis | None:
        """The inverse of :meth:`to_json` (None for None: a baseline written before the basis was kept)."""
        if value is None:
            return None
        if not isinstance(value, Mapping) or value.get("kind") not in ("own", "shrunk", "borrowed"):
            raise TypeError(f"basis must be an object with kind own, shrunk or borrowed; got {value!r}")
        return cls(cast(BasisKind, value["kind"]), _int(value["rows"]), _float(value["weight"]))


@dataclass(frozen=True, slots=True, eq=False)
class Reference:
    """What "normal" looks like for one model (and segment).

    Attributes
    ----------
    n_events : events the reference was built from.
    gamma_sample : (≤ max_sample,) sorted γ sample.
    gamma_mean : exact mean γ over all events.
    flicker_sample : (≤ max_sample,) sorted flicker sample.
    flicker_mean, flicker_var, flicker_count : exact mean, population variance and count of flicker.
    feature_mean, feature_std : (n,) exact per-feature mean and population std.
    feature_sample : (≤ max_feature_sample, n) random rows, for per-feature KS.
    class_mix : predicted class → fraction (empty when no classes were given).
    feature_names : optional names of the n features (alerts name the features that moved).
    confidence_sample : (≤ max_sample,) sorted sample of the model's confidence (max-probability) per event; empty
        for a regressor, or for a reference written before confidence was kept (no confidence detector then).
    margin_sample : (≤ max_sample,) sorted sample of the model's margin (top-1 minus top-2 class probability) per
        event; empty for a regressor, or for a reference written before margin was kept (no margin detector then).
    gamma_map : the Gamma Map (confidence × γ) over every event with both finite, the yardstick for the live map;
        None for a regressor, or for a reference written before it was kept. Its γ edges are the model's
        (:func:`monitor.gammamap.model_gamma_edges`, fixed when the reference is built): every live map of the model
        is binned on them (:attr:`gamma_edges`).

    feature_low, feature_high : (n,) each input's k-th smallest and k-th largest value over all N rows
        (:func:`order_range`, about the 0.1th and 99.9th percentiles; the data-quality range test,
        :mod:`monitor.drift.quality`); empty for a reference written before they were kept (no range test).
    feature_outside : (n,) each input's share of the N rows outside [low, high] (in sample: 0 below 1,999 rows; the
        range test's null is a new draw's, from k and N, not this).
    held_tables : per held input element (string, int, bool inputs; ``fixed_features``), its count table over the
        reference rows: the most frequent categories and ``other`` (:mod:`monitor.drift.categories`); empty for a
        model that holds nothing or a reference written before they were kept (no category test then).
    basis : a segment's baseline from reference rows: what it is made of (:class:`Basis`); None for the
        model-wide reference, a learned baseline or one written before the basis was kept.
    """

    n_events: int
    gamma_sample: NDArray[np.float64]
    gamma_mean: float
    flicker_sample: NDArray[np.float64]
    flicker_mean: float
    flicker_var: float
    flicker_count: int
    feature_mean: NDArray[np.float64]
    feature_std: NDArray[np.float64]
    feature_sample: NDArray[np.float64]
    class_mix: Mapping[int, float]
    feature_names: tuple[str, ...] | None = None
    confidence_sample: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    margin_sample: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    gamma_map: GammaMap | None = None

    feature_low: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    feature_high: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    feature_outside: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    held_tables: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    basis: Basis | None = None
    #: :meth:`to_dict` as JSON text, once encoded (:meth:`encoded`); a list so the frozen instance can hold it
    _json: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def n_features(self) -> int:
        """Feature count n."""
        return int(self.feature_mean.size)

    @property
    def gamma_edges(self) -> tuple[float, ...]:
        """The γ edges of the model's Gamma Maps: its map's; the fixed grid where it has none (a regressor, or a
        reference written before the map was kept)."""
        return GAMMA_EDGES if self.gamma_map is None else self.gamma_map.gamma_edges

    @classmethod
    def from_arrays(
        cls,
        *,
        gamma: ArrayLike,
        flicker: ArrayLike,
        features: ArrayLike,
        predicted_class: ArrayLike | None = None,
        feature_names: Sequence[str] | None = None,
        max_sample: int = 5000,
        max_feature_sample: int = 2000,
        seed: int = 0,  # not a setting: the reference sample's seed; run samples with 0 whatever scoring.seed is
        confidence: ArrayLike | None = None,
        margin: ArrayLike | None = None,
        held: Mapping[str, Sequence[str] | NDArray[np.str_]] | None = None,
        gamma_edges: Sequence[float] | None = None,
    ) -> Reference:
        """Build from offline arrays.

        Parameters
        ----------
        gamma, flicker : (N,) per-event values; NaN entries are ignored.
        confidence : (N,) the model's max-probability per event (NaN ignored: regressors, rows without a class),
            or None (no confidence sample).
        margin : (N,) the model's top-1 minus top-2 class probability per event (NaN ignored), or None (no margin
            sample).
        features : (N, n) raw feature rows.
        predicted_class : (N,) ints (-1 = none), or None.
        feature_names : n names, or None.
        max_sample : bound on the γ, flicker, confidence and margin samples.
        max_feature_sample : bound on the feature rows kept.
        seed : seeds the choice of feature rows, so the same data and seed give the same reference.
        held : ``{held element: (N,) values}`` (``monitor.drift.categories.held_columns``), or None: its count
            tables.
        gamma_edges : the Gamma Map's γ edges (a segment's baseline takes its model's); None: the model's own, from
            these events (:func:`monitor.gammamap.model_gamma_edges`).

        Raises
        ------
        DataError
            If the arrays are empty, disagree in length, have no finite γ or flicker, or have
            non-finite features.
        ConfigError
            If a bound is below 10.

        Examples
        --------
        >>> ref = Reference.from_arrays(gamma=[0.0, 0.1, 0.3], flicker=[0.0, 0.0, 0.5],
        ...                             features=[[1.0], [2.0], [3.0]], predicted_class=[0, 1, 1])
        >>> ref.gamma_sample.tolist(), round(ref.flicker_mean, 3), ref.class_mix
        ([0.0, 0.1, 0.3], 0.167, {0: 0.3333333333333333, 1: 0.6666666666666666})
        >>> Reference.from_dict(ref.to_dict()).feature_mean.tolist()
        [2.0]
        """
        check_sizes(max_sample, max_feature_sample)
        g, f, x = _checked_arrays(gamma, flicker, features)
        n_events = x.shape[0]
        g_ok, f_ok = g[np.isfinite(g)], f[np.isfinite(f)]
        if g_ok.size == 0 or f_ok.size == 0:
            raise DataError("reference needs at least one finite γ and one finite flicker value")
        rows = _sample_rows(n_events, max_feature_sample, seed)
        mix = _class_mix(predicted_class, n_events)
        names = None if feature_names is None else tuple(str(n) for n in feature_names)
        if names is not None and len(names) != x.shape[1]:
            raise DataError(f"{len(names)} feature names given for {x.shape[1]} features")
        conf = _per_event(confidence, n_events, "confidence")
        marg = _per_event(margin, n_events, "margin")
        low, high = order_range(x)
        outside = np.mean((x < low) | (x > high), axis=0)
        return cls(
            n_events=n_events,
            gamma_sample=thin_sorted(g_ok, max_sample),
            gamma_mean=float(g_ok.mean()),
            flicker_sample=thin_sorted(f_ok, max_sample),
            flicker_mean=float(f_ok.mean()),
            flicker_var=float(f_ok.var()),
            flicker_count=int(f_ok.size),
            feature_mean=x.mean(axis=0),
            feature_std=x.std(axis=0),
            feature_sample=x if rows is None else x[rows],
            class_mix=mix,
            feature_names=names,
            confidence_sample=thin_sorted(conf, max_sample),
            margin_sample=thin_sorted(marg, max_sample),
            gamma_map=_gamma_map(conf, g, gamma_edges) if confidence is not None else None,
            feature_low=low,
            feature_high=high,
            feature_outside=outside,
            held_tables={} if held is None else _count_tables(held, n_events),
        )

    def encoded(self) -> EncodedJSON:
        """:meth:`to_dict` as JSON text, encoded at the first call only. A reference does not change once built (a
        new one replaces it), and it is most of the state file written at every checkpoint: its ~2,000 feature rows
        took ~80 ms to encode each time, a pause of the loop every 5 s."""
        if not self._json:
            self._json.append(json.dumps(self.to_dict(), default=float))
        return EncodedJSON(self._json[0])

    def to_dict(self) -> dict[str, object]:
        """A JSON-able dict (lists, floats, ints, strings) that :meth:`from_dict` restores exactly."""
        return {
            "format": FORMAT,
            "n_events": self.n_events,
            "gamma_sample": self.gamma_sample.tolist(),
            "gamma_mean": self.gamma_mean,
            "flicker_sample": self.flicker_sample.tolist(),
            "flicker_mean": self.flicker_mean,
            "flicker_var": self.flicker_var,
            "flicker_count": self.flicker_count,
            "feature_mean": self.feature_mean.tolist(),
            "feature_std": self.feature_std.tolist(),
            "feature_sample": self.feature_sample.tolist(),
            # JSON object keys are strings; from_dict turns them back into ints
            "class_mix": {str(c): p for c, p in self.class_mix.items()},
            "feature_names": None if self.feature_names is None else list(self.feature_names),
            "confidence_sample": self.confidence_sample.tolist(),
            "margin_sample": self.margin_sample.tolist(),
            "gamma_map": None if self.gamma_map is None else self.gamma_map.to_json(),
            "feature_low": self.feature_low.tolist(),
            "feature_high": self.feature_high.tolist(),
            "feature_outside": self.feature_outside.tolist(),
            "held_tables": {k: dict(v) for k, v in self.held_tables.items()},
            "basis": None if self.basis is None else self.basis.to_json(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> Reference:
        """Restore a reference written by :meth:`to_dict`.

        Raises
        ------
        DataError
            If the dict is not a reference of this format or a field is missing or malformed.
        """
        if data.get("format") != FORMAT:
            raise DataError(f"not a reference dict: format is {data.get('format')!r}; expected {FORMAT!r}")
        try:
            n = len(_floats(data["feature_mean"]))
            sample = np.asarray(data["feature_sample"], dtype=np.float64).reshape(-1, n)
            names = data.get("feature_names")
            mix = data["class_mix"]
            if not isinstance(mix, Mapping):
                raise TypeError("class_mix must be an object")
            ref = cls(
                n_events=_int(data["n_events"]),
                gamma_sample=np.sort(_floats(data["gamma_sample"])),
                gamma_mean=_float(data["gamma_mean"]),
                flicker_sample=np.sort(_floats(data["flicker_sample"])),
                flicker_mean=_float(data["flicker_mean"]),
                flicker_var=_float(data["flicker_var"]),
                flicker_count=_int(data["flicker_count"]),
                feature_mean=_floats(data["feature_mean"]),
                feature_std=_floats(data["feature_std"]),
                feature_sample=sample,
                class_mix={int(c): _float(p) for c, p in mix.items()},
                feature_names=None if names is None else tuple(str(s) for s in _sequence(names)),
                # absent in references written before confidence was kept: no confidence detector for them
                confidence_sample=np.sort(_floats(data.get("confidence_sample", []))),
                # absent in references written before margin was kept: no margin detector for them
                margin_sample=np.sort(_floats(data.get("margin_sample", []))),
                # absent in references written before the Gamma Map was kept: no reference map beside the live one
                gamma_map=_read_gamma_map(data.get("gamma_map")),
                # absent in references written before the range test: no range test for them
                feature_low=_floats(data.get("feature_low", [])),
                feature_high=_floats(data.get("feature_high", [])),
                feature_outside=_floats(data.get("feature_outside", [])),
                held_tables=_tables(data.get("held_tables", {})),
                basis=Basis.from_json(data.get("basis")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(
                f"reference dict is malformed ({type(exc).__name__}: {exc}); rebuild the reference"
            ) from exc
        if {ref.feature_low.size, ref.feature_high.size, ref.feature_outside.size} - {0, n}:
            raise DataError("reference dict is malformed: its input ranges are not one per feature")
        if ref.feature_std.size != n or ref.gamma_sample.size == 0 or ref.flicker_sample.size == 0:
            raise DataError("reference dict is malformed: empty samples or feature stats of different lengths")
        if ref.feature_names is not None and len(ref.feature_names) != n:
            raise DataError(f"reference dict has {len(ref.feature_names)} feature names for {n} features")
        return ref


def _gamma_map(
    confidence: NDArray[np.float64], gamma: NDArray[np.float64], edges: Sequence[float] | None
) -> GammaMap | None:
    """The reference's Gamma Map over the events with a finite confidence and γ, on ``edges`` (None: the model's
    own from these events' γ); None when there are none."""
    ok = np.isfinite(confidence) & np.isfinite(gamma)
    if not ok.any():
        return None
    g = gamma[ok]
    return gamma_map(confidence[ok], g, gamma_edges=model_gamma_edges(g) if edges is None else edges)


def _read_gamma_map(value: object) -> GammaMap | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError("gamma_map must be an object")
    return GammaMap.from_json(dict(value))


def _count_tables(held: Mapping[str, Sequence[str] | NDArray[np.str_]], n_events: int) -> dict[str, dict[str, int]]:
    from monitor.drift.categories import count_tables

    bad = sorted(k for k, v in held.items() if len(v) != n_events)
    if bad:
        raise DataError(f"reference held values of {bad} are not one per row ({n_events} rows)")
    return count_tables(held)


def _tables(value: object) -> dict[str, dict[str, int]]:
    if not isinstance(value, Mapping):
        raise TypeError("held_tables must be an object")
    out: dict[str, dict[str, int]] = {}
    for name, table in value.items():
        if not isinstance(table, Mapping):
            raise TypeError(f"held_tables['{name}'] must be an object")
        out[str(name)] = {str(c): _int(n) for c, n in table.items()}
    return out


def _sequence(value: object) -> Sequence[object]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _floats(value: object) -> NDArray[np.float64]:
    arr = np.asarray(_sequence(value), dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(arr)):
        raise ValueError("non-finite number in a list")
    return arr


def _float(value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise TypeError(f"expected a finite number, got {value!r}")
    return float(value)


def _int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"expected a count (int >= 0), got {value!r}")
    return value


def _checked_arrays(
    gamma: ArrayLike, flicker: ArrayLike, features: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """γ and flicker as (N,) and the features as finite (N, n) rows, N > 0 and the same for all three."""
    g = np.asarray(gamma, dtype=np.float64).reshape(-1)
    f = np.asarray(flicker, dtype=np.float64).reshape(-1)
    x = np.asarray(features, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise DataError(f"reference features must be a non-empty 2-D array (events × features); got {x.shape}")
    n_events = x.shape[0]
    if g.size != n_events or f.size != n_events:
        raise DataError(
            f"reference arrays disagree: {n_events} feature rows, {g.size} γ values, {f.size} flicker values"
        )
    if not np.all(np.isfinite(x)):
        raise DataError("reference features have NaN or infinite values; clean them first")
    return g, f, x


def _sample_rows(n_events: int, max_rows: int, seed: int) -> NDArray[np.intp] | None:
    """``max_rows`` of ``n_events`` rows drawn with ``seed``, in order; None when all fit."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_events, size=max_rows, replace=False)) if n_events > max_rows else None


def _class_mix(predicted_class: ArrayLike | None, n_events: int) -> dict[int, float]:
    """Each predicted class's share of the events that have one (-1: none); {} without predicted classes."""
    if predicted_class is None:
        return {}
    pc = np.asarray(predicted_class, dtype=np.int64).reshape(-1)
    if pc.size != n_events:
        raise DataError(f"reference predicted_class has {pc.size} values; expected {n_events}")
    classes, counts = np.unique(pc[pc >= 0], return_counts=True)
    total = int(counts.sum())
    return {int(c): int(k) / total for c, k in zip(classes, counts, strict=True)}


def _per_event(values: ArrayLike | None, n_events: int, what: str) -> NDArray[np.float64]:
    """(N,) ``values`` (NaN where an event has none), or an empty array when there are none at all."""
    out = np.zeros(0) if values is None else np.asarray(values, dtype=np.float64).reshape(-1)
    if values is not None and out.size != n_events:
        raise DataError(f"reference {what} has {out.size} values; expected {n_events}")
    return out
