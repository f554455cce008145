"""Per-model analytics (monitor/runtime/watch.py): ModelWatch on synthetic scored batches with event-time timestamps.

The batches are built directly (no model): γ is exponential, flicker a mixture of 0 and Binomial(32, p)/32, two
Gaussian features. A harmful shift raises γ and the flicker rate; time is the events' own timestamps (100 events/s).
"""

from __future__ import annotations

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.alerts import AlertEvent
from monitor.clock import WatermarkClock
from monitor.config import DriftSettings
from monitor.drift.verdict import Verdict
from monitor.events import InferenceEvent
from monitor.exporters.prometheus import MetricsState
from monitor.rolling.reference import Reference
from monitor.runtime.watch import HARMFUL_ALERT, INPUT_ALERT, SHADOW_ALERT, ModelWatch, WatchConfig
from monitor.signals.scorer import ScoreResult
from tests.unit.fanned_watch import FannedWatch, fanned_watch

MODEL = "credit"
T0 = 1_795_000_000.0
SPACING = 0.01  # seconds of event time per event
BATCH = 100


class Stream:
    """Seeded synthetic scored events; ``harmful`` raises γ and flicker (fragility) and lowers the model's confidence
    (evidence of a loss), ``moved`` shifts feature 1 only."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.index = 0

    def signals(self, n: int, *, harmful: bool = False) -> tuple[np.ndarray, np.ndarray]:
        unstable = self.rng.random(n) < (0.4 if harmful else 0.1)
        gamma = self.rng.exponential(1e-3, n) * np.where(unstable & harmful, 5.0, 1.0)
        flicker = np.where(unstable, self.rng.binomial(32, 0.15, n) / 32.0, 0.0)
        return gamma, flicker

    def confidence(self, n: int, *, harmful: bool = False) -> np.ndarray:
        """Max-probability of a binary classifier: about 0.95; ``harmful``: 40 % of events 0.3 lower."""
        drop = np.where(self.rng.random(n) < 0.4, 0.3, 0.0) if harmful else 0.0
        return np.clip(0.96 - self.rng.exponential(0.04, n) - drop, 0.5, 1.0)

    def features(self, n: int, *, moved: bool = False) -> np.ndarray:
        x = self.rng.normal(0.0, 1.0, (n, 2))
        if moved:
            x[:, 1] += 1.5
        return x

    def batch(
        self,
        n: int = BATCH,
        *,
        harmful: bool = False,
        moved: bool = False,
        segment: str = "other",
        shadow_rate: float | None = None,
    ) -> tuple[list[InferenceEvent], np.ndarray, ScoreResult, np.ndarray]:
        x = self.features(n, moved=moved)
        gamma, flicker = self.signals(n, harmful=harmful)
        probability = self.confidence(n, harmful=harmful)
        events = [
            InferenceEvent(f"e{self.index + i}", MODEL, "1", x[i], T0 + (self.index + i) * SPACING, segment=segment)
            for i in range(n)
        ]
        self.index += n
        result = ScoreResult(
            gamma=gamma,
            flicker=flicker,
            p_adj=np.exp(-25.0 * gamma),
            gamma_logit=gamma,
            predicted_class=(x[:, 0] > 0).astype(np.int64),
            probability=probability,
            valid=np.ones(n, dtype=bool),
            margin=2.0 * probability - 1.0,
        )
        shadow = np.full(n, np.nan) if shadow_rate is None else (self.rng.random(n) < shadow_rate).astype(float)
        return events, x, result, shadow

    @property
    def now(self) -> float:
        return T0 + (self.index - 1) * SPACING


def reference(seed: int = 100, n: int = 5000) -> Reference:
    s = Stream(seed)
    gamma, flicker = s.signals(n)
    # a confidence sample of its own whose 90th percentile is representative (9.98 % of the population above it):
    # the CUSUMs' stated rate holds over the references one could draw, and one 2.6 sd off pages more often
    confidence = Stream(seed + 3).confidence(n)
    return Reference.from_arrays(
        gamma=gamma,
        flicker=flicker,
        features=s.features(n),
        predicted_class=np.zeros(n, dtype=np.int64),
        confidence=confidence,
        margin=2.0 * confidence - 1.0,
    )


def make_watch(
    *,
    for_seconds: float = 10.0,
    alerts: list[AlertEvent] | None = None,
    with_reference: bool = True,
    clock: WatermarkClock | None = None,
    detectors: DriftSettings | None = None,
) -> tuple[FannedWatch, MetricsState]:
    state = MetricsState()
    config = WatchConfig(
        window_seconds=(60.0,),
        count_window_events=1000,
        detectors=detectors or DriftSettings(window=1000, every=100),
        warmup_events=500,
        for_seconds=for_seconds,
        resolve_after_seconds=30.0,
        shadow_disagreement_threshold=0.02,
    )
    watch = fanned_watch(MODEL, config, state, alerts=alerts, clock=clock)
    if with_reference:
        watch.install_reference(reference())
    return watch, state


def feed(watch: ModelWatch, stream: Stream, batches: int, **kwargs: object) -> list[Verdict | None]:
    """Feed ``batches`` batches; return the verdict of ``segment`` after each one."""
    segment = str(kwargs.get("segment", "other"))
    verdicts = []
    for _ in range(batches):
        watch.update(*stream.batch(**kwargs))  # type: ignore[arg-type]
        verdicts.append(watch.verdict(segment))
    return verdicts


def fired(watch: ModelWatch, rule: str, segment: str | None = None) -> list[AlertEvent]:
    return [
        ev
        for ev in watch.fired
        if ev.alert.rule.name == rule
        and ev.alert.state.value == "firing"
        and (segment is None or ev.alert.segment == segment)
    ]


# ---------------------------------------------------------------------- stationary


def test_watch_stationary_stream_is_stable_and_silent() -> None:
    watch, state = make_watch()
    stream = Stream(seed=1)
    verdicts = feed(watch, stream, 80)  # 8000 events, 80 s of event time
    assert set(verdicts) == {Verdict.STABLE}
    assert watch.fired == []
    assert state.gauge(tel.DRIFT_VERDICT.name, (MODEL, "other", "stable")) == 1.0
    assert state.gauge(tel.DRIFT_VERDICT.name, (MODEL, "other", "harmful-shift")) is None
    assert state.gauge(tel.ALERTS_FIRING.name, (MODEL, "other", HARMFUL_ALERT)) == 0.0
    assert state.counter(tel.EVENTS_SCORED_TOTAL.name, (MODEL, "1", "other")) == 8000
    assert state.gauge(tel.WINDOW_EVENTS.name, (MODEL, "other", "60s")) == 6000  # 60 s at 100 events/s
    assert state.gauge(tel.WINDOW_EVENTS.name, (MODEL, "other", "last_1000")) == 1000


# ---------------------------------------------------------------------- harmful shift


def test_watch_harmful_shift_gives_the_harmful_verdict() -> None:
    watch, _ = make_watch()
    stream = Stream(seed=2)
    feed(watch, stream, 30)
    verdicts = feed(watch, stream, 40, harmful=True)
    assert verdicts[-1] == Verdict.HARMFUL_SHIFT
    first = verdicts.index(Verdict.HARMFUL_SHIFT)
    assert first < 15  # within 1500 events of the shift
    report = watch.last_reports["other"]
    assert "confidence_cusum" in report.fired  # evidence of a loss; γ and flicker alone are fragility


def test_watch_reports_a_verdict_change_at_the_batch_whose_detector_crossed_not_at_the_cadence() -> None:
    watch, _ = make_watch()  # window tests every 100 events
    stream = Stream(seed=2)
    feed(watch, stream, 300, n=10)
    engine = watch.verdicts.engine("other")
    first = None
    for i in range(400):  # batches of 10 events: ten per cadence
        watch.update(*stream.batch(10, harmful=True))
        if first is None and any(engine.alarms_on):
            first = i
            # the batch that turned a detector on is the batch whose verdict says so
            assert watch.verdict("other") is Verdict.HARMFUL_SHIFT, engine.alarms_on
            break
    assert first is not None
    crossings = []  # and not only at the cadence: over several streams, some crossings land between
    for seed in range(3, 9):
        w, _ = make_watch()
        st = Stream(seed=seed)
        feed(w, st, 300, n=10)
        eng = w.verdicts.engine("other")
        for i in range(400):
            w.update(*st.batch(10, harmful=True))
            if w.verdict("other") is Verdict.HARMFUL_SHIFT:
                assert any(eng.alarms_on)
                crossings.append(i)
                break
    assert any((i + 1) % 10 for i in crossings), crossings


def test_watch_harmful_alert_fires_after_for_seconds_of_event_time() -> None:
    delivered: list[AlertEvent] = []
    watch, state = make_watch(for_seconds=10.0, alerts=delivered)
    stream = Stream(seed=3)
    feed(watch, stream, 30)
    verdicts = feed(watch, stream, 60, harmful=True)
    first = verdicts.index(Verdict.HARMFUL_SHIFT)
    (ev,) = fired(watch, HARMFUL_ALERT)
    alert = ev.alert
    # pending from the first harmful evaluation, firing once 10 s of event time later (evaluations are 1 s apart)
    first_harmful_at = T0 + ((30 + first + 1) * BATCH - 1) * SPACING
    assert alert.starts_at_seconds == pytest.approx(first_harmful_at)
    assert ev.at_seconds - alert.starts_at_seconds >= 10.0
    assert ev.at_seconds - alert.starts_at_seconds < 10.0 + BATCH * SPACING + 1e-9
    assert delivered == watch.fired and ev in delivered
    assert alert.labels["model"] == MODEL and alert.labels["segment"] == "other"
    assert alert.labels["verdict"] == "harmful-shift" and alert.labels["severity"] == "warning"
    notes = alert.annotations
    assert notes["summary"].startswith(f"{HARMFUL_ALERT} {MODEL}/other: ") and len(notes["summary"]) < 200
    assert notes["runbook_url"] == "docs/OPERATIONS.md#harmonicharmfulshift"  # a section of docs/OPERATIONS.md
    ref = watch.reference
    assert ref is not None
    # the annotations give the first detector that fired in its own numbers: what it watches, window vs reference
    first = alert.evidence[0]
    assert first.detector.endswith(("_cusum", "_ks", "_rate"))
    assert float(notes["reference"]) == pytest.approx(first.reference, rel=1e-5)
    assert float(notes["value"]) == pytest.approx(first.window, rel=1e-5)
    assert first.window > first.reference  # a rise, as the detector says
    if first.detector.endswith("_cusum"):
        assert first.statistic > first.threshold and first.reference == pytest.approx(0.1, abs=0.02)
    assert notes["description"].startswith(first.headline) and f"/other: {first.plain}" in notes["summary"]
    assert "CUSUM" not in notes["summary"] and notes["summary"].count("confidence fell") == 1  # said once, plainly
    assert all(notes["description"].count(e.headline) == 1 for e in alert.evidence)  # each thing once
    # what fired, not a fixed name: the stream lowers confidence (harm evidence) and raises flicker (fragility)
    assert alert.labels["signal"] == "flicker+confidence"
    assert state.gauge(tel.ALERTS_FIRING.name, (MODEL, "other", HARMFUL_ALERT)) == 1.0
    assert state.counter(tel.ALERTS_FIRED_TOTAL.name, (MODEL, HARMFUL_ALERT)) == 1.0


def test_watch_harmful_alert_does_not_fire_before_for_seconds() -> None:
    watch, _ = make_watch(for_seconds=120.0)
    stream = Stream(seed=3)
    feed(watch, stream, 30)
    verdicts = feed(watch, stream, 60, harmful=True)  # 60 s of event time: harmful, but not yet for 120 s
    assert verdicts[-1] == Verdict.HARMFUL_SHIFT
    assert fired(watch, HARMFUL_ALERT) == []
    pending = watch.alerts.get(HARMFUL_ALERT, model=MODEL, segment="other")
    assert pending is not None and pending.state.value == "pending"


def test_watch_input_shift_fires_only_the_input_drift_alert() -> None:
    watch, _ = make_watch(for_seconds=5.0)
    stream = Stream(seed=4)
    feed(watch, stream, 30)
    verdicts = feed(watch, stream, 40, moved=True)
    assert verdicts[-1] == Verdict.INPUT_SHIFT
    assert fired(watch, HARMFUL_ALERT) == []
    (ev,) = fired(watch, INPUT_ALERT)
    assert ev.alert.top_features[0] == "f1" and ev.alert.labels["verdict"] == "input-shift"


def test_watch_publishes_how_many_input_features_moved() -> None:
    watch, state = make_watch()
    stream = Stream(seed=4)
    feed(watch, stream, 30)
    assert state.gauge(tel.FEATURE_DRIFT_FEATURES.name, (MODEL, "other")) == 0.0  # tested, nothing moved
    feed(watch, stream, 40, moved=True)
    assert state.gauge(tel.FEATURE_DRIFT_FEATURES.name, (MODEL, "other")) == 1.0  # f1 only


# ---------------------------------------------------------------------- shadow disagreement


def test_watch_shadow_disagreement_above_threshold_fires() -> None:
    watch, state = make_watch(for_seconds=5.0)
    stream = Stream(seed=5)
    feed(watch, stream, 20, shadow_rate=0.1)
    (ev,) = fired(watch, SHADOW_ALERT)
    assert ev.alert.labels["severity"] == "critical"
    assert float(ev.alert.annotations["value"]) == pytest.approx(0.1, abs=0.03)
    assert float(ev.alert.annotations["reference"]) == 0.02
    ratio = state.gauge(tel.WINDOW_SHADOW_DISAGREEMENT_RATIO.name, (MODEL, "other", "60s"))
    assert ratio == pytest.approx(0.1, abs=0.03)


def test_watch_shadow_agreement_stays_silent() -> None:
    watch, _ = make_watch(for_seconds=5.0)
    stream = Stream(seed=6)
    feed(watch, stream, 20, shadow_rate=0.0)
    assert fired(watch, SHADOW_ALERT) == []


def test_watch_shadow_alert_needs_no_reference() -> None:
    watch, _ = make_watch(for_seconds=5.0, with_reference=False)
    stream = Stream(seed=7)
    feed(watch, stream, 3, shadow_rate=0.5)  # 300 events: still warming up the reference (500)
    assert not watch.has_reference
    feed(watch, stream, 10, shadow_rate=0.5)
    assert fired(watch, SHADOW_ALERT)


# ---------------------------------------------------------------------- alerts on a clock


class Wall:
    """A wall clock that moves only when the test says so."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def resolved(watch: ModelWatch, rule: str = SHADOW_ALERT) -> list[AlertEvent]:
    return [ev for ev in watch.fired if ev.alert.rule.name == rule and ev.alert.state.value == "resolved"]


