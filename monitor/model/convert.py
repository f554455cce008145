"""Stage 3 (model): a fitted scikit-learn estimator → an ONNX file with skl2onnx, probabilities as a plain tensor.

Used by ``harmonic-monitor convert`` and by the demo; needs the ``convert`` extra (skl2onnx).

A pipeline fitted on a DataFrame through a ``ColumnTransformer`` takes one ONNX input per column (what skl2onnx
makes of it, and what :mod:`monitor.model.signature` reads as inputs by name): each column's type comes from a sample
of the training rows when given (:func:`column_types_from_sample`), else from the estimator
(:func:`column_types_from_estimator`: ``feature_names_in_`` for the names, the encoders' ``categories_`` for string
and integer columns, float for the rest). An estimator of one float input ``input`` fitted on named columns keeps their
names in the file's metadata (:data:`FEATURE_NAMES_KEY`); the loader names the input's elements by them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from monitor.errors import ModelError

#: (column name, "float" | "int64" | "string") per input of a DataFrame-fitted pipeline
ColumnTypes = list[tuple[str, str]]
#: the ONNX metadata_props key holding a plain model's feature names (a JSON list)
FEATURE_NAMES_KEY = "harmonic_feature_names"


def convert_estimator(
    estimator: object,
    n_features: int,
    out: Path,
    opset: int | None = None,
    *,
    columns: ColumnTypes | None = None,
) -> Path:
    """Convert a fitted estimator with skl2onnx, probabilities as a tensor. Returns ``out``.

    ``columns``: one input per column with its type (a DataFrame-fitted ``ColumnTransformer`` pipeline); default one
    float input ``input`` of ``n_features``.
    """
    try:
        from skl2onnx import to_onnx
        from skl2onnx.common.data_types import FloatTensorType, Int64TensorType, StringTensorType
    except ImportError as exc:
        raise ModelError(
            "skl2onnx is not installed; install the `convert` extra: in the clone, pip install -e '.[convert]'"
        ) from exc
    options = {id(estimator): {"zipmap": False}} if hasattr(estimator, "predict_proba") else None
    kinds = {"float": FloatTensorType, "int64": Int64TensorType, "string": StringTensorType}
    if columns:
        initial = [(name, kinds[kind]([None, 1])) for name, kind in columns]
    else:
        initial = [("input", FloatTensorType([None, n_features]))]
    try:
        with _integer_attributes():
            onx = to_onnx(estimator, initial_types=initial, options=options, target_opset=opset)
    except Exception as exc:  # noqa: BLE001 - skl2onnx raises many types
        hint = ""
        if columns:
            listed = ", ".join(f"{n}: {k}" for n, k in columns)
            hint = (
                f" (inputs tried: {listed}); if a column's type is wrong, pass --sample FILE: a CSV or parquet file "
                "with a header naming the training columns and a few training rows, whose values decide each type"
            )
        raise ModelError(f"skl2onnx cannot convert {type(estimator).__name__}: {short_error(exc)}{hint}") from exc
    names = getattr(estimator, "feature_names_in_", None)
    if not columns and names is not None and len(names) == n_features:
        entry = onx.metadata_props.add()  # the one input is ``input``: the training columns' names travel beside it
        entry.key, entry.value = FEATURE_NAMES_KEY, json.dumps([str(n) for n in names])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(onx.SerializeToString())
    return out


@contextlib.contextmanager
def _integer_attributes() -> Iterator[None]:
    """While skl2onnx converts, a node attribute that is a list of integers reaches onnx as Python ints.

    skl2onnx's tree converters pass numpy integers and booleans through to ``onnx.helper.make_attribute`` (skl2onnx
    1.20 with scikit-learn 1.9: a HistGradientBoosting tree's missing-value directions, numpy ``uint8`` mixed with
    ``bool``), which protobuf refuses ("Expected an int, got a boolean"): every HistGradientBoosting classifier failed
    to convert. The values are the same integers either way. Where skl2onnx's container class differs, nothing is
    changed and the conversion runs as skl2onnx has it.
    """
    try:
        from skl2onnx.common._container import ModelComponentContainer
    except ImportError:  # pragma: no cover - a skl2onnx without the class
        yield
        return
    original = getattr(ModelComponentContainer, "add_node", None)
    if original is None:  # pragma: no cover
        yield
        return

    def add_node(self: Any, *args: Any, **attrs: Any) -> Any:
        for key, value in attrs.items():
            if isinstance(value, list) and value and all(isinstance(v, int | np.integer | np.bool_) for v in value):
                attrs[key] = [int(v) for v in value]
        return original(self, *args, **attrs)

    ModelComponentContainer.add_node = add_node
    try:
        yield
    finally:
        ModelComponentContainer.add_node = original


def short_error(exc: BaseException, limit: int = 400) -> str:
    """An exception's message for one line of an error: at most ``limit`` characters of it (skl2onnx puts whole
    tree ensembles' attributes in its messages, a hundred thousand lines), and the cause it wraps, which says what
    went wrong.

    >>> try:
    ...     raise ValueError("Unable to create node " + "x" * 1000) from TypeError("Expected an int, got a boolean.")
    ... except ValueError as e:
    ...     short_error(e, 40)
    'Unable to create node xxxxxxxxxxxxxxxxxx… (982 characters cut); cause: TypeError: Expected an int, got a boolean.'
    """
    text = " ".join(str(exc).split())
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit:,} characters cut)"
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        text += f"; cause: {type(cause).__name__}: {' '.join(str(cause).split())[:limit]}"
    return text


def stored_feature_names(metadata: Mapping[str, str], n_features: int) -> tuple[str, ...] | None:
    """The feature names an ONNX file's metadata holds under :data:`FEATURE_NAMES_KEY` (a JSON list, one distinct
    non-empty name per feature, as ``convert`` writes from ``feature_names_in_``), else None."""
    raw = metadata.get(FEATURE_NAMES_KEY)
    try:
        names = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(names, list) or len(names) != n_features or len(set(map(str, names))) != n_features:
        return None
    given = tuple(str(n).strip() for n in names)
    return given if all(given) else None


def _walk(estimator: Any) -> Iterator[Any]:
    """The estimator and every estimator inside it (pipeline steps, column transformers' parts)."""
    yield estimator
    for _, step in getattr(estimator, "steps", []) or []:
        yield from _walk(step)
    for _, part, _cols in getattr(estimator, "transformers_", []) or []:
        if not isinstance(part, str):
            yield from _walk(part)


def column_transformer(estimator: Any) -> Any | None:
    """The first fitted ``ColumnTransformer`` in the estimator (None when it has none)."""
    return next((e for e in _walk(estimator) if hasattr(e, "transformers_")), None)


def column_types_from_estimator(estimator: Any) -> ColumnTypes | None:
    """Each input column's type for a DataFrame-fitted pipeline with a ``ColumnTransformer``; None for any other
    estimator (one float input then).

    Raises
    ------
    ModelError
        A ``ColumnTransformer`` that selected columns by position (fitted on an array): the names are unknown.
    """
    ct = column_transformer(estimator)
    if ct is None:
        return None
    names = getattr(estimator, "feature_names_in_", None)
    if names is None:
        names = getattr(ct, "feature_names_in_", None)
    if names is None:
        raise ModelError(
            f"{type(estimator).__name__} holds a ColumnTransformer fitted without column names (on an array); "
            "convert takes the columns' names and types from a DataFrame-fitted model: refit it on a DataFrame, or "
            "pass --sample FILE (a CSV or parquet with a header naming the training columns)"
        )
    kinds: dict[str, str] = {str(n): "float" for n in names}
    for _, part, cols in ct.transformers_:
        if isinstance(part, str) or isinstance(cols, slice):
            continue
        selected = [str(names[c]) if isinstance(c, int) else str(c) for c in _as_list(cols)]
        encoder = next((e for e in _walk(part) if hasattr(e, "categories_")), None)
        if encoder is None:
            continue
        for name, cats in zip(selected, encoder.categories_, strict=False):
            kind = getattr(cats, "dtype", None)
            kinds[name] = (
                "string"
                if kind is not None and kind.kind in "OUS"
                else ("int64" if kind is not None and kind.kind in "iub" else "float")
            )
    return [(str(n), kinds[str(n)]) for n in names]


def _as_list(cols: Any) -> Sequence[Any]:
    if isinstance(cols, (str, int)):
        return [cols]
    return list(cols)


def column_types_from_sample(frame: Any, names: Sequence[str] | None = None) -> ColumnTypes:
    """Each column's type from a DataFrame of training rows (``names``: the columns the model was fitted on, in
    order; default every column): strings and categories → string, integers → int64, the rest → float.

    Raises
    ------
    ModelError
        A column the model was fitted on is missing from the sample (named).
    """
    cols = [str(c) for c in frame.columns]
    wanted = list(names) if names is not None else cols
    missing = [n for n in wanted if n not in cols]
    if missing:
        raise ModelError(
            f"--sample lacks columns {', '.join(repr(m) for m in missing)} that the model was fitted on "
            f"({', '.join(wanted)}); give a file with a header naming every training column"
        )
    out: ColumnTypes = []
    for name in wanted:
        dtype = frame[name].dtype
        if dtype.kind in "OUS" or str(dtype) in ("category", "string", "str"):
            out.append((name, "string"))
        elif dtype.kind in "iu":
            out.append((name, "int64"))
        else:
            out.append((name, "float"))
    return out
