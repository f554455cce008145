"""Stage 5b: drift of held inputs (string, int and bool inputs, ``fixed_features``) — category frequencies.

A held input is never perturbed, so γ and flicker cannot see it move, and the per-feature KS test reads float
features only. Each held input element gets a test of its own here, against a **count table** of the reference:
its :data:`TOP_CATEGORIES` most frequent values with their counts, and the count of all the others (``other``), over
every reference row (not a sample, so a rare category is still known).

:class:`CategoryDrift` keeps the last ``window`` events' categories and, every ``every`` events, compares each
element's category frequencies with the table's: a two-sample chi-square test (the reference's counts are a draw
too, so the null is what a *new* draw of the reference's law gives, and a small reference widens it; sparse cells
merged, :func:`two_sample_p`), Benjamini–Hochberg across elements at ``alpha``, and an effect-size floor — the total
variation distance (half the sum of absolute share differences, the categorical counterpart of the KS distance),
less what a window and a reference of those sizes show by chance on average, must reach ``min_distance``. It also reports, per element, the
**unseen share**: the share of the window whose value is not in the table (a category the reference never saw when
its ``other`` count is 0). All of it is input evidence (``input-shift``), never harm by itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final, Self

import numpy as np
from numpy.typing import NDArray

from monitor.drift.base import PerFeatureTest, WindowPlan, require
from monitor.errors import DataError

#: categories a count table keeps per held element; the rest are counted together as ``other``
TOP_CATEGORIES: Final = 64
#: the key of the ``other`` count in a table (a value events cannot carry: control characters are removed from them)
OTHER_KEY: Final = "\x00other"


def count_table(values: Sequence[str] | NDArray[np.str_], top: int = TOP_CATEGORIES) -> dict[str, int]:
    """``{category: count}`` of the ``top`` most frequent values (ties: in sort order), with ``OTHER_KEY``: the rest.

    >>> count_table(["a", "b", "a", "c"], top=1)
    {'a': 2, '\\x00other': 2}
    """
    counts = Counter(str(v) for v in values)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    table = dict(ranked[:top])
    table[OTHER_KEY] = sum(n for _, n in ranked[top:])
    return table


def held_columns(
    values: Mapping[str, NDArray[Any]], names: Mapping[str, Sequence[str]] | None = None
) -> dict[str, NDArray[np.str_]]:
    """Each held element as a column of strings: ``{element name: (B,) values}``, from a ``Held``'s ``values``
    (``{input: (B, *dims)}``). Elements are named ``input`` (one element), else by ``names[input]`` when given, else
    ``input[i]``. Floats that are whole numbers read as ints (``1.0`` → ``"1"``).

    >>> cols = held_columns({"city": np.array(["paris", "oslo"]), "flags": np.array([[True, False], [True, True]])})
    >>> {k: v.tolist() for k, v in cols.items()}
    {'city': ['paris', 'oslo'], 'flags[0]': ['True', 'True'], 'flags[1]': ['False', 'True']}
    """
    out: dict[str, NDArray[np.str_]] = {}
    for key, arr in values.items():
        a = np.asarray(arr)
        flat = a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(-1, 1)
        if flat.dtype.kind == "f":
            whole = np.isfinite(flat) & (flat == np.round(flat))
            text = np.where(whole, np.round(np.where(whole, flat, 0)).astype(np.int64).astype(str), flat.astype(str))
        else:
            text = flat.astype(str)
        given = None if names is None else names.get(key)
        for j in range(flat.shape[1]):
            if given is not None and j < len(given):
                name = str(given[j])
            else:
                name = key if flat.shape[1] == 1 else f"{key}[{j}]"
            out[name] = np.asarray(text[:, j], dtype=str)
    return out


def held_element_names(signature: object) -> dict[str, list[str]]:
    """``{held input: its element names}`` of a model's :class:`~monitor.model.signature.Signature` (the held float
    features of ``fixed_features`` under their own names), for :func:`held_columns`."""
    from monitor.model.signature import HELD_COLUMNS

    names: dict[str, list[str]] = {
        spec.name: list(spec.element_names()) for spec in getattr(signature, "held_inputs", ())
    }
    fixed = list(getattr(signature, "held_features", ()))
    if fixed:
        names[HELD_COLUMNS] = fixed
    return names


def count_tables(columns: Mapping[str, Sequence[str] | NDArray[np.str_]]) -> dict[str, dict[str, int]]:
    """:func:`count_table` of every column."""
    return {name: count_table(np.asarray(col).astype(str).tolist()) for name, col in columns.items()}


class CategoryDrift(PerFeatureTest):
    """Per held element, category frequencies of the window against the reference's count table.

    Parameters
    ----------
    tables : ``{element name: count table}`` (:func:`count_table`), in the order the elements are fed.
    plan : the window and the test cadence (default :class:`WindowPlan`'s: the last 1000 events, every 100).
    alpha : the false discovery rate across elements.
    min_distance : total variation distance floor (0 <= min_distance < 1).
    name : label reported in :class:`DriftState`.

    ``statistics`` and the ``statistic`` of each element in ``moved``: total variation distance per element.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> ref = rng.choice(["paris", "oslo", "rome"], size=5000)
    >>> cd = CategoryDrift({"city": count_table(ref)}, plan=WindowPlan(window=500))
    >>> cd.update({"city": rng.choice(["paris", "oslo", "rome"], size=1000)}).drift_detected
    False
    >>> [(m.name, round(m.statistic, 2)) for m in cd.update({"city": np.array(["paris"] * 500)}).moved]
    [('city', 0.64)]
    >>> _ = cd.update({"city": np.array(["lima"] * 100)})
    >>> round(float(cd.unseen_shares[0]), 2)
    0.2
    """

    def __init__(
        self,
        tables: Mapping[str, Mapping[str, int]],
        *,
        plan: WindowPlan | None = None,
        alpha: float = 0.01,
        min_distance: float = 0.1,
        name: str = "held_inputs",
    ) -> None:
        require(0.0 <= min_distance < 1.0, f"min_distance must be in [0, 1); got {min_distance!r}")
        if not tables:
            raise DataError("category drift needs at least one held element's count table")
        self.feature_names = tuple(tables)
        self._codes: list[dict[str, int]] = []
        self._expected: list[NDArray[np.float64]] = []
        self.other_shares = np.zeros(len(tables))
        for j, (elem, table) in enumerate(tables.items()):
            cats = [c for c in table if c != OTHER_KEY]
            counts = np.array([table[c] for c in cats] + [table.get(OTHER_KEY, 0)], dtype=np.float64)
            total = counts.sum()
            if total <= 0:
                raise DataError(f"the count table of held input '{elem}' is empty; rebuild the reference")
            self._codes.append({c: i for i, c in enumerate(cats)})
            self._expected.append(counts / total)
            self.other_shares[j] = counts[-1] / total
        self.reference_total = float(sum(tables[self.feature_names[0]].values()))
        self._init_window(plan, alpha, width=len(tables))
        self.min_distance, self.name = min_distance, name
        self.reset()

    def _threshold(self) -> float:
        return self.min_distance

    def _clear(self) -> None:
        super()._clear()
        self._unseen: NDArray[np.float64] = np.zeros(self.n_features)

    def update(self, columns: Mapping[str, Sequence[str] | NDArray[np.str_]]) -> Self:
        """Feed one batch: ``{element name: (b,) values}`` for every element of the tables."""
        missing = [n for n in self.feature_names if n not in columns]
        if missing:
            raise DataError(f"category drift expects held inputs {list(self.feature_names)}; the batch lacks {missing}")
        cols = [np.asarray(columns[n]).astype(str).reshape(-1) for n in self.feature_names]
        b = cols[0].size
        if any(c.size != b for c in cols):
            raise DataError("held input columns of one batch differ in length")
        codes = np.empty((b, self.n_features))
        for j, (col, lookup) in enumerate(zip(cols, self._codes, strict=True)):
            k = len(lookup)
            codes[:, j] = [lookup.get(v, k) for v in col.tolist()]
        self._feed(codes)
        return self

    def _test(self, event: int) -> None:
        w = self._buffer.values()
        m = w.shape[0]
        p = np.empty(self.n_features)
        for j, expected in enumerate(self._expected):
            k = expected.size
            seen = np.bincount(w[:, j].astype(np.intp), minlength=k)[:k].astype(np.float64)
            share = seen / m
            self._unseen[j] = share[-1]
            # the distance minus what sampling alone gives on average (0.5·Σ E|share − expected| when both the window
            # and the reference are draws of the same law), so that an input of many categories or a small reference
            # does not read as "moved" by noise
            spread = expected * (1.0 - expected) * (1.0 / m + 1.0 / max(self.reference_total, 1.0))
            noise = 0.5 * float(np.sqrt(2.0 / np.pi * spread).sum())
            self._stat[j] = max(0.0, 0.5 * float(np.abs(share - expected).sum()) - noise)
            p[j] = two_sample_p(expected * self.reference_total, seen)
        self._flag(p, self.min_distance, event)

    @property
    def unseen_shares(self) -> NDArray[np.float64]:
        """(n,) per element, the window's share of values outside the reference's table at the last test."""
        return self._unseen.copy()


#: categories with a pooled expected count below this (in the window or the reference) are merged into one cell
MIN_EXPECTED: Final = 5.0


def two_sample_p(reference: NDArray[np.float64], window: NDArray[np.float64]) -> float:
    """p-value that ``window``'s category counts and the ``reference``'s are draws of the same law: Pearson's
    chi-square on the 2 × K table (the reference is a sample too, so a small one widens the null), cells whose pooled
    expected count falls below :data:`MIN_EXPECTED` on either side merged into one.

    >>> round(two_sample_p(np.array([50.0, 50.0]), np.array([500.0, 500.0])), 3)
    1.0
    >>> two_sample_p(np.array([50.0, 50.0]), np.array([900.0, 100.0])) < 1e-6
    True
    """
    ref, win = np.asarray(reference, dtype=np.float64), np.asarray(window, dtype=np.float64)
    n, m = ref.sum(), win.sum()
    if n <= 0 or m <= 0:
        return 1.0
    pooled = (ref + win) / (n + m)
    small = (pooled * min(n, m)) < MIN_EXPECTED
    if small.any():
        ref = np.append(ref[~small], ref[small].sum())
        win = np.append(win[~small], win[small].sum())
        pooled = (ref + win) / (n + m)
    keep = pooled > 0
    ref, win, pooled = ref[keep], win[keep], pooled[keep]
    if pooled.size < 2:
        return 1.0
    stat = float((((ref - n * pooled) ** 2) / (n * pooled)).sum() + (((win - m * pooled) ** 2) / (m * pooled)).sum())
    return float(_chi2().sf(stat, pooled.size - 1))


def _chi2() -> Any:
    """``scipy.stats.chi2``, imported on first use (``scipy.stats`` costs ~0.4 s at every command's start-up)."""
    from scipy.stats import chi2

    return chi2
