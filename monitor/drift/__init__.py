"""Stage 5b: drift detectors on the γ and flicker streams, per-feature input drift, and the verdict."""

from __future__ import annotations

from monitor.config import DriftSettings
from monitor.drift.base import DriftDetector, DriftState, ReferenceLike, WindowPlan, ks_two_sample
from monitor.drift.cusum import Cusum, CusumBounds
from monitor.drift.features import FeatureDrift, FeatureShift
from monitor.drift.ks import KsDrift
from monitor.drift.page_hinkley import PageHinkley
from monitor.drift.rate import RateTest
from monitor.drift.registry import DETECTORS
from monitor.drift.slots import DetectorSlot, DetectorSpec, SlotState
from monitor.drift.verdict import Verdict, VerdictEngine, VerdictReport, decide_verdict

__all__ = [
    "DETECTORS",
    "Cusum",
    "CusumBounds",
    "DetectorSlot",
    "DetectorSpec",
    "DriftDetector",
    "DriftSettings",
    "DriftState",
    "FeatureDrift",
    "FeatureShift",
    "KsDrift",
    "PageHinkley",
    "RateTest",
    "ReferenceLike",
    "SlotState",
    "Verdict",
    "VerdictEngine",
    "VerdictReport",
    "WindowPlan",
    "decide_verdict",
    "ks_two_sample",
]
