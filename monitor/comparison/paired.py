"""Paired statistics of two models on the same rows: the paired bootstrap, the Pareto statement, and which inputs
the rows where they disagree share. Pure numpy: arrays in, typed results out.

The rows are the same for both models, so each bootstrap replicate resamples row indices once and takes the mean
of every per-row difference on that resample: the interval of a difference then carries the correlation between
the two models' scores (their shared hard rows), which two separate intervals would not. The live comparison
(:mod:`monitor.runtime.candidate`), which compares every window every few thousand events, takes the normal paired
interval instead (:func:`normal_interval`: the spread of the per-row differences, one pass over the rows).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

#: replicates drawn per block (bounds the (block, N) count matrix to a few tens of MB)
_BLOCK = 32
#: above this many rows the bootstrap resamples random groups of rows instead of rows (see :func:`paired_bootstrap`)
EXACT_ROWS = 5000
#: the groups of rows it then resamples
GROUPS = 2000

Direction = Literal["lower", "higher", "none"]


@dataclass(frozen=True)
class Axis:
    """One measured axis: its name, which direction is better (``none``: reported, not ranked), and in words."""

    name: str
    better: Direction
    text: str


@dataclass(frozen=True)
class PairedDifference:
    """mean(a) − mean(b) over the rows valid for both, with its paired-bootstrap interval at ``level``, and which
    model the interval favours (``a``, ``b``, ``tie`` when it covers 0, or ``unranked`` on an axis without a
    direction, which is reported and never ranked)."""

    axis: str
    n: int
    mean_a: float
    mean_b: float
    difference: float
    lower: float
    upper: float
    favours: str


def paired_bootstrap(
    a: NDArray[np.float64],
    b: NDArray[np.float64],
    *,
    replicates: int = 1000,
    level: float = 0.9,
    seed: int = 0,  # not a setting: the bootstrap's own draw; compare passes scoring.seed
    groups: int = GROUPS,
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Percentile intervals of mean(a[:, k]) − mean(b[:, k]) for every column k, resampling rows together.

    Parameters
    ----------
    a, b : (N, K) per-row values of the two models on the same N rows (no NaN: drop rows first).
    replicates, level, seed : bootstrap replicates, the interval's coverage, the RNG seed.
    groups : above ``max(groups, EXACT_ROWS)`` rows the groups resampled, else ``groups`` itself when below
        :data:`GROUPS` (the live comparison's: above that many rows, that many groups; see below).

    Returns
    -------
    (difference, lower, upper), each (K,).

    Above :data:`EXACT_ROWS` rows, the rows are dealt at random into :data:`GROUPS` groups and the groups are
    resampled (each replicate's mean is the ratio of its groups' sums to their rows): the rows are exchangeable, so
    this is the row bootstrap of groups of about N/G rows, whose spread of the mean matches the row bootstrap's to a
    few per cent, at the cost of G instead of N draws per replicate (100,000 rows: 50× fewer). With fewer ``groups``
    than :data:`GROUPS` the rows are grouped from ``groups`` rows on (the live comparison, which bootstraps every
    window every few thousand events: 200 groups, the spread of the mean within about 5 %).

    >>> rng = np.random.default_rng(0)
    >>> hard = rng.normal(size=(500, 1))
    >>> d, lo, hi = paired_bootstrap(hard + 0.1, hard, replicates=200)
    >>> round(float(d[0]), 3), bool(lo[0] > 0.09 and hi[0] < 0.11)
    (0.1, True)
    """
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"a and b must be (N, K) of one shape; got {a.shape} and {b.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1); got {level!r}")
    if replicates < 1:
        raise ValueError(f"replicates must be >= 1; got {replicates!r}")
    n, k = a.shape
    d = a - b
    mean = d.mean(axis=0) if n else np.full(k, np.nan)
    if n < 2:
        return mean, np.full(k, np.nan), np.full(k, np.nan)
    rng = np.random.default_rng(seed)
    sums, sizes = d, np.ones(n)
    if groups < 1:
        raise ValueError(f"groups must be >= 1; got {groups!r}")
    if n > (EXACT_ROWS if groups >= GROUPS else groups):
        group = rng.permutation(n) % groups
        sums = np.stack([np.bincount(group, weights=d[:, j], minlength=groups) for j in range(k)], axis=1)
        sizes = np.bincount(group, minlength=groups).astype(np.float64)
    g = sizes.shape[0]
    means = np.empty((replicates, k))
    for start in range(0, replicates, _BLOCK):
        m = min(_BLOCK, replicates - start)
        # counts of each unit in each of m resamples (one bincount for the block): the resample means are one product
        idx = rng.integers(0, g, size=(m, g)) + (np.arange(m) * g)[:, None]
        counts = np.bincount(idx.ravel(), minlength=m * g).reshape(m, g).astype(np.float64)
        means[start : start + m] = (counts @ sums) / (counts @ sizes)[:, None]
    tail = (1 - level) / 2
    lower, upper = np.quantile(means, [tail, 1 - tail], axis=0)
    return mean, lower, upper


