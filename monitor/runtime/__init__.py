"""The only wiring: the pipeline (ingest → score → apply → commit), the per-model watch, state, the service.

``__all__``: what other packages import from here, each loaded from its module on first use (:mod:`monitor.lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.lazy import lazy_names

if TYPE_CHECKING:
    from monitor.runtime.gammamap_view import gamma_map_document_handler
    from monitor.runtime.models import (
        ModelRuntime,
        check_reference_rows,
        dropped_rows_note,
        load_model_runtime,
        read_segmented_reference_rows,
    )
    from monitor.runtime.pipeline import Pipeline
    from monitor.runtime.service import Service
    from monitor.runtime.stage_results import Accepted, ScoredBatch
    from monitor.runtime.watch import ModelWatch, WatchConfig
    from monitor.runtime.watch_report import AlertTransition, DetectorCrossed, VerdictChange, WatchReport

#: each public name → the module that defines it
_HOMES = {
    "Accepted": "stage_results",
    "AlertTransition": "watch_report",
    "check_reference_rows": "models",
    "DetectorCrossed": "watch_report",
    "dropped_rows_note": "models",
    "gamma_map_document_handler": "gammamap_view",
    "load_model_runtime": "models",
    "ModelRuntime": "models",
    "ModelWatch": "watch",
    "Pipeline": "pipeline",
    "read_segmented_reference_rows": "models",
    "ScoredBatch": "stage_results",
    "Service": "service",
    "VerdictChange": "watch_report",
    "WatchConfig": "watch",
    "WatchReport": "watch_report",
}

__all__ = [
    "Accepted",
    "AlertTransition",
    "DetectorCrossed",
    "ModelRuntime",
    "ModelWatch",
    "Pipeline",
    "ScoredBatch",
    "Service",
    "VerdictChange",
    "WatchConfig",
    "WatchReport",
    "check_reference_rows",
    "dropped_rows_note",
    "gamma_map_document_handler",
    "load_model_runtime",
    "read_segmented_reference_rows",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())
