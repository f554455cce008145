"""The runtime's per-model record: the ONNX copy, its standardizer, scorer and analytics (:class:`ModelWatch`).

:func:`load_model_runtime` is where a configured model enters the runtime: the ONNX file is loaded once and its
standardizer comes from the reference (a CSV/NPY of rows or a ``harmonic-monitor reference`` JSON), from
``space: raw``, or later from the warm-up window.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from monitor.accuracy import EstimatorFit
from monitor.accuracy.regression import LossFit
from monitor.config import ModelSettings
from monitor.drift.base import MIN_REFERENCE_VALUES
from monitor.drift.categories import OTHER_KEY
from monitor.errors import ConfigError, DataError
from monitor.events import InferenceEvent
from monitor.model.io import ModelRowsFile, read_model_rows
from monitor.model.onnx import OnnxModel
from monitor.model.signature import Held, scale_groups
from monitor.model.standardize import Standardizer
from monitor.rolling.reference_file import (
    read_accuracy_estimator,
    read_held_sample,
    read_loss_estimator,
    read_reference,
    read_scales,
)
from monitor.rolling.segment_baselines import is_input_column, split_segment_column
from monitor.runtime.watch import ModelWatch
from monitor.signals.control import control_for
from monitor.signals.scales import SignalScales
from monitor.signals.scorer import RobustnessScorer, ScoringConfig
from monitor.source.base import RawRecord

log = logging.getLogger(__name__)

#: held values kept for a regressor's output scale (:attr:`ModelRuntime.held_sample`)
HELD_SAMPLE_ROWS = 256


class Pending(NamedTuple):
    """One sampled event waiting to be scored."""

    event: InferenceEvent
    #: the live server's label against the ONNX copy's: NaN (no live label), 0.0 (agrees) or 1.0 (disagrees)
    disagreement: float
    #: 1 / the event's inclusion probability
    weight: float
    #: the record it came from (dead-lettered if applying it fails), None for a KServe half released alone
    record: RawRecord | None


@dataclass
class ModelRuntime:
    """One watched model: its ONNX copy, standardizer (None during warm-up), scorer and analytics."""

    settings: ModelSettings
    model: OnnxModel
    standardizer: Standardizer | None = None
    scorer: RobustnessScorer | None = None
    watch: ModelWatch | None = None
    warmup: list[NDArray[np.float64]] = field(default_factory=list)
    #: the warm-up events' held values, for a model that holds inputs fixed (see :attr:`held_sample`)
    warmup_held: list[dict[str, Any]] = field(default_factory=list)
    #: held values seen in the reference or the warm-up (at most :data:`HELD_SAMPLE_ROWS`), for a model that holds
    #: inputs fixed: a regressor's output scale is measured with them (``RobustnessScorer(held_sample=...)``)
    held_sample: Held | None = None
    #: sampled events waiting for the next micro-batch, each with its shadow disagreement (NaN, 0 or 1), its
    #: sampling weight (1 / inclusion probability) and the record it came from (dead-lettered if applying it fails)
    pending: list[Pending] = field(default_factory=list)
    #: the label-free accuracy estimators a reference JSON built with labels holds (``reference --labels``), else
    #: None; the model's :class:`ModelWatch` estimates accuracy per window with them
    accuracy_fit: EstimatorFit | LossFit | None = None
    #: the σ and r the reference JSON records (``reference --scales from-reference``), else None; with
    #: ``scoring.scales: from_reference`` the scorer uses them where radius/sigma are not set explicitly
    recorded_scales: SignalScales | None = None
    #: reference rows (a reference JSON's feature sample) the γ_logit control map is fitted on at activation, for a
    #: classifier scored with a per-event sampled hypercube (:func:`monitor.signals.control.control_for`)
    control_rows: NDArray[np.float64] | None = None
    _fingerprint: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.settings.name

    def scoring_config(self) -> ScoringConfig:
        s = self.settings.scoring
        radius, sigma = self.scales()
        return ScoringConfig.from_settings(s, radius=radius, sigma=sigma)

    def scales(self) -> tuple[float, float]:
        """(radius, sigma) the scorer uses: the recorded scales of the reference JSON under ``scales:
        from_reference``, except where the settings give radius or sigma explicitly; else the settings'."""
        s = self.settings.scoring
        rec = self.recorded_scales
        if rec is None or s.scales == "fixed":
            return s.radius, s.sigma
        explicit = s.model_fields_set
        return (
            s.radius if "radius" in explicit else rec.radius,
            s.sigma if "sigma" in explicit else rec.sigma,
        )

    def fit_standardizer(self, rows: NDArray[np.float64]) -> Standardizer:
        """The standardizer of reference or warm-up rows, with the ``scale`` grouping the settings ask for."""
        s = self.settings.scoring
        return Standardizer.fit(rows, groups=scale_groups(self.model.signature, s.scale, s.channel_axis))

    def activate(self, standardizer: Standardizer) -> None:
        self.standardizer = standardizer
        config = self.scoring_config()
        control = control_for(self.model, standardizer, config.radius, config.ball, self.control_rows)
        self.scorer = RobustnessScorer(self.model, standardizer, config, held_sample=self.held_sample, control=control)

    def readiness(self) -> dict[str, Any]:
        """This model in ``/readyz``: loaded, scoring (or warming up), and what its inputs were read as.

        ``inputs`` and ``held`` (the inputs and elements held fixed) come from the graph; ``held_categories`` is the
        number of values the reference counted for each held element (its category table, which the held-inputs
        drift test compares events against; rarer values past the table's top ones share one bucket, not counted).
        The values themselves are left out: they are event data, and the reference JSON holds them.
        """
        signature = self.model.signature.summary()
        reference = None if self.watch is None else self.watch.baselines.reference
        tables = {} if reference is None else reference.held_tables
        return {
            "loaded": True,
            "scoring": self.scorer is not None,
            "warmup_events": len(self.warmup),
            # segments still learning their own baseline (no verdict yet): {segment: {events, of}}
            "segments_warming_up": {} if self.watch is None else self.watch.warming_up,
            # the baseline each segment is judged against: own, shrunk toward the model-wide rows, borrowed
            "segment_baselines": {} if self.watch is None else self.watch.baselines.bases,
            # judged segments whose window tests (KS, range, PCA …) have not run yet: {segment: {detector: {scored,
            # needed}}}; their harmonic_drift_statistic is NaN until the first test
            "segments_untested": {} if self.watch is None else self.watch.untested_windows,
            "kind": self.model.kind,
            "inputs": signature["inputs"],
            "held": signature["held"],
            "held_categories": {name: len(set(table) - {OTHER_KEY}) for name, table in tables.items()},
        }

    def fingerprint(self) -> dict[str, Any]:
        """What a saved reference was computed from: the model file, the reference file and the scoring settings.

        Persisted beside the reference; a restart with any of them changed rebuilds the reference instead of
        restoring a γ/flicker distribution that no longer describes this model (see :func:`monitor.runtime.state.restore_model`).
        Computed once, when first asked (at start-up): it describes the files this process loaded.
        """
        if self._fingerprint is None:
            reference = self.settings.reference
            self._fingerprint = {
                "model_sha256": _sha256(self.model.path),
                "reference_sha256": None if reference is None else _sha256(reference),
                "scoring": self.settings.scoring.model_dump(mode="json"),
                # what the outputs were read as (model_kind, or the graph): γ and flicker mean something else
                # when it changes
                "outputs": self.model.decision.fingerprint(),
            }
        return self._fingerprint


