"""The typed result of a comparison (:class:`Comparison`): its tables, the JSON document and the printed table."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from monitor.gammamap import GammaMap

#: the segment label of the rows taken together
ALL = "(all)"


def table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> dict[str, NDArray[Any]]:
    """Rows of dicts as named columns (numbers as float64, the rest as object arrays)."""
    out: dict[str, NDArray[Any]] = {}
    for c in columns:
        values = [r.get(c) for r in rows]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) or v is None for v in values)
        if numeric and values and all(isinstance(v, int) for v in values):
            out[c] = np.array(values, dtype=np.int64)
        elif numeric and any(v is not None for v in values):
            out[c] = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
        else:
            out[c] = np.array(values, dtype=object)
    return out


def _json(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (tuple, list)):
        return [_json(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _json(x) for k, x in v.items()}
    return v


@dataclass(frozen=True, eq=False)
class Comparison:
    """:func:`monitor.compare`'s result; each table is named columns of equal length (``frames()`` gives them as
    pandas DataFrames).

    ``models``: per model and segment (``(all)`` for every row): rows, mean γ, flicker, P_adj, confidence, the
    label-free accuracy estimate with its interval and its method (one for every model, ``estimate``'s default) and
    the realized accuracy where labels were given.
    ``pairs``: per pair, segment and axis: each model's mean on the rows valid for both, the paired difference
    (a − b) with its paired-bootstrap interval, and the model the interval favours (``tie`` when it covers 0,
    ``unranked`` on confidence, an axis reported without a direction); ``estimated_accuracy`` is each row's share of
    the models table's estimate, so its means are that table's figures.
    ``verdicts``: per pair and segment: the Pareto relation in words, the candidate's verdict (b is the candidate beside a),
    the share of rows where they predict different classes with its interval, and the more fragile model.
    ``disagreement_inputs``: per pair, the inputs whose distribution among the disagreeing rows differs most.
    ``fragility``: per probe target, ε* per model and whether the fragility is universal or model-specific.
    ``gamma_maps``: each classifier's Gamma Map of the rows (by model name; not in the JSON document).
    """

    models: Mapping[str, NDArray[Any]]
    pairs: Mapping[str, NDArray[Any]]
    verdicts: Mapping[str, NDArray[Any]]
    disagreement_inputs: Mapping[str, NDArray[Any]]
    fragility: Mapping[str, NDArray[Any]]
    notes: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    gamma_maps: Mapping[str, GammaMap] = field(default_factory=dict)

    TABLES = ("models", "pairs", "verdicts", "disagreement_inputs", "fragility")

    def frames(self) -> dict[str, Any]:
        """Every table as a ``pandas.DataFrame`` (the ``frame`` extra)."""
        from monitor.offline.frames import pandas_module as _pandas

        pd = _pandas()
        return {name: pd.DataFrame({k: list(v) for k, v in getattr(self, name).items()}) for name in self.TABLES}

    def rows(self, name: str) -> list[dict[str, Any]]:
        """The table ``name`` as a list of row dicts (NaN as None)."""
        cols = getattr(self, name)
        n = len(next(iter(cols.values()))) if cols else 0
        return [{k: _json(v[i]) for k, v in cols.items()} for i in range(n)]

    def document(self) -> dict[str, Any]:
        """The JSON ``harmonic-monitor compare --json`` writes: the settings, the notes and every table as rows."""
        doc: dict[str, Any] = {"settings": _json(dict(self.settings)), "notes": list(self.notes)}
        doc.update({name: self.rows(name) for name in self.TABLES})
        return doc

    def summary(self) -> str:
        """The printed table: the models (all rows), then per pair its verdict, the differences and what the
        disagreeing rows share, then the fragilities."""
        lines = []
        head = f"{'model':<24}{'rows':>8}{'gamma':>11}{'flicker':>9}{'p_adj':>8}{'conf':>7}{'acc est [90 %]':>24}{'acc':>7}"
        lines.append(head)
        methods: dict[str, str] = {}
        for r in self.rows("models"):
            if r["segment"] != ALL:
                continue
            est = r.get("accuracy_estimate")
            est_txt = "-"
            if est is not None:
                methods[r["model"]] = str(r["accuracy_method"])
                est_txt = f"{est:.3f} [{r['accuracy_lower']:.2f},{r['accuracy_upper']:.2f}] {r['accuracy_method']}"
            lines.append(
                f"{r['model']:<24}{r['rows']:>8}{_f(r['gamma'], '.3g'):>11}{_f(r['flicker'], '.3f'):>9}"
                f"{_f(r.get('p_adj'), '.3f'):>8}{_f(r.get('confidence'), '.3f'):>7}{est_txt:>24}"
                f"{_f(r.get('accuracy'), '.3f'):>7}"
            )
        verdicts = self.rows("verdicts")
        for v in verdicts:
            if v["segment"] != ALL:
                continue
            a, b = v["a"], v["b"]
            lines += ["", f"{a} vs {b}: {v['statement']}", f"  verdict for '{b}' beside '{a}': {v['verdict']}"]
            if v.get("disagreement") is not None:
                lines.append(
                    f"  predict different classes on {v['disagreement']:.1%} of rows "
                    f"[{v['disagreement_lower']:.1%}, {v['disagreement_upper']:.1%}]"
                )
            lines.append(f"  more fragile (γ, flicker): {v['more_fragile']}")
            for d in self.rows("pairs"):
                if d["a"] == a and d["b"] == b and d["segment"] == ALL:
                    axis = d["axis"]
                    if axis == "estimated_accuracy" and a in methods:
                        axis = f"estimated ({methods[a]})"  # the table's method: its means are the table's figures
                    lines.append(
                        f"  {axis:<20} {_f(d['mean_a'], '.4g'):>10} vs {_f(d['mean_b'], '.4g'):<10} "
                        f"diff {_f(d['difference'], '+.3g')} [{_f(d['lower'], '+.3g')}, {_f(d['upper'], '+.3g')}] "
                        + ("unranked" if d["favours"] == "unranked" else f"favours {d['favours']}")
                    )
            for w in verdicts:
                if w["a"] == a and w["b"] == b and w["segment"] != ALL:
                    share = "" if w.get("disagreement") is None else f"; classes differ on {w['disagreement']:.1%}"
                    lines.append(f"  segment {w['segment']}: {w['statement']}{share}")
            shared = [s for s in self.rows("disagreement_inputs") if s["a"] == a and s["b"] == b]
            if shared:
                lines.append(
                    "  the disagreeing rows differ most in: "
                    + ", ".join(f"{s['input']} ({s['statistic']:.2f})" for s in shared)
                )
        frag = self.rows("fragility")
        if frag:
            lines.append("")
            for kind in ("universal", "specific"):
                names = [
                    f"{f['target']}" + (f" ({f['fragile_for']})" if kind == "specific" else "")
                    for f in frag
                    if f["kind"] == kind
                ]
                lines.append(f"{kind} fragilities: {', '.join(names) or 'none'}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def _f(v: Any, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)