def test_watch_quiet_segment_resolves_its_firing_alert_in_event_time() -> None:
    watch, state = make_watch(for_seconds=5.0)  # replay: the clock is the event-time watermark
    stream = Stream(seed=11)
    for _ in range(20):
        watch.update(*stream.batch(segment="eu", shadow_rate=0.5))
        watch.update(*stream.batch(segment="us", shadow_rate=0.0))
    (ev,) = fired(watch, SHADOW_ALERT)
    assert ev.alert.segment == "eu"
    eu_last = stream.now - BATCH * SPACING
    for _ in range(150):  # "eu" goes quiet while "us" carries event time on for 150 s
        watch.update(*stream.batch(segment="us", shadow_rate=0.0))
    (done,) = resolved(watch)
    assert done.alert.segment == "eu"
    # quiet once its shortest window (60 s) has no new event, then resolve_after_seconds (30 s) of hysteresis
    assert 90.0 <= done.at_seconds - eu_last <= 92.0
    assert state.gauge(tel.ALERTS_FIRING.name, (MODEL, "eu", SHADOW_ALERT)) == 0.0


def test_watch_tick_in_event_time_waits_for_events() -> None:
    watch, _ = make_watch(for_seconds=5.0)
    stream = Stream(seed=12)
    for _ in range(20):
        watch.update(*stream.batch(shadow_rate=0.5))
    assert fired(watch, SHADOW_ALERT)
    for _ in range(100):
        watch.tick()  # a replay that ended: event time stands still, nothing resolves
    assert resolved(watch) == []


