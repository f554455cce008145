"""Scoring rows offline: the scorer of a baseline at a :class:`~monitor.signals.scorer.ScoringConfig`, rows scored in
batches, and :func:`score` (``harmonic-monitor score``): γ, flicker and P_adj per row with each signal beside the
reference's."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError
from monitor.offline.baseline import Baseline, load_baseline
from monitor.offline.frames import is_frame
from monitor.offline.keywords import (
    SEED,
    ScoreKeywords,
    ScoringKeywords,
    StandardizeKeywords,
    scoring_config,
    split_keywords,
)
from monitor.offline.results import ScoreTable, yardsticks
from monitor.offline.rows import MODEL_KIND, DataLike, ModelLike, Rows, load_model, read_rows

if TYPE_CHECKING:
    from monitor.model.onnx import OnnxModel
    from monitor.model.signature import Held
    from monitor.rolling.reference import Reference
    from monitor.signals.scorer import RobustnessScorer, ScoreResult, ScoringConfig

#: rows per scorer call (flicker noise is drawn per call: the same rows in the same calls give the same numbers)
BATCH_ROWS = 1024
#: rows of a reference scored for the yardstick when the reference is rows
YARDSTICK_ROWS = 2000


def robustness_scorer(model: OnnxModel, base: Baseline, config: ScoringConfig) -> RobustnessScorer:
    """The scorer of ``base``'s standardizer and held sample at ``config`` (built with the reference's own scales
    where it chose them: :func:`~monitor.offline.keywords.scoring_config`)."""
    from monitor.signals.control import control_for
    from monitor.signals.scorer import RobustnessScorer

    held = base.held_sample if model.signature.has_held else None
    rows = None if base.reference is None else base.reference.feature_sample
    control = control_for(model, base.standardizer, config.radius, config.ball, rows)  # γ_logit at high dimension
    return RobustnessScorer(model, base.standardizer, config, held_sample=held, control=control)


def score_rows(
    scorer: RobustnessScorer, x: NDArray[np.float64], held: Held | None, batch_rows: int = BATCH_ROWS
) -> ScoreResult:
    """Score ``x`` in calls of ``batch_rows`` rows; one :class:`~monitor.signals.scorer.ScoreResult` for all."""
    from monitor.signals.scorer import ScoreResult

    if batch_rows < 1:
        raise DataError(f"batch size must be >= 1; got {batch_rows}")
    parts = [
        scorer.score(x[s : s + batch_rows], None if held is None else held.take(slice(s, s + batch_rows)))
        for s in range(0, x.shape[0], batch_rows)
    ]
    if not parts:
        raise DataError("no rows to score")
    columns = {f.name: [getattr(p, f.name) for p in parts] for f in dataclasses.fields(ScoreResult)}
    # a field a scorer leaves unset (None: a classifier's ``value``) stays unset
    return ScoreResult(
        **{k: None if any(c is None for c in v) else np.concatenate(v) for k, v in columns.items()}  # type: ignore[arg-type]
    )


def score(
    model: ModelLike,
    data: DataLike,
    reference: Any = None,
    *,
    batch_rows: int = BATCH_ROWS,
    model_kind: str = MODEL_KIND,
    header: str = "auto",
    max_events: int | None = None,
    as_frame: bool | None = None,
    **options: Unpack[ScoreKeywords],
) -> Any:
    """γ, flicker and P_adj for every row of ``data`` (and the class with its probability for a classifier).

    Parameters
    ----------
    model : an ONNX path or a loaded model.
    data : a DataFrame, array, mapping or file (``.csv``/``.npy``/``.npz``/``.parquet``/``.jsonl``).
    reference : what standardizes the radius and σ (rows, a reference JSON or :func:`reference`'s result); default
        the data itself. A reference JSON or :class:`ReferenceResult` also gives ``yardstick``.
    radius, sigma, flicker_copies, steps, seed, ball, output, regression_tolerance, space, scale, channel_axis :
        as ``harmonic-monitor score``'s options (:class:`~monitor.offline.keywords.ScoreKeywords`; a reference
        JSON that chose its own scales is scored at them, as ``run`` does, not at ``radius`` and ``sigma``).
    as_frame : return a DataFrame (True), the typed :class:`ScoreTable` (False), or a DataFrame exactly when ``data``
        is one (None, the default).

    Returns
    -------
    pandas.DataFrame or ScoreTable
        One row per input row (per valid event of a log), in order: ``gamma``, ``flicker``, ``p_adj`` (and ``class``,
        ``probability``, ``margin`` for a classifier). A DataFrame keeps the input frame's index, and its ``attrs``
        hold ``"score"``: the :class:`ScoreTable` (``yardstick``, ``invalid``, ``summary()``).

    Examples
    --------
    >>> import numpy as np, monitor
    >>> from monitor.examples import linear_classifier
    >>> rows = np.random.default_rng(1).normal(size=(30, 3))
    >>> t = monitor.score(linear_classifier(), rows, reference=rows, flicker_copies=4)
    >>> len(t), t.kind, bool((t.columns["gamma"] >= 0).all())
    (30, 'classifier', True)
    """
    scoring, standardize = split_keywords("score", options, ScoringKeywords, StandardizeKeywords)
    m = load_model(model, model_kind=model_kind)
    if batch_rows < 1:
        raise DataError(f"batch size must be >= 1; got {batch_rows}")
    base0 = None
    if reference is not None and reference is not data:
        base0 = load_baseline(reference, m, None, header=header, **standardize)
    names = None if base0 is None else base0.feature_names
    rows = read_rows(data, m, header=header, feature_names=names, max_events=max_events)
    base = base0 if base0 is not None else load_baseline(None, m, rows, header=header, **standardize)
    scorer = robustness_scorer(m, base, scoring_config(scoring, base.scales))
    res = score_rows(scorer, rows.x, rows.held, batch_rows)
    sources = {"data": rows.source}
    if base.rows is not None:
        sources["reference"] = base.rows.source
    table = dataclasses.replace(score_table(m.kind, res, rows), result=res, sources=sources)
    ref = base.reference
    if ref is None and base.rows is not None:  # reference rows: score a sample of them for the yardstick
        pick = np.random.default_rng(scoring.get("seed", SEED)).permutation(len(base.rows))[:YARDSTICK_ROWS]
        ref = scored_reference(scorer, base.rows.take(pick), m.kind, batch_rows, min_valid=10)
    if ref is not None:
        table = dataclasses.replace(table, yardstick=yardsticks(live_signals(res, m.kind), ref))
    if as_frame or (as_frame is None and is_frame(data)):
        frame = table.to_frame()
        frame.attrs["score"] = table
        return frame
    return table


def live_signals(res: ScoreResult, kind: str) -> dict[str, NDArray[np.float64]]:
    """The signals a yardstick sets beside the reference: γ and flicker, and a classifier's confidence."""
    live = {"gamma": res.gamma, "flicker": res.flicker}
    if kind == "classifier":
        live["confidence"] = res.probability
    return live


