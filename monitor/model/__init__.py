"""Stage 3: the model: ONNX loading and prediction, the input signature, standardizing, row files and conversion from scikit-learn.

``__all__``: what other packages import from here, each loaded from its module on first use (:mod:`monitor.lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.lazy import lazy_names

if TYPE_CHECKING:
    from monitor.model.base import ModelKind, ModelOutput, Predictor
    from monitor.model.convert import (
        ColumnTypes,
        column_types_from_estimator,
        column_types_from_sample,
        convert_estimator,
    )
    from monitor.model.io import (
        HEADER_MODES,
        HeaderMode,
        ModelRowsFile,
        RowsFile,
        load_rows,
        read_model_rows,
        read_rows,
        split_flat,
    )
    from monitor.model.onnx import NeighbourhoodEvaluator, NeighbourhoodRejected, OnnxModel, argmax_rows
    from monitor.model.signature import HELD_COLUMNS, Held, InputSpec, Signature, default_held, scale_groups
    from monitor.model.sniff import not_joblib
    from monitor.model.standardize import Standardizer

#: each public name → the module that defines it
_HOMES = {
    "argmax_rows": "onnx",
    "column_types_from_estimator": "convert",
    "column_types_from_sample": "convert",
    "ColumnTypes": "convert",
    "convert_estimator": "convert",
    "default_held": "signature",
    "HEADER_MODES": "io",
    "HeaderMode": "io",
    "Held": "signature",
    "HELD_COLUMNS": "signature",
    "InputSpec": "signature",
    "load_rows": "io",
    "ModelKind": "base",
    "ModelOutput": "base",
    "ModelRowsFile": "io",
    "NeighbourhoodEvaluator": "onnx",
    "NeighbourhoodRejected": "onnx",
    "not_joblib": "sniff",
    "OnnxModel": "onnx",
    "Predictor": "base",
    "read_model_rows": "io",
    "read_rows": "io",
    "RowsFile": "io",
    "scale_groups": "signature",
    "Signature": "signature",
    "split_flat": "io",
    "Standardizer": "standardize",
}

__all__ = [
    "ColumnTypes",
    "HEADER_MODES",
    "HELD_COLUMNS",
    "HeaderMode",
    "Held",
    "InputSpec",
    "ModelKind",
    "ModelOutput",
    "ModelRowsFile",
    "NeighbourhoodEvaluator",
    "NeighbourhoodRejected",
    "OnnxModel",
    "Predictor",
    "RowsFile",
    "Signature",
    "Standardizer",
    "argmax_rows",
    "column_types_from_estimator",
    "column_types_from_sample",
    "convert_estimator",
    "default_held",
    "load_rows",
    "not_joblib",
    "read_model_rows",
    "read_rows",
    "scale_groups",
    "split_flat",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())