def test_watch_tick_resolves_a_firing_alert_on_a_quiet_stream() -> None:
    wall = Wall(T0)
    delivered: list[AlertEvent] = []
    watch, state = make_watch(for_seconds=5.0, alerts=delivered, clock=WatermarkClock(60.0, wall=wall))
    stream = Stream(seed=13)
    for _ in range(20):  # live: events arrive half a second after their timestamps
        watch.update(*stream.batch(shadow_rate=0.5))
        wall.now = stream.now + 0.5
        watch.tick()
    assert fired(watch, SHADOW_ALERT)
    last = stream.now
    seconds = 0
    while not resolved(watch) and seconds < 1000:  # the stream stops; Service.run ticks every loop turn
        seconds += 1
        wall.now = last + seconds
        watch.tick()
    # the clock trails the wall by allowed_lag (60 s) once events stop; the segment is quiet after its shortest
    # window (60 s) of that clock, then resolve_after_seconds (30 s)
    assert 150 <= seconds <= 152
    (done,) = resolved(watch)
    assert done in delivered and done.at_seconds == pytest.approx(last + seconds - 60.0)
    assert state.gauge(tel.ALERTS_FIRING.name, (MODEL, "other", SHADOW_ALERT)) == 0.0


def test_watch_backlog_after_a_restart_keeps_its_alert_firing() -> None:
    wall = Wall(T0 + 3600.0)  # after a restart the consumer reads events an hour old, 10x faster than real time
    watch, _ = make_watch(for_seconds=5.0, clock=WatermarkClock(60.0, wall=wall))
    stream = Stream(seed=14)
    for _ in range(300):
        watch.update(*stream.batch(shadow_rate=0.5))
        wall.now += 0.1
        watch.tick()
    (ev,) = fired(watch, SHADOW_ALERT)  # for_seconds runs on the clock: wall - allowed lag
    assert ev.at_seconds - ev.alert.starts_at_seconds == pytest.approx(5.0, abs=0.2)
    assert ev.alert.starts_at_seconds == pytest.approx(T0 + 3600.0 - 60.0 + 0.1, abs=0.2)
    assert resolved(watch) == []  # its events keep the condition true: old timestamps do not make it quiet
    end = wall.now
    while not resolved(watch) and wall.now < end + 1000:  # the backlog is read; then nothing more arrives
        wall.now += 1.0
        watch.tick()
    # the clock already trails the wall by the allowed lag: quiet after 60 s, resolved 30 s later
    assert 90.0 <= wall.now - end <= 92.0


