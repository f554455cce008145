"""A poll decoded as columns (monitor/source/columns.py) is the per-record decoder's poll, event for event: the same
events, the same invalid records with the same reasons and messages, the same counts; and the sampler deciding on
columns decides as it does on the events."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.config import load_settings
from monitor.events import InferenceEvent
from monitor.runtime.ingest import Ingest
from monitor.runtime.stage_results import Ingested
from monitor.sampler.stratified import StratifiedSampler
from monitor.sampler.uniform import UniformSampler
from monitor.sampler.uniform_config import UniformSamplerConfig
from monitor.source.base import Polled, RawRecord
from monitor.source.columns import decode_columns
from monitor.source.decode_ahead import DecodeAhead
from monitor.source.validate import ModelSchema

TS = 1_795_168_800_000
SCHEMAS = {
    "credit": ModelSchema(4, None, default_version="7"),
    "fraud": ModelSchema(2, ("a", "b"), default_version="1"),
}


def good(rng: random.Random, i: int) -> dict[str, Any]:
    model = rng.choice(["credit", "credit", "fraud", None])
    width = 2 if model == "fraud" else 4
    doc: dict[str, Any] = {"id": f"e{i}", "features": [rng.uniform(-5, 5) for _ in range(width)]}
    if model is not None:
        doc["model"] = model
    if rng.random() < 0.8:
        doc["ts"] = TS + i
    if rng.random() < 0.5:
        doc["model_version"] = rng.choice(["3", "v2"])
    if rng.random() < 0.8:
        doc["segment"] = rng.choice(["eu", "us", "apac"])
    if rng.random() < 0.7:
        p = rng.random()
        doc["prediction"] = {"label": int(p > 0.5), "probabilities": [1 - p, p]}
    return doc


#: one fault of every kind the decoders tell apart (and shapes the fast path leaves to the careful one)
FAULTS: list[Any] = [
    lambda d: b"not json",
    lambda d: b"[1, 2]",
    lambda d: b'{"id": "x", "features": [1, 2, 3, 4]} trailing',
    lambda d: {k: v for k, v in d.items() if k != "features"},
    lambda d: {k: v for k, v in d.items() if k != "id"},
    lambda d: {**d, "id": 17},
    lambda d: {**d, "id": "tab\there"},
    lambda d: {**d, "id": "x" * 200},
    lambda d: {**d, "id": "caf\u00e9"},
    lambda d: {**d, "model": "nope"},
    lambda d: {**d, "model": 3},
    lambda d: {**d, "model": None},
    lambda d: {**d, "model_version": 3},
    lambda d: {**d, "model_version": "v\x01"},
    lambda d: {**d, "features": [1.0, 2.0, 3.0]},
    lambda d: {**d, "features": [1.0, "2", 3.0, 4.0]},
    lambda d: {**d, "features": [True, 0.0, 1.0, 2.0]},
    lambda d: {**d, "features": [1, 2, 3, 4]},
    lambda d: {**d, "features": [1e39, 0.0, 0.0, 0.0]},
    lambda d: {**d, "features": [3e38, 3e38, 1.0, 1.0]},
    lambda d: {**d, "features": [10**400, 0, 0, 0]},
    lambda d: {**d, "features": {"a": 1.0, "b": 2.0}},
    lambda d: {**d, "features": None},
    lambda d: json.dumps({**d, "features": [float("nan"), 0, 0, 0]}).encode(),
    lambda d: json.dumps(d).replace('"features": [', '"features": [1e400, ', 1).encode(),
    lambda d: {**d, "ts": 1_700_000_000},
    lambda d: {**d, "ts": "2026-11-20T10:00:00Z"},
    lambda d: {**d, "ts": None},
    lambda d: {**d, "ts": 10**30},
    lambda d: {**d, "ts": True},
    lambda d: {**d, "segment": "brand-new"},
    lambda d: {**d, "segment": "e\u0000u"},
    lambda d: {**d, "segment": 5},
    lambda d: {**d, "prediction": {"value": 3.2}},
    lambda d: {**d, "prediction": {"label": 1, "value": None}},
    lambda d: {**d, "prediction": {"label": True}},
    lambda d: {**d, "prediction": {"label": 2**70}},
    lambda d: {**d, "prediction": {"label": 1.0}},
    lambda d: {**d, "prediction": {"label": 1, "probabilities": []}},
    lambda d: {**d, "prediction": {"label": 1, "probabilities": [0, 1]}},
    lambda d: {**d, "prediction": {"label": 1, "probabilities": [0.5, 1.5]}},
    lambda d: {**d, "prediction": {"probabilities": [0.2, 0.8]}},
    lambda d: {**d, "prediction": "yes"},
    lambda d: {**d, "prediction": 1},
    lambda d: {**d, "prediction": 2.5},
    lambda d: {**d, "prediction": [0.2, 0.8]},
    lambda d: {**d, "prediction": [1.5, 2.5]},
    lambda d: {**d, "specversion": "1.0", "type": "org.kubeflow.serving.inference.request"},
    lambda d: {**d, "extra": {"nested": [1, 2]}},
    lambda d: json.dumps(d).replace('"id": ', '"id": "dup", "id": ', 1).encode(),
    lambda d: b"  " + json.dumps(d).encode() + b"\n",
    lambda d: json.dumps(d).encode()[:-3],
    lambda d: b'{"id": "big", "features": [' + b"1.0," * 300_000 + b"1.0]}",
]


def value_of(doc: Any) -> bytes:
    return doc if isinstance(doc, bytes) else json.dumps(doc).encode()


def random_poll(rng: random.Random, start: int, n: int) -> list[RawRecord]:
    records = []
    for i in range(start, start + n):
        doc: Any = good(rng, i)
        if rng.random() < 0.3:
            doc = rng.choice(FAULTS)(doc)
        headers: tuple[tuple[str, bytes], ...] = (("trace", b"1"),) if rng.random() < 0.02 else ()
        stamp = rng.choice([TS + i, None, 0])
        records.append(RawRecord(value_of(doc), headers, "events", i % 3, i, stamp))
    return records


def outcome(ev: InferenceEvent) -> tuple[Any, ...]:
    p = ev.prediction
    return (
        ev.event_id,
        ev.model,
        ev.model_version,
        ev.features.tolist(),
        ev.timestamp_seconds,
        ev.segment,
        None if p is None else (p.label, p.probabilities, p.value),
        ev.origin,
    )


def ingest(tmp_path: Path) -> Ingest:
    settings = load_settings(
        None,
        {"models": [{"name": m, "path": str(tmp_path / f"{m}.onnx")} for m in SCHEMAS], "max_event_bytes": 1 << 20},
    )
    return Ingest(settings, dict(SCHEMAS))


def columns_poll(ing: Ingest, records: list[RawRecord]) -> Polled:
    """The poll as the consumer's child hands it over: one column decode per partition batch."""
    spec = DecodeAhead.of(ing.decoder).columns()
    assert spec is not None
    polled = Polled(records)
    for partition in range(3):
        at = [i for i, r in enumerate(records) if r.partition == partition]
        batch = [records[i] for i in at]
        headers = [r.headers for r in batch] if any(r.headers for r in batch) else None
        for cols in decode_columns(spec, [r.value for r in batch], headers, [r.timestamp_ms for r in batch]):
            cols.rows = np.asarray(at, dtype=np.intp)[cols.rows]
            polled.columns.append(cols)
    return polled


