""":func:`reference` (``harmonic-monitor reference``): the reference of reference rows, built by
:func:`~monitor.offline.reference_build.build_reference` from rows read with their segments and labels."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np
from numpy.typing import NDArray

from monitor.errors import DataError
from monitor.offline.baseline import SPACE, load_baseline
from monitor.offline.frames import is_frame
from monitor.offline.keywords import (
    BuildKeywords,
    ReferenceKeywords,
    ScoringKeywords,
    StandardizeKeywords,
    scoring_config,
    split_keywords,
)
from monitor.offline.reference_build import ReferenceRows, build_reference
from monitor.offline.results import ReferenceResult
from monitor.offline.rows import (
    MODEL_KIND,
    DataLike,
    ModelLike,
    Rows,
    int_labels,
    load_labels,
    load_model,
    model_path,
    read_rows,
    true_values,
)

if TYPE_CHECKING:
    from monitor.model.onnx import OnnxModel
    from monitor.model.standardize import Standardizer


def reference(
    model: ModelLike,
    data: DataLike,
    *,
    labels: Any = None,
    feature_names: Sequence[str] | None = None,
    segment_column: str | None = None,
    header: str = "auto",
    model_kind: str = MODEL_KIND,
    reference: Any = None,
    standardizer: Standardizer | None = None,
    out: str | os.PathLike[str] | None = None,
    **options: Unpack[ReferenceKeywords],
) -> ReferenceResult:
    """Build a reference from reference rows: what ``harmonic-monitor reference`` writes for the same rows and
    options, built by the same function (:func:`monitor.offline.reference_build.build_reference`): the count tables
    of held (string, int, bool) inputs over every row, the scored sample, per-segment baselines, scales and fit.

    How the rows are read: ``labels``: the true class of each row (an array, a column name of a DataFrame ``data``,
    or a ``.csv``/``.npy`` file) to fit the label-free accuracy estimators — for a regressor the true value (NaN:
    none), to fit the loss estimator (:mod:`monitor.accuracy.regression`: MAE and RMSE without labels); ``segment_column``: the DataFrame's (or
    the CSV's) column naming each row's segment; the reference then keeps a baseline per segment (each of the
    ``max_segments`` most frequent, the rest as ``other``): its own from 200 rows, shrunk toward the model-wide rows
    from 50, borrowed below (:mod:`monitor.rolling.segment_baselines`), each from a sample of at most ``sample_rows``
    of its rows. A segment column that is also a model input stays an input; a label or segment column named by the
    call is otherwise no feature (a plain model reads the frame's other columns in order).

    What standardizes them: ``reference``: rows or a reference JSON to standardize by instead of ``data``
    (``harmonic-monitor reference --reference``); ``standardizer``: this standardizer instead; ``space``, ``scale``,
    ``channel_axis`` (:class:`~monitor.offline.keywords.StandardizeKeywords`).

    What is scored: ``radius``, ``sigma``, ``flicker_copies``, ``steps``, ``seed``, ``ball``, ``output``,
    ``regression_tolerance`` (:class:`~monitor.offline.keywords.ScoringKeywords`, ``harmonic-monitor score``'s).

    How it is built (:class:`~monitor.offline.keywords.BuildKeywords`): ``scales``: ``fixed`` scores at ``radius``
    and ``sigma``; ``from-reference`` chooses σ (= r) so that ``target_flicker_share`` of the rows flicker and
    records it (``ReferenceResult.scales``; ``run`` then scores at it). ``label_kind``: ``values`` (labels are the
    class values the model's integer label output gives, else class indices) or ``indices`` (class indices 0..C−1);
    ``calibration``, ``sample_rows``, ``max_segments``. ``out``: also write the JSON there.

    Examples
    --------
    >>> import numpy as np, monitor
    >>> from monitor.examples import linear_classifier
    >>> ref = monitor.reference(linear_classifier(), np.random.default_rng(2).normal(size=(50, 3)),
    ...                         flicker_copies=4)
    >>> ref.reference.n_events, ref.fit is None
    (50, True)
    """
    scoring, standardize, build = split_keywords(
        "reference", options, ScoringKeywords, StandardizeKeywords, BuildKeywords
    )
    m = load_model(model, model_kind=model_kind)
    rows, source = _reference_rows(
        data, m, labels=labels, header=header, segment_column=segment_column, feature_names=feature_names
    )
    held_sample = None  # the rows' own, unless the standardizing reference brings its own
    if standardizer is None:
        from monitor.model.standardize import Standardizer

        standardizer = Standardizer.identity(m.n_features)  # rows without a finite one are refused below
        if reference is not None or np.all(np.isfinite(rows.x), axis=1).any():
            own = Rows(rows.x, rows.held, source)
            base = load_baseline(reference, m, own, header=header, **standardize)
            standardizer, held_sample = base.standardizer, base.held_sample if reference is not None else None
    built = build_reference(
        m, rows, standardizer, scoring_config(scoring), held_sample=held_sample, feature_names=feature_names, **build
    )
    result = ReferenceResult(
        standardizer,
        built.reference,
        standardize.get("space", SPACE),
        model_path(model),
        built.held_sample,
        built.fit,
        built.scales,
        segments=built.segments,
        segment_column=segment_column if built.segments else None,
        notes=(f"data: {source}", *built.notes),
        loss_fit=built.loss_fit,
    )
    if out is not None:
        result = dataclasses.replace(result, path=result.save(out))
    return result


def _reference_rows(
    data: DataLike,
    model: OnnxModel,
    *,
    labels: Any,
    header: str,
    segment_column: str | None,
    feature_names: Sequence[str] | None,
) -> tuple[ReferenceRows, str]:
    """``data`` as reference rows with their segments (``segment_column``) and labels, and what was read (a frame's
    columns named by ``feature_names`` are a plain model's features)."""

    label_column = labels if isinstance(labels, str) and is_frame(data) else None
    read: dict[str, Any] = {"header": header, "label_column": label_column, "feature_names": feature_names}
    if segment_column is None:
        rows = read_rows(data, model, **read)
        segments = None
    elif is_frame(data):
        from monitor.rolling.segment_baselines import is_input_column

        others = () if is_input_column(model.signature, segment_column) else (segment_column,)
        rows = read_rows(data, model, **read, other_columns=others)
        segments = frame_segments(data, segment_column)
    elif isinstance(data, (str, os.PathLike)):
        rows, segments = csv_segments(Path(data), model, segment_column, header)
    else:
        raise DataError(
            f"segment_column '{segment_column}' names a column of a DataFrame or of a CSV with a header; the data is "
            f"{type(data).__name__}: pass a DataFrame or a CSV path"
        )
    if segments is not None and segments.size != len(rows):
        raise DataError(
            f"segment column '{segment_column}': {segments.size} values for {len(rows)} rows of {rows.source}; "
            "every row needs one"
        )
    if label_column is not None:
        y = rows.labels
    elif isinstance(labels, (str, os.PathLike)):
        y = load_labels(labels, header=header, integer=model.kind == "classifier")
        if y.shape[0] != len(rows):
            raise DataError(
                f"labels '{labels}' has {y.shape[0]} values; expected one class per data row ({len(rows)})",
                path=str(labels),
            )
    else:
        y = None if labels is None else np.asarray(labels).reshape(-1)
    if y is not None and y.shape[0] != len(rows):
        raise DataError(f"labels: {y.shape[0]} values for {len(rows)} rows; give one class per row")
    name = f"'{data}'" if isinstance(data, (str, os.PathLike)) else f"the reference data ({rows.source})"
    if y is not None:
        y = int_labels(y) if model.kind == "classifier" else true_values(y)
    return ReferenceRows(rows.x, rows.held, name, segments, y, rows.names), rows.source


def frame_segments(frame: Any, column: str) -> NDArray[np.str_]:
    """The frame's ``column`` as each row's segment (a missing or blank value: ``other``)."""
    from monitor.rolling.windows import OTHER

    if column not in frame.columns:
        shown = ", ".join(repr(str(c)) for c in list(frame.columns)[:12])
        raise DataError(f"segment_column '{column}': the DataFrame has no such column (it has {shown})")
    missing = np.asarray(frame[column].isna().to_numpy(), dtype=bool)
    text = np.array([str(v).strip() for v in frame[column].to_numpy(dtype=object)], dtype=str)
    return np.where(missing | (text == ""), OTHER, text)


def csv_segments(path: Path, model: OnnxModel, column: str, header: str) -> tuple[Rows, NDArray[np.str_]]:
    """The rows of the CSV ``path`` and its ``column`` as each row's segment; the column is read as the model's
    input too when it names one (:func:`~monitor.rolling.segment_baselines.split_segment_column`)."""
    from monitor.rolling.segment_baselines import is_input_column, split_segment_column

    keep = is_input_column(model.signature, column)
    with split_segment_column(path, column, flag="segment column", keep=keep) as (copy, segments):
        rows = read_rows(copy, model, header=header)
    return dataclasses.replace(rows, source=rows.source.replace(str(copy), str(path))), segments
