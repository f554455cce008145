"""Two or more models scored on the same rows at the same scales, compared pair by pair
(:func:`compare_models`; :func:`monitor.compare` and ``harmonic-monitor compare`` call it).

Every model reads its inputs from the same table by name (:mod:`monitor.comparison.columns`), is standardized by the
same reference rows and scored by the one scorer ``score`` uses, at the same radius, σ and seed. The pairs are then
compared row by row (:mod:`monitor.comparison.paired`): no composite score, a Pareto statement instead.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.comparison.columns import Columns, ModelRows, class_values, model_rows, read_columns
from monitor.comparison.estimated import with_estimates
from monitor.comparison.events import is_event_log, log_rows
from monitor.comparison.fragility import Target, split_fragilities
from monitor.comparison.paired import (
    Axis,
    PairedDifference,
    differences,
    input_shifts,
    pareto,
    share_interval,
    verdict,
)
from monitor.comparison.result import ALL, Comparison, table
from monitor.config import ModelSettings, ScoringSettings, setting_default
from monitor.errors import DataError
from monitor.gammamap import GammaMap, gamma_map
from monitor.model.onnx import OnnxModel
from monitor.signals.scorer import ScoreResult, ScoringConfig

if TYPE_CHECKING:
    from monitor.accuracy.estimators import EstimatorFit
    from monitor.model.standardize import Standardizer

#: the measured axes, in the order tables list them; ``none``: reported beside the others, not ranked
AXES = (
    Axis("gamma", "lower", "mean anharmonicity γ"),
    Axis("flicker", "lower", "share of noisy copies that change the output"),
    Axis("p_adj", "higher", "N-step adversarial robustness P·e^(−Nγ)"),
    Axis("confidence", "none", "top-class probability"),
    Axis("estimated_accuracy", "higher", "label-free accuracy, each row's share of the table's estimate (its method)"),
    Axis("accuracy", "higher", "realized accuracy (labels)"),
)


@dataclass(frozen=True)
class Scored:
    """One model's scores on the shared rows, and its per-row values on each axis it measures."""

    name: str
    model: OnnxModel
    rows: ModelRows
    result: ScoreResult
    predicted: NDArray[Any]  # class value per row as text ("" where none)
    axes: Mapping[str, NDArray[np.float64]]
    estimate: Mapping[str, Any] | None


def _names(models: Sequence[Any] | Mapping[str, Any]) -> list[tuple[str, Any]]:
    if isinstance(models, Mapping):
        return [(str(k), v) for k, v in models.items()]
    out: list[tuple[str, Any]] = []
    for m in models:
        stem = Path(str(getattr(m, "path", m))).stem
        name, k = stem, 2
        while name in {n for n, _ in out}:
            name, k = f"{stem}-{k}", k + 1
        out.append((name, m))
    return out


def _check_kinds(loaded: list[tuple[str, OnnxModel]]) -> list[tuple[str, ...] | None]:
    """Refuse a classifier beside a regressor, or classifiers of different class sets; each model's classes."""
    kinds = {name: m.kind for name, m in loaded}
    if len(set(kinds.values())) > 1:
        shown = ", ".join(f"'{n}' is a {k}" for n, k in kinds.items())
        raise DataError(
            f"models of different kinds cannot be compared ({shown}); compare classifiers with classifiers and "
            "regressors with regressors (--model-kind sets the kind when the graph misleads)"
        )
    classes: list[tuple[str, ...] | None] = []
    for _, m in loaded:
        declared = class_values(m) if m.kind == "classifier" else None
        if declared is None and m.kind == "classifier":
            out = m.evaluate(np.zeros((1, m.n_features), dtype=np.float32), _default_held(m))
            width = None if out.proba is None else int(out.proba.shape[1])
            declared = None if width is None else tuple(str(i) for i in range(width))
        classes.append(declared)
    first = classes[0]
    for (name, _), own in zip(loaded[1:], classes[1:], strict=True):
        if first is not None and own is not None and set(own) != set(first):
            raise DataError(
                f"'{loaded[0][0]}' predicts classes {{{', '.join(first)}}} and '{name}' {{{', '.join(own)}}}; "
                "models of different class sets answer different questions: compare models of one task"
            )
    return classes


