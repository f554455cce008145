"""A candidate model beside the served model it would replace (``models[].compare_with``), on the same events.

The candidate is never served and receives no events of its own: every micro-batch the served model scores (one
sampled draw, decoded once) is scored on the candidate too, at the served model's scales (its standardizer, radius,
σ and seed) and on the same perturbations (the same ball points, and the served scorer's very flicker copies:
:meth:`~monitor.signals.scorer.RobustnessScorer.share_noise`), so both models' per-event values are paired.
:class:`PairedRows` keeps the newest paired events per segment; :class:`Candidate` scores, pairs and, every
``every`` paired events, compares each time window with :mod:`monitor.comparison.paired` (the Pareto relation and
the verdict ``compare`` uses; the normal paired interval, :func:`~monitor.comparison.paired.normal_interval`, where
``compare`` bootstraps): the differences (candidate − served) with their intervals, the share of events where the
two predict different classes, and per segment the verdict of the longest window. Its :class:`CompareReport` goes to telemetry at the
pipeline's drains (:func:`publish_comparison`). The paired rows are not persisted: a restart compares afresh.

The candidate's file is watched while ``run`` runs (:mod:`monitor.runtime.candidate_file`, :meth:`Candidate.refresh`):
replaced, it is loaded again and checked as at start, and the comparison starts afresh (its series go until the
new windows fill); a file that is gone, unreadable or no longer fits the served model is refused (one log line,
``harmonic_compare_candidate_up`` 0, ``/readyz``) and nothing is compared until a file that fits replaces it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.comparison.columns import class_values
from monitor.comparison.paired import Axis, PairedDifference, paired_differences, pareto, verdict
from monitor.comparison.run import AXES
from monitor.config import ModelSettings, Settings
from monitor.errors import ConfigError, MonitorError
from monitor.exporters.prometheus import MetricsState
from monitor.model.onnx import OnnxModel
from monitor.model.signature import Held, default_held
from monitor.rolling.windows import OTHER
from monitor.runtime.candidate_file import FileWatch
from monitor.runtime.models import ModelRuntime, load_onnx
from monitor.signals.scorer import RobustnessScorer, ScoreResult

log = logging.getLogger("monitor.runtime.candidate")

#: the axes compared live, per model kind (a regressor has no class probability, P_adj or classes to disagree on)
LIVE_AXES: Mapping[str, tuple[Axis, ...]] = {
    "classifier": tuple(ax for ax in AXES if ax.name in ("gamma", "flicker", "p_adj", "confidence")),
    "regressor": tuple(ax for ax in AXES if ax.name in ("gamma", "flicker")),
}
#: each live axis's per-event values in a ScoreResult
_VALUES = {"gamma": "gamma", "flicker": "flicker", "p_adj": "p_adj", "confidence": "probability"}
#: the comparison verdicts, as ``harmonic_compare_verdict`` labels them
VERDICTS = ("candidate-better", "candidate-worse", "no-difference", "incomparable")
#: paired events kept per segment (the newest): bounds memory and a comparison's cost at any event rate
MAX_ROWS = 20_000
#: paired events a window needs before it is compared
MIN_EVENTS = 50
#: the fewest new paired events between two comparisons (a comparison reads every window of every segment)
COMPARE_EVERY = 2000
#: ... or at least this many seconds of event time since the last comparison (a slow stream)
COMPARE_SECONDS = 10.0
#: batches scored on flicker copies other than the served model's (its scorer drew for something else, as for a
#: reference scored again) before the candidate takes the served model's draws again (a copy of its noise bank)
RESHARE_BATCHES = 16


def check_candidate(served: str, a: OnnxModel, candidate: str, b: OnnxModel) -> NDArray[np.int64] | None:
    """Refuse a candidate that cannot be scored on the served model's events; the map of the candidate's class
    indices to the served model's (None: the same order, or a regressor).

    Raises
    ------
    ConfigError
        Different kinds, inputs (names, order, held inputs) or class sets, each in one line naming both models.
    """
    where = f"model '{candidate}' (compare_with: {served})"
    if a.kind != b.kind:
        raise ConfigError(
            f"{where}: '{served}' is a {a.kind} and '{candidate}' a {b.kind}; a candidate must answer the same task "
            "(set model_kind when the graph misleads)"
        )
    fa, fb = tuple(a.feature_names), tuple(b.feature_names)
    if fa != fb:
        missing = [n for n in fa if n not in fb]
        what = (
            f"takes {len(fb)} ({_first(fb)})"
            if len(fa) != len(fb)
            else f"lacks {_first(missing)}"
            if missing
            else f"takes them in another order ({_first(fb)})"
        )
        raise ConfigError(
            f"{where}: '{served}' takes {len(fa)} inputs ({_first(fa)}) and '{candidate}' {what}; export the "
            "candidate with the same inputs in the same order, or set feature_names on both"
        )
    held_a = tuple(s.name for s in a.signature.held_inputs) + a.signature.held_features
    held_b = tuple(s.name for s in b.signature.held_inputs) + b.signature.held_features
    if held_a != held_b:
        raise ConfigError(
            f"{where}: '{served}' holds {list(held_a)} fixed and '{candidate}' {list(held_b)}; both must take the "
            "same held inputs (fixed_features)"
        )
    if a.kind != "classifier":
        return None
    ca, cb = _classes(a), _classes(b)
    if ca is None or cb is None or ca == cb:  # None: no probabilities to count classes by (labels only)
        return None
    if set(ca) != set(cb):
        raise ConfigError(
            f"{where}: '{served}' predicts classes {{{', '.join(ca)}}} and '{candidate}' {{{', '.join(cb)}}}; "
            "a candidate must predict the served model's classes"
        )
    return np.array([ca.index(c) for c in cb], dtype=np.int64)


def _classes(model: OnnxModel) -> tuple[str, ...] | None:
    """The class values the graph declares, else the columns of its probabilities as ``0`` … ``C−1`` (as
    ``compare`` reads them)."""
    declared = class_values(model)
    if declared is not None:
        return declared
    out = model.evaluate(np.zeros((1, model.n_features), dtype=np.float32), default_held(model.signature, 1))
    return None if out.proba is None else tuple(str(i) for i in range(int(out.proba.shape[1])))


def _first(names: Sequence[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (f", … ({len(names)} in all)" if len(names) > shown else "")


@dataclass(frozen=True)
class PairedWindow:
    """One window of one segment: the paired differences (``difference`` is candidate − served, ``lower``/``upper``
    its 90 % paired interval), the share of events where the predicted classes differ (NaN for a
    regressor) and the verdict of the window."""

    segment: str
    window: str
    events: int
    differences: tuple[PairedDifference, ...]
    disagreement: float
    verdict: str
    statement: str


class PairedRows:
    """The newest :data:`MAX_ROWS` paired events per segment: event time, both models' values on each axis, and
    both predicted classes. ``update`` feeds a batch, ``compare`` reads a window.

    The values are kept axis by axis, (K, N): a window's means and spreads are then reductions along contiguous
    rows (a (N, K) array's per-column reductions cost ~10× more), and a window that is the newest events of the
    segment, as the events mostly arrive in time order, is a view of them, not a copy.

    >>> rows = PairedRows(("gamma",), max_rows=4)
    >>> t = np.arange(6.0); a = np.zeros((6, 1)); b = np.ones((6, 1)); c = np.zeros(6, dtype=np.int64)
    >>> rows.update(np.array(["x"] * 6), t, a, b, c, c).events("x")
    4
    """

    def __init__(self, axes: Sequence[str], max_rows: int = MAX_ROWS) -> None:
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1; got {max_rows!r}")
        self.axes = tuple(axes)
        self.max_rows = max_rows
        self.reset()

    def reset(self) -> None:
        #: per segment: (t (N,), served values (K, N), candidate values (K, N), served class (N,), candidate class)
        self._rows: dict[str, list[NDArray[Any]]] = {}
        #: per segment, batches appended since the last consolidation (joined when read, or past 2 × max_rows)
        self._new: dict[str, list[list[NDArray[Any]]]] = {}
        self._pending: dict[str, int] = {}
        #: the latest event time seen
        self._end = -np.inf

    def update(
        self,
        segments: NDArray[np.str_],
        t: NDArray[np.float64],
        a: NDArray[np.float64],
        b: NDArray[np.float64],
        class_a: NDArray[np.int64],
        class_b: NDArray[np.int64],
    ) -> Self:
        """Append paired events (``a``: the served model, ``b``: the candidate, (N, K) over :attr:`axes`)."""
        if not t.size:
            return self
        self._end = max(self._end, float(t.max()))
        first = segments[0]
        if (segments == first).all():  # one segment in the batch (the common case): no selection
            self._append(str(first), [t, a.T, b.T, class_a, class_b])
            return self
        for seg in np.unique(segments).tolist():
            sel = segments == seg
            self._append(seg, [t[sel], a[sel].T, b[sel].T, class_a[sel], class_b[sel]])
        return self

    def _append(self, segment: str, parts: list[NDArray[Any]]) -> None:
        self._new.setdefault(segment, []).append(parts)
        self._pending[segment] = self._pending.get(segment, 0) + int(parts[0].shape[0])
        if self._pending[segment] > 2 * self.max_rows:  # bounded between reads too
            self._join(segment)

    def _join(self, segment: str) -> list[NDArray[Any]] | None:
        """``segment``'s rows, the batches appended since the last read joined and the oldest past max_rows dropped
        (one concatenation per read, not one per batch)."""
        new = self._new.pop(segment, [])
        self._pending.pop(segment, None)
        old = self._rows.get(segment)
        chunks = new if old is None else [old, *new]
        if not chunks:
            return None
        if len(chunks) > 1:
            joined = [np.concatenate(parts, axis=-1) for parts in zip(*chunks, strict=True)]
        else:
            joined = [np.ascontiguousarray(p) for p in chunks[0]]
        self._rows[segment] = [p[..., -self.max_rows :] for p in joined]
        return self._rows[segment]

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self._rows, *self._new]))

    def events(self, segment: str) -> int:
        rows = self._join(segment)
        return 0 if rows is None else int(rows[0].shape[0])

    def events_in(self, segment: str, window_seconds: float, end: float) -> int:
        """``segment``'s events in (end − window_seconds, end]."""
        rows = self._join(segment)
        return 0 if rows is None else int(np.count_nonzero(rows[0] > end - window_seconds))

    def end(self) -> float:
        """The latest event time held (the windows end there), -inf when empty."""
        return self._end

    def compare(self, segment: str, window_seconds: float, end: float, axes: Sequence[Axis]) -> PairedWindow | None:
        """The paired comparison of ``segment``'s events in (end − window_seconds, end]; None below
        :data:`MIN_EVENTS` events. Its intervals are the normal paired ones
        (:func:`~monitor.comparison.paired.normal_interval`): one pass over the window's rows."""
        rows = self._join(segment)
        if rows is None:
            return None
        t, a, b, ca, cb = rows
        sel = t > end - window_seconds
        n = int(np.count_nonzero(sel))
        if n < MIN_EVENTS:
            return None
        pick = _newest(sel, n)
        cols = [self.axes.index(ax.name) for ax in axes]
        served, cand = a[:, pick], b[:, pick]
        if cols != list(range(len(self.axes))):
            served, cand = served[cols], cand[cols]
        # (N, K) views of the (K, N) rows: paired_differences reduces each axis along its contiguous row
        diffs = paired_differences(served.T, cand.T, axes, interval="normal")
        relation = pareto(diffs, axes)
        cls_a, cls_b = ca[pick], cb[pick]
        known = (cls_a >= 0) & (cls_b >= 0)
        seen = int(np.count_nonzero(known))
        share = float(np.count_nonzero((cls_a != cls_b) & known)) / seen if seen else float("nan")
        # candidate − served (the interval's ends swap); ``favours`` names the model
        sides = {"a": "served", "b": "candidate"}
        flipped = tuple(
            PairedDifference(
                d.axis, d.n, d.mean_b, d.mean_a, -d.difference, -d.upper, -d.lower, sides.get(d.favours, d.favours)
            )
            for d in diffs
        )
        return PairedWindow(
            segment,
            f"{window_seconds:g}s",
            n,
            flipped,
            share,
            verdict(relation.relation),
            relation.statement("served", "candidate"),
        )


def _newest(sel: NDArray[np.bool_], n: int) -> slice | NDArray[np.bool_]:
    """The ``n`` rows ``sel`` picks: a slice when they are the newest rows (events in time order), else ``sel``."""
    first = sel.shape[0] - n
    return slice(first, None) if sel[first:].all() else sel


@dataclass
class CompareReport:
    """What a candidate produced since the last drain: the windows compared, the verdict per segment (of its
    longest window), and the model rows the candidate evaluated."""

    model: str
    candidate: str
    windows: list[PairedWindow] = field(default_factory=list)
    verdicts: dict[str, str] = field(default_factory=dict)
    #: (segment, window) pairs whose window fell below MIN_EVENTS (a segment gone quiet): their series go
    stale: list[tuple[str, str]] = field(default_factory=list)
    #: segments with no window left to compare: their verdict goes too
    quiet: list[str] = field(default_factory=list)
    evaluations: float = 0.0
    #: the comparison started afresh (the candidate's file replaced or refused): every earlier series goes
    restarted: bool = False
    #: the candidate's file is loaded and compared (False: refused)
    up: bool = True


class Candidate:
    """One candidate beside its served model: scores the served model's batches and compares them per window.

    Parameters
    ----------
    served : the served model's name.
    name, model : the candidate's name and ONNX copy.
    class_map : the candidate's class index → the served model's (:func:`check_candidate`); None: the same.
    window_seconds : the time windows compared (``windows.time_windows_seconds``).
    every : paired events between comparisons (``drift.every``, at least :data:`COMPARE_EVERY`).
    settings, served_model : the candidate's settings and the served model's ONNX copy: with both, the candidate's
        file is watched (:meth:`refresh`); without, the model stays the one given.
    """

    def __init__(
        self,
        served: str,
        name: str,
        model: OnnxModel,
        class_map: NDArray[np.int64] | None,
        window_seconds: Sequence[float],
        every: int,
        *,
        settings: ModelSettings | None = None,
        served_model: OnnxModel | None = None,
    ) -> None:
        if not window_seconds:
            raise ValueError("window_seconds must name at least one window")
        self.served, self.name, self.model = served, name, model
        self.class_map = class_map
        self.window_seconds = tuple(sorted(window_seconds))
        self.every = max(1, every)
        self.axes = LIVE_AXES.get(model.kind, LIVE_AXES["regressor"])
        self.rows = PairedRows([ax.name for ax in self.axes])
        self.scorer: RobustnessScorer | None = None
        self._standardizer: object = None
        #: batches since the candidate's flicker copies were last the served model's, and after how many it takes
        #: the served model's draws again (RESHARE_BATCHES, doubled each time that did not hold)
        self._unshared, self._reshare_after, self._reshared = 0, RESHARE_BATCHES, False
        self._since = 0
        #: the event time of the last comparison (a slow stream is compared every COMPARE_SECONDS of event time)
        self._compared_at = -np.inf
        self._report = CompareReport(served, name)
        #: per segment, the verdict last logged
        self._verdicts: dict[str, str] = {}
        self.settings, self.served_model = settings, served_model
        self.file = None if settings is None or served_model is None else FileWatch(model.path)
        #: times the file was loaded again; why it is refused (None: compared)
        self.reloads = 0
        self.refused: str | None = None

    def score(
        self,
        scorer: RobustnessScorer,
        held_sample: Held | None,
        rows: NDArray[np.float64],
        held: Held | None,
        served: ScoreResult,
        timestamps: NDArray[np.float64],
        segments: NDArray[np.str_],
        keep: NDArray[np.bool_] | None,
    ) -> None:
        """Score the served model's batch on the candidate (``scorer``: the served model's, whose standardizer and
        scales the candidate shares) and pair the events both scored; compare once ``every`` events are new
        or :data:`COMPARE_SECONDS` of event time have passed. A refused candidate scores nothing."""
        if self.refused is not None:
            return
        if self.scorer is None or self._standardizer is not scorer.standardizer:
            self.scorer = RobustnessScorer(
                self.model, scorer.standardizer, scorer.config, held_sample=held_sample, noise_from=scorer
            )
            self._standardizer, self._unshared, self._reshare_after = scorer.standardizer, 0, RESHARE_BATCHES
        elif self._unshared >= self._reshare_after:  # the served scorer drew for something else: its draws again
            self.scorer.share_noise(scorer)
            self._unshared, self._reshared = 0, True
        result = self.scorer.score(rows, held)
        if self.scorer.shares_noise(scorer):
            self._unshared, self._reshare_after = 0, RESHARE_BATCHES
        else:  # a copy of the bank that did not hold is tried again ever later: it costs a bank's projection
            self._unshared += 1
            if self._reshared:
                self._reshare_after = min(2 * self._reshare_after, 64 * RESHARE_BATCHES)
        self._reshared = False
        self._report.evaluations += float(rows.shape[0] * self.scorer.rows_per_event())
        ok = served.valid & result.valid
        if keep is not None:
            ok &= keep
        paired = int(np.count_nonzero(ok))
        if not paired:
            return
        pick: slice | NDArray[np.bool_] = slice(None) if paired == ok.shape[0] else ok  # all paired: views, no copies
        cls_b = result.predicted_class
        if self.class_map is not None:
            cls_b = np.where(cls_b >= 0, self.class_map[np.clip(cls_b, 0, None)], -1)
        a = np.column_stack([getattr(served, _VALUES[ax.name])[pick] for ax in self.axes])
        b = np.column_stack([getattr(result, _VALUES[ax.name])[pick] for ax in self.axes])
        self.rows.update(segments[pick], timestamps[pick], a, b, served.predicted_class[pick], cls_b[pick])
        self._since += paired
        latest = float(timestamps[pick].max())
        if not np.isfinite(self._compared_at):  # the first paired events: the event-time cadence starts here
            self._compared_at = latest
        if self._since >= self.every or latest - self._compared_at >= COMPARE_SECONDS:
            self._since, self._compared_at = 0, latest
            self.compare()

    def compare(self) -> None:
        """Compare every window of every segment, ending at the latest event time held."""
        end = self.rows.end()
        for seg in self.rows.segments:
            shorter: PairedWindow | None = None
            for w in self.window_seconds:
                # a longer window holding no more events than the shorter one holds the same events: its result
                same = shorter is not None and self.rows.events_in(seg, w, end) == shorter.events
                got = dataclasses.replace(shorter, window=f"{w:g}s") if same and shorter else None
                got = got or self.rows.compare(seg, w, end, self.axes)
                if got is None:
                    self._stale(seg, f"{w:g}s")
                    continue
                shorter = got
                self._report.windows.append(got)
                if (seg, got.window) in self._report.stale:
                    self._report.stale.remove((seg, got.window))
                if seg in self._report.quiet:
                    self._report.quiet.remove(seg)
                self._report.verdicts[seg] = got.verdict  # the longest window compared last: its verdict stands
                if w == self.window_seconds[-1] and self._verdicts.get(seg) != got.verdict:
                    self._verdicts[seg] = got.verdict
                    log.info(
                        f"comparison verdict {got.verdict}: {got.statement}",
                        extra={"model": self.served, "candidate": self.name, "segment": seg, "window": got.window},
                    )
            if shorter is None and self._verdicts.pop(seg, None) is not None:
                self._report.quiet.append(seg)
                self._report.verdicts.pop(seg, None)

    def _stale(self, segment: str, window: str) -> None:
        """``segment``'s ``window`` holds too few events now: its series go (an earlier result of this report too)."""
        report = self._report
        report.windows = [w for w in report.windows if (w.segment, w.window) != (segment, window)]
        if (segment, window) not in report.stale:
            report.stale.append((segment, window))

    def take_report(self) -> CompareReport:
        report, self._report = self._report, CompareReport(self.served, self.name, up=self.refused is None)
        return report

    def refresh(self, now: float | None = None) -> None:
        """Look at the candidate's file (``now``: a monotonic clock; at most once per
        :data:`~monitor.runtime.candidate_file.CHECK_SECONDS`); replaced, load it again and start the comparison
        afresh, or refuse it (gone, unreadable, or no longer fitting the served model) until it is replaced again."""
        if self.file is None or not self.file.changed(time.monotonic() if now is None else now):
            return
        assert self.settings is not None and self.served_model is not None
        try:
            model = load_onnx(self.settings)
            class_map = check_candidate(self.served, self.served_model, self.name, model)
        except Exception as exc:  # noqa: BLE001 - a bad file refuses the candidate, never the served model
            self.refused = str(exc) if isinstance(exc, MonitorError) else f"{type(exc).__name__}: {exc}"
            self._restart()
            log.error(
                f"candidate '{self.name}' refused: its file {self.file.path} changed and cannot stand beside "
                f"'{self.served}' ({self.refused}); nothing is compared until a file that fits replaces it",
                extra={"model": self.served, "candidate": self.name},
            )
            return
        self.model, self.class_map, self.refused = model, class_map, None
        self.axes = LIVE_AXES.get(model.kind, LIVE_AXES["regressor"])
        self.reloads += 1
        self._restart()
        log.info(
            f"candidate '{self.name}' reloaded: its file {self.file.path} was replaced; its comparison with "
            f"'{self.served}' starts afresh",
            extra={"model": self.served, "candidate": self.name, "reloads": self.reloads},
        )

    def _restart(self) -> None:
        """Forget every paired event and verdict: the next report clears the candidate's series first."""
        self.rows = PairedRows([ax.name for ax in self.axes])
        self.scorer, self._standardizer = None, None
        self._since, self._compared_at, self._verdicts = 0, -np.inf, {}
        evaluations = self._report.evaluations
        self._report = CompareReport(
            self.served, self.name, evaluations=evaluations, restarted=True, up=self.refused is None
        )

    def readiness(self) -> dict[str, object]:
        """This candidate in ``/readyz``: the model it would replace, its file, reloads, and why it is refused."""
        detail: dict[str, object] = {"compared_with": self.served, "path": str(self.model.path)}
        detail["reloads"] = self.reloads
        if self.refused is not None:
            detail["refused"] = self.refused
        return detail


def build_candidates(settings: Settings, runtimes: Sequence[ModelRuntime]) -> dict[str, list[Candidate]]:
    """Per served model, a :class:`Candidate` for every model whose ``compare_with`` names it, each checked
    (:func:`check_candidate`); raises :class:`ConfigError` for one that cannot stand beside its model."""
    by_name = {rt.name: rt for rt in runtimes}
    out: dict[str, list[Candidate]] = {}
    for rt in runtimes:
        served = rt.settings.compare_with
        if served is None:
            continue
        if served not in by_name:
            raise ConfigError(f"model '{rt.name}': compare_with names '{served}', which is not loaded")
        class_map = check_candidate(served, by_name[served].model, rt.name, rt.model)
        windows = tuple(float(w) for w in settings.windows.time_windows_seconds)
        out.setdefault(served, []).append(
            Candidate(
                served,
                rt.name,
                rt.model,
                class_map,
                windows,
                max(settings.drift.every, COMPARE_EVERY),
                settings=rt.settings,
                served_model=by_name[served].model,
            )
        )
    return out


def fold_segments(segments: Sequence[str], known: set[str]) -> NDArray[np.str_]:
    """Each event's segment as the served model's windows keep it (segments past ``max_segments`` in ``other``).

    >>> fold_segments(["eu", "mars", "eu"], {"eu"}).tolist(), fold_segments(["europe"] * 2, {"europe"}).tolist()
    (['eu', 'other', 'eu'], ['europe', 'europe'])
    """
    first = segments[0] if segments else OTHER
    if all(s == first for s in segments):  # one segment in the batch (the common case): folded once
        folded = first if first in known else OTHER
        return np.full(len(segments), folded, dtype=f"<U{max(len(folded), 1)}")
    return np.array([s if s in known else OTHER for s in segments], dtype=np.str_)


def _starts_with(prefix: tuple[str, ...]) -> Callable[[tuple[str, ...]], bool]:
    """A label match: the series whose first labels are ``prefix``."""
    return lambda labels: labels[: len(prefix)] == prefix


def publish_comparison(state: MetricsState, report: CompareReport) -> None:
    """Write a candidate's report into the ``harmonic_compare_*`` series (:mod:`monitor.telemetry`)."""
    model, cand = report.model, report.candidate
    tel.COMPARE_CANDIDATE_UP.set(state, tel.ModelCandidate(model, cand), 1.0 if report.up else 0.0)
    if report.restarted:
        pair = _starts_with((model, cand))
        for gauge in (tel.COMPARE_EVENTS, tel.COMPARE_DISAGREEMENT_RATIO, tel.COMPARE_VERDICT):
            gauge.clear(state, pair)
        for axis_gauge in (tel.COMPARE_DIFFERENCE, tel.COMPARE_DIFFERENCE_LOWER, tel.COMPARE_DIFFERENCE_UPPER):
            axis_gauge.clear(state, pair)
    if report.evaluations:
        tel.MODEL_EVALUATIONS_TOTAL.inc(state, tel.ModelPurpose(cand, "events"), report.evaluations)
    # what went stale first: a window compared again later in the same report is set again below
    for seg, window in report.stale:
        match = _starts_with((model, cand, seg, window))
        for gauge in (tel.COMPARE_EVENTS, tel.COMPARE_DISAGREEMENT_RATIO):
            gauge.clear(state, match)
        for axis_gauge in (tel.COMPARE_DIFFERENCE, tel.COMPARE_DIFFERENCE_LOWER, tel.COMPARE_DIFFERENCE_UPPER):
            axis_gauge.clear(state, match)
    for seg in report.quiet:
        tel.COMPARE_VERDICT.clear(state, _starts_with((model, cand, seg)))
    for w in report.windows:
        labels = tel.ModelCandidateSegmentWindow(model, cand, w.segment, w.window)
        tel.COMPARE_EVENTS.set(state, labels, float(w.events))
        if np.isfinite(w.disagreement):
            tel.COMPARE_DISAGREEMENT_RATIO.set(state, labels, w.disagreement)
        for d in w.differences:
            axis = tel.ModelCandidateSegmentWindowAxis(model, cand, w.segment, w.window, d.axis)
            tel.COMPARE_DIFFERENCE.set(state, axis, d.difference)
            if np.isfinite(d.lower) and np.isfinite(d.upper):
                tel.COMPARE_DIFFERENCE_LOWER.set(state, axis, d.lower)
                tel.COMPARE_DIFFERENCE_UPPER.set(state, axis, d.upper)
    for seg, current in report.verdicts.items():
        for v in VERDICTS:
            tel.COMPARE_VERDICT.set(state, tel.ModelCandidateSegmentVerdict(model, cand, seg, v), float(v == current))