def load_onnx(ms: ModelSettings) -> OnnxModel:
    """The model's ONNX copy, its ``feature_names`` checked against its inputs and given to its elements."""
    model = OnnxModel.from_settings(ms)
    check_feature_names(ms, model)
    if ms.feature_names is not None and len(ms.feature_names) == model.n_features:
        # one name per element, decided here: probe reports, /probes and drift alerts use model.feature_names
        model.name_features(ms.feature_names, source=f"model '{ms.name}': feature_names")
    return model


def load_model_runtime(ms: ModelSettings, *, segment_column: str | None = None) -> ModelRuntime:
    """Load the model's ONNX copy and, when its reference (or ``space: raw``) allows, its standardizer.

    Without a reference the standardizer is fitted from the first ``warmup_events`` events of the stream.
    ``segment_column`` (``segments.reference_column``): a CSV reference's column naming each row's segment, left out
    of the rows the standardizer is fitted on.
    """
    model = load_onnx(ms)
    rt = ModelRuntime(settings=ms, model=model)
    if ms.scoring.space == "raw":
        if ms.reference is not None and ms.reference.suffix.lower() == ".json":
            rt.control_rows = read_reference(ms.reference, model.n_features)[1].feature_sample
        rt.activate(Standardizer.identity(model.n_features))
        if ms.reference is not None and ms.reference.suffix.lower() != ".json":
            # a reference `run` cannot use is refused here, as with standardized units, not once events arrive
            if segment_column is None:
                read_reference_table(ms, model)
            else:
                read_segmented_reference_table(ms, model, segment_column)
    elif ms.reference is not None and ms.reference.suffix.lower() == ".json":
        rt.held_sample = read_held_sample(ms.reference, model.signature)
        try:
            rt.recorded_scales = read_scales(ms.reference)
        except DataError as exc:
            raise ConfigError(f"model '{ms.name}': {exc}") from exc
        standardizer, reference = read_reference(ms.reference, model.n_features)
        if reference.n_events < MIN_REFERENCE_ROWS:
            raise ConfigError(
                f"model '{ms.name}': reference '{ms.reference}' was built from {reference.n_events} events; the drift "
                f"detectors need at least {MIN_REFERENCE_ROWS}. Rebuild it with `harmonic-monitor reference` from more "
                "rows"
            )
        name_features_from_reference(ms, model, reference.feature_names, "feature_names")
        rt.control_rows = reference.feature_sample
        rt.activate(standardizer)
    elif ms.reference is not None:
        table = (
            read_reference_table(ms, model)
            if segment_column is None
            else read_segmented_reference_table(ms, model, segment_column)[0]
        )
        name_features_from_reference(ms, model, table.names, "header")
        ref, held = table.rows, table.held
        finite = np.all(np.isfinite(ref), axis=1)
        if held is not None:
            rt.held_sample = held.take(np.flatnonzero(finite)[:HELD_SAMPLE_ROWS])
        rt.activate(rt.fit_standardizer(ref[finite]))
    if ms.reference is not None and ms.reference.suffix.lower() == ".json":
        rt.accuracy_fit = read_accuracy_fit(ms, model)
    return rt