def _default_held(m: OnnxModel) -> Any:
    from monitor.model.signature import default_held

    return default_held(m.signature, 1)


def _labels(labels: Any, cols: Columns, what: str, header: str) -> NDArray[Any] | None:
    """Labels as text, one per row: a column name of the data, an array, or a ``.csv``/``.npy`` file."""
    if labels is None:
        return None
    if isinstance(labels, str) and labels in cols.columns:
        raw = cols.columns[labels]
    elif isinstance(labels, (str, os.PathLike)) and Path(labels).suffix.lower() in (".csv", ".npy"):
        from monitor.offline.rows import load_labels

        raw = load_labels(labels, header=header)
    elif isinstance(labels, (str, os.PathLike)):
        raise DataError(f"{what} '{labels}' is neither a column of {cols.source} nor a .csv/.npy file of labels")
    else:
        raw = np.asarray(labels).reshape(-1)
    if raw.shape[0] != len(cols):
        raise DataError(f"{what}: {raw.shape[0]} values for {len(cols)} rows of {cols.source}; give one per row")
    return np.array([_class_text(v) for v in raw], dtype=object)


def _class_text(v: Any) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v).strip()


def _segments(values: NDArray[Any], max_segments: int) -> NDArray[Any]:
    """Each row's segment: one of the ``max_segments`` most frequent values, else (and when blank) ``other``."""
    raw = np.array([_class_text(v) for v in values], dtype=object)
    raw[raw == ""] = "other"
    kept_values, counts = np.unique(raw.astype(str), return_counts=True)
    kept = set(kept_values[np.argsort(-counts, kind="stable")][:max_segments].tolist())
    return np.array([v if v in kept else "other" for v in raw], dtype=object)


def _check_options(reference: Any, *, level: float, replicates: int, batch_rows: int) -> None:
    """Refuse what would fail only after the scoring: a reference of one model, options out of range."""
    if isinstance(reference, (str, os.PathLike)) and str(reference).lower().endswith(".json"):
        raise DataError(
            f"reference '{reference}' is a reference JSON of one model; compare standardizes every model by the same "
            "reference rows: give rows (.csv/.parquet/.npy or a DataFrame)"
        )
    if is_event_log(reference):
        raise DataError(
            f"reference '{reference}': give the reference as a table (.csv/.parquet/.npy or a DataFrame); an event "
            "log is read as the data"
        )
    if not 0 < level < 1:
        raise DataError(f"level must be in (0, 1), the intervals' coverage; got {level!r}")
    if replicates < 1 or batch_rows < 1:
        raise DataError(f"replicates and batch_rows must be >= 1; got {replicates} and {batch_rows}")


def _read_data(
    loaded: Sequence[tuple[str, OnnxModel]],
    data: Any,
    given: Mapping[str, Sequence[str]],
    labels: Any,
    segment_column: str | None,
    max_segments: int,
    header: str,
    notes: list[str],
) -> tuple[dict[str, ModelRows], Columns, Columns, NDArray[Any] | None]:
    """The data: each model's rows when it is an event log (else empty: picked from the columns by name), all its
    columns, the columns the models may read (without the label column) and each row's segment."""
    if is_event_log(data):
        from_log, feats, log_segments, log_notes = log_rows(loaded, data, given)
        notes += log_notes
        if segment_column not in (None, "segment"):
            raise DataError(f"segment column '{segment_column}': an event log's segment is its events' 'segment'")
        return from_log, feats, feats, None if segment_column is None else _segments(log_segments, max_segments)
    cols = read_columns(data, header=header)
    segs = None if segment_column is None else _segments(cols.column(segment_column, "segment column"), max_segments)
    label_col = labels if isinstance(labels, str) and labels in cols.columns else None
    return {}, cols, cols.without([label_col]), segs  # a segment column may be a model's input too: it stays