def normal_interval(
    d: NDArray[np.float64], level: float = 0.9
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Normal intervals of mean(d[:, k]) for every column k of (N, K) per-row differences: the mean ± z·s/√N, s
    the columns' sample standard deviation (ddof 1).

    The live comparison's interval (:mod:`monitor.runtime.candidate`): the paired bootstrap's standard error of a
    mean is s·√((N − 1)/N)/√N as its replicates grow, so this is that bootstrap's normal interval without the
    replicates' own noise, at the cost of one pass over the rows (a window of 20,000 events: ~0.1 ms instead of
    ~2 ms for 400 replicates). It is paired as the bootstrap is: s is the spread of each row's difference, so rows
    hard for both models cancel. On skewed, zero-inflated values from 50 rows on its 90 % interval covers the true
    difference as often as the percentile bootstrap's (``tests/unit/test_compare.py``).

    >>> d = np.array([[0.1], [0.3], [0.2], [0.2]])
    >>> tuple(round(float(v[0]), 3) for v in normal_interval(d))
    (0.2, 0.133, 0.267)
    """
    if d.ndim != 2:
        raise ValueError(f"d must be (N, K); got shape {d.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1); got {level!r}")
    n, k = d.shape
    mean = d.mean(axis=0) if n else np.full(k, np.nan)
    if n < 2:
        return mean, np.full(k, np.nan), np.full(k, np.nan)
    half = NormalDist().inv_cdf(0.5 + level / 2) * d.std(axis=0, ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half


def differences(
    a: Mapping[str, NDArray[np.float64]],
    b: Mapping[str, NDArray[np.float64]],
    axes: Sequence[Axis],
    *,
    replicates: int = 1000,
    level: float = 0.9,
    seed: int = 0,  # not a setting: the bootstrap's own draw; compare passes scoring.seed
    groups: int = GROUPS,
) -> tuple[PairedDifference, ...]:
    """One :class:`PairedDifference` per axis both ``a`` and ``b`` measure (per-row arrays of one length), over
    the rows finite in every shared axis for both; one bootstrap for all axes (``groups``:
    :func:`paired_bootstrap`)."""
    shared = [ax for ax in axes if ax.name in a and ax.name in b]
    if not shared:
        return ()
    ma = np.column_stack([np.asarray(a[ax.name], dtype=np.float64) for ax in shared])
    mb = np.column_stack([np.asarray(b[ax.name], dtype=np.float64) for ax in shared])
    return paired_differences(ma, mb, shared, replicates=replicates, level=level, seed=seed, groups=groups)


def paired_differences(
    ma: NDArray[np.float64],
    mb: NDArray[np.float64],
    axes: Sequence[Axis],
    *,
    interval: Literal["bootstrap", "normal"] = "bootstrap",
    replicates: int = 1000,
    level: float = 0.9,
    seed: int = 0,  # not a setting: the bootstrap's own draw
    groups: int = GROUPS,
) -> tuple[PairedDifference, ...]:
    """:func:`differences` of (N, K) matrices whose column k is ``axes[k]``, over the rows finite in every column
    for both; ``interval``: the paired bootstrap's (:func:`paired_bootstrap`) or the normal one
    (:func:`normal_interval`, the live comparison's)."""
    if ma.shape != mb.shape or ma.ndim != 2 or ma.shape[1] != len(axes):
        raise ValueError(f"ma and mb must be (N, {len(axes)}) of one shape; got {ma.shape} and {mb.shape}")
    d = ma - mb
    if not np.isfinite(d.sum()):  # a finite sum: every difference, so every value, is finite (no copy)
        ok = np.all(np.isfinite(ma) & np.isfinite(mb), axis=1)
        ma, mb, d = ma[ok], mb[ok], d[ok]
    n = int(ma.shape[0])
    if interval == "normal":
        diff, lower, upper = normal_interval(d, level)
    else:
        diff, lower, upper = paired_bootstrap(ma, mb, replicates=replicates, level=level, seed=seed, groups=groups)
    means_a = ma.mean(axis=0) if n else np.full(len(axes), np.nan)
    means_b = mb.mean(axis=0) if n else np.full(len(axes), np.nan)
    out = []
    for j, ax in enumerate(axes):
        favours = "unranked" if ax.better == "none" else "tie"
        if ax.better != "none" and np.isfinite(lower[j]) and (lower[j] > 0 or upper[j] < 0):
            a_higher = lower[j] > 0
            favours = "a" if a_higher == (ax.better == "higher") else "b"
        out.append(
            PairedDifference(
                ax.name,
                n,
                float(means_a[j]),
                float(means_b[j]),
                float(diff[j]),
                float(lower[j]),
                float(upper[j]),
                favours,
            )
        )
    return tuple(out)


@dataclass(frozen=True)
class Pareto:
    """Where two models stand on the ranked axes, without a composite score.

    ``relation``: ``a-dominates`` (a is better on at least one axis and worse on none), ``b-dominates``,
    ``incomparable`` (each is better somewhere), ``no-difference`` (no interval excludes 0)."""

    relation: str
    a_wins: tuple[str, ...]
    b_wins: tuple[str, ...]
    ties: tuple[str, ...]

    def statement(self, a: str, b: str) -> str:
        """The relation in words, naming the axes each model wins.

        >>> Pareto("incomparable", ("gamma",), ("accuracy",), ()).statement("gbdt", "mlp")
        "incomparable: 'gbdt' is better on gamma, 'mlp' on accuracy; no single ordering holds"
        """
        if self.relation == "a-dominates":
            return f"'{a}' dominates '{b}': better on {', '.join(self.a_wins)}, worse on no measured axis"
        if self.relation == "b-dominates":
            return f"'{b}' dominates '{a}': better on {', '.join(self.b_wins)}, worse on no measured axis"
        if self.relation == "incomparable":
            return (
                f"incomparable: '{a}' is better on {', '.join(self.a_wins)}, '{b}' on {', '.join(self.b_wins)}; "
                "no single ordering holds"
            )
        return f"no difference between '{a}' and '{b}' on any measured axis ({', '.join(self.ties) or 'none'})"


def pareto(diffs: Sequence[PairedDifference], axes: Sequence[Axis]) -> Pareto:
    """The Pareto relation of a pair from its paired differences (axes without a direction are left out).

    >>> ax = [Axis("gamma", "lower", ""), Axis("flicker", "lower", "")]
    >>> d = [PairedDifference("gamma", 9, 1, 2, -1, -1.5, -0.5, "a"), PairedDifference("flicker", 9, 0, 0, 0, -1, 1, "tie")]
    >>> pareto(d, ax).relation
    'a-dominates'
    """
    ranked = {ax.name for ax in axes if ax.better != "none"}
    mine = [d for d in diffs if d.axis in ranked]
    a_wins = tuple(d.axis for d in mine if d.favours == "a")
    b_wins = tuple(d.axis for d in mine if d.favours == "b")
    ties = tuple(d.axis for d in mine if d.favours == "tie")
    if a_wins and b_wins:
        relation = "incomparable"
    elif a_wins:
        relation = "a-dominates"
    elif b_wins:
        relation = "b-dominates"
    else:
        relation = "no-difference"
    return Pareto(relation, a_wins, b_wins, ties)


def verdict(relation: str) -> str:
    """The candidate's verdict when ``a`` is the model in place and ``b`` the candidate.

    >>> verdict("b-dominates"), verdict("a-dominates")
    ('candidate-better', 'candidate-worse')
    """
    return {
        "b-dominates": "candidate-better",
        "a-dominates": "candidate-worse",
        "incomparable": "incomparable",
    }.get(relation, "no-difference")


def share_interval(flags: NDArray[np.bool_], level: float = 0.9) -> tuple[float, float, float]:
    """The share of True in ``flags`` with its Wilson interval at ``level``.

    >>> tuple(round(v, 3) for v in share_interval(np.array([True] * 10 + [False] * 90)))
    (0.1, 0.061, 0.16)
    """
    n = int(flags.size)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    p = float(flags.mean())
    z = NormalDist().inv_cdf(0.5 + level / 2)  # the standard library's: no scipy import, microseconds a call
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(0.0, float(centre - half)), min(1.0, float(centre + half))


@dataclass(frozen=True)
class InputShift:
    """How one input's values differ between the rows where two models disagree and the rows where they agree:
    ``statistic`` is the two-sample KS distance for a number column and the total-variation distance for a text
    column (0 = the same distribution, 1 = disjoint); ``disagree``/``agree`` the mean (numbers) or the value most
    over-represented among the disagreeing rows with its share in each group (text)."""

    input: str
    statistic: float
    disagree: Any
    agree: Any


def input_shifts(
    columns: Mapping[str, NDArray[Any]], disagree: NDArray[np.bool_], top: int = 5
) -> tuple[InputShift, ...]:
    """The ``top`` inputs whose distribution among the disagreeing rows differs most from the agreeing rows'.

    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=400); noise = rng.normal(size=400)
    >>> [s.input for s in input_shifts({"x": x, "noise": noise}, np.abs(x) < 0.3, top=1)]
    ['x']
    """
    from scipy.stats import ks_2samp

    if disagree.all() or not disagree.any():
        return ()
    out: list[InputShift] = []
    for name, values in columns.items():
        if values.dtype.kind == "f":
            a, b = values[disagree], values[~disagree]
            a, b = a[np.isfinite(a)], b[np.isfinite(b)]
            if a.size == 0 or b.size == 0:
                continue
            stat = float(ks_2samp(a, b).statistic)
            out.append(InputShift(name, stat, float(a.mean()), float(b.mean())))
        else:
            cats, inv = np.unique(values.astype(str), return_inverse=True)
            pa = np.bincount(inv[disagree], minlength=cats.size) / disagree.sum()
            pb = np.bincount(inv[~disagree], minlength=cats.size) / (~disagree).sum()
            j = int(np.argmax(pa - pb))
            out.append(
                InputShift(
                    name,
                    float(0.5 * np.abs(pa - pb).sum()),
                    f"{cats[j]} ({pa[j]:.0%})",
                    f"{cats[j]} ({pb[j]:.0%})",
                )
            )
    out.sort(key=lambda s: -s.statistic)
    return tuple(out[:top])