def read_accuracy_fit(ms: ModelSettings, model: OnnxModel) -> EstimatorFit | LossFit | None:
    """The accuracy estimators the model's reference JSON holds (a regressor's: its loss estimator), or None (a file
    built without labels).

    Raises
    ------
    ConfigError
        The file holds a damaged or other-version fit, or holds one for a model read as a regressor.
    """
    assert ms.reference is not None
    if model.kind == "regressor" and (loss := read_loss_estimator(ms.reference)) is not None:
        try:
            return LossFit.from_dict(loss)
        except DataError as exc:
            raise ConfigError(f"model '{ms.name}': reference '{ms.reference}': {exc}") from exc
    doc = read_accuracy_estimator(ms.reference)
    if doc is None:
        return None
    if model.kind != "classifier":
        raise ConfigError(
            f"model '{ms.name}' is read as a {model.kind}, but its reference '{ms.reference}' holds accuracy "
            "estimators (built with `reference --labels`): accuracy estimation is for classifiers"
        )
    try:
        return EstimatorFit.from_dict(doc)
    except DataError as exc:
        raise ConfigError(f"model '{ms.name}': reference '{ms.reference}': {exc}") from exc


def name_features_from_reference(ms: ModelSettings, model: OnnxModel, names: Sequence[str] | None, where: str) -> None:
    """Name a plain model's features by its reference (a reference JSON's ``feature_names``, a CSV reference's header)
    when the settings give no ``feature_names``: one name per element, decided at load, so that ``run``, ``replay``
    and ``report`` name an input alike (drift alerts, per-input invalid counts, probe reports). A model of named
    inputs keeps its signature's element names."""
    if ms.feature_names is not None or names is None or not model.signature.plain:
        return
    if len(names) != model.n_features or tuple(names) == model.feature_names:
        return
    model.name_features(names, source=f"model '{ms.name}': reference '{ms.reference}' {where}")
    log.info(
        "model '%s': features named by its reference's %s (%s)", ms.name, where, ", ".join(model.feature_names[:4])
    )


def read_reference_rows(ms: ModelSettings, model: OnnxModel) -> tuple[NDArray[np.float64], Held | None]:
    """The reference file's x and held values (:func:`read_reference_table`)."""
    table = read_reference_table(ms, model)
    return table.rows, table.held


def read_reference_table(ms: ModelSettings, model: OnnxModel, *, shown: Path | None = None) -> ModelRowsFile:
    """The reference file as read (:func:`~monitor.model.io.read_model_rows`): x, held values, header names.
    ``shown``: the file's name in messages (default: ``ms.reference``).

    Raises
    ------
    ConfigError
        The file is not as wide as the model's features, or has fewer than :data:`MIN_REFERENCE_ROWS` rows without
        NaN or infinite values (:func:`check_reference_rows`).
    """
    assert ms.reference is not None
    table = read_model_rows(ms.reference, model.signature, ms.reference_header, flag="--reference-header")
    ref = table.rows
    if ref.shape[1] != model.n_features:
        raise ConfigError(
            f"reference '{shown or ms.reference}' has {ref.shape[1]} columns; model '{ms.name}' expects "
            f"{model.n_features} features. Was the reference built for another model?"
        )
    check_reference_rows(ms, ref, shown=shown)
    return table


#: the fewest finite reference rows ``run`` takes: each drift detector's minimum (a reference of fewer rows leaves
#: every event unscorable)
MIN_REFERENCE_ROWS = MIN_REFERENCE_VALUES