def compare_models(
    models: Sequence[Any] | Mapping[str, Any],
    data: Any,
    reference: Any = None,
    *,
    labels: Any = None,
    reference_labels: Any = None,
    segment_column: str | None = None,
    feature_names: Mapping[str, Sequence[str]] | None = None,
    config: ScoringConfig | None = None,
    space: str = setting_default(ScoringSettings, "space"),
    model_kind: str = setting_default(ModelSettings, "model_kind"),
    batch_rows: int = 1024,
    replicates: int = 1000,
    level: float = 0.9,
    probe_points: int = 20,
    max_segments: int = 10,
    header: str = "auto",
    standardizer: Standardizer | None = None,
    fits: Mapping[str, EstimatorFit] | None = None,
) -> Comparison:
    """Score every model on the same rows and compare them pair by pair (see :func:`monitor.compare`).
    ``standardizer``: one that standardizes every model of its width instead of the reference rows' (a reference
    JSON's); ``fits``: the fitted label-free estimators of the models named, where no reference labels fit them."""
    from monitor.offline.rows import load_model

    named = _names(models)
    if len(named) < 2:
        raise DataError(f"compare needs two or more models; got {len(named)}")
    cfg = config or ScoringConfig()
    loaded = [(n, load_model(m, model_kind=model_kind)) for n, m in named]
    _check_options(reference, level=level, replicates=replicates, batch_rows=batch_rows)
    classes = _check_kinds(loaded)
    given = dict(feature_names or {})
    unknown = [k for k in given if k not in {n for n, _ in loaded}]
    if unknown:
        raise DataError(f"feature names given for {unknown}, which name no model; models: {[n for n, _ in loaded]}")
    notes: list[str] = []
    from_log, cols, feats, segs = _read_data(loaded, data, given, labels, segment_column, max_segments, header, notes)
    y = _labels(labels, cols, "labels", header)
    ref_cols = cols if reference is None else read_columns(reference, header=header)
    ref_y = _labels(reference_labels, ref_cols, "reference labels", header)
    ref_label_col = reference_labels if isinstance(reference_labels, str) else None
    ref_feats = ref_cols.without([ref_label_col]) if reference is not None else feats
    scored, fitted = [], []
    first: tuple[str, ...] | None = None  # the columns the given standardizer's features are (the first model's)
    for (name, m), cls in zip(loaded, classes, strict=True):
        rows = from_log[name] if from_log else model_rows(m, feats, given.get(name), name)
        ref_rows = model_rows(m, ref_feats, given.get(name), name)
        if rows.how != "by name" and not from_log:
            notes.append(f"'{name}': inputs taken {rows.how}")
        std, first = _given_standardizer(standardizer, first, rows.columns, m.n_features)
        one, fit = _score_one(
            name, m, rows, ref_rows, cls, cfg, space=space, batch_rows=batch_rows, y=y, ref_y=ref_y, std=std
        )
        scored.append(one)
        fitted.append(fit if fit is not None else (fits or {}).get(name))
    scored = with_estimates(scored, fitted, cfg.seed)  # one method for every model, as ``estimate`` resolves it
    if ref_y is None and labels is not None:
        notes.append("no reference labels: the label-free estimate needs a labelled reference (reference_labels)")
    per_model = _model_table(scored, segs, y is not None)
    pairs, verdicts, shifts = _pair_tables(scored, feats, segs, replicates=replicates, level=level, seed=cfg.seed)
    frag = _fragility(scored, ref_feats, given, cfg, space, probe_points, notes) if probe_points > 0 else {}
    if probe_points <= 0:
        notes.append("the ε* probe profile was skipped (probe_points 0)")
    notes.append(
        f"intervals at {level:.0%} by a paired bootstrap of {replicates} replicates over the same rows, one per pair "
        "and axis: with many axes and pairs, expect some to exclude 0 by chance"
    )
    settings = {**dataclasses.asdict(cfg), "space": space, "level": level, "replicates": replicates, "rows": len(cols)}
    return Comparison(per_model, pairs, verdicts, shifts, frag, tuple(notes), settings, _gamma_maps(scored))


def _gamma_maps(scored: list[Scored]) -> dict[str, GammaMap]:
    """Each classifier's Gamma Map of its valid rows (γ against the predicted class's probability)."""
    out = {}
    for s in scored:
        if s.model.kind == "classifier":
            r = s.result
            ok = r.valid & np.isfinite(r.probability) & np.isfinite(r.gamma)
            out[s.name] = gamma_map(r.probability[ok], r.gamma[ok])
    return out