# ---------------------------------------------------------------------- segments and warm-up


def test_watch_segments_are_kept_apart() -> None:
    watch, state = make_watch(for_seconds=5.0)
    stream = Stream(seed=8)
    for _ in range(30):
        watch.update(*stream.batch(segment="eu"))
        watch.update(*stream.batch(segment="us"))
    for _ in range(40):
        watch.update(*stream.batch(segment="eu", harmful=True))
        watch.update(*stream.batch(segment="us"))
    assert watch.verdict("eu") == Verdict.HARMFUL_SHIFT
    assert watch.verdict("us") == Verdict.STABLE
    assert [ev.alert.segment for ev in fired(watch, HARMFUL_ALERT)] == ["eu"]
    assert state.gauge(tel.ALERTS_FIRING.name, (MODEL, "us", HARMFUL_ALERT)) == 0.0
    assert state.counter(tel.EVENTS_SCORED_TOTAL.name, (MODEL, "1", "eu")) == 7000
    assert state.counter(tel.EVENTS_SCORED_TOTAL.name, (MODEL, "1", "us")) == 7000


def test_watch_builds_its_reference_from_the_warm_up_window() -> None:
    watch, state = make_watch(with_reference=False)
    stream = Stream(seed=9)
    feed(watch, stream, 4)
    assert not watch.has_reference and watch.verdict("other") is None
    feed(watch, stream, 1)
    assert watch.has_reference and watch.reference is not None and watch.reference.n_events == 500
    assert state.gauge(tel.REFERENCE_GAMMA_MEAN.name, (MODEL,)) == pytest.approx(watch.reference.gamma_mean)
    assert set(feed(watch, stream, 30)) == {Verdict.STABLE}


def test_watch_dump_and_restore_keep_the_reference() -> None:
    watch, _ = make_watch()
    restored, _ = make_watch(with_reference=False)
    restored.restore(watch.dump())
    assert restored.reference is not None and watch.reference is not None
    assert restored.reference.gamma_mean == watch.reference.gamma_mean
    np.testing.assert_array_equal(restored.reference.gamma_sample, watch.reference.gamma_sample)


def test_watch_ignores_invalid_rows() -> None:
    watch, state = make_watch()
    stream = Stream(seed=10)
    events, x, result, shadow = stream.batch()
    valid = np.arange(BATCH) % 4 != 0
    bad = ScoreResult(
        gamma=np.where(valid, result.gamma, np.nan),
        flicker=np.where(valid, result.flicker, np.nan),
        p_adj=result.p_adj,
        gamma_logit=result.gamma_logit,
        predicted_class=result.predicted_class,
        probability=result.probability,
        valid=valid,
        margin=result.margin,
    )
    watch.update(events, x, bad, shadow)
    assert state.counter(tel.EVENTS_SCORED_TOTAL.name, (MODEL, "1", "other")) == 75