def check_reference_rows(ms: ModelSettings, rows: NDArray[np.float64], *, shown: Path | None = None) -> int:
    """The number of rows of ``rows`` (N, D) without NaN or infinite values, which ``run`` keeps.

    Raises
    ------
    ConfigError
        Fewer than :data:`MIN_REFERENCE_ROWS` remain: what the detectors need, and the fix.
    """
    finite = int(np.count_nonzero(np.all(np.isfinite(rows), axis=1)))
    empty = np.flatnonzero(~np.any(np.isfinite(rows), axis=0)) if rows.shape[0] else np.zeros(0, dtype=np.intp)
    if empty.size:
        names = ms.feature_names
        label = ", ".join(str(names[j]) if names is not None else f"x[{j}]" for j in empty.tolist())
        raise ConfigError(
            f"model '{ms.name}': reference '{shown or ms.reference}': input {label} is NaN or infinite in every one "
            f"of its {rows.shape[0]} rows, so no row is usable; fill the column or leave that input out"
        )
    if finite < MIN_REFERENCE_ROWS:
        dropped = rows.shape[0] - finite
        without = f" ({dropped} with NaN or infinite values left out)" if dropped else ""
        raise ConfigError(
            f"model '{ms.name}': reference '{shown or ms.reference}' has {finite} usable rows{without}; the drift "
            f"detectors need at least {MIN_REFERENCE_ROWS} (200 or more calibrate their thresholds). Give a larger "
            "reference, or leave `reference` out to learn one from the first warmup_events events"
        )
    return finite


def dropped_rows_note(ms: ModelSettings, finite: int, total: int) -> str | None:
    """What ``run`` says of reference rows with NaN or infinite values it leaves out (None: there are none)."""
    if finite == total:
        return None
    return (
        f"model '{ms.name}': {total - finite} of {total} rows of reference '{ms.reference}' hold NaN or infinite "
        f"values and are left out; the reference is the other {finite}"
    )


def read_segmented_reference_rows(
    ms: ModelSettings, model: OnnxModel, column: str
) -> tuple[NDArray[np.float64], Held | None, NDArray[np.str_]]:
    """The reference CSV's x and held values without its segment ``column``, and that column's value per row."""
    table, segments = read_segmented_reference_table(ms, model, column)
    return table.rows, table.held, segments


def read_segmented_reference_table(
    ms: ModelSettings, model: OnnxModel, column: str
) -> tuple[ModelRowsFile, NDArray[np.str_]]:
    """The reference CSV as read without its segment ``column`` (:func:`read_reference_table`), and that column's
    value per row.

    Raises
    ------
    ConfigError
        The reference is not a CSV with a header naming ``column``, or its other columns do not fit the model.
    """
    assert ms.reference is not None
    try:
        keep = is_input_column(model.signature, column)
        with split_segment_column(ms.reference, column, flag="segments.reference_column", keep=keep) as (
            path,
            segments,
        ):
            table = read_reference_table(ms.model_copy(update={"reference": path}), model, shown=ms.reference)
    except DataError as exc:
        raise ConfigError(f"model '{ms.name}': {exc}") from exc
    if segments.size != table.rows.shape[0]:
        raise ConfigError(
            f"model '{ms.name}': reference '{ms.reference}' has {segments.size} values in its segment column "
            f"'{column}' for {table.rows.shape[0]} rows read; every row needs one"
        )
    return table, segments


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_feature_names(ms: ModelSettings, model: OnnxModel) -> None:
    """When the model's inputs name its features (one input per column, several inputs, N-D inputs), each
    ``feature_names`` entry must be one of those names, in the model's order. Checked wherever a model is loaded:
    ``run`` refuses a misspelt name as ``check-config`` does, with the closest names.

    Raises
    ------
    ConfigError
        A name that names no input element, or the model's names in another order.
    """
    sig = model.signature
    if ms.feature_names is None or sig.plain:  # one 2-D input: its columns are named by feature_names alone
        return
    known = set(sig.features)
    unknown = [n for n in ms.feature_names if n not in known]
    if unknown:
        hints = []
        for name in unknown[:5]:
            close = difflib.get_close_matches(name, sig.features, n=3, cutoff=0.5)
            hints.append(f"'{name}' (closest: {', '.join(repr(c) for c in close)})" if close else f"'{name}'")
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise ConfigError(
            f"model '{ms.name}': feature_names lists {', '.join(hints)}{more}, which name no input element of the "
            f"model; its features are {_first(sig.features)}. Spell them as the model's inputs do, or drop "
            "feature_names"
        )
    if tuple(ms.feature_names) != sig.features:
        raise ConfigError(
            f"model '{ms.name}': feature_names lists the model's features in another order; the model's order is "
            f"{_first(sig.features)}. List them in that order, or drop feature_names"
        )


def _first(names: tuple[str, ...], shown: int = 12) -> str:
    listed = ", ".join(names[:shown])
    return listed + (f" … ({len(names)} in all)" if len(names) > shown else "")