def _given_standardizer(
    given: Standardizer | None, first: tuple[str, ...] | None, columns: tuple[str, ...], width: int
) -> tuple[Standardizer | None, tuple[str, ...] | None]:
    """The given standardizer for a model reading ``columns``: the first model's as given (its columns are then the
    standardizer's), a later model's with its features picked by column name; None where they do not all match."""
    from monitor.model.standardize import Standardizer

    if given is None or given.mean.shape[0] != width:
        return None, first if first is not None else ()
    if first is None:
        return given, tuple(columns)
    if len(set(columns)) != width or not set(columns) <= set(first):
        return None, first
    pick = [first.index(c) for c in columns]
    return Standardizer(given.mean[pick], given.scale[pick]), first


def _score_one(
    name: str,
    m: OnnxModel,
    rows: ModelRows,
    ref_rows: ModelRows,
    classes: tuple[str, ...] | None,
    cfg: ScoringConfig,
    *,
    space: str,
    batch_rows: int,
    y: NDArray[Any] | None,
    ref_y: NDArray[Any] | None,
    std: Standardizer | None = None,
) -> tuple[Scored, EstimatorFit | None]:
    """Score ``rows`` as ``score`` does (the reference's standardizer and held sample, the scorer over ``cfg``), and
    the label-free estimators fitted on the labelled reference rows (with their inputs, as ``reference`` fits)."""
    from monitor.accuracy import fit_from_scores
    from monitor.offline.baseline import standardizer_of
    from monitor.offline.rows import Rows
    from monitor.offline.scoring import score_rows
    from monitor.signals.scorer import RobustnessScorer

    ref = Rows(ref_rows.x, ref_rows.held, f"the reference rows of '{name}'")
    std = std if std is not None else standardizer_of(ref, m, space=space)
    scorer = RobustnessScorer(m, std, cfg, held_sample=ref_rows.held if m.signature.has_held else None)
    res = score_rows(scorer, rows.x, rows.held, batch_rows)
    predicted = _values(res.predicted_class, res.valid, classes)
    axes: dict[str, NDArray[np.float64]] = {"gamma": res.gamma, "flicker": res.flicker}
    fit = None
    if m.kind == "classifier":
        axes |= {"p_adj": res.p_adj, "confidence": np.where(res.valid, res.probability, np.nan)}
        if y is not None:
            axes["accuracy"] = np.where(predicted != "", (predicted == y).astype(np.float64), np.nan)
        if ref_y is not None:
            ref_res = score_rows(scorer, ref_rows.x, ref_rows.held, batch_rows)
            index = {c: i for i, c in enumerate(classes or ())}
            y_idx = np.array([index.get(v, -1) for v in ref_y], dtype=np.int64)
            fit = fit_from_scores(ref_res, y_idx, seed=cfg.seed, inputs=ref_rows.x)
    return Scored(name, m, rows, res, predicted, axes, None), fit


def _values(pred: NDArray[np.int64], valid: NDArray[np.bool_], classes: tuple[str, ...] | None) -> NDArray[Any]:
    table_ = np.array(list(classes or ()), dtype=object)
    out = np.full(pred.shape[0], "", dtype=object)
    ok = valid & (pred >= 0) & (pred < table_.size)
    out[ok] = table_[pred[ok]]
    return out


def _groups(segs: NDArray[Any] | None, n: int) -> list[tuple[str, NDArray[np.bool_]]]:
    every = [(ALL, np.ones(n, dtype=bool))]
    if segs is None:
        return every
    return every + [(str(s), segs == s) for s in sorted(set(segs.tolist()))]


