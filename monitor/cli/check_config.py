"""``harmonic-monitor check-config``: validate a configuration (file + env + flags) without running.

It refuses what ``run`` would refuse before or during its loop: the settings themselves (pydantic: every window,
budget and radius is checked where it is declared; broker lists, alert URLs and output topics that would be read
back: monitor/config_checks.py), each model file, the scorer and the windows built from the settings, and each
model's reference (its width, its columns' names against ``feature_names``, and at least the detectors' minimum of
finite rows, with a warning for rows left out). A metrics port taken here and now is a note, not a refusal: beside a
running sidecar it is that sidecar's.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from numpy.typing import NDArray

from monitor.cli.run import add_settings_flags, settings_from_args
from monitor.config import ModelSettings, Settings
from monitor.errors import ConfigError
from monitor.logs import redact, setup_logging
from monitor.model.io import ModelRowsFile, RowsFile, read_model_rows, read_rows
from monitor.model.onnx import OnnxModel
from monitor.model.signature import default_held


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check-config",
        help="validate the configuration and print the effective settings as JSON",
        description="Load the YAML file, HARMONIC_* variables and flags exactly as `run` would, check every model "
        "file loads with its scoring settings and its reference (width, names, finite rows), and print the "
        "effective settings. Exit 0 when valid, 2 with the reasons otherwise.",
    )
    add_settings_flags(p)
    p.add_argument(
        "--no-load-models",
        action="store_true",
        help="check settings only; do not open the ONNX files or the references",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    setup_logging(settings.log_level, settings.log_format)
    if settings.metrics.web_config_file is not None:
        from monitor.exporters.webconfig import load_web_config

        load_web_config(settings.metrics.web_config_file)  # TLS files loaded, hashes checked: what `run` does first
    if not args.no_load_models:
        for m in settings.models:
            check_model(settings, m)
        _check_candidates(settings)
    _note_port_in_use(settings)
    # secrets (SASL/SSL passwords, tokens, credentials in URLs) print as "***": the output lands in CI logs and tickets
    print(json.dumps(redact(settings.model_dump(mode="json")), indent=2))
    return 0


def _check_candidates(settings: Settings) -> None:
    """Each ``compare_with`` pair loaded as ``run`` loads it: same kind, inputs and classes (one-line refusals)."""
    from monitor.runtime.candidate import check_candidate
    from monitor.runtime.models import load_model_runtime

    by_name = {m.name: m for m in settings.models}
    for m in settings.models:
        if m.compare_with is None:
            continue
        column = settings.segments.reference_column
        served = load_model_runtime(by_name[m.compare_with], segment_column=column)
        cand = load_model_runtime(m, segment_column=column)
        check_candidate(served.name, served.model, cand.name, cand.model)
        print(
            f"model '{m.name}': a candidate beside '{m.compare_with}' (scored on its events, not served)",
            file=sys.stderr,
        )


def _note_port_in_use(settings: Settings) -> None:
    """A note (not a refusal) when the metrics port cannot be bound here and now: ``run`` refuses it, but a check
    beside the running sidecar finds the port held by that very sidecar."""
    from monitor.exporters.listen import listen

    if settings.metrics.port == 0:
        return
    try:
        listen(settings.metrics.host, settings.metrics.port).close()
    except ConfigError as exc:
        print(f"note: {exc} (`run` here would refuse to start)", file=sys.stderr)


def check_model(settings: Settings, ms: ModelSettings) -> None:
    """Load ``ms`` as ``run`` does and build what ``run`` builds from it later; raise what ``run`` would raise.

    Raises
    ------
    MonitorError
        The model file, its scoring settings, the windows, or its reference (width, names, finite rows).
    """
    from monitor.runtime.models import load_model_runtime
    from monitor.runtime.watch import ModelWatch, WatchConfig

    column = settings.segments.reference_column
    rt = load_model_runtime(ms, segment_column=column)
    sig = rt.model.signature
    held = ", ".join([s.name for s in sig.held_inputs] + list(sig.held_features)) or "nothing"
    print(
        f"model '{ms.name}': inputs {sig.describe()}; {sig.n_features} features perturbed, {held} held fixed; "
        f"read as a {rt.model.decision.summary()}{_logits_hint(rt.model)}",
        file=sys.stderr,
    )
    fixed = sig.fixed_batch
    if fixed is not None and rt.model.run_batch is None:
        print(
            f"model '{ms.name}': fixed batch of {fixed} made free at load (checked against runs of {fixed})",
            file=sys.stderr,
        )
    elif fixed is not None:
        print(
            f"model '{ms.name}': fixed batch of {fixed} kept: rows are evaluated in runs of {fixed} (the load warning "
            "gives the cost); export the model with a dynamic batch dimension",
            file=sys.stderr,
        )
    half = [spec.describe() for spec in sig.float_inputs if spec.type_name in ("float16", "bfloat16")]
    if half:
        print(
            f"model '{ms.name}': half-precision input {', '.join(half)}: perturbed in float32 and cast at the input; "
            "γ below the output's resolution (about 5e-4 for float16, 4e-3 for bfloat16) is rounding, not the model "
            "(docs/MODELS.md, Half precision)",
            file=sys.stderr,
        )
    for data in rt.model.external_data:
        print(
            f"model '{ms.name}': weights in external data {data.describe()}, read from beside the model",
            file=sys.stderr,
        )
    table = None
    if ms.reference is not None and ms.reference.suffix.lower() != ".json" and column is not None:
        from monitor.runtime.models import read_segmented_reference_rows

        rows, _, segments = read_segmented_reference_rows(ms, rt.model, column)
        _check_width(ms, rows.shape[1], rt.model.n_features)
        _warn_dropped(ms, rows)
        print(
            f"model '{ms.name}': reference of {rows.shape[0]} rows in {np.unique(segments).size} segment(s) of "
            f"column '{column}'",
            file=sys.stderr,
        )
        from monitor.drift.power import segment_row_notes

        for note in segment_row_notes(segments, rows, settings.segments.max_segments, settings.drift, ms.feature_names):
            print(f"model '{ms.name}': {note}", file=sys.stderr)
    elif ms.reference is not None and ms.reference.suffix.lower() != ".json":
        table = _read_reference(ms, rt.model)
    n = rt.model.n_features
    if ms.feature_names is not None and len(ms.feature_names) != n:
        raise ConfigError(
            f"model '{ms.name}': feature_names lists {len(ms.feature_names)} names; the ONNX input takes {n} features"
        )
    rt.scoring_config()  # the ball and the scales: without a reference `run` builds the scorer after the warm-up
    ModelWatch(ms.name, WatchConfig.from_settings(settings, ms.warmup_events))
    if rt.model.kind == "classifier":
        from monitor.accuracy import EstimatorFit
        from monitor.accuracy.confidence_errors import confidence_harm

        errors = rt.accuracy_fit.confidence_errors if isinstance(rt.accuracy_fit, EstimatorFit) else None
        _, why = confidence_harm(settings.drift.confidence_harm, errors, settings.accuracy.tolerance)
        print(f"model '{ms.name}': {why}", file=sys.stderr)
    if table is not None:
        _check_width(ms, table.rows.shape[1], n)  # load_model_runtime does not read it with space: raw
        _check_names(ms, table.names if isinstance(table, RowsFile) else None)
        print(f"model '{ms.name}': reference: {table.describe()}", file=sys.stderr)
    elif ms.reference is not None and ms.reference.suffix.lower() == ".json":
        from monitor.drift.power import baseline_notes  # on use: it builds verdict engines
        from monitor.rolling.reference_file import read_reference, read_segment_references

        _, reference = read_reference(ms.reference, n)
        _check_names(ms, reference.feature_names)
        print(f"model '{ms.name}': reference '{ms.reference}' of {reference.n_events} events", file=sys.stderr)
        baselines = read_segment_references(ms.reference, n)
        notes = baseline_notes(baselines or {"model-wide": reference}, settings.drift)
        if baselines:
            notes.append(
                "a segment without a baseline here warms up on its own first events live (models[].warmup_events)"
            )
        for note in notes:
            print(f"model '{ms.name}': {note}", file=sys.stderr)


def _read_reference(ms: ModelSettings, model: OnnxModel) -> RowsFile | ModelRowsFile:
    """The reference rows as ``run`` reads them: plain rows for a model of one 2-D float input, else by the
    model's signature (:func:`~monitor.model.io.read_model_rows`)."""
    assert ms.reference is not None
    table: RowsFile | ModelRowsFile
    if model.signature.plain:
        table = read_rows(ms.reference, ms.reference_header, flag="--reference-header")
    else:
        table = read_model_rows(ms.reference, model.signature, ms.reference_header, flag="--reference-header")
    _warn_dropped(ms, table.rows)
    return table