@pytest.mark.parametrize("seed", range(6))
def test_a_poll_decoded_as_columns_is_the_per_record_decoders_poll(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    one, cols = ingest(tmp_path), ingest(tmp_path)
    taken = 0
    for poll in range(8):
        records = random_poll(rng, poll * 200, 200)
        now = 1.9e9 + poll
        a, b = Ingested(), Ingested()
        for record in records:  # record by record: the per-record decoder alone
            one.decode(record, now, a)
        polled = columns_poll(cols, records)
        if poll % 2:  # the child's columns; or none, and the pipeline's process decodes the poll as columns
            polled.columns.clear()
        cols.decode_all(polled, now, b)
        taken += sum(len(c) for c, _ in b.columns)
        made = b.events + [
            (c.event(j, rs[int(c.rows[j])].origin), rs[int(c.rows[j])]) for c, rs in b.columns for j in range(len(c))
        ]
        assert sorted(outcome(ev) for ev, _ in a.events) == sorted(outcome(ev) for ev, _ in made)
        assert [(i.record, i.reason, i.detail, i.model) for i in a.invalid] == [
            (i.record, i.reason, i.detail, i.model) for i in b.invalid
        ]
        assert a.consumed == b.consumed
        assert one.decoder.admitted_segments == cols.decoder.admitted_segments
    assert taken > 300  # most good events were taken as columns


def test_what_columns_do_not_take_is_decoded_record_by_record(tmp_path: Path) -> None:
    ing = ingest(tmp_path)
    ing.decoder.admit_segments(["eu"])
    rng = random.Random(1)
    base = {**good(rng, 0), "model": "credit", "segment": "eu", "ts": TS}
    base["features"] = [0.5, 1.0, 1.5, 2.0]
    records = [RawRecord(value_of(f(base)), (), "events", 0, i, TS) for i, f in enumerate([lambda d: d, *FAULTS])]
    polled = columns_poll(ing, records)
    # the good one; no model (the default); integer features; large but within float32; no ts (the record's);
    # an extra field; a duplicate key (the last counts, as for orjson); blanks around the document
    assert [c.rows.tolist() for c in polled.columns] == [[0, 12, 18, 20, 28, 40, 49, 50, 51]]
    into = Ingested()
    ing.decode_all(polled, 1.9e9, into)
    assert sum(into.consumed.values()) == len(records)
    assert len(into.invalid) + sum(len(c) for c, _ in into.columns) + len(into.events) == len(records)


def test_a_kserve_half_held_mid_poll_sends_the_rest_of_the_poll_through_the_joiner(tmp_path: Path) -> None:
    one, cols = ingest(tmp_path), ingest(tmp_path)
    for ing in (one, cols):
        ing.decoder.admit_segments(["eu"])
    doc = {"id": "e", "model": "credit", "ts": TS, "segment": "eu", "features": [1.0, 2.0, 3.0, 4.0]}
    request = {
        "specversion": "1.0",
        "type": "org.kubeflow.serving.inference.request",
        "source": "credit",
        "id": "k1",
        "data": {"instances": [[1.0, 2.0, 3.0, 4.0]]},
    }
    values = [value_of({**doc, "id": f"e{i}"}) for i in range(3)] + [value_of(request)]
    values += [value_of({**doc, "id": f"f{i}"}) for i in range(3)]
    records = [RawRecord(v, (), "events", 0, i, TS + i) for i, v in enumerate(values)]
    a, b = Ingested(), Ingested()
    for record in records:
        one.decode(record, 1.9e9, a)
    polled = columns_poll(cols, records)
    assert polled.columns and len(polled.columns[0]) == 6
    cols.decode_all(polled, 1.9e9, b)
    assert sorted(outcome(e) for e, _ in a.events) == sorted(
        [outcome(e) for e, _ in b.events]
        + [outcome(c.event(j, rs[int(c.rows[j])].origin)) for c, rs in b.columns for j in range(len(c))]
    )
    assert [c.rows.tolist() for c, _ in b.columns] == [[0, 1, 2]]  # after the request's record: the joiner's
    assert a.consumed == b.consumed


@pytest.mark.parametrize("kind", ["uniform", "stratified", "capped", "work-conserving"])
def test_the_sampler_decides_on_columns_as_on_events(kind: str) -> None:
    def sampler() -> UniformSampler:
        config = {
            "uniform": UniformSamplerConfig(target_per_second=50.0),
            "stratified": UniformSamplerConfig(target_per_second=50.0),
            "capped": UniformSamplerConfig(target_per_second=5000.0),
            "work-conserving": UniformSamplerConfig(cpus=2.0, cpu_share=0.5),
        }[kind]
        return StratifiedSampler(config, seed=3) if kind == "stratified" else UniformSampler(config, seed=3)

    rng = np.random.default_rng(0)
    a, b, c = sampler(), sampler(), sampler()
    for step in range(40):
        now = 1000.0 + step * 0.05 + (5.0 if step == 30 else 0.0)
        n = int(rng.integers(0, 400))
        labels = [None if r < 0.2 else int(r * 10) % 3 for r in rng.random(n)]
        forced = rng.random(n) < 0.05
        events = [
            InferenceEvent(f"e{step}-{i}", "m", "1", np.zeros(2), now, "other", _pred(label))
            for i, label in enumerate(labels)
        ]
        if step == 10:
            for s in (a, b, c):
                s.observe_cost("m", 100, 0.2)
        wa = a.sample_many(events, now, forced.tolist())
        wb = b.sample_columns("m", labels, forced, now, events.__getitem__)
        as_array = (np.array([x or 0 for x in labels], dtype=np.int64), np.array([x is not None for x in labels]))
        wc = c.sample_columns("m", labels, forced, now, events.__getitem__, label_array=as_array)
        assert wa == wb.tolist() == wc.tolist()
        assert [id(e) for e in a.last_held] == [id(e) for e in b.last_held] == [id(e) for e in c.last_held]
        ra, rb, rc = a.release(now), b.release(now), c.release(now)
        assert [(id(e), w) for e, w in ra] == [(id(e), w) for e, w in rb] == [(id(e), w) for e, w in rc]
        assert a.snapshot() == b.snapshot() == c.snapshot()


def _pred(label: int | None) -> Any:
    from monitor.events import LivePrediction

    return None if label is None else LivePrediction(label, None)


@pytest.mark.parametrize("budget", [0, 40])
def test_a_pipeline_over_columns_counts_samples_and_scores_as_over_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    """The same polls through the whole pipeline, decoded as columns or record by record: the same counts, the same
    shadow checks and the same events scored (the sampler's draws and the shadow check's, event for event)."""
    from monitor.runtime import ingest as ingest_module
    from tests.unit.test_pipeline import RecordingSource, events, make_pipeline, make_settings, rows, run_to_end

    x = rows(400, seed=5)
    values = events(x)
    values[::7] = [value_of({"id": "x", "model": "nope", "features": [1.0, 2.0]})] * len(values[::7])
    values[3] = b"not json"
    records = [RawRecord(v, (), "events", 0, i, TS + i) for i, v in enumerate(values)]
    outcomes = []
    for min_rows in (10**9, 32):  # record by record; then as columns in the pipeline's process
        monkeypatch.setattr(ingest_module, "MIN_COLUMN_ROWS", min_rows)
        settings = make_settings(tmp_path / str(min_rows), sampler={"events_per_second": budget})
        scored: list[str] = []
        pipeline = make_pipeline(settings, RecordingSource(records))

        def note(batch: Any, into: list[str] = scored) -> None:
            into.extend(e.event_id for e in batch.events)

        pipeline.stages.scored_hooks.append(note)
        run_to_end(pipeline)
        names = ("consumed", "invalid", "sampled", "shadow_compared", "shadow_disagreements", "scored")
        state = pipeline.state
        outcomes.append(([state.counter_sum(f"harmonic_events_{n}_total") for n in names[:3]], sorted(scored)))
        outcomes[-1][0].extend(state.counter_sum(f"harmonic_{n}_total") for n in names[3:5])
    assert outcomes[0] == outcomes[1]
    counts, scored_ids = outcomes[0]
    assert counts[0] == len(records) and counts[3] > 0  # every record counted; live labels shadow-checked
    assert 0 < len(scored_ids) < (len(records) if budget else len(records) + 1)
    if budget:
        assert len(scored_ids) < counts[0] - counts[1] - 50  # sampled: most valid events not scored


def _as_tuples(cols: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (
            c.model,
            c.rows.tolist(),
            c.ids,
            c.versions,
            c.timestamps.tolist(),
            c.segments,
            c.features.tolist(),
            c.labels.tolist(),
            c.has_label.tolist(),
            [None if p is None else tuple(p) for p in c.probabilities],
        )
        for c in cols
    ]


@pytest.mark.parametrize("fault_rate", [0.0, 0.002, 0.02, 0.3])
def test_a_model_checked_in_bulk_is_the_model_checked_record_by_record(
    tmp_path: Path, fault_rate: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    import monitor.source.columns as columns

    ing = ingest(tmp_path)
    ing.decoder.admit_segments(["eu", "us"])
    spec = DecodeAhead.of(ing.decoder).columns()
    assert spec is not None
    rng = random.Random(int(fault_rate * 1000))
    bulk = columns._bulk
    taken_in_bulk = []

    def counted(*args: Any) -> Any:
        cols = bulk(*args)
        taken_in_bulk.append(cols is not None)
        return cols

    for poll in range(20):
        docs: list[Any] = []
        for i in range(300):
            doc: Any = good(rng, i)
            if poll % 2:  # half the polls hold one model, named in each record, and admitted segments
                doc = {
                    **doc,
                    "model": "credit",
                    "features": (doc["features"] * 2)[:4],
                    "segment": rng.choice(["eu", "us"]),
                }
            if rng.random() < fault_rate:
                doc = rng.choice(FAULTS)(doc)
            docs.append(doc)
        values = [value_of(d) for d in docs]
        stamps = [rng.choice([TS + i, None, 0]) if poll % 4 == 3 else TS + i for i in range(len(values))]
        monkeypatch.setattr(columns, "_bulk", counted)
        fast = decode_columns(spec, values, None, stamps)
        monkeypatch.setattr(columns, "_bulk", lambda *args: None)
        slow = decode_columns(spec, values, None, stamps)
        assert _as_tuples(fast) == _as_tuples(slow)
    if fault_rate < 0.01:
        assert any(taken_in_bulk)


def test_probabilities_stated_on_every_row_travel_as_one_array_and_come_back_as_python_floats(
    tmp_path: Path,
) -> None:
    ing = ingest(tmp_path)
    ing.decoder.admit_segments(["eu"])
    docs = [
        {"id": f"e{i}", "model": "credit", "ts": TS, "segment": "eu", "features": [0.5, 1.0, 1.5, 2.0 + i]}
        | {"prediction": {"label": i % 2, "probabilities": [0.25 + i / 100, 0.75 - i / 100]}}
        for i in range(5)
    ]
    records = [RawRecord(value_of(d), (), "events", 0, i, TS) for i, d in enumerate(docs)]
    (cols,) = columns_poll(ing, records).columns
    assert isinstance(cols.probabilities, np.ndarray) and cols.probabilities.shape == (5, 2)
    kept = cols.subset(np.array([True, False, True, True, False]))
    for k, i in enumerate([0, 2, 3]):
        ev = kept.event(k, None)
        assert ev.prediction is not None
        assert ev.prediction.probabilities == tuple(docs[i]["prediction"]["probabilities"])  # type: ignore[index]
        assert {type(p) for p in ev.prediction.probabilities} == {float}


def test_draws_taken_in_one_call_are_the_generators_next_draws() -> None:
    import random

    from monitor.sampler.admission import random_floats

    for seed in range(5):
        one, many = random.Random(seed), random.Random(seed)
        for n in (0, 1, 7, 2000):
            assert random_floats(one, n).tolist() == [many.random() for _ in range(n)]
        assert one.getstate() == many.getstate()


def test_strata_found_over_arrays_are_the_counters() -> None:
    from collections import Counter

    from monitor.sampler.uniform import first_sight

    rng = np.random.default_rng(11)
    for n in (0, 1, 50, 500):
        labels = rng.integers(-3, 4, n)
        has = rng.random(n) < 0.7
        keys = [int(x) if h else None for x, h in zip(labels, has, strict=True)]
        counted = Counter(keys)
        distinct, counts, codes = first_sight(labels, has)
        assert list(zip(distinct, counts, strict=True)) == list(counted.items())
        assert [distinct[k] for k in codes.tolist()] == keys
