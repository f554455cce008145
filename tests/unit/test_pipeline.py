"""The wiring (monitor/runtime/pipeline.py): Pipeline.step on a ReplaySource or a recording fake source, with a tiny ONNX model.

Covers counters, invalid events (counted by reason, dead-lettered, never stopping the loop), at-least-once commits
(only after the batch is scored and published; never past a held KServe half), the scores topic, shadow agreement
with forced sampling, the warm-up path, and state persistence (including a corrupt state file).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.config import Settings, load_settings
from monitor.exporters.prometheus import MetricsState
from monitor.runtime.models import load_model_runtime
from monitor.runtime.pipeline import Pipeline
from monitor.runtime.scoring_budget import BEHIND_EVENTS_PER_SECOND
from monitor.runtime.service import build_sampler
from monitor.runtime.state import STATE_FILE, baselines_path
from monitor.sampler.keep_all import KeepAllSampler
from monitor.source.base import Positions, RawRecord
from monitor.source.replay import ReplaySource
from tests.unit import onnx_graphs

TS_MS = 1_795_000_000_000
MODEL = "clf"
#: the fields of a record on the scores topic, in order
SCORES_RECORD_KEYS = (
    "id",
    "model",
    "model_version",
    "segment",
    "ts",
    "gamma",
    "flicker",
    "p_adj",
    "predicted_class",
    "probability",
    "margin",
)


# ---------------------------------------------------------------------- fakes and builders


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self, start: float = TS_MS / 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class RecordingSink:
    """A Sink that keeps every message and counts flushes; ``log`` is shared with the source to order calls."""

    def __init__(self, log: list[str] | None = None) -> None:
        self.sent: list[tuple[str, bytes, list[tuple[str, bytes]], bytes | None]] = []
        self.flushes = 0
        self.log = log if log is not None else []

    def send(
        self, topic: str, value: bytes, headers: Sequence[tuple[str, bytes]] = (), key: bytes | None = None
    ) -> None:
        self.sent.append((topic, value, list(headers), key))
        self.log.append(f"send:{topic}")

    def flush(self, timeout_seconds: float) -> bool:
        self.flushes += 1
        self.log.append("flush")
        return True

    def close(self) -> None:
        return None

    def on(self, topic: str) -> list[tuple[bytes, list[tuple[str, bytes]], bytes | None]]:
        return [(v, h, k) for t, v, h, k in self.sent if t == topic]


class RecordingSource:
    """A Source over fixed RawRecords (partition 0) that records each commit with a snapshot taken at that moment."""

    def __init__(self, records: Iterable[RawRecord], snapshot: Callable[[], float] = lambda: 0.0) -> None:
        self.records = list(records)
        self.next = 0
        self.commits: list[tuple[Positions, float]] = []
        self.snapshot = snapshot
        self.log: list[str] = []

    def poll(self, timeout_seconds: float, max_records: int) -> list[RawRecord]:
        out = self.records[self.next : self.next + max_records]
        self.next += len(out)
        return out

    def commit(self, positions: Positions) -> None:
        self.commits.append((dict(positions), self.snapshot()))
        self.log.append("commit")

    @property
    def ready(self) -> bool:
        return True

    @property
    def exhausted(self) -> bool:
        return self.next >= len(self.records)

    def close(self) -> None:
        return None


def event(i: int, x: Sequence[float], *, label: int | None = None, segment: str | None = None, **extra: Any) -> bytes:
    doc: dict[str, Any] = {"id": f"e{i}", "ts": TS_MS + 10 * i, "model": MODEL, "features": [float(v) for v in x]}
    if label is not None:
        doc["prediction"] = {"label": label}
    if segment is not None:
        doc["segment"] = segment
    doc.update(extra)
    return json.dumps(doc).encode()


def model_class(x: NDArray[np.float64]) -> NDArray[np.int64]:
    """The tiny model's class: 1 when x0 − x1 + 0.2 > 0."""
    return (x[:, 0] - x[:, 1] + 0.2 > 0).astype(np.int64)


def rows(n: int, seed: int = 0) -> NDArray[np.float64]:
    return np.random.default_rng(seed).normal(0.0, 1.0, size=(n, 2))


def events(x: NDArray[np.float64], *, labels: bool = True, start: int = 0) -> list[bytes]:
    cls = model_class(x)
    return [event(start + i, x[i], label=int(cls[i]) if labels else None) for i in range(x.shape[0])]


def make_settings(tmp_path: Path, *, reference: bool = True, **overrides: Any) -> Settings:
    model_path = tmp_path / "clf.onnx"
    if not model_path.exists():
        onnx_graphs.linear_classifier(model_path, [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2])
    model: dict[str, Any] = {"name": MODEL, "path": str(model_path), "version": "1", "scoring": {"flicker_copies": 8}}
    if reference:
        ref_path = tmp_path / "ref.csv"
        np.savetxt(ref_path, rows(300, seed=99), delimiter=",")
        model["reference"] = str(ref_path)
    else:
        model["warmup_events"] = overrides.pop("warmup_events", 50)
    flags: dict[str, Any] = {
        "models": [model],
        "state_dir": str(tmp_path / "state"),
        "sampler": {"events_per_second": 0},
        "probes": {"enabled": False},
        # a checkpoint (state saved, then offsets committed) after every micro-batch, so that commits can be
        # asserted batch by batch; the default checkpoints every few seconds
        "checkpoint_seconds": 0,
    }
    for key, value in overrides.items():
        flags[key] = value
    return load_settings(None, flags)


