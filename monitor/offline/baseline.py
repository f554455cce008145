"""The baseline a reference gives: the standardizer (identity in ``raw`` space), the held sample, the reference
distributions, the fitted accuracy estimators and the scales, of rows, a reference JSON or :func:`monitor.reference`'s
result."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor.config import ScoringSettings, setting_default
from monitor.errors import ConfigError, DataError
from monitor.offline.results import ReferenceResult
from monitor.offline.rows import Rows, read_rows

if TYPE_CHECKING:
    from monitor.accuracy import EstimatorFit
    from monitor.accuracy.regression import LossFit
    from monitor.model.onnx import OnnxModel
    from monitor.model.signature import Held
    from monitor.model.standardize import Standardizer
    from monitor.rolling.reference import Reference
    from monitor.signals.scales import SignalScales

#: the standardizing keywords' defaults: the settings' (monitor/config.py declares them once)
SPACE: str = setting_default(ScoringSettings, "space")
SCALE: str = setting_default(ScoringSettings, "scale")
CHANNEL_AXIS: int = setting_default(ScoringSettings, "channel_axis")


@dataclass(frozen=True)
class Baseline:
    """What :func:`load_baseline` gives; ``rows``: the finite reference rows where the reference is rows read here
    (None for a reference JSON, :func:`monitor.reference`'s result, or the data standing as its own reference)."""

    standardizer: Standardizer
    held_sample: Held | None
    reference: Reference | None
    fit: EstimatorFit | None
    scales: SignalScales | None
    path: Path | None
    feature_names: tuple[str, ...] | None
    rows: Rows | None
    #: a regressor's fitted loss estimator (a reference built with labels)
    loss_fit: LossFit | None = None


def load_baseline(
    reference: Any,
    model: OnnxModel,
    data: Rows | None,
    *,
    space: str = SPACE,
    header: str = "auto",
    scale: str = SCALE,
    channel_axis: int = CHANNEL_AXIS,
) -> Baseline:
    """The standardizer (identity in ``raw`` space), held sample, reference distributions, fitted estimators and
    scales of ``reference`` (default: of ``data``); ``scale``/``channel_axis``: standardize per feature, globally or
    per image channel (:func:`monitor.model.signature.scale_groups`)."""
    from monitor.model.standardize import Standardizer

    if space not in ("standardized", "raw"):
        raise DataError(f"space must be 'standardized' or 'raw'; got {space!r}")

    if isinstance(reference, ReferenceResult):
        return Baseline(
            reference.standardizer,
            reference.held_sample,
            reference.reference,
            reference.fit,
            reference.scales,
            reference.path,
            reference.reference.feature_names,
            None,
            reference.loss_fit,
        )
    if isinstance(reference, (str, os.PathLike)) and str(reference).lower().endswith(".json"):
        base = _json_baseline(Path(reference), model)
        if space == "raw":  # radius and σ in the features' own units
            base = dataclasses.replace(base, standardizer=Standardizer.identity(model.n_features))
        return base
    rows = data if reference is None else read_rows(reference, model, what="reference", header=header)
    if rows is None:
        raise DataError("a reference is needed: rows, a reference JSON or monitor.reference(...)'s result")
    finite = np.all(np.isfinite(rows.x), axis=1)
    if not finite.any():
        raise DataError(f"the reference ({rows.source}) has no finite rows to standardize with")
    if space == "raw":
        std = Standardizer.identity(model.n_features)
    else:
        groups = None
        if scale != "per_feature":
            from monitor.errors import ModelError
            from monitor.model.signature import scale_groups

            try:
                groups = scale_groups(model.signature, scale, channel_axis)
            except ModelError as exc:
                raise ConfigError(str(exc)) from None
        std = Standardizer.fit(rows.x[finite], groups=groups)
    held = None if rows.held is None else rows.held.take(finite)
    return Baseline(std, held, None, None, None, None, None, rows.take(finite) if reference is not None else None)


def standardizer_of(
    reference: Any,
    model: OnnxModel,
    *,
    space: str = SPACE,
    header: str = "auto",
    scale: str = SCALE,
    channel_axis: int = CHANNEL_AXIS,
) -> Standardizer:
    """The standardizer a reference gives (rows, a reference JSON or :func:`reference`'s result), as :func:`score`
    standardizes by it (identity in ``raw`` space)."""
    base = load_baseline(reference, model, None, space=space, header=header, scale=scale, channel_axis=channel_axis)
    return base.standardizer


def _json_baseline(path: Path, model: OnnxModel) -> Baseline:
    from monitor.accuracy import EstimatorFit
    from monitor.accuracy.regression import LossFit
    from monitor.rolling.reference_file import (
        read_accuracy_estimator,
        read_held_sample,
        read_loss_estimator,
        read_reference,
        read_scales,
    )

    standardizer, ref = read_reference(path, model.n_features)
    block = read_accuracy_estimator(path)
    loss = read_loss_estimator(path)
    return Baseline(
        standardizer,
        read_held_sample(path, model.signature),
        ref,
        None if block is None else EstimatorFit.from_dict(block),
        read_scales(path),
        path,
        ref.feature_names,
        None,
        None if loss is None else LossFit.from_dict(loss),
    )
