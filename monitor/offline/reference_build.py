"""The reference a model's reference rows give, what ``harmonic-monitor reference`` and
``monitor.reference`` both write (:func:`build_reference`; the command and the API differ only in how the rows and
options arrive).

From the finite reference rows:

* the **count tables** of the held inputs (int, bool and string inputs, ``fixed_features``), from *every* row, so a
  rare category stays known (:func:`monitor.drift.categories.count_tables`), model-wide and per segment;
* a seeded **sample** of at most ``sample_rows`` rows (of each segment, with segments) is scored: γ, flicker, the
  predicted class, a classifier's confidence and margin give the :class:`~monitor.rolling.reference.Reference`;
* with ``scales="from-reference"``, σ (= r) is chosen on the sample first (:func:`monitor.signals.scales.choose_scales`)
  and the sample is scored at it;
* with segments, one baseline per segment (:func:`monitor.rolling.segment_baselines.segment_references`);
* with labels, the label-free accuracy estimators fitted on the scored sample
  (:func:`monitor.accuracy.labelled.labelled_fit`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.config import DriftSettings, SegmentSettings, setting_default
from monitor.drift.base import MIN_REFERENCE_VALUES
from monitor.drift.categories import count_tables, held_columns, held_element_names
from monitor.errors import DataError
from monitor.gammamap import edges_note
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.offline.scoring import score_rows
from monitor.rolling.reference import Reference
from monitor.rolling.segment_baselines import SegmentPlan, fold_segments, plan_segments, segment_references

if TYPE_CHECKING:
    from monitor.accuracy import EstimatorFit
    from monitor.accuracy.regression import LossFit
    from monitor.model.onnx import OnnxModel
    from monitor.signals.scales import SignalScales
    from monitor.signals.scorer import ScoreResult, ScoringConfig

#: scale choices: score at the configured radius and σ, or choose σ (= r) on the reference rows
SCALES = ("fixed", "from-reference")


@dataclass(frozen=True)
class ReferenceRows:
    """Reference rows read for a model: x (N, D) in the signature's feature order, the held values, and per row
    the segment and the true class where given; ``source`` names them in messages."""

    x: NDArray[np.float64]
    held: Held | None
    source: str
    segments: NDArray[np.str_] | None = None
    #: the true class (classifiers) or value (regressors; NaN: none) of each row
    labels: NDArray[Any] | None = None
    #: the names the data gave its columns (a CSV header, a frame's columns), in feature order
    names: tuple[str, ...] | None = None

    def take(self, pick: NDArray[np.intp] | NDArray[np.bool_]) -> ReferenceRows:
        """The rows at ``pick`` (indices or a mask)."""
        return dataclasses.replace(
            self,
            x=self.x[pick],
            held=None if self.held is None else self.held.take(pick),
            segments=None if self.segments is None else self.segments[pick],
            labels=None if self.labels is None else self.labels[pick],
        )


@dataclass(frozen=True)
class BuiltReference:
    """What a reference file holds: the model-wide reference, the per-segment baselines, the held sample of the
    scored rows, the chosen scales and the fitted estimators; ``notes``: what was chosen, one line each."""

    reference: Reference
    segments: dict[str, Reference]
    held_sample: Held | None
    scales: SignalScales | None
    fit: EstimatorFit | None
    notes: tuple[str, ...] = ()
    loss_fit: LossFit | None = None


def build_reference(
    model: OnnxModel,
    rows: ReferenceRows,
    standardizer: Standardizer,
    config: ScoringConfig,
    *,
    held_sample: Held | None = None,
    sample_rows: int = 5000,
    scales: str = "fixed",
    target_flicker_share: float = 0.5,
    feature_names: Sequence[str] | None = None,
    max_segments: int = setting_default(SegmentSettings, "max_segments"),
    calibration: str = "temperature",
    label_kind: str = "values",
) -> BuiltReference:
    """The reference of ``rows`` for ``model`` standardized by ``standardizer`` and scored at ``config`` (see the
    module docstring). ``held_sample``: the held values a regressor's output scale is measured with (default the
    rows' own); ``config.seed`` seeds the sample.

    Raises
    ------
    DataError
        Fewer than 10 finite rows, labels for a model that is not a classifier, feature names of the wrong count,
        an unknown ``scales``.
    """
    from monitor.signals.scorer import RobustnessScorer

    names = _checked(model, rows, scales, sample_rows, feature_names)
    _refuse_empty_inputs(rows, names)
    rows, dropped_note = _finite(rows)
    # the count tables of the held inputs from every finite row (before sampling): a rare category stays known
    every_held = None if rows.held is None else held_columns(rows.held.values, held_element_names(model.signature))
    scored = rows.take(sample(rows, sample_rows, config.seed))
    notes = [] if dropped_note is None else [dropped_note]
    chosen = None
    if scales == "from-reference":
        config, chosen, note = _scales_chosen(model, standardizer, scored, config, target_flicker_share)
        notes.append(note)
    held = rows.held if held_sample is None else held_sample
    scorer = RobustnessScorer(model, standardizer, config, held_sample=held if model.signature.has_held else None)
    res = score_rows(scorer, scored.x, scored.held)
    ok = res.valid
    signals = _signals(res, scored.x, model.kind == "classifier", ok)
    ref = Reference.from_arrays(**signals, feature_names=names, seed=config.seed)
    notes.append(_gamma_map_note(ref))
    baselines: dict[str, Reference] = {}
    if scored.segments is not None and rows.segments is not None:
        baselines, note = _segment_baselines(
            model, rows, scored, ok, signals, names, max_segments, config.seed, ref, every_held
        )
        notes.append(note)
    if every_held is not None:
        ref = dataclasses.replace(ref, held_tables=count_tables(every_held))
        baselines = {
            k: dataclasses.replace(b, held_tables=ref.held_tables)
            if b.basis is not None and b.basis.kind == "borrowed"
            else b
            for k, b in baselines.items()
        }
    notes.extend(_baseline_notes(ref, baselines))
    fit, loss_fit = None, None
    if scored.labels is not None and model.kind == "regressor":
        from monitor.accuracy.labelled import labelled_loss_fit

        loss_fit = labelled_loss_fit(
            model, scored.x, scored.held, scored.labels, seed=config.seed, segments=scored.segments
        )
    elif scored.labels is not None:
        fit = _labelled_fit(model, scored, res, config.seed, calibration, label_kind)
    kept_held = None if scored.held is None else scored.held.take(ok)
    return BuiltReference(ref, baselines, kept_held, chosen, fit, tuple(notes), loss_fit)


def _segment_baselines(
    model: OnnxModel,
    rows: ReferenceRows,
    scored: ReferenceRows,
    ok: NDArray[np.bool_],
    signals: dict[str, Any],
    names: Sequence[str] | None,
    max_segments: int,
    seed: int,
    ref: Reference,
    every_held: Any,
) -> tuple[dict[str, Reference], str]:
    """Each segment's baseline from the scored rows (own, shrunk toward the others or borrowed:
    :func:`~monitor.rolling.segment_baselines.plan_segments`) on the model's γ edges, with the held inputs' count
    tables of every row; and the note that says which each segment got."""
    assert scored.segments is not None and rows.segments is not None
    plan: dict[str, SegmentPlan] = plan_segments(scored.segments[ok], signals["features"], max_segments, seed, names)
    scored_held = None
    if scored.held is not None:
        scored_held = held_columns(scored.held.take(ok).values, held_element_names(model.signature))
    baselines = segment_references(
        scored.segments[ok],
        **signals,
        feature_names=names,
        max_segments=max_segments,
        seed=seed,
        held=scored_held,
        plan=plan,
        gamma_edges=ref.gamma_edges,  # the model's: its maps add up across segments
    )
    if every_held is not None:
        baselines = _with_held_tables(baselines, every_held, fold_segments(rows.segments, max_segments))
    kept = ", ".join(f"{name} {p.describe()}" for name, p in plan.items()) or "none"
    return (
        baselines,
        f"per-segment baselines: {kept}; a segment absent from these rows warms up on its own first events live",
    )


def _gamma_map_note(ref: Reference) -> str:
    """Which γ edges the model's Gamma Maps are on, and why (none for a regressor: no P axis)."""
    m = ref.gamma_map
    if m is None:
        return "Gamma Map: none (a regressor has no predicted-class probability, the map's P axis)"
    return f"Gamma Map: {edges_note(m.gamma_edges, m.total)}"


