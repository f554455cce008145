"""Stage 5a (rolling): the reference file ``harmonic-monitor reference`` writes and ``run`` reads.

A JSON document holding the standardizer and the reference γ/flicker/feature distributions, so that the sidecar
starts with a ready reference instead of re-scoring reference rows at start-up.

For a model that holds values fixed (int, bool and string inputs, ``fixed_features``: see
:mod:`monitor.model.signature`) the file also holds ``held_sample``: up to :data:`HELD_SAMPLE_ROWS` seeded rows of
the reference's held values, ``{"rows": n, "values": {key: {"dtype": "int64" | "bool" | "float32" | "string",
"shape": [n, …], "data": nested lists}}}`` (strings as JSON strings). :func:`read_held_sample` gives them back as a
:class:`~monitor.model.signature.Held` for ``RobustnessScorer(..., held_sample=...)``; files without it (older ones,
plain models) still load, and give None.

A reference built with labels (``reference --labels``) also holds ``accuracy_estimator``: the fitted label-free
accuracy estimators (:mod:`monitor.accuracy`, ``EstimatorFit.to_dict()``), read by
:func:`read_accuracy_estimator`; a regressor's holds ``loss_estimator`` instead (``LossFit.to_dict()``,
:mod:`monitor.accuracy.regression`), read by :func:`read_loss_estimator`; files without them load as before.

A reference built with ``reference --scales from-reference`` also holds ``scales``: the σ and r its γ and flicker
were scored at and how they were chosen (:class:`monitor.signals.scales.SignalScales`: ``{"sigma", "radius",
"method", "flicker_share", "target", "rows"}``), read by :func:`read_scales`; ``run`` scores at them unless the
model's ``scoring`` settings say otherwise. Files without it load as before (scored at the fixed settings).

Version 2 (the current one) may also hold ``segments``: ``{"column": name, "baselines": {segment: reference}}``, one
reference per segment built from the reference rows of that segment (``reference --segment-column NAME``; see
:mod:`monitor.rolling.segment_baselines`), read by :func:`read_segment_references`. Version 1 files still load (with
a log line): they hold no per-segment baselines, so every segment learns its own from its first events.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from monitor.errors import DataError
from monitor.model.signature import HELD_COLUMNS, Held, Signature
from monitor.model.standardize import Standardizer
from monitor.rolling.reference import Reference
from monitor.rolling.segment_baselines import references_from_json, references_to_json
from monitor.signals.scales import SignalScales

log = logging.getLogger("monitor.rolling.reference_file")

REFERENCE_FORMAT = "harmonic-monitor/reference"
REFERENCE_VERSION = 2
#: versions this release reads: 1 (no per-segment baselines) and the current one
READABLE_VERSIONS = (1, REFERENCE_VERSION)
#: the key of the per-segment baselines (``reference --segment-column``)
SEGMENTS_KEY = "segments"
#: held rows a reference file keeps for a model that holds values fixed (a seeded sample of the reference's)
HELD_SAMPLE_ROWS = 256
#: the key of the fitted accuracy estimators (``reference --labels``); files without it load as before
ACCURACY_KEY = "accuracy_estimator"
#: the key of a regressor's fitted loss estimator (``reference --labels`` of a regressor)
LOSS_KEY = "loss_estimator"
#: the key of the signal scales chosen from the reference (``reference --scales from-reference``)
SCALES_KEY = "scales"


def write_reference(
    out: Path,
    standardizer: Standardizer,
    ref: Reference,
    *,
    model: str,
    space: str,
    held_sample: Held | None = None,
    accuracy_estimator: Mapping[str, Any] | None = None,
    loss_estimator: Mapping[str, Any] | None = None,
    scales: SignalScales | None = None,
    segments: Mapping[str, Reference] | None = None,
    segment_column: str | None = None,
) -> Path:
    """Write ``ref`` and the standardizer it was computed with as a reference file; returns ``out``.

    ``segments``: one reference per segment (built from the reference rows of ``segment_column``), stored under
    :data:`SEGMENTS_KEY`.

    ``held_sample``: held values of reference rows (a model that holds values fixed); at most
    :data:`HELD_SAMPLE_ROWS` of them are kept (:func:`sample_held`). ``accuracy_estimator``: a labelled
    reference's ``EstimatorFit.to_dict()`` (:mod:`monitor.accuracy`), stored under :data:`ACCURACY_KEY`;
    ``loss_estimator``: a labelled regressor's ``LossFit.to_dict()`` (:mod:`monitor.accuracy.regression`), under
    :data:`LOSS_KEY`.
    ``scales``: the σ and r chosen from the reference, stored under :data:`SCALES_KEY`.
    """
    doc: dict[str, Any] = {
        "format": REFERENCE_FORMAT,
        "version": REFERENCE_VERSION,
        "model": model,
        "n_features": standardizer.n_features,
        "space": space,
        "standardizer": standardizer.to_dict(),
        "reference": ref.to_dict(),
    }
    if held_sample is not None and len(held_sample) and held_sample.values:
        doc["held_sample"] = _held_to_json(sample_held(held_sample, HELD_SAMPLE_ROWS))
    if accuracy_estimator is not None:
        doc[ACCURACY_KEY] = dict(accuracy_estimator)
    if loss_estimator is not None:
        doc[LOSS_KEY] = dict(loss_estimator)
    if scales is not None:
        doc[SCALES_KEY] = scales.to_dict()
    if segments:
        doc[SEGMENTS_KEY] = {"column": segment_column, "baselines": references_to_json(segments)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, default=float) + "\n", encoding="utf-8")
    return out


def _read_json(p: Path) -> Any:
    """The JSON document in the reference file ``p``.

    Raises
    ------
    DataError
        The file cannot be read or is not JSON.
    """
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(
            f"reference JSON '{p}' does not exist; build it from rows the model saw in validation: "
            f"`harmonic-monitor reference --model MODEL.onnx --data ROWS.csv --out {p}`",
            path=str(p),
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read reference JSON '{p}': {exc}", path=str(p)) from exc


def _read_block(path: str | Path, key: str) -> tuple[Path, Any]:
    """The reference file's path and its top-level ``key`` block (None where it has none or is not a JSON object)."""
    p = Path(path)
    doc = _read_json(p)
    return p, (doc.get(key) if isinstance(doc, dict) else None)