def scored_reference(
    scorer: RobustnessScorer, rows: Rows, kind: str, batch_rows: int = BATCH_ROWS, *, min_valid: int = 0
) -> Reference | None:
    """The reference distributions of reference rows (γ, flicker, features, a classifier's confidence), scored by
    ``scorer``: what a yardstick compares with when the reference is rows, not a reference JSON. None where fewer
    than ``min_valid`` rows score."""
    from monitor.rolling.reference import Reference

    res = score_rows(scorer, rows.x, rows.held, batch_rows)
    ok = res.valid
    if int(ok.sum()) < min_valid:
        return None
    return Reference.from_arrays(
        gamma=res.gamma[ok],
        flicker=res.flicker[ok],
        features=rows.x[ok],
        confidence=res.probability[ok] if kind == "classifier" else None,
    )


def predicted_values(res: ScoreResult) -> NDArray[np.float64] | None:
    """A regressor of one output: its prediction per row (NaN where a row is not valid); None for a classifier, or
    a regressor of several outputs (its scorer keeps no one value per row)."""
    v = res.value
    if v is None or not np.isfinite(v).any() and res.valid.any():
        return None
    return v


def score_table(kind: str, res: ScoreResult, rows: Rows) -> ScoreTable:
    """The table of ``res`` row for row: γ, flicker, P_adj, and a classifier's class (−1 where not valid),
    probability and margin, or a regressor's ``predicted_value``."""
    cols: dict[str, NDArray[Any]] = {"gamma": res.gamma, "flicker": res.flicker, "p_adj": res.p_adj}
    if kind == "classifier":
        cols["class"] = np.where(res.valid, res.predicted_class, -1)
        cols["probability"] = res.probability
        cols["margin"] = res.margin
    elif (value := predicted_values(res)) is not None:
        cols["predicted_value"] = value
    cols.update({} if res.gamma_se is None else {"gamma_se": res.gamma_se})  # γ's error against the full ball
    return ScoreTable(
        cols, kind=kind, n_invalid_rows=int((~res.valid).sum()), invalid=dict(rows.invalid), index=rows.index
    )
