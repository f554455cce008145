"""The report's data: each section of the page a typed result, or the reason it is empty (:class:`ReportData`), which
:func:`~monitor.offline.report.build_report` gathers and :mod:`monitor.offline.report_page` draws."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from monitor.comparison import Comparison
    from monitor.gammamap import GammaMap
    from monitor.offline.probe import ProbeReport
    from monitor.offline.replay import ReplayTimeline
    from monitor.offline.results import AccuracyEstimate, ScoreTable, Yardstick

#: the section ids, in page order
SECTIONS = ("summary", "verdicts", "signals", "gammamap", "drift", "accuracy", "probes")
#: the id of the section of two models side by side, last on the page, drawn only where a candidate was given
TWO_MODELS = "models"


@dataclass(frozen=True)
class SignalSeries:
    """One signal over the log: per bin of consecutive events, the bin's middle line and the signal's mean; the
    reference's p5, median and p95 (NaN without a reference sample). ``time``: where the events carry timestamps
    (an event log), each bin's mean event time in epoch seconds, the bins then cut in event-time order; the page
    plots over it (None: over the line)."""

    signal: str
    line: NDArray[np.float64]
    mean: NDArray[np.float64]
    ref_low: float
    ref_median: float
    ref_high: float
    time: NDArray[np.float64] | None = None


@dataclass(frozen=True)
class InputDrift:
    """One input element: its name, the test's effect size between the events and the reference (a number: the KS
    distance D against the reference's feature sample; a category: the total variation distance against the
    reference's count table, tested by chi-square), the Benjamini–Hochberg adjusted p-value, and whether it moved
    (adjusted p below the report's ``DRIFT_ALPHA``).

    ``bins`` with ``reference_share`` and ``live_share``: the two distributions side by side — a number's histogram
    over ``len(bins) − 1`` common bins (``bins`` its edges, raw units), a category's share per category (``bins`` the
    category names, the reference's rarer ones and the unseen ones under ``other``)."""

    name: str
    statistic: float
    p_value: float
    moved: bool
    live_mean: float
    reference_mean: float
    kind: str = "numeric"
    test: str = "KS"
    bins: tuple[float | str, ...] = ()
    reference_share: tuple[float, ...] = ()
    live_share: tuple[float, ...] = ()
    live_median: float = float("nan")
    reference_median: float = float("nan")


@dataclass(frozen=True)
class PeriodEstimate:
    """The performance estimate of one period of the events (``start``–``end``: epoch seconds on an event-time axis,
    else the events' 0-based positions), its interval, and the realized value where the period's events are labelled
    (None otherwise)."""

    start: float
    end: float
    n: int
    estimate: float
    lower: float
    upper: float
    realized: float | None = None
    n_labelled: int = 0


@dataclass(frozen=True)
class VerdictSpan:
    """A segment's verdict from line ``start`` to line ``end`` (exclusive) and the detectors that set it."""

    segment: str
    verdict: str
    start: int
    end: int
    detectors: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    #: the span's first and last event time (epoch seconds), NaN where the events carry none
    t_start: float = float("nan")
    t_end: float = float("nan")
    #: why the detectors that fired did not make the verdict harmful (:attr:`VerdictReport.not_harm`)
    not_harm: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportData:
    """Everything the page shows, each section a typed result or the reason it is empty (``*_note``)."""

    title: str
    model: str
    source: str
    n_lines: int
    n_events: int
    invalid: Mapping[str, int]
    kind: str
    scores: ScoreTable
    timeline: ReplayTimeline | None
    spans: tuple[VerdictSpan, ...]
    timeline_note: str
    signals: tuple[SignalSeries, ...]
    yardstick: tuple[Yardstick, ...]
    gamma_map: GammaMap | None
    gamma_map_note: str
    drift: tuple[InputDrift, ...]
    drift_note: str
    accuracy: AccuracyEstimate | None
    accuracy_note: str
    probe: ProbeReport | None
    probe_note: str
    n_flagged: int = 0
    flag_threshold: float = float("nan")
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: events per micro-batch of the replay run for the page (0: the timeline came from elsewhere)
    replay_batch: int = 0
    #: the reference's Gamma Map (a classifier's): the reference JSON's (``reference.gamma_map``), or drawn from
    #: the reference rows
    reference_gamma_map: GammaMap | None = None
    #: K, the classes the reference predicts: the Gamma Map's P axis starts at 1/K (None: at 0)
    gamma_map_classes: int | None = None
    #: invalid lines refused for one input's value: ``"feature: problem"`` → lines
    invalid_inputs: Mapping[str, int] = field(default_factory=dict)
    #: the performance estimate per period (on the signals' time axis), or why there is none
    periods: tuple[PeriodEstimate, ...] = ()
    periods_note: str = ""
    #: ``"time"`` where the events carry event times (timestamps, or a DataFrame's DatetimeIndex), else ``"line"``
    axis: str = "line"
    #: the names the inputs are shown by, in the model's element order
    feature_names: tuple[str, ...] = ()
    #: the model beside a candidate on the same events (:func:`monitor.compare`'s result), or why not
    #: (``comparison_note``; both empty: no candidate was given)
    comparison: Comparison | None = None
    comparison_note: str = ""
    #: per segment whose verdict named inputs: those inputs over the segment's events alone, against the
    #: segment's baseline (its own, else the model-wide reference) — the pooled ``drift`` mixes every segment
    segment_drift: tuple[SegmentDrift, ...] = ()


@dataclass(frozen=True)
class SegmentDrift:
    """The inputs a segment's verdict named, tested over that segment's events alone (``baseline``: the segment's
    own baseline, or ``model-wide``)."""

    segment: str
    events: int
    baseline: str
    drift: tuple[InputDrift, ...]


@dataclass(frozen=True)
class Report:
    """:func:`build_report`'s result: the data behind the page, the page, and where it was written."""

    data: ReportData
    html: str
    path: Path | None = None