def make_pipeline(
    settings: Settings,
    source: Any,
    *,
    sink: RecordingSink | None = None,
    state: MetricsState | None = None,
    clock: FakeClock | None = None,
) -> Pipeline:
    runtimes = [load_model_runtime(m) for m in settings.models]
    return Pipeline(
        settings,
        source,
        runtimes,
        build_sampler(settings),
        state=state or MetricsState(),
        sink=sink,
        clock=clock or FakeClock(),
    )


def run_to_end(pipeline: Pipeline) -> Pipeline:
    """Step ``pipeline`` until its source has nothing more, then close it (the final flush and commit)."""
    while pipeline.step(0.0):
        pass
    pipeline.close()
    return pipeline


def drain(pipeline: Pipeline, limit: int = 10_000) -> None:
    for _ in range(limit):
        if pipeline.step(0.0) == 0 and pipeline.source.exhausted:
            break
    pipeline.close()


def counter(state: MetricsState, name: str) -> float:
    return state.counter_sum(name)


# ---------------------------------------------------------------------- counters and invalid events


def test_pipeline_counts_consumed_and_scored_and_commits_past_the_last_offset(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 64})
    source = ReplaySource(events(rows(200, seed=1)))
    pipeline = make_pipeline(settings, source)
    drain(pipeline)
    state = pipeline.state
    assert counter(state, tel.EVENTS_CONSUMED_TOTAL.name) == 200
    assert state.counter(tel.EVENTS_CONSUMED_TOTAL.name, (MODEL,)) == 200
    assert counter(state, tel.EVENTS_SCORED_TOTAL.name) == 200
    assert state.counter(tel.EVENTS_SCORED_TOTAL.name, (MODEL, "1", "other")) == 200
    assert counter(state, tel.EVENTS_INVALID_TOTAL.name) == 0
    assert source.committed == {("replay", 0): 200}  # last offset (199) + 1


INVALID: list[tuple[bytes, str]] = [
    (b"not json at all", "not_json"),
    (b"[1, 2]", "not_object"),
    (json.dumps({"id": "m", "ts": TS_MS, "model": MODEL}).encode(), "missing_field"),
    (json.dumps({"id": "w", "ts": TS_MS, "model": MODEL, "features": [1.0, 2.0, 3.0]}).encode(), "wrong_width"),
    (json.dumps({"id": "u", "ts": TS_MS, "model": "nope", "features": [1.0, 2.0]}).encode(), "unknown_model"),
    (json.dumps({"id": "t", "ts": 12345, "model": MODEL, "features": [1.0, 2.0]}).encode(), "bad_timestamp"),
    (json.dumps({"id": "s", "ts": TS_MS, "model": MODEL, "features": ["a", 2.0]}).encode(), "bad_type"),
]

#: the model each of INVALID is counted under: the watched model it named once the decoder knew it, else `unknown`
#: (not JSON, not an object, an unwatched name: no label from the wire)
INVALID_MODEL = ["unknown", "unknown", MODEL, MODEL, "unknown", MODEL, MODEL]


def test_pipeline_counts_invalid_events_by_reason_and_keeps_scoring(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 5})
    valid = events(rows(40, seed=2))
    lines = [line for pair in zip(valid[: len(INVALID)], (raw for raw, _ in INVALID), strict=True) for line in pair]
    lines += valid[len(INVALID) :]
    source = ReplaySource(lines)
    pipeline = make_pipeline(settings, source)
    drain(pipeline)
    state = pipeline.state
    for (_, reason), model in zip(INVALID, INVALID_MODEL, strict=True):
        assert state.counter(tel.EVENTS_INVALID_TOTAL.name, (model, reason)) == 1, reason
    assert counter(state, tel.EVENTS_INVALID_TOTAL.name) == len(INVALID)
    assert counter(state, tel.EVENTS_SCORED_TOTAL.name) == 40
    assert counter(state, tel.EVENTS_CONSUMED_TOTAL.name) == 40 + len(INVALID)
    assert source.committed == {("replay", 0): 40 + len(INVALID)}


