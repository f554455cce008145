"""Where within a micro-batch a verdict change is placed: at the event at which its detectors turned it
(monitor/drift/verdict.py ``settled_at``, monitor/drift/slots.py ``DetectorSlot.feed``, monitor/runtime/watch.py),
so a change names the same event whatever the batch size, and at the batch's end where the accuracy estimate, read at
evaluations, turned it."""

from __future__ import annotations

import dataclasses

import numpy as np

from monitor.drift.verdict import HarmEvidence, Verdict, VerdictEngine
from monitor.events import InferenceEvent
from monitor.runtime.watch import ModelWatch
from monitor.runtime.watch_report import DetectorCrossed, VerdictChange
from monitor.signals.scorer import ScoreResult
from tests.unit.test_watch import MODEL, Stream, make_watch, reference


def engine() -> VerdictEngine:
    eng = VerdictEngine(reference())
    s = Stream(seed=5)
    eng.update(confidence=s.confidence(2000), gamma=s.signals(2000)[0], features=s.features(2000))
    assert eng.verdict is Verdict.STABLE
    return eng


def test_settled_at_is_the_event_at_which_the_first_confidence_cusum_crossed() -> None:
    eng = engine()
    names = ("confidence_cusum", "confidence_tail_cusum", "confidence_jump_cusum")
    cusums = [eng.detector(name) for name in names]
    before = [c.state.events for c in cusums if c is not None]
    assert len(before) == 3
    conf = np.concatenate([Stream(seed=6).confidence(40), np.full(60, 0.5)])  # confidence collapses at event 40
    eng.update(confidence=conf)
    assert eng.verdict is Verdict.HARMFUL_SHIFT
    # the 0-based event of the batch whose value each crossed at
    crossed = [c.state.changes[-1] - b - 1 for c, b in zip(cusums, before, strict=True) if c and c.state.changes]
    assert all(40 <= x < 100 for x in crossed)
    assert eng.settled_at(Verdict.HARMFUL_SHIFT) == min(crossed)


def test_settled_at_skips_the_events_a_detector_did_not_take() -> None:
    eng = engine()
    conf = np.concatenate([Stream(seed=6).confidence(40), np.full(60, 0.5)])
    gaps = conf.copy()
    gaps[::3] = np.nan  # every third event without a confidence: the CUSUM takes the others
    eng.update(confidence=gaps)
    cusum = eng.detector("confidence_cusum")
    assert cusum is not None
    at = eng.settled_at(Verdict.HARMFUL_SHIFT)
    assert at is not None and at >= 40 and not np.isnan(gaps[at])
    # the event named is the one at which the CUSUM, fed the same values one by one, crossed
    again = engine()
    for i, value in enumerate(gaps.tolist()):
        again.update(confidence=np.array([value]))
        if again.verdict is Verdict.HARMFUL_SHIFT:
            assert i == at
            break
    else:
        raise AssertionError("fed one by one, the CUSUM never crossed")


def test_a_verdict_the_accuracy_estimate_turned_settles_at_the_evaluation() -> None:
    eng = engine()
    eng.update(confidence=Stream(seed=7).confidence(50))
    # harm from the estimate alone, read at this evaluation: the verdict turned at the batch's last event
    assert eng.settled_at(Verdict.HARMFUL_SHIFT, HarmEvidence(accuracy_drop=True)) == 49
    # the estimate was already below before the batch: no event of the batch turned the verdict
    drop = HarmEvidence(accuracy_drop=True)
    assert eng.settled_at(Verdict.HARMFUL_SHIFT, drop, drop) is None
    assert eng.settled_at(Verdict.STABLE) is None


def interleaved(
    stream: Stream, n: int, *, harmful: bool
) -> tuple[list[InferenceEvent], np.ndarray, ScoreResult, np.ndarray]:
    """A batch of ``n`` events whose segments alternate a, b (only a's events ``harmful``)."""
    events, x, result, shadow = stream.batch(n, harmful=harmful)
    if harmful:  # b's events as they were: stationary
        calm = stream.batch(n)
        odd = np.arange(n) % 2 == 1
        for name in ("gamma", "flicker", "p_adj", "gamma_logit", "probability", "margin"):
            getattr(result, name)[odd] = getattr(calm[2], name)[odd]
    for i, ev in enumerate(events):
        ev.segment = "a" if i % 2 == 0 else "b"
    return events, x, result, shadow


def changes_fed_in(batch: int) -> list[tuple[str, str, str]]:
    """(kind, segment, event id) of every verdict change and detector crossing of one stream fed ``batch`` events
    at a time: 1,000 stationary events, then 600 whose segment a turns harmful."""
    watch = ModelWatch(MODEL, make_watch()[0].config)
    watch.install_reference(reference())
    watch.install_segment_references({"a": reference(), "b": reference(seed=101)})
    stream = Stream(seed=11)
    parts = [interleaved(stream, 1000, harmful=False), interleaved(stream, 600, harmful=True)]
    events = [ev for p in parts for ev in p[0]]
    x = np.vstack([p[1] for p in parts])
    names = [f.name for f in dataclasses.fields(ScoreResult) if getattr(parts[0][2], f.name) is not None]
    result = {k: np.concatenate([getattr(p[2], k) for p in parts]) for k in names}
    shadow = np.concatenate([p[3] for p in parts])
    out: list[tuple[str, str, str]] = []
    watch.take_report()
    for lo in range(0, len(events), batch):
        sl = slice(lo, lo + batch)
        watch.update(events[sl], x[sl], ScoreResult(**{k: v[sl] for k, v in result.items()}), shadow[sl])
        for change in watch.take_report().changes:
            assert change.event is not None
            if isinstance(change, VerdictChange):
                out.append((change.report.verdict.value, change.segment, change.event.event_id))
            elif isinstance(change, DetectorCrossed):
                out.append((change.crossing.detector, change.segment, change.event.event_id))
    return out


def test_a_verdict_change_names_the_same_event_whatever_the_batch_size() -> None:
    one = changes_fed_in(1)
    harmful = [c for c in one if c[0] == "harmful-shift"]
    assert harmful and all(c[1] == "a" for c in harmful)
    # batches of 20 (10 events of each segment) and of 50: every change and crossing at the event where it happened
    assert changes_fed_in(20) == one
    assert changes_fed_in(50) == one