def _model_table(scored: list[Scored], segs: NDArray[Any] | None, has_labels: bool) -> dict[str, NDArray[Any]]:
    rows: list[dict[str, Any]] = []
    n = len(scored[0].result)
    for s in scored:
        for seg, mask in _groups(segs, n):
            pick = mask & s.result.valid
            row: dict[str, Any] = {"model": s.name, "segment": seg, "rows": int(mask.sum()), "valid": int(pick.sum())}
            for ax in ("gamma", "flicker", "p_adj", "confidence", "accuracy"):
                v = s.axes.get(ax)
                row[ax] = None if v is None or not np.isfinite(v[pick]).any() else float(np.nanmean(v[pick]))
            if s.estimate is not None and seg == ALL:
                acc = s.estimate["accuracy"]
                row |= {
                    "accuracy_estimate": acc["estimate"],
                    "accuracy_lower": acc["lower"],
                    "accuracy_upper": acc["upper"],
                    "accuracy_method": acc["method"],
                }
            elif s.estimate is not None and "estimated_accuracy" in s.axes:
                v = s.axes["estimated_accuracy"][pick]
                row["accuracy_estimate"] = float(np.nanmean(v)) if np.isfinite(v).any() else None
                row["accuracy_method"] = s.estimate["accuracy"]["method"]
            rows.append(row)
    cols: tuple[str, ...] = ("model", "segment", "rows", "valid", "gamma", "flicker", "p_adj", "confidence")
    cols += ("accuracy_estimate", "accuracy_lower", "accuracy_upper", "accuracy_method")
    return table(rows, cols + (("accuracy",) if has_labels else ()))


def _more_fragile(diffs: Sequence[Any], a: str, b: str) -> str:
    votes = {d.favours for d in diffs if d.axis in ("gamma", "flicker") and d.favours != "tie"}
    if votes == {"a"}:
        return b
    if votes == {"b"}:
        return a
    return "mixed" if votes else "neither (no difference in γ or flicker)"


def _pair_tables(
    scored: list[Scored], feats: Columns, segs: NDArray[Any] | None, *, replicates: int, level: float, seed: int
) -> tuple[dict[str, NDArray[Any]], dict[str, NDArray[Any]], dict[str, NDArray[Any]]]:
    """Per pair and segment: the paired differences and the verdict; per pair: what the disagreeing rows share."""
    diff_rows: list[dict[str, Any]] = []
    verdict_rows: list[dict[str, Any]] = []
    shift_rows: list[dict[str, Any]] = []
    n = len(scored[0].result)
    for i, sa in enumerate(scored):
        for sb in scored[i + 1 :]:
            names = {"a": sa.name, "b": sb.name}
            for seg, mask in _groups(segs, n):
                a = {k: v[mask] for k, v in sa.axes.items()}
                b = {k: v[mask] for k, v in sb.axes.items()}
                diffs = differences(a, b, AXES, replicates=replicates, level=level, seed=seed)
                for d in diffs:
                    row = {**names, "segment": seg, **dataclasses.asdict(d)}
                    diff_rows.append(row | {"favours": names.get(d.favours, d.favours)})
                verdict_rows.append({**names, "segment": seg, **_verdict(sa, sb, diffs, mask, level)})
            both = (sa.predicted != "") & (sb.predicted != "")
            if both.any():
                used = set(sa.rows.columns) | set(sb.rows.columns) | _held_columns(sa, sb)
                inputs = {k: v[both] for k, v in feats.columns.items() if k in used}
                for s in input_shifts(inputs, sa.predicted[both] != sb.predicted[both]):
                    shift_rows.append({**names, **dataclasses.asdict(s)})
    diff_cols = ("a", "b", "segment", "axis", "n", "mean_a", "mean_b", "difference", "lower", "upper", "favours")
    verdict_cols: tuple[str, ...] = ("a", "b", "segment", "relation", "statement", "verdict", "more_fragile")
    verdict_cols += ("disagreement", "disagreement_lower", "disagreement_upper")
    return (
        table(diff_rows, diff_cols),
        table(verdict_rows, verdict_cols),
        table(shift_rows, ("a", "b", "input", "statistic", "disagree", "agree")),
    )


