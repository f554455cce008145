"""Two or more models on the same rows: :func:`compare`, the facade's entry to :mod:`monitor.comparison`; and
:func:`two_models`, the report page's comparison of its model with a candidate."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np

from monitor.config import ModelSettings, ScoringSettings, SegmentSettings, setting_default
from monitor.errors import DataError
from monitor.offline.keywords import ScoringKeywords, StandardizeKeywords, scoring_config, split_keywords
from monitor.offline.scoring import BATCH_ROWS

if TYPE_CHECKING:
    from monitor.comparison import Comparison
    from monitor.offline.baseline import Baseline
    from monitor.offline.keywords import ScoreKeywords
    from monitor.offline.rows import DataLike, ModelLike


def compare(
    models: Sequence[ModelLike] | Mapping[str, ModelLike],
    data: DataLike,
    reference: DataLike = None,
    *,
    labels: Any = None,
    reference_labels: Any = None,
    segment_column: str | None = None,
    feature_names: Mapping[str, Sequence[str]] | None = None,
    model_kind: str = setting_default(ModelSettings, "model_kind"),
    batch_rows: int = BATCH_ROWS,
    replicates: int = 1000,
    level: float = 0.9,
    probe_points: int = 20,
    max_segments: int = setting_default(SegmentSettings, "max_segments"),
    header: str = "auto",
    **options: Unpack[ScoreKeywords],
) -> Comparison:
    """Two or more models scored on the same rows at the same scales and compared pair by pair
    (``harmonic-monitor compare``; :mod:`monitor.comparison` says how). ``options``: the scoring keywords and
    ``space`` (:class:`~monitor.offline.keywords.ScoreKeywords`).

    Parameters
    ----------
    models : ONNX paths or loaded models, in a list (named by file stem) or a mapping by name; the first is the one
        in place, each later one a candidate beside it.
    data : a DataFrame, a mapping of columns, a ``.csv`` (with a header), ``.parquet`` or ``.npy`` file, or a
        ``.jsonl`` event log (decoded for each model as ``run`` decodes events); each model reads its inputs from the
        columns by name (``feature_names``: the columns a model of one unnamed [N, D] input reads, by model name).
    reference : rows of the same columns that standardize every model (default ``data``).
    labels, reference_labels : the true class per row (a column name, an array, or a ``.csv``/``.npy`` file): the
        realized accuracy, and the fit of the label-free estimators.
    segment_column : a column of ``data`` naming each row's segment (the ``max_segments`` most frequent kept).
    replicates, level : the paired bootstrap's replicates and the intervals' coverage.
    probe_points : rows each model's ε* profile is probed on (0: no fragility split).

    Returns
    -------
    monitor.comparison.Comparison
        Its tables (``models``, ``pairs``, ``verdicts``, ``disagreement_inputs``, ``fragility``) as named columns;
        ``frames()`` gives them as DataFrames, ``document()`` as JSON, ``summary()`` as the printed table.

    Raises
    ------
    DataError
        Fewer than two models, a classifier beside a regressor, different class sets, or inputs the data does not
        name (listed).
    TypeError
        A keyword none of the sets declares.
    """
    from monitor.comparison import compare_models

    scoring, standardize = split_keywords("compare", options, ScoringKeywords, StandardizeKeywords)
    return compare_models(
        models,
        data,
        reference,
        labels=labels,
        reference_labels=reference_labels,
        segment_column=segment_column,
        feature_names=feature_names,
        config=scoring_config(scoring),
        space=standardize.get("space", setting_default(ScoringSettings, "space")),
        model_kind=model_kind,
        batch_rows=batch_rows,
        replicates=replicates,
        level=level,
        probe_points=probe_points,
        max_segments=max_segments,
        header=header,
    )


def two_models(
    models: tuple[Any, Any],
    references: tuple[Any, Any],
    events: Any,
    labels: Any,
    seed: int,
    names: Sequence[str] | None,
    max_events: int | None = None,
    served: Baseline | None = None,
) -> dict[str, Any]:
    """The model and a candidate compared on the same events by :func:`monitor.compare` (by the reference rows
    where ``reference`` is rows; with the labels where every event has one; ``names`` for each model of one
    unnamed input), as :class:`~monitor.offline.report_data.ReportData`'s fields; a comparison refused (different inputs, kinds, class sets)
    leaves its message as the note.

    ``served``: the page's baseline of the model. Where the reference is a reference JSON (the model's alone), both
    models are standardized and scored as the page scores the model (its standardizer and scales), and the model's
    label-free estimate comes from the reference's labelled fit, so the section's figures are the page's; the
    candidate has no labelled reference of its own there (the page says so)."""
    from monitor.offline.rows import load_model, model_path

    model, candidate = models
    reference, reference_labels = references
    if candidate is None:
        return {}
    first = Path(model_path(model)).stem
    second = Path(model_path(candidate)).stem
    named = {first: model, (second if second != first else f"{second}-candidate"): candidate}
    given = None
    if names is not None:
        given = {k: list(names) for k, m in named.items() if load_model(m).signature.plain}
    notes = (
        []
        if max_events is None
        else [f"the two models are compared on every event (max_events={max_events} cuts the other sections only)"]
    )
    reference, reference_labels, standardizer, fits, config = _scored_as(
        (reference, reference_labels), served, first, seed, notes
    )
    y = None if labels is None else np.asarray(labels).reshape(-1)
    if y is not None and y.dtype.kind in "fO" and not all(v is not None and v == v for v in y.tolist()):
        y = None
        notes.append("no realized accuracy per model: some events have no label")

    is_log = isinstance(events, (str, os.PathLike)) and str(events).lower().endswith(".jsonl")

    def run(y: Any) -> Any:
        from monitor.comparison import compare_models

        return compare_models(
            named,
            events,
            reference,
            labels=y,
            reference_labels=reference_labels,
            feature_names=given,
            config=config,
            batch_rows=BATCH_ROWS,
            probe_points=0,
            max_segments=setting_default(SegmentSettings, "max_segments"),
            # an event log's segments: the page pairs the models per segment as its timeline shows them
            segment_column="segment" if is_log else None,
            standardizer=standardizer,
            fits=fits,
        )

    try:
        try:
            cmp = run(y)
        except DataError as exc:
            if y is None or not str(exc).startswith("labels:"):
                raise
            cmp = run(None)  # labels of the report's valid events, not one per row the comparison reads
            notes.append(f"no realized accuracy per model: {exc}")
    except DataError as exc:
        return {"comparison_note": f"no comparison of the two models: {exc}"}
    return {"comparison": cmp, "comparison_note": "; ".join(notes)}


def _scored_as(
    references: tuple[Any, Any], served: Baseline | None, first: str, seed: int, notes: list[str]
) -> tuple[Any, Any, Any, dict[str, Any] | None, Any]:
    """How :func:`two_models` standardizes and scores both models: by the reference rows where ``references`` holds
    rows; where it is a reference JSON (one model's), as the page scores the model (``served``: its standardizer,
    scales and labelled fit), else by the events. Returns (reference, reference_labels, standardizer, fits, config)
    for the comparison; what it decided is appended to ``notes``."""
    from monitor.offline.results import ReferenceResult
    from monitor.signals.scorer import ScoringConfig

    reference, reference_labels = references
    one_model = isinstance(reference, ReferenceResult) or (
        isinstance(reference, (str, os.PathLike)) and str(reference).lower().endswith(".json")
    )
    standardizer, fits, config = None, None, ScoringConfig(seed=seed)
    if one_model and served is not None:
        reference = reference_labels = None
        standardizer, config = served.standardizer, scoring_config({"seed": seed}, served.scales)
        fits = {first: served.fit} if served.fit is not None else None
        notes.append(
            f"'{first}' is standardized and scored as the page scores it (the reference's standardizer"
            + (" and scales" if served.scales is not None else "")
            + "), the candidate by the same standardizer where it reads the same inputs (else by the events)"
            + (
                f"; the label-free estimate of '{first}' is the reference's labelled fit, as in the summary; the "
                "candidate's needs labelled reference rows (give reference rows and reference_labels to fit both)"
                if fits
                else ""
            )
        )
    elif one_model:
        reference = reference_labels = None
        notes.append(
            "both models are standardized by the events themselves: a reference JSON is of one model (give reference "
            "rows to standardize both by them)"
        )
    return reference, reference_labels, standardizer, fits, config