def _finite(rows: ReferenceRows) -> tuple[ReferenceRows, str | None]:
    """The rows whose features are all finite (at least the drift detectors' minimum), and the warning that says
    how many were left out (None: none)."""
    finite = np.all(np.isfinite(rows.x), axis=1)
    dropped = int(finite.size - finite.sum())
    rows = rows.take(finite)
    if rows.x.shape[0] < MIN_REFERENCE_VALUES:
        raise DataError(
            f"{rows.source} has {rows.x.shape[0]} finite rows; a reference needs at least {MIN_REFERENCE_VALUES}, the "
            "drift detectors' minimum (200 or more calibrate their thresholds)"
        )
    if not dropped:
        return rows, None
    return rows, (
        f"warning: {dropped} of {finite.size} rows of {rows.source} hold NaN or infinite values and are left out; "
        f"the reference is built from the other {rows.x.shape[0]}"
    )


def _labelled_fit(
    model: OnnxModel, scored: ReferenceRows, res: ScoreResult, seed: int, calibration: str, label_kind: str
) -> EstimatorFit:
    """The accuracy estimators fitted on the scored rows' labels."""
    from monitor.accuracy.labelled import labelled_fit

    assert scored.labels is not None
    return labelled_fit(
        model,
        scored.x,
        scored.held,
        res,
        scored.labels,
        seed=seed,
        calibration=calibration,  # type: ignore[arg-type]
        compare=label_kind,
        segments=scored.segments,
    )