def test_pipeline_counts_events_whose_model_outputs_are_not_finite(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # logit1 − logit0 = x0 − x1 + 0.2 overflows float32 at these finite features: NaN probabilities, NaN γ
    settings = make_settings(tmp_path)
    normal = rows(30, seed=4)
    extreme = np.array([[3e38, -3e38], [2.5e38, -1e38], [2e38, -2e38]])
    lines = events(normal) + [event(100 + i, x) for i, x in enumerate(extreme)]
    pipeline = make_pipeline(settings, ReplaySource(lines))
    assert pipeline.state.counter(tel.SCORES_NONFINITE_TOTAL.name, (MODEL,)) == 0  # registered at start
    with caplog.at_level("WARNING"):
        drain(pipeline)
    state = pipeline.state
    assert state.counter(tel.SCORES_NONFINITE_TOTAL.name, (MODEL,)) == 3
    assert counter(state, tel.EVENTS_SCORED_TOTAL.name) == 33  # valid events: scored, and counted as such
    observed = {
        s.name: s.value
        for family in state.families()
        if family.name == tel.GAMMA.name
        for s in family.samples
        if s.name == "harmonic_gamma_count"
    }
    assert observed == {"harmonic_gamma_count": 30}  # the NaN γ stay out of the histogram
    (line,) = [r for r in caplog.records if "model outputs not finite" in r.getMessage()]
    assert line.model == MODEL and line.events == 3 and line.event_ids == ["e100", "e101", "e102"]  # type: ignore[attr-defined]


def test_pipeline_dead_letters_invalid_events_with_the_reason_header(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"dead_letter_topic": "dlq"})
    sink = RecordingSink()
    lines = [raw for raw, _ in INVALID] + events(rows(5, seed=3))
    pipeline = make_pipeline(settings, ReplaySource(lines), sink=sink)
    drain(pipeline)
    dead = sink.on("dlq")
    assert [v for v, _, _ in dead] == [raw for raw, _ in INVALID]  # the original bytes, in order
    for (_, headers, key), (_, reason) in zip(dead, INVALID, strict=True):
        hdr = dict(headers)
        assert hdr["harmonic-invalid-reason"] == reason.encode()
        assert key == reason.encode()
        assert hdr["harmonic-invalid-detail"]
        assert hdr["harmonic-origin"].startswith(b"replay/0/")
    for model in set(INVALID_MODEL):
        assert pipeline.state.counter(tel.EVENTS_DEAD_LETTERED_TOTAL.name, (model,)) == INVALID_MODEL.count(model)
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 5


# ---------------------------------------------------------------------- at-least-once commits


def test_pipeline_commits_only_after_the_pending_batch_is_scored(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, batch={"max_events": 25, "max_wait_ms": 60_000}, kafka={"max_poll_records": 10})
    state = MetricsState()
    lines = events(rows(30, seed=4))
    source = RecordingSource(
        [RawRecord(v, topic="t", partition=0, offset=100 + i) for i, v in enumerate(lines)],
        snapshot=lambda: state.counter_sum(tel.EVENTS_SCORED_TOTAL.name),
    )
    clock = FakeClock()
    pipeline = make_pipeline(settings, source, state=state, clock=clock)
    assert pipeline.step(0.0) == 10 and pipeline.step(0.0) == 10
    assert source.commits == []  # 20 events pending, batch not full, not aged: nothing scored, nothing committed
    assert state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 0
    assert pipeline.step(0.0) == 10  # 30 >= 25: flush
    assert source.commits == [({("t", 0): 130}, 30.0)]  # scored before the commit; last offset 129 + 1


def test_pipeline_flushes_an_aged_partial_batch_then_commits(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, batch={"max_events": 1000, "max_wait_ms": 200}, kafka={"max_poll_records": 5})
    state = MetricsState()
    lines = events(rows(5, seed=5))
    source = RecordingSource(
        [RawRecord(v, topic="t", partition=0, offset=i) for i, v in enumerate(lines)],
        snapshot=lambda: state.counter_sum(tel.EVENTS_SCORED_TOTAL.name),
    )
    clock = FakeClock()
    pipeline = make_pipeline(settings, source, state=state, clock=clock)
    pipeline.step(0.0)
    clock.now += 0.1
    pipeline.step(0.0)
    assert source.commits == []
    clock.now += 0.15  # 250 ms since the first pending event
    pipeline.step(0.0)
    assert source.commits == [({("t", 0): 5}, 5.0)]


def test_pipeline_publishes_and_flushes_the_sink_before_committing(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path, kafka={"scores_topic": "scores", "max_poll_records": 50}, batch={"max_events": 50}
    )
    log: list[str] = []
    sink = RecordingSink(log)
    x = rows(50, seed=6)
    source = RecordingSource([RawRecord(v, topic="t", partition=0, offset=i) for i, v in enumerate(events(x))])
    source.log = log
    pipeline = make_pipeline(settings, source, sink=sink)
    pipeline.step(0.0)
    assert log[-2:] == ["flush", "commit"]
    assert log.index("flush") > max(i for i, entry in enumerate(log) if entry == "send:scores")
    docs = [json.loads(v) for v, _, _ in sink.on("scores")]
    assert [d["id"] for d in docs] == [f"e{i}" for i in range(50)]  # one JSON per scored event
    assert [k for _, _, k in sink.on("scores")] == [f"e{i}".encode() for i in range(50)]
    assert {d["model"] for d in docs} == {MODEL} and {d["model_version"] for d in docs} == {"1"}
    assert [d["predicted_class"] for d in docs] == model_class(x).tolist()
    for d in docs:
        assert d["gamma"] >= 0.0 and 0.0 <= d["flicker"] <= 1.0 and 0.0 <= d["probability"] <= 1.0
    # the record's fields, and the margin: top-1 minus top-2 class probability, 2p − 1 for this binary model
    assert {tuple(d) for d in docs} == {SCORES_RECORD_KEYS}
    margin = np.array([d["margin"] for d in docs], dtype=np.float64)
    probability = np.array([d["probability"] for d in docs], dtype=np.float64)
    np.testing.assert_allclose(margin, 2.0 * probability - 1.0, atol=1e-6)
    assert margin.std() > 0.01  # real values, not one constant


