"""What an alert says fired: each detector that fired and each input that moved, in its own numbers.

:func:`detector_evidence` reads a segment's verdict engine, its baseline and its count window, and returns the
clauses of HarmonicHarmfulShift's and HarmonicInputDrift's descriptions (:class:`~monitor.alerts.Evidence`): each
fired slot's clauses (:attr:`monitor.drift.slots.DetectorSpec.evidence`) — the detector's statistic and the
threshold it crossed, and the quantity it watches in the window against the baseline. An input's clause starts with
the input's name and names its test first; no clause holds ``; `` (the separator between clauses).
"""

from __future__ import annotations

from typing import Any

from monitor.alerts import Evidence
from monitor.config import DriftSettings
from monitor.drift.slots import ALERT_INPUTS as ALERT_INPUTS
from monitor.drift.slots import Recent
from monitor.drift.verdict import VerdictEngine
from monitor.rolling.reference import Reference


def detector_evidence(
    engine: VerdictEngine, baseline: Reference, count: Any, detectors: DriftSettings
) -> tuple[tuple[Evidence, ...], tuple[Evidence, ...]]:
    """(output detectors that fired, inputs that moved then fragility detectors — γ, flicker — that fired), each in
    its own numbers: the detector's statistic and
    threshold, and the quantity it watches over the last ``drift.window`` events of ``count`` (a segment's count
    window) vs the segment's ``baseline``; by the slots' ``clause_rank``, then in slot order. At most
    :data:`ALERT_INPUTS` inputs per input test."""
    recent = Recent(count, baseline, detectors)
    slots = sorted(engine.slots, key=lambda slot: slot.spec.clause_rank)  # stable: slot order within a rank
    outputs = tuple(e for slot in slots if slot.role == "output" for e in slot.evidence(recent))
    inputs = tuple(e for slot in slots if slot.role == "input" for e in slot.evidence(recent))
    fragility = tuple(e for slot in slots if slot.role == "fragility" for e in slot.evidence(recent))
    return outputs, inputs + fragility
