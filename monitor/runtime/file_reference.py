"""A model's reference when it is given as rows (``models[].reference``, a CSV or Parquet file): read, sampled
per segment, scored once, and set on the model's watch as its baseline."""

from __future__ import annotations

import logging
import time

import numpy as np

from monitor.drift.categories import held_columns
from monitor.runtime.models import (
    ModelRuntime,
    dropped_rows_note,
    read_reference_rows,
    read_segmented_reference_rows,
)
from monitor.runtime.scoring import Scoring
from monitor.runtime.stage_results import Evaluations

#: its lines are scoring's (operators filter on the logger name)
log = logging.getLogger("monitor.runtime.scoring")


def reference_from_file(scoring: Scoring, rt: ModelRuntime) -> Evaluations:
    """Score (a bounded sample of) ``rt``'s reference data once with ``scoring`` to get the reference γ/flicker
    distribution; returns the model rows that took (purpose ``reference``).

    With ``segments.reference_column`` the reference CSV carries each row's segment in that column (not fed to the
    model): each segment gets its own baseline, from a sample of at most ``drift.reference_max_events`` of its rows.
    The held inputs' count tables are counted over every finite row.
    """
    assert rt.settings.reference is not None and rt.scorer is not None and rt.watch is not None
    column = scoring.settings.segments.reference_column
    segments = None
    if column is None:
        ref, held = read_reference_rows(rt.settings, rt.model)
    else:
        ref, held, segments = read_segmented_reference_rows(rt.settings, rt.model, column)
    keep = np.flatnonzero(np.all(np.isfinite(ref), axis=1))
    dropped = dropped_rows_note(rt.settings, int(keep.size), int(ref.shape[0]))
    if dropped is not None:
        log.warning(dropped, extra={"model": rt.name})
    # the held inputs' count tables come from every finite row, not the scored sample: a rare category stays known
    all_held = None if held is None else held_columns(held.take(keep).values, rt.watch.held_names)
    all_segments = None if segments is None else segments[keep]
    rng = np.random.default_rng(rt.settings.scoring.seed)
    cap = rt.watch.config.detectors.reference_max_events
    if segments is not None:  # a bounded sample per segment, so a small segment keeps all of its rows
        keep = np.sort(
            np.concatenate(
                [
                    rows if rows.size <= cap else rng.choice(rows, cap, replace=False)
                    for name in np.unique(segments[keep]).tolist()
                    for rows in [keep[segments[keep] == name]]
                ]
            )
        )
    elif keep.shape[0] > cap:
        keep = keep[rng.choice(keep.shape[0], cap, replace=False)]
    ref = ref[keep]
    held = None if held is None else held.take(keep)
    cpu_started = time.process_time()
    result, evaluations = scoring.score_rows(rt, ref, held)
    # the first measured cost: the sampler knows what an event costs before the first poll (a backlog read
    # after a restart is then sampled from its first poll on, not scored whole)
    scoring.sampler.observe_cost(rt.name, int(ref.shape[0]), time.process_time() - cpu_started)
    columns = None if held is None else held_columns(held.values, rt.watch.held_names)
    rt.watch.set_reference(ref, result, None if segments is None else segments[keep], columns)
    if all_held is not None:
        rt.watch.set_held_tables(all_held, all_segments)
    log.info("reference built from file", extra={"model": rt.name, "rows": int(ref.shape[0])})
    return Evaluations(rt, "reference", evaluations)
