"""An event log (``.jsonl``) as the shared rows of several models: each model decodes the log as ``run`` decodes
its Kafka messages (:func:`monitor.api.read_events`), and the events every model decodes are compared.

Events name their features by a map (``{"age": 41, …}``), so models of different input layouts read the same event
by name; a list of features is read in each model's own order (the same width only). The events' ``segment`` field
is the segment column ``segment``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.comparison.columns import Columns, ModelRows, wanted_names
from monitor.errors import DataError
from monitor.model.onnx import OnnxModel


def is_event_log(data: Any) -> bool:
    return isinstance(data, (str, os.PathLike)) and Path(data).suffix.lower() == ".jsonl"


def log_rows(
    loaded: Sequence[tuple[str, OnnxModel]], path: str | os.PathLike[str], given: Mapping[str, Sequence[str]]
) -> tuple[dict[str, ModelRows], Columns, NDArray[Any], list[str]]:
    """Each model's rows of the events every model decodes, the events as named columns, their segments, and notes
    (events some model refused, by reason).

    Raises
    ------
    DataError
        No event every model decodes, or a log whose lines hold several events that the models decode differently.
    """
    from monitor.offline.rows import log_model_name, read_events

    p = Path(path)
    name = log_model_name(p, str(loaded[0][1].path))
    read = {}
    notes = []
    for label, m in loaded:
        names = given.get(label)
        if names is not None:
            wanted_names(m, names)  # the width and the kind of input checked, with the model's name in the message
        rows = read_events(p, m, feature_names=names, model_name=name)
        if names is not None:
            m.name_features(names, source=f"the feature names of '{label}'")
        if rows.invalid:
            shown = ", ".join(f"{k}: {v}" for k, v in sorted(rows.invalid.items()))
            notes.append(f"'{label}' refused lines of '{p}' ({shown})")
        read[label] = rows
    lines = [r.lines for r in read.values() if r.lines is not None]
    common = lines[0]
    for ln in lines[1:]:
        if np.unique(ln).size != ln.size or np.unique(common).size != common.size:
            if not np.array_equal(ln, common):
                raise DataError(
                    f"'{p}': lines holding several events decode differently for the models; compare a log of one "
                    "event per line"
                )
            continue
        common = np.intersect1d(common, ln)
    if common.size == 0:
        raise DataError(f"'{p}': no event that every model decodes ({'; '.join(notes) or 'no lines'})", path=str(p))
    out: dict[str, ModelRows] = {}
    columns: dict[str, NDArray[Any]] = {}
    segments: NDArray[Any] = np.array([], dtype=object)
    for (label, m), rows in zip(loaded, read.values(), strict=True):
        keep = rows.take(np.isin(rows.lines, common)) if rows.lines is not None else rows
        feature_names = m.feature_names
        out[label] = ModelRows(keep.x, keep.held, tuple(feature_names), "by name (event log)")
        for j, n in enumerate(feature_names):
            columns.setdefault(n, keep.x[:, j])
        for spec in m.signature.held_inputs:
            if keep.held is not None and spec.size == 1 and spec.name in keep.held.values:
                columns.setdefault(spec.name, np.asarray(keep.held.values[spec.name]).reshape(-1).astype(str))
        segments = np.array(keep.segments or ("other",) * len(keep), dtype=object)
    if any(len(r.lines if r.lines is not None else ()) > common.size for r in read.values()):
        notes.append(f"compared on the {common.size} events of '{p}' that every model decodes")
    return out, Columns(columns, f"'{p}' ({common.size} events)"), segments, notes