def read_reference(path: str | Path, n_features: int) -> tuple[Standardizer, Reference]:
    """Load a file written by ``harmonic-monitor reference`` and check it fits the model."""
    p = Path(path)
    doc: dict[str, Any] = _read_json(p)
    if not isinstance(doc, dict):
        raise DataError(
            f"'{p}' is not a harmonic-monitor reference (a JSON {type(doc).__name__}, not an object); "
            "build one with `harmonic-monitor reference`",
            path=str(p),
        )
    if doc.get("format") != REFERENCE_FORMAT or doc.get("version") not in READABLE_VERSIONS:
        raise DataError(
            f"'{p}' is not a harmonic-monitor reference (format {doc.get('format')!r}, version {doc.get('version')!r}); "
            "build one with `harmonic-monitor reference`",
            path=str(p),
        )
    if doc.get("n_features") != n_features:
        raise DataError(
            f"reference '{p}' was built for {doc.get('n_features')} features; the model takes {n_features}",
            path=str(p),
        )
    if doc.get("version") != REFERENCE_VERSION:
        log.info(
            "reference file of an older version read: it holds no per-segment baselines, so each segment learns its "
            "own from its first events (rebuild it with `harmonic-monitor reference --segment-column` to give them)",
            extra={"path": str(p), "version": doc.get("version")},
        )
    try:
        return Standardizer.from_dict(doc["standardizer"]), Reference.from_dict(doc["reference"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a hand-edited file
        raise DataError(
            f"reference '{p}' is damaged ({type(exc).__name__}: {exc}); rebuild it with `harmonic-monitor reference`",
            path=str(p),
        ) from exc


def read_segment_references(path: str | Path, n_features: int) -> dict[str, Reference]:
    """The per-segment baselines a reference file keeps (``reference --segment-column``): ``{segment: Reference}``,
    empty when it keeps none (a version 1 file, a reference built without a segment column).

    Raises
    ------
    DataError
        The file cannot be read, or its baselines are damaged or built for another feature count.
    """
    p, block = _read_block(path, SEGMENTS_KEY)
    if block is None:
        return {}
    try:
        if not isinstance(block, dict):
            raise DataError(f"'{SEGMENTS_KEY}' is a {type(block).__name__}, not an object")
        refs = references_from_json(block.get("baselines"))
    except DataError as exc:
        raise DataError(
            f"reference '{p}' holds damaged per-segment baselines ({exc}); rebuild it with "
            "`harmonic-monitor reference --segment-column`",
            path=str(p),
        ) from exc
    wrong = sorted(name for name, ref in refs.items() if ref.n_features != n_features)
    if wrong:
        raise DataError(
            f"reference '{p}' holds baselines of segments {wrong} for another feature count; the model takes "
            f"{n_features}: rebuild it",
            path=str(p),
        )
    return refs


def read_accuracy_estimator(path: str | Path) -> dict[str, Any] | None:
    """The ``accuracy_estimator`` document a reference file keeps (``reference --labels``), or None when it keeps
    none (an older file, a reference built without labels). Read it with ``EstimatorFit.from_dict``.

    Raises
    ------
    DataError
        The file cannot be read, or its ``accuracy_estimator`` is not a JSON object.
    """
    return _fit_block(path, ACCURACY_KEY, "an")


def read_loss_estimator(path: str | Path) -> dict[str, Any] | None:
    """The ``loss_estimator`` document a regressor's reference file keeps (``reference --labels``), or None. Read it
    with ``LossFit.from_dict``.

    Raises
    ------
    DataError
        The file cannot be read, or its ``loss_estimator`` is not a JSON object.
    """
    return _fit_block(path, LOSS_KEY, "a")


def _fit_block(path: str | Path, key: str, article: str) -> dict[str, Any] | None:
    """The fitted estimator's JSON object a reference file keeps under ``key``, or None where it keeps none."""
    p, block = _read_block(path, key)
    if block is None:
        return None
    if not isinstance(block, dict):
        raise DataError(
            f"reference '{p}' holds {article} '{key}' that is not a JSON object; rebuild it with "
            "`harmonic-monitor reference --labels`",
            path=str(p),
        )
    return block


def read_scales(path: str | Path) -> SignalScales | None:
    """The signal scales a reference file records (``reference --scales from-reference``), or None when it records
    none (an older file, a reference built at the fixed scales).

    Raises
    ------
    DataError
        The file cannot be read, or its ``scales`` block is damaged.
    """
    p, block = _read_block(path, SCALES_KEY)
    if block is None:
        return None
    try:
        return SignalScales.from_dict(block)
    except DataError as exc:
        raise DataError(
            f"reference '{p}': {exc}; rebuild it with `harmonic-monitor reference --scales from-reference`",
            path=str(p),
        ) from exc


def sample_held(
    held: Held,
    rows: int = HELD_SAMPLE_ROWS,
    *,
    seed: int = 0,  # not a setting: a reference JSON's held sample is always drawn with 0
) -> Held:
    """At most ``rows`` of ``held``'s rows: all of them when they are that few, else a seeded sample in file order."""
    n = len(held)
    if n <= rows:
        return held
    pick = np.sort(np.random.default_rng([seed, 0x4E1D]).choice(n, rows, replace=False))
    return held.take(pick)


def _held_to_json(held: Held) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, arr in held.values.items():
        dtype = "string" if arr.dtype.kind in "OUS" else str(arr.dtype)
        data = arr.astype(str).tolist() if dtype == "string" else arr.tolist()
        values[key] = {"dtype": dtype, "shape": list(arr.shape), "data": data}
    return {"rows": len(held), "values": values}


def read_held_sample(path: str | Path, signature: Signature) -> Held | None:
    """The held values a reference file keeps (see the module docstring), for ``RobustnessScorer(held_sample=...)``.

    Returns None when the model holds nothing, or the file keeps no held values (an older file, a JSON reference
    built for a plain model).

    Raises
    ------
    DataError
        The file cannot be read, or its held values do not fit the model (other inputs, shapes or types).
    """
    if not signature.has_held:
        return None
    p, block = _read_block(path, "held_sample")
    if block is None:
        return None
    rebuild = "rebuild it with `harmonic-monitor reference` for this model"
    try:
        values = block["values"]
        keys = list(signature.held_keys)
        if sorted(values) != sorted(keys):
            raise DataError(
                f"reference '{p}' keeps held values of {sorted(values)}; the model holds {keys} fixed: {rebuild}",
                path=str(p),
            )
        dims = {s.name: (s.dims, s.dtype) for s in signature.held_inputs}
        dims[HELD_COLUMNS] = ((len(signature.held_features),), np.dtype(np.float32))
        out: dict[str, Any] = {}
        rows = int(block["rows"])
        for key in keys:
            shape, dtype = dims[key]
            entry = values[key]
            if dtype.kind == "O":
                if entry["dtype"] != "string":
                    raise ValueError(f"'{key}' holds {entry['dtype']} values; the model takes strings")
                arr = np.array(entry["data"], dtype=object)
                if not all(isinstance(v, str) for v in arr.reshape(-1)):
                    raise ValueError(f"'{key}' holds values that are not strings")
            else:
                if entry["dtype"] == "string":
                    raise ValueError(f"'{key}' holds strings; the model takes {dtype}")
                arr = np.array(entry["data"], dtype=dtype)
            if arr.shape != (rows, *shape):
                raise ValueError(f"'{key}' has shape {list(arr.shape)}; the model takes {[rows, *shape]}")
            out[key] = arr
    except DataError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise DataError(
            f"reference '{p}' keeps held values that do not fit the model ({exc}): {rebuild}", path=str(p)
        ) from exc
    return Held(out) if rows else None
