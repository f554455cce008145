"""The Python API: score, reference, estimate, replay, probe and report from a notebook.

Every function takes the model (an ONNX path, or a loaded :class:`~monitor.model.onnx.OnnxModel`) and data as

* a **pandas DataFrame**, columns named by the model's inputs or feature names (``age``, ``city``; ``x[0]``,
  ``x[1]`` …), strings (or a categorical dtype) for held string inputs; other columns are ignored, missing ones are
  named in the error;
* a **numpy array** (N, D) for a model of float inputs only (their values in the graph's input order), or a mapping
  of arrays by input name;
* a **file path**: ``.csv``, ``.npy``, ``.npz`` (as the CLI reads them), ``.parquet`` (needs the ``frame`` extra) or a
  ``.jsonl`` event log decoded exactly as ``run`` decodes Kafka messages (invalid lines counted by reason in
  ``invalid``, never raised).

A reference is any of those rows, a reference JSON written by ``harmonic-monitor reference`` (or
:meth:`ReferenceResult.save`), or the :class:`ReferenceResult` that :func:`reference` returns.

Results are typed (frozen dataclasses); tables among them have ``to_frame()``, which needs pandas
(``pip install -e '.[frame]'`` in the clone) and says so when it is missing; :func:`score` of a DataFrame returns a
DataFrame. The commands ``score``, ``reference``, ``estimate``, ``replay``, ``probe``, ``report`` and ``compare`` are wrappers
over these functions (the same options give the same numbers). ``import monitor`` stays cheap: this module is
imported on first use of one of them.

This module is the facade: the functions and their types, from the offline engine (:mod:`monitor.offline`), under
one name each. The scoring keywords are one set (:class:`ScoringKeywords`, the fields of
:class:`~monitor.signals.scorer.ScoringConfig`) that :func:`score`, :func:`reference` and :func:`estimate` take
alike.

Examples
--------
>>> import numpy as np, monitor
>>> from monitor.examples import linear_classifier
>>> path = linear_classifier()                 # inputs age, income, debt; 3 classes
>>> rows = np.random.default_rng(0).normal(size=(40, 3))
>>> scores = monitor.score(path, rows, flicker_copies=8)
>>> scores.columns["gamma"].shape, sorted(scores.columns)[:3]
((40,), ['class', 'flicker', 'gamma'])
"""

from __future__ import annotations

from monitor.errors import ConfigError, DataError, MonitorError
from monitor.offline.baseline import standardizer_of
from monitor.offline.compare import compare
from monitor.offline.estimate import accuracy_from_scores, estimate, predicted_values
from monitor.offline.frames import FRAME_EXTRA, MissingExtraError
from monitor.offline.keywords import (
    BuildKeywords,
    ReferenceKeywords,
    ScoreKeywords,
    ScoringKeywords,
    StandardizeKeywords,
)
from monitor.offline.probe import ProbeReport, probe
from monitor.offline.reference import reference
from monitor.offline.replay import ReplayTimeline, replay
from monitor.offline.report import build_report
from monitor.offline.report_data import Report, ReportData
from monitor.offline.results import (
    AccuracyEstimate,
    LossEstimate,
    ReferenceResult,
    ScoreTable,
    Table,
    Yardstick,
    yardsticks,
)
from monitor.offline.rows import (
    DataLike,
    ModelLike,
    Rows,
    load_labels,
    load_model,
    log_model_name,
    read_events,
    read_rows,
)
from monitor.offline.scoring import BATCH_ROWS, live_signals, score, score_rows, scored_reference

#: :func:`monitor.report` is :func:`~monitor.offline.report.build_report`
report = build_report

__all__ = [
    "BATCH_ROWS",
    "FRAME_EXTRA",
    "AccuracyEstimate",
    "LossEstimate",
    "BuildKeywords",
    "ConfigError",
    "DataError",
    "DataLike",
    "MissingExtraError",
    "ModelLike",
    "MonitorError",
    "ProbeReport",
    "ReferenceKeywords",
    "ReferenceResult",
    "ReplayTimeline",
    "Report",
    "ReportData",
    "Rows",
    "ScoreKeywords",
    "ScoreTable",
    "ScoringKeywords",
    "StandardizeKeywords",
    "Table",
    "Yardstick",
    "accuracy_from_scores",
    "build_report",
    "compare",
    "estimate",
    "live_signals",
    "load_labels",
    "load_model",
    "log_model_name",
    "predicted_values",
    "probe",
    "read_events",
    "read_rows",
    "reference",
    "replay",
    "report",
    "score",
    "score_rows",
    "scored_reference",
    "standardizer_of",
    "yardsticks",
]
