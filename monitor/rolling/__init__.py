"""Stage 5a: what is held over time: windows per model and segment, the reference and its file, per-segment baselines, labelled windows.

``__all__``: what other packages import from here, each loaded from its module on first use (:mod:`monitor.lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from monitor.lazy import lazy_names

if TYPE_CHECKING:
    from monitor.rolling.labelled import LabelledWindow
    from monitor.rolling.reference import RANGE_QUANTILES, EncodedJSON, Reference
    from monitor.rolling.reference_file import (
        read_accuracy_estimator,
        read_held_sample,
        read_reference,
        read_scales,
        read_segment_references,
        write_reference,
    )
    from monitor.rolling.scores import ScoreRows, ScoreSamples
    from monitor.rolling.segment_baselines import (
        fold_segments,
        is_input_column,
        references_from_json,
        references_to_json,
        segment_references,
        split_segment_column,
    )
    from monitor.rolling.warmup import WarmupReferenceBuilder
    from monitor.rolling.windows import OTHER, SignalBatch, WindowSet

#: each public name → the module that defines it
_HOMES = {
    "EncodedJSON": "reference",
    "fold_segments": "segment_baselines",
    "is_input_column": "segment_baselines",
    "LabelledWindow": "labelled",
    "OTHER": "windows",
    "RANGE_QUANTILES": "reference",
    "read_accuracy_estimator": "reference_file",
    "read_held_sample": "reference_file",
    "read_reference": "reference_file",
    "read_scales": "reference_file",
    "read_segment_references": "reference_file",
    "Reference": "reference",
    "references_from_json": "segment_baselines",
    "references_to_json": "segment_baselines",
    "ScoreRows": "scores",
    "ScoreSamples": "scores",
    "segment_references": "segment_baselines",
    "SignalBatch": "windows",
    "split_segment_column": "segment_baselines",
    "WarmupReferenceBuilder": "warmup",
    "WindowSet": "windows",
    "write_reference": "reference_file",
}

__all__ = [
    "EncodedJSON",
    "LabelledWindow",
    "OTHER",
    "RANGE_QUANTILES",
    "Reference",
    "ScoreRows",
    "ScoreSamples",
    "SignalBatch",
    "WarmupReferenceBuilder",
    "WindowSet",
    "fold_segments",
    "is_input_column",
    "read_accuracy_estimator",
    "read_held_sample",
    "read_reference",
    "read_scales",
    "read_segment_references",
    "references_from_json",
    "references_to_json",
    "segment_references",
    "split_segment_column",
    "write_reference",
]

__getattr__, __dir__ = lazy_names(__name__, _HOMES, globals())