def test_pipeline_publishes_null_probability_and_margin_for_a_regressor(tmp_path: Path) -> None:
    path = onnx_graphs.linear_regressor(tmp_path / "reg.onnx", [1.0, -1.0])
    reference = tmp_path / "reg_ref.csv"
    np.savetxt(reference, rows(300, seed=99), delimiter=",")
    model = {"name": MODEL, "path": str(path), "reference": str(reference), "scoring": {"flicker_copies": 8}}
    settings = make_settings(tmp_path, models=[model], kafka={"scores_topic": "scores", "max_poll_records": 20})
    sink = RecordingSink()
    drain(make_pipeline(settings, ReplaySource(events(rows(20, seed=6), labels=False)), sink=sink))
    docs = [json.loads(v) for v, _, _ in sink.on("scores")]
    assert len(docs) == 20 and {tuple(d) for d in docs} == {SCORES_RECORD_KEYS}
    assert all(d["probability"] is None and d["margin"] is None and d["predicted_class"] == -1 for d in docs)
    assert all(d["gamma"] is not None for d in docs)


def test_pipeline_never_commits_past_a_held_kserve_half(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 10}, batch={"max_events": 1})
    ce = [
        ("ce_specversion", b"1.0"),
        ("ce_type", b"org.kubeflow.serving.inference.request"),
        ("ce_id", b"req-1"),
        ("ce_source", b"http://localhost/"),
        ("ce_inferenceservicename", MODEL.encode()),
        ("content-type", b"application/json"),
    ]
    request = RawRecord(json.dumps({"instances": [[0.5, 0.1]]}).encode(), tuple(ce), "t", 0, 3)
    plain = [RawRecord(v, topic="t", partition=0, offset=i) for i, v in enumerate(events(rows(3, seed=7)))]
    later = [RawRecord(v, topic="t", partition=0, offset=4 + i) for i, v in enumerate(events(rows(3, seed=8)))]
    source = RecordingSource([*plain, request, *later])
    pipeline = make_pipeline(settings, source)
    pipeline.step(0.0)
    assert source.commits and source.commits[-1][0] == {("t", 0): 3}  # offset 3 (the request) is still held
    pipeline.close()  # releases the request without a prediction, scores it, then commits everything
    assert source.commits[-1][0] == {("t", 0): 7}
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 7