def _verdict(
    sa: Scored, sb: Scored, diffs: Sequence[PairedDifference], mask: NDArray[np.bool_], level: float
) -> dict[str, Any]:
    """The Pareto relation of a pair on the rows of ``mask`` and the share of them on which the classes differ."""
    rel = pareto(diffs, AXES)
    row: dict[str, Any] = {
        "relation": rel.relation,
        "statement": rel.statement(sa.name, sb.name),
        "verdict": verdict(rel.relation),
        "more_fragile": _more_fragile(diffs, sa.name, sb.name),
    }
    both = mask & (sa.predicted != "") & (sb.predicted != "")
    if both.any():
        p, lo, hi = share_interval(sa.predicted[both] != sb.predicted[both], level)
        row |= {"disagreement": p, "disagreement_lower": lo, "disagreement_upper": hi}
    return row


def _held_columns(*scored: Scored) -> set[str]:
    """The data columns of the models' held (string, int) inputs: one column each for one-element inputs."""
    return {spec.name for s in scored for spec in s.model.signature.held_inputs}


def _fragility(
    scored: list[Scored],
    ref_feats: Columns,
    given: Mapping[str, Sequence[str]],
    cfg: ScoringConfig,
    space: str,
    points: int,
    notes: list[str],
) -> dict[str, NDArray[Any]]:
    """Each model's ε* profile on the same ``points`` rows (valid for every model), split by
    :func:`split_fragilities`."""
    from monitor.offline.probe import probe
    from monitor.offline.rows import Rows
    from monitor.probes.offline import ProbeOptions

    ok = np.all([s.result.valid for s in scored], axis=0)
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        notes.append("no row scores for every model: the ε* profile was skipped")
        return {}
    pick = np.sort(np.random.default_rng(cfg.seed).permutation(idx)[:points])
    opts = ProbeOptions(certify_copies=0, l2_boundary=False)
    profiles: dict[str, dict[Target, float | None]] = {}
    for s in scored:
        held = None if s.rows.held is None else s.rows.held.take(pick)
        ref_rows = model_rows(s.model, ref_feats, given.get(s.name), s.name)
        report = probe(
            s.model,
            Rows(s.rows.x[pick], held, f"{pick.size} rows"),
            Rows(ref_rows.x, ref_rows.held, "the reference rows"),
            options=opts,
            steps=0,
            seed=cfg.seed,
            space=space,
        )
        names = s.model.feature_names
        prof: dict[Target, float | None] = {}
        for entry in report.result.profile:
            inp = None if entry.feature is None else names[entry.feature]
            t = entry.threshold
            prof[(entry.perturbation, inp)] = None if t is None else t.result.eps_star
        profiles[s.name] = prof
    rows: list[dict[str, Any]] = []
    for f in split_fragilities(profiles):
        row: dict[str, Any] = {
            "target": f.target,
            "perturbation": f.perturbation,
            "input": f.input,
            "kind": f.kind,
            "fragile_for": ", ".join(f.fragile_for),
            "most_robust": f.most_robust,
        }
        row |= {f"eps_star_{m}": e for m, e in f.eps_star.items()}
        unit = _unit(ref_feats, f.input, space)
        row |= {f"eps_raw_{m}": None if e is None or unit is None else e * unit for m, e in f.eps_star.items()}
        rows.append(row)
    notes.append(
        f"ε* per target on the same {pick.size} rows, in {'raw' if space == 'raw' else 'standardized'} units of the "
        "shared reference (eps_raw_*: a shift's ε* in its input's own units); fragile: the search crossed"
    )
    cols: tuple[str, ...] = ("target", "perturbation", "input", "kind", "fragile_for", "most_robust")
    cols += tuple(f"eps_star_{s.name}" for s in scored) + tuple(f"eps_raw_{s.name}" for s in scored)
    return table(rows, cols)


def _unit(ref: Columns, column: str | None, space: str) -> float | None:
    """One standardized unit of ``column`` in its own units (the reference's standard deviation, as the shared
    standardizer has it); None for a perturbation of the whole row, whose ε has no single raw unit."""
    if column is None or column not in ref.columns or ref.columns[column].dtype.kind != "f":
        return None
    if space == "raw":
        return 1.0
    v = ref.columns[column]
    sd = float(np.std(v[np.isfinite(v)])) if np.isfinite(v).any() else 0.0
    return sd if sd > 1e-12 else 1.0
