"""Two or more models on the same rows: :func:`compare`, the facade's entry to :mod:`monitor.comparison`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from monitor.config import ModelSettings, ScoringSettings, SegmentSettings, setting_default
from monitor.offline.keywords import ScoringKeywords, StandardizeKeywords, scoring_config, split_keywords
from monitor.offline.scoring import BATCH_ROWS

if TYPE_CHECKING:
    from monitor.comparison import Comparison
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