def _checked(
    model: OnnxModel, rows: ReferenceRows, scales: str, sample_rows: int, feature_names: Sequence[str] | None
) -> tuple[str, ...] | None:
    """The feature names the reference records (given, else a named-input model's, else a plain model's data's column
    names), once the options are checked against the model and the rows."""
    if scales not in SCALES:
        raise DataError(f"scales must be 'fixed' or 'from-reference'; got {scales!r}")
    if sample_rows < 1:
        raise DataError(f"sample rows must be >= 1; got {sample_rows}")
    names = tuple(feature_names) if feature_names else (None if model.signature.plain else model.signature.features)
    if names is None and rows.names is not None and len(rows.names) == model.n_features:
        names = rows.names  # a plain model's input is one tensor of generic element names: the data's own names
    if names is None:
        names = model.given_feature_names  # else the names the ONNX file's metadata holds (``convert``'s)
    if names is not None and len(names) != model.n_features:
        raise DataError(f"feature_names lists {len(names)} names; the model takes {model.n_features} features")
    return names


def _scales_chosen(
    model: OnnxModel,
    standardizer: Standardizer,
    scored: ReferenceRows,
    config: ScoringConfig,
    target_flicker_share: float,
) -> tuple[ScoringConfig, SignalScales, str]:
    """σ (= r) chosen on the sampled rows: the configuration at it, the scales, and the note saying so."""
    from monitor.signals.scales import choose_scales

    chosen = choose_scales(
        model, standardizer, scored.x, scored.held, config, target_share=target_flicker_share, held_sample=scored.held
    )
    note = (
        f"signal scales from the reference: σ = r = {chosen.sigma:.4g}; {chosen.flicker_share:.0%} of "
        f"{chosen.rows} rows flicker (target {target_flicker_share:.0%})"
    )
    return dataclasses.replace(config, sigma=chosen.sigma, radius=chosen.radius), chosen, note


def _with_held_tables(
    baselines: dict[str, Reference], every_held: dict[str, Any], folded: NDArray[Any]
) -> dict[str, Reference]:
    """Each segment's own baseline with the count tables of its own rows' held inputs (every row, not the sample); a
    shrunk or borrowed one keeps the tables of the rows it was built from."""
    return {
        name: dataclasses.replace(base, held_tables=count_tables({k: v[folded == name] for k, v in every_held.items()}))
        if base.basis is None or base.basis.kind == "own"
        else base
        for name, base in baselines.items()
    }


def _refuse_empty_inputs(rows: ReferenceRows, names: Sequence[str | None] | None) -> None:
    """Refuse reference rows in which an input is NaN or infinite in every row (no row would be left)."""
    empty = np.flatnonzero(~np.any(np.isfinite(rows.x), axis=0)) if rows.x.shape[0] else np.zeros(0, dtype=np.intp)
    if empty.size:
        label = [str(names[j]) if names is not None and names[j] is not None else f"f{j}" for j in empty.tolist()]
        raise DataError(
            f"{rows.source}: input {', '.join(label)} is NaN or infinite in every one of its {rows.x.shape[0]} rows, "
            "so no row is usable; fill the column or leave that input out of the model's rows"
        )


def _baseline_notes(ref: Reference, baselines: Mapping[str, Reference]) -> list[str]:
    """What each baseline allows at the default drift settings and its constant inputs
    (:func:`monitor.drift.power.baseline_notes`)."""
    from monitor.drift.power import baseline_notes  # on use: it builds verdict engines

    return baseline_notes(baselines or {"model-wide": ref}, DriftSettings())


def sample(rows: ReferenceRows, sample_rows: int, seed: int) -> NDArray[np.intp]:
    """The indices of the rows scored: at most ``sample_rows`` of each segment (in row order), or of all rows
    without segments (a seeded draw; all of them when they are that few)."""
    n = rows.x.shape[0]
    rng = np.random.default_rng(seed)
    if rows.segments is not None:
        segments = rows.segments
        return np.sort(
            np.concatenate(
                [
                    idx if idx.size <= sample_rows else rng.choice(idx, sample_rows, replace=False)
                    for name in np.unique(segments).tolist()
                    for idx in [np.flatnonzero(segments == name)]
                ]
            )
        )
    if n > sample_rows:
        return np.asarray(rng.choice(n, sample_rows, replace=False), dtype=np.intp)
    return np.arange(n)


def _signals(res: ScoreResult, x: NDArray[np.float64], classifier: bool, ok: NDArray[np.bool_]) -> dict[str, Any]:
    """The scored rows' signals as :meth:`Reference.from_arrays` and :func:`segment_references` take them."""
    return {
        "gamma": res.gamma[ok],
        "flicker": res.flicker[ok],
        "features": x[ok],
        "predicted_class": res.predicted_class[ok],
        "confidence": res.probability[ok] if classifier else None,
        "margin": res.margin[ok] if classifier else None,
    }
