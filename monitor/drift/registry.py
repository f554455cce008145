"""Stage 5b: the registered detectors — every :class:`~monitor.drift.slots.DetectorSpec` the verdict engine builds.

A new detector is one module (the detector and its spec) and one line here. The order is the order of the engine's
states, of the detectors a verdict names and of the metrics' detector series; ``tests/unit/test_detector_contract.py``
runs every detector listed here through the same checks.
"""

from __future__ import annotations

from typing import Any

from monitor.drift.input_detectors import FEATURES_KS, HELD_INPUTS, INPUTS_PCA, INPUTS_RANGE
from monitor.drift.output_detectors import (
    CONFIDENCE_CUSUM,
    CONFIDENCE_JUMP_CUSUM,
    CONFIDENCE_TAIL_CUSUM,
    FLICKER_CUSUM,
    FLICKER_RATE,
    GAMMA_CUSUM,
    GAMMA_KS,
    MARGIN_CUSUM,
)
from monitor.drift.slots import DetectorSpec

DETECTORS: tuple[DetectorSpec[Any, Any], ...] = (
    GAMMA_CUSUM,
    GAMMA_KS,
    FLICKER_CUSUM,
    FLICKER_RATE,
    CONFIDENCE_CUSUM,
    CONFIDENCE_TAIL_CUSUM,
    CONFIDENCE_JUMP_CUSUM,
    MARGIN_CUSUM,
    FEATURES_KS,
    INPUTS_RANGE,
    HELD_INPUTS,
    INPUTS_PCA,
)
