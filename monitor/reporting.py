"""The report's names where they were first published: :mod:`monitor.offline.report` gathers the page,
:mod:`monitor.offline.report_data` holds its data and :mod:`monitor.offline.report_page` draws it."""

from __future__ import annotations

from monitor.offline.report import DRIFT_ALPHA, FLAG_PERCENTILE, REPLAY_BATCH, SIGNAL_BINS, build_report, input_drift
from monitor.offline.report_data import SECTIONS, InputDrift, Report, ReportData, SignalSeries, VerdictSpan

__all__ = [
    "DRIFT_ALPHA",
    "FLAG_PERCENTILE",
    "REPLAY_BATCH",
    "SECTIONS",
    "SIGNAL_BINS",
    "InputDrift",
    "Report",
    "ReportData",
    "SignalSeries",
    "VerdictSpan",
    "build_report",
    "input_drift",
]