def test_an_event_off_the_common_shape_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An integer ``id`` is decoded by the full decoder, from the document the first step parsed."""
    from monitor.runtime import ingest
    from monitor.source import decode

    parsed: list[bytes] = []
    real = decode.loads

    def counted(raw: bytes) -> object:
        parsed.append(raw)
        return real(raw)

    monkeypatch.setattr(decode, "loads", counted)  # the full decoder's parse
    monkeypatch.setattr(ingest, "fast_loads", counted)  # the pipeline's fast path's
    lines = [event(0, [0.1, 0.2], id=7), event(1, [0.3, 0.4])]  # the first off the common shape, the second on it
    pipeline = make_pipeline(make_settings(tmp_path), ReplaySource(lines))
    drain(pipeline)
    assert parsed == lines
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 2


# ---------------------------------------------------------------------- shadow agreement


def test_pipeline_shadow_disagreements_are_counted_and_always_scored(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        sampler={"events_per_second": 1.0, "burst_seconds": 1.0, "stratify": False},
        # one poll that is not full: no backlog, so ingest first leaves the shadow check every labelled event
        kafka={"scores_topic": "scores", "max_poll_records": 500},
    )
    sink = RecordingSink()
    x = rows(300, seed=9)
    cls = model_class(x)
    wrong = set(range(7, 300, 23))  # 13 events whose live label disagrees with the ONNX copy
    lines = [event(i, x[i], label=int(1 - cls[i]) if i in wrong else int(cls[i])) for i in range(300)]
    pipeline = make_pipeline(settings, ReplaySource(lines), sink=sink)  # a frozen clock: the budget never refills
    drain(pipeline)
    state = pipeline.state
    assert state.counter(tel.SHADOW_COMPARED_TOTAL.name, (MODEL,)) == 300
    assert state.counter(tel.SHADOW_DISAGREEMENTS_TOTAL.name, (MODEL,)) == len(wrong)
    scored = {json.loads(v)["id"] for v, _, _ in sink.on("scores")}
    assert {f"e{i}" for i in wrong} <= scored  # forced through the sampler
    assert len(scored) < 300  # the budget did drop the agreeing ones
    assert state.counter(tel.EVENTS_SAMPLED_TOTAL.name, (MODEL,)) == len(scored)


def test_a_cut_shadow_share_compares_a_uniform_draw_and_keeps_the_disagreement_ratio(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    x = rows(4000, seed=12)
    cls = model_class(x)
    wrong = set(range(0, 4000, 5))  # a fifth of the live labels disagree with the ONNX copy
    lines = [event(i, x[i], label=int(1 - cls[i]) if i in wrong else int(cls[i])) for i in range(4000)]
    pipeline = make_pipeline(settings, ReplaySource(lines))
    scoring = pipeline.scoring
    scoring.shadow_share = 0.25  # as ingest first sets it while behind (no controller here: no CPU cap)
    accepted = scoring.accept([(pipeline.ingest.decoder.decode(line), None) for line in lines], 0.0)
    compared = accepted.shadow_compared[MODEL]
    assert 850 <= compared <= 1150  # about a quarter of 4,000 (binomial sd 27)
    assert accepted.shadow_disagreed[MODEL] / compared == pytest.approx(0.2, abs=0.04)
    pipeline.close()


def test_pipeline_events_without_a_live_label_are_not_shadow_compared(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    pipeline = make_pipeline(settings, ReplaySource(events(rows(20, seed=10), labels=False)))
    drain(pipeline)
    assert pipeline.state.counter(tel.SHADOW_COMPARED_TOTAL.name, (MODEL,)) == 0
    assert pipeline.state.counter(tel.MODEL_EVALUATIONS_TOTAL.name, (MODEL, "shadow")) == 0
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 20


# ---------------------------------------------------------------------- warm-up


def test_pipeline_warm_up_fits_the_standardizer_then_starts_scoring(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, reference=False, warmup_events=50, kafka={"max_poll_records": 25})
    x = rows(80, seed=11) * [2.0, 0.5] + [10.0, -3.0]
    pipeline = make_pipeline(settings, ReplaySource(events(x)))
    rt = pipeline.runtimes[MODEL]
    pipeline.step(0.0)
    assert rt.scorer is None and rt.standardizer is None  # 25 of 50 warm-up events
    pipeline.step(0.0)
    assert rt.standardizer is not None and rt.scorer is not None
    np.testing.assert_allclose(rt.standardizer.mean, x[:50].mean(axis=0))
    np.testing.assert_allclose(rt.standardizer.scale, x[:50].std(axis=0))
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 0
    drain(pipeline)
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 30
    assert counter(pipeline.state, tel.EVENTS_CONSUMED_TOTAL.name) == 80
    ok, detail = pipeline.readiness()
    assert ok and detail["models"][MODEL]["scoring"] is True


def test_pipeline_scores_the_events_past_the_warm_up_window_in_the_same_poll(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, reference=False, warmup_events=50, kafka={"max_poll_records": 500})
    x = rows(80, seed=16) + 3.0
    pipeline = make_pipeline(settings, ReplaySource(events(x)))
    pipeline.step(0.0)  # one poll: 50 warm-up events, then 30 scored with the fresh standardizer
    std = pipeline.runtimes[MODEL].standardizer
    assert std is not None
    np.testing.assert_allclose(std.mean, x[:50].mean(axis=0))
    pipeline.flush()
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 30


# ---------------------------------------------------------------------- state


def test_pipeline_state_counters_survive_a_restart(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    first = make_pipeline(settings, ReplaySource(events(rows(30, seed=12)) + [b"junk"]))
    drain(first)
    assert (tmp_path / "state" / STATE_FILE).is_file()
    # new events on another topic: a second replay of "replay" would restart at offset 0, below the position the
    # state holds for it, and be skipped as already applied
    second = make_pipeline(settings, ReplaySource(events(rows(10, seed=13), start=30), topic="replay-2"))
    assert counter(second.state, tel.EVENTS_SCORED_TOTAL.name) == 30
    assert second.state.counter(tel.EVENTS_INVALID_TOTAL.name, ("unknown", "not_json")) == 1
    drain(second)
    assert counter(second.state, tel.EVENTS_SCORED_TOTAL.name) == 40
    assert second.state.counter(tel.EVENTS_CONSUMED_TOTAL.name, (MODEL,)) == 40


def test_pipeline_restores_the_warm_up_standardizer_and_reference(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, reference=False, warmup_events=50)
    first = make_pipeline(settings, ReplaySource(events(rows(200, seed=14) + 4.0)))
    drain(first)
    fitted = first.runtimes[MODEL].standardizer
    watch = first.runtimes[MODEL].watch
    assert fitted is not None and watch is not None and watch.has_reference  # 150 scored >= 50 warm-up events
    second = make_pipeline(settings, ReplaySource([]))
    rt = second.runtimes[MODEL]
    assert rt.standardizer is not None and rt.scorer is not None  # scoring at once, no second warm-up
    np.testing.assert_array_equal(rt.standardizer.mean, fitted.mean)
    np.testing.assert_array_equal(rt.standardizer.scale, fitted.scale)
    assert rt.watch is not None and rt.watch.reference is not None and watch.reference is not None
    assert rt.watch.reference.gamma_mean == watch.reference.gamma_mean


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"\xff\xfe\x00garbage", b'{"version": 1, "counters": 5}', b'{"version": 1, "models": []}'],
    ids=["bad-json", "bad-utf8", "bad-counters", "bad-models"],
)
def test_pipeline_moves_a_corrupt_state_file_aside_and_starts_fresh(tmp_path: Path, content: bytes) -> None:
    settings = make_settings(tmp_path)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / STATE_FILE).write_bytes(content)
    pipeline = make_pipeline(settings, ReplaySource(events(rows(10, seed=15))))
    moved = [p for p in state_dir.iterdir() if p.name.startswith("state.corrupt-")]
    assert len(moved) == 1 and moved[0].read_bytes() == content  # kept for inspection
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 0
    drain(pipeline)
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 10
    assert json.loads((state_dir / STATE_FILE).read_text())["version"] == 1


def test_pipeline_ignores_saved_state_of_another_feature_count(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, reference=False, warmup_events=20)
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    stale = {"standardizer": {"mean": [0.0, 0.0, 0.0], "scale": [1.0, 1.0, 1.0]}}  # the model had 3 features
    (state_dir / STATE_FILE).write_text(json.dumps({"version": 1, "counters": [], "models": {MODEL: stale}}))
    pipeline = make_pipeline(settings, ReplaySource(events(rows(50, seed=17))))
    assert pipeline.runtimes[MODEL].standardizer is None  # warm up again instead of crash-looping
    drain(pipeline)
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 30


def _scored_reference_mean(pipeline: Pipeline) -> float:
    watch = pipeline.runtimes[MODEL].watch
    assert watch is not None and watch.reference is not None
    return float(watch.reference.gamma_mean)


def test_pipeline_rebuilds_the_reference_when_the_reference_file_changed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = make_settings(tmp_path)
    first = make_pipeline(settings, ReplaySource(events(rows(20, seed=20))))
    drain(first)
    before = _scored_reference_mean(first)
    assert make_pipeline(settings, ReplaySource([])).runtimes[MODEL].watch is not None
    assert _scored_reference_mean(make_pipeline(settings, ReplaySource([]))) == before  # unchanged: restored
    # the operator ships a new reference (other traffic: far from the boundary, γ near 0) and restarts
    np.savetxt(tmp_path / "ref.csv", rows(300, seed=98) * 0.1 + 5.0, delimiter=",")
    with caplog.at_level("WARNING"):
        second = make_pipeline(settings, ReplaySource([]))
    (warning,) = [r for r in caplog.records if "rebuilding them" in r.getMessage()]
    assert warning.changed == ["reference"]  # type: ignore[attr-defined]
    assert _scored_reference_mean(second) != before
    fresh_dir = tmp_path / "fresh"
    fresh = make_pipeline(settings.model_copy(update={"state_dir": fresh_dir}), ReplaySource([]))
    assert _scored_reference_mean(second) == _scored_reference_mean(fresh)  # as if started without state


def test_pipeline_rebuilds_the_reference_when_the_scoring_settings_changed(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    drain(make_pipeline(settings, ReplaySource(events(rows(20, seed=21)))))
    before = _scored_reference_mean(make_pipeline(settings, ReplaySource([])))
    model = settings.models[0]
    wider = settings.model_copy(
        update={"models": [model.model_copy(update={"scoring": model.scoring.model_copy(update={"radius": 0.5})})]}
    )
    assert _scored_reference_mean(make_pipeline(wider, ReplaySource([]))) != before


class _HoldingSampler:
    """The configured sampler, except that events of the first ``hold`` polls are held undecided (as the
    event-time reservoir does) until the next poll step: each then decided kept with weight 1."""

    def __init__(self, inner: Any, hold: int) -> None:
        self._inner = inner
        self._hold = hold
        self._waiting: list[Any] = []
        self.last_held: list[Any] = []

    def sample_many(self, evs: Any, now: float, force: Any = None) -> list[float]:
        if self._hold > 0:
            self._hold -= 1
            self.last_held = list(evs)
            self._later = list(evs)
            return [0.0] * len(evs)
        self.last_held = []
        weights: list[float] = self._inner.sample_many(evs, now, force)
        return weights

    def release(self, now: float) -> list[tuple[Any, float]]:
        out = [(ev, 1.0) for ev in self._waiting]
        self._waiting = getattr(self, "_later", [])
        self._later = []
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_pipeline_never_commits_past_an_event_the_sampler_still_holds(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, kafka={"max_poll_records": 3})
    records = [RawRecord(v, topic="t", partition=0, offset=i) for i, v in enumerate(events(rows(6, seed=3)))]
    source = RecordingSource(records)
    runtimes = [load_model_runtime(m) for m in settings.models]
    pipeline = Pipeline(
        settings,
        source,
        runtimes,
        _HoldingSampler(KeepAllSampler(), hold=1),  # type: ignore[arg-type]
        state=MetricsState(),
        clock=FakeClock(),
    )
    pipeline.step(0.0)  # offsets 0-2: held undecided, nothing scored, nothing committed
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 0 and not source.commits
    pipeline.flush()  # a checkpoint while they are held commits nothing past them
    assert all(c[0].get(("t", 0), 0) == 0 for c in source.commits), source.commits
    pipeline.step(0.0)  # offsets 3-5 accepted; 0-2 released at this step: all six pending
    pipeline.flush()
    assert counter(pipeline.state, tel.EVENTS_SCORED_TOTAL.name) == 6
    assert source.commits[-1][0] == {("t", 0): 6}


def test_scoring_held_positions_are_the_first_held_record_per_partition(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    pipeline = make_pipeline(settings, RecordingSource([]))
    thinner = pipeline.scoring.thinner
    a = RawRecord(b"{}", topic="t", partition=0, offset=7)
    b = RawRecord(b"{}", topic="t", partition=0, offset=4)
    c = RawRecord(b"{}", topic="t", partition=1, offset=9)
    thinner.held.update({1: (None, a, 0.0), 2: (None, b, 0.0), 3: (None, c, 0.0), 4: (None, None, 0.0)})  # type: ignore[dict-item]
    assert pipeline.scoring.held_positions() == {("t", 0): 4, ("t", 1): 9}
    assert pipeline.ingest.committable({("t", 0): 10, ("t", 1): 12}, pipeline.scoring.held_positions()) == {
        ("t", 0): 4,
        ("t", 1): 9,
    }


# ---------------------------------------------------------------------- per-segment baselines


def test_pipeline_readyz_lists_segments_warming_up_and_their_baselines_survive_a_restart(tmp_path: Path) -> None:
    base = make_settings(tmp_path)
    settings = base.model_copy(update={"models": [base.models[0].model_copy(update={"warmup_events": 60})]})
    x = rows(200, seed=21)
    lines = [event(i, x[i], segment="eu" if i % 2 else "us") for i in range(100)]
    lines += [event(100 + i, x[100 + i], segment="eu") for i in range(40)]  # eu: 90 events, us: 50
    pipeline = make_pipeline(settings, ReplaySource(lines))
    drain(pipeline)
    ok, detail = pipeline.readiness()
    assert ok  # warming segments do not make the sidecar unready; they are listed
    assert detail["models"][MODEL]["segments_warming_up"] == {"us": {"events": 50, "of": 60}}
    assert detail["models"][MODEL]["segment_baselines"] == {"eu": "own (60 events)"}  # learned by its warm-up
    assert pipeline.state.gauge(tel.SEGMENT_WARMING_UP.name, (MODEL, "us")) == 1.0
    assert pipeline.state.gauge(tel.SEGMENT_WARMING_UP.name, (MODEL, "eu")) == 0.0
    watch = pipeline.runtimes[MODEL].watch
    assert watch is not None and sorted(watch.segment_references) == ["eu"]
    again = make_pipeline(settings, ReplaySource([]))
    restored = again.runtimes[MODEL].watch
    assert restored is not None and restored.segmented
    assert restored.segment_references["eu"].gamma_mean == watch.segment_references["eu"].gamma_mean
    # the baselines live in a file of their own, written when one changes, not in every checkpoint's state.json
    saved = json.loads((tmp_path / "state" / "state.json").read_text(encoding="utf-8"))
    assert "segments" not in saved["models"][MODEL]["watch"]
    path = baselines_path(tmp_path / "state", MODEL)
    written = path.stat().st_mtime_ns
    again.persist()
    assert path.stat().st_mtime_ns == written  # nothing changed: not rewritten
    # other scoring settings: the saved baselines describe another γ and are dropped
    first_model = settings.models[0]
    scoring = first_model.scoring.model_copy(update={"flicker_copies": 4})
    changed = settings.model_copy(update={"models": [first_model.model_copy(update={"scoring": scoring})]})
    other = make_pipeline(changed, ReplaySource([]))
    assert other.runtimes[MODEL].watch is not None and other.runtimes[MODEL].watch.segment_references == {}
    path.write_text("{not json", encoding="utf-8")  # unreadable: ignored, the segments warm up again
    assert make_pipeline(settings, ReplaySource([])).runtimes[MODEL].watch.segment_references == {}  # type: ignore[union-attr]


class LaggingSource(RecordingSource):
    """A RecordingSource whose partition ends at its last record (the log-end offset a real consumer reports)."""

    def highwaters(self) -> dict[tuple[str, int], int]:
        return {("t", 0): len(self.records)} if self.next else {}


def test_pipeline_exports_the_consumer_lag_and_cuts_scoring_to_what_ingest_leaves_while_behind(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, sampler={"events_per_second": None}, kafka={"max_poll_records": 10})
    records = [RawRecord(v, topic="t", partition=0, offset=i) for i, v in enumerate(events(rows(200, seed=4)))]
    clock = FakeClock()
    pipeline = make_pipeline(settings, LaggingSource(records), clock=clock)
    control, sampler = pipeline.ingest_first, pipeline.sampler
    assert control is not None and control.cap == sampler.cpu_cap_per_second  # type: ignore[attr-defined]
    pipeline.step(0.0)  # 10 of 200 read: 190 behind, above the backlog threshold (5 polls)
    assert pipeline.state.gauge(tel.CONSUMER_LAG_RECORDS.name, ()) == 190
    assert control.state == "behind"
    assert sampler.cpu_per_second == pytest.approx(control.budget)  # type: ignore[attr-defined]
    assert control.budget < control.cap
    # the shadow check (a model row per labelled event, sampled or not) is cut by the same fraction
    share = pipeline.state.gauge(tel.SHADOW_CHECKED_SHARE.name, ())
    assert share == pytest.approx(control.budget / control.cap) and share < 1.0
    assert pipeline.scoring.shadow_share == share
    while not pipeline.source.exhausted:
        clock.now += 0.5
        pipeline.step(0.0)
    for _ in range(
        20
    ):  # caught up: doubling to half the budget the backlog formed at, then a sixteenth of the cap a second
        clock.now += 1.0
        pipeline.step(0.0)
    assert pipeline.state.gauge(tel.CONSUMER_LAG_RECORDS.name, ()) == 0
    assert control.state == "caught_up" and sampler.cpu_per_second == control.cap  # type: ignore[attr-defined]
    assert pipeline.state.gauge(tel.SHADOW_CHECKED_SHARE.name, ()) == 1.0
    pipeline.close()


def test_pipeline_while_behind_cuts_scoring_to_the_minimum_events_per_second_at_the_measured_cost(
    tmp_path: Path,
) -> None:
    settings = make_settings(tmp_path, sampler={"events_per_second": None}, kafka={"max_poll_records": 10})
    records = [RawRecord(v, topic="t", partition=0, offset=i) for i, v in enumerate(events(rows(200, seed=4)))]
    pipeline = make_pipeline(settings, LaggingSource(records), clock=FakeClock())
    control, sampler = pipeline.ingest_first, pipeline.sampler
    assert control is not None
    sampler.observe_cost(MODEL, events=100, seconds=0.02)  # 0.2 ms per event
    pipeline.step(0.0)  # 190 records behind: a backlog
    assert control.state == "behind"
    floor = sampler.cpu_for(BEHIND_EVENTS_PER_SECOND)  # type: ignore[attr-defined]
    assert floor is not None and control.min_budget == pytest.approx(floor)
    assert control.budget == pytest.approx(min(floor, control.share)) and control.budget < control.share
    assert sampler.cpu_per_second == pytest.approx(control.budget)  # type: ignore[attr-defined]
    pipeline.close()


def test_pipeline_without_a_cpu_cap_has_no_controller_and_a_source_without_log_ends_no_lag(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)  # events_per_second 0: every event scored
    pipeline = make_pipeline(
        settings, RecordingSource([RawRecord(events(rows(3))[0], topic="t", partition=0, offset=0)])
    )
    assert pipeline.ingest_first is None
    pipeline.step(0.0)
    assert pipeline.consumer_lag() is None
    pipeline.close()


def test_a_segment_s_window_tests_run_from_first_test_events_not_only_once_the_window_is_full(tmp_path: Path) -> None:
    """A segment starting (or after a restart) with moved inputs: its per-input test runs at ``first_test_events``
    scored events and flags them, where waiting for a full ``drift.window`` left it untested."""
    x = rows(260, seed=5) + 4.0  # every input far outside the reference
    for first, tested in ((200, True), (1000, False)):
        settings = make_settings(
            tmp_path / str(first), drift={"window": 1000, "every": 100, "first_test_events": first}
        )
        pipeline = make_pipeline(settings, ReplaySource(events(x)))
        drain(pipeline)
        untested = pipeline.readiness()[1]["models"][MODEL]["segments_untested"]
        statistic = pipeline.state.gauge(tel.DRIFT_STATISTIC.name, (MODEL, "other", "features_ks"))
        assert statistic is not None
        if tested:
            assert "other" not in untested and statistic > 0.5
            assert pipeline.state.gauge(tel.FEATURE_DRIFT_FEATURES.name, (MODEL, "other")) == x.shape[1]
        else:
            assert untested["other"]["features_ks"] == {"scored": 260, "needed": 1000} and np.isnan(statistic)
        pipeline.close()


def test_a_window_test_that_has_not_run_exports_nan_and_readyz_says_how_many_events_it_needs(
    tmp_path: Path,
) -> None:
    """Fewer scored events than ``drift.window``: the KS, range and per-input tests have not run, so their statistics
    are NaN (not the 0.0 that reads as "tested, no drift") and /readyz names the counts; once they run, numbers."""
    settings = make_settings(tmp_path, drift={"window": 100, "every": 10})
    x = rows(160, seed=4)
    pipeline = make_pipeline(settings, ReplaySource(events(x[:60])))
    drain(pipeline)
    untested = pipeline.readiness()[1]["models"][MODEL]["segments_untested"]
    assert untested["other"]["gamma_ks"] == {"scored": 60, "needed": 100}
    assert {"gamma_ks", "features_ks"} <= set(untested["other"])
    statistic = pipeline.state.gauge(tel.DRIFT_STATISTIC.name, (MODEL, "other", "gamma_ks"))
    assert statistic is not None and np.isnan(statistic)
    assert np.isfinite(pipeline.state.gauge(tel.DRIFT_STATISTIC.name, (MODEL, "other", "gamma_cusum")))  # sequential
    ran = make_pipeline(settings, ReplaySource(events(x)))
    drain(ran)
    assert "other" not in ran.readiness()[1]["models"][MODEL]["segments_untested"]
    assert np.isfinite(ran.state.gauge(tel.DRIFT_STATISTIC.name, (MODEL, "other", "gamma_ks")))