def _warn_dropped(ms: ModelSettings, rows: NDArray[np.float64]) -> None:
    """Refuse a reference with too few finite rows, as ``run`` does; say how many rows ``run`` leaves out."""
    from monitor.runtime.models import check_reference_rows, dropped_rows_note

    note = dropped_rows_note(ms, check_reference_rows(ms, rows), rows.shape[0])
    if note is not None:
        print(f"warning: {note}", file=sys.stderr)
    finite = rows[np.all(np.isfinite(rows), axis=1)]
    constant = np.flatnonzero(np.ptp(finite, axis=0) == 0.0) if finite.shape[0] else np.zeros(0, dtype=np.intp)
    if constant.size:
        names = ms.feature_names
        label = ", ".join(str(names[j]) if names is not None else f"x[{j}]" for j in constant.tolist())
        print(
            f"note: model '{ms.name}': the reference holds input {label} constant: any other live value counts as "
            "outside its range (the range test), and its KS test sees any change",
            file=sys.stderr,
        )


def _check_width(ms: ModelSettings, width: int, n_features: int) -> None:
    if width != n_features:
        raise ConfigError(
            f"reference '{ms.reference}' has {width} columns; model '{ms.name}' expects {n_features} features. "
            "Was the reference built for another model?"
        )


def _check_names(ms: ModelSettings, names: tuple[str, ...] | None) -> None:
    """The reference's column names (a CSV header, a reference file's feature names) agree with feature_names."""
    if names is None or ms.feature_names is None or tuple(names) == tuple(ms.feature_names):
        return
    raise ConfigError(
        f"model '{ms.name}': reference '{ms.reference}' names its columns {', '.join(names)}; model "
        f"'{ms.name}' lists feature_names {', '.join(ms.feature_names)}. The columns must be in the order of "
        "feature_names: reorder one of them, or rename the header if only the spelling differs"
    )


def _logits_hint(model: OnnxModel) -> str:
    """For a regressor whose one output has several columns: that a classifier's logits read so (exported without
    its Softmax) need ``model_kind: classifier``."""
    decision = model.decision
    if decision.kind != "regressor" or len(decision.values) != 1 or "set in the configuration" in decision.reason:
        return ""
    width = model.evaluate(np.zeros((1, model.n_features), dtype=np.float32), default_held(model.signature, 1))
    assert width.value is not None
    columns = int(width.value.shape[1])
    if columns < 2:
        return ""
    return (
        f". NOTE: if these {columns} values are a classifier's logits (exported without its Softmax), set "
        "model_kind: classifier — read as a regressor, its confidence, margin and flicker are not computed"
    )
