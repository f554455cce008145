"""Decoding ahead in the consumer's process: the events are the pipeline's own decoder's, event for event; what the
fast path does not take as it is comes over undecoded; segment values are admitted only by the pipeline."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.config import load_settings
from monitor.runtime.ingest import Ingest
from monitor.runtime.stage_results import Ingested
from monitor.source.base import RawRecord
from monitor.source.decode import EventDecoder
from monitor.source.decode_ahead import DecodeAhead, decode_ahead, event_of
from monitor.source.kafka_process import AheadShare
from monitor.source.validate import ModelSchema

MODEL = "credit"
TS = 1_795_168_800_000


def doc(**fields: Any) -> bytes:
    base: dict[str, Any] = {"id": "e1", "model": MODEL, "ts": TS, "features": [1.0, 2.5, -3.0]}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None}).encode()


def decoder(**kw: Any) -> EventDecoder:
    return EventDecoder({MODEL: ModelSchema(3, None, default_version="7")}, default_model=MODEL, **kw)


def fields(ev: Any) -> tuple[Any, ...]:
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
        ev.held,
    )


VALUES = [
    doc(),
    doc(model=None, model_version="v2", segment="eu"),
    doc(prediction={"label": 1, "probabilities": [0.25, 0.75]}),
    doc(prediction={"label": 0}),
    doc(ts=None),  # no ts: the record's timestamp, or the pipeline's clock
    doc(segment="new-segment"),  # not admitted yet: only the pipeline admits
    doc(features=[1, 2, 3]),  # integers: taken as they are (made float64 when read)
    doc(features=[1.0, 2.0]),  # wrong width: refused by the pipeline
    doc(id=7),  # an integer id: the careful path
    doc(prediction={"value": [0.5]}),
    b"not json",
    b'{"specversion": "1.0", "type": "org.kubeflow.serving.inference.request", "id": "k1", "data": {}}',
]


@pytest.mark.parametrize("timestamp_ms", [None, TS + 5])
@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_an_event_decoded_ahead_is_the_one_the_pipeline_decodes(value: bytes, timestamp_ms: int | None) -> None:
    here = decoder()
    here.decode(doc(segment="eu"))  # the pipeline admitted "eu" before it sent its state
    ahead = DecodeAhead.of(here).decoder()
    origin = ("events", 3, 42)
    decoded = decode_ahead(ahead, value, timestamp_ms)
    if decoded is None:
        return  # the pipeline decodes the record itself, as before
    event_now = timestamp_ms / 1000.0 if timestamp_ms else 1.0e9
    parsed = here.parse(value)
    assert parsed is not None
    own = here.common(parsed, origin, event_now)
    assert own is not None, "decoded ahead what the pipeline's fast path does not take"
    assert fields(event_of(decoded, origin)) == fields(own)


def test_what_the_fast_path_does_not_take_comes_over_undecoded() -> None:
    ahead = DecodeAhead.of(decoder()).decoder()
    taken = [decode_ahead(ahead, v, None) is not None for v in VALUES]
    assert taken[:4] == [True, False, True, True]  # "eu" is not admitted in a fresh decoder
    assert taken[4] is False  # no ts and no record timestamp: the pipeline's clock decides
    assert decode_ahead(ahead, VALUES[4], TS) is not None  # the record's timestamp stands in, as in the pipeline
    assert taken[5:] == [False, True, False, False, False, False, False]


def test_segments_are_admitted_by_the_pipeline_and_then_decoded_ahead(tmp_path: Path) -> None:
    settings = load_settings(None, {"models": [{"name": MODEL, "path": str(tmp_path / "m.onnx")}]})
    ingest = Ingest(settings, {MODEL: ModelSchema(3, None, default_version="7")})
    sent: list[DecodeAhead] = []

    class Source:
        def decode_ahead(self, spec: DecodeAhead) -> None:
            sent.append(spec)

    ingest.share_decoder(Source())
    ingest.share_decoder(Source())
    assert len(sent) == 1 and sent[0].admitted == frozenset()
    value = doc(segment="eu")
    assert decode_ahead(sent[-1].decoder(), value, None) is None
    into = Ingested()
    ingest.decode(RawRecord(value, (), "events", 0, 0), 1.0, into)  # the pipeline decodes it, and admits "eu"
    assert into.events[0][0].segment == "eu"
    ingest.share_decoder(Source())
    assert len(sent) == 2 and sent[1].admitted == frozenset({"eu"})
    assert decode_ahead(sent[-1].decoder(), value, None) is not None


def test_the_pipeline_takes_an_event_decoded_ahead_and_decodes_the_rest_itself(tmp_path: Path) -> None:
    settings = load_settings(None, {"models": [{"name": MODEL, "path": str(tmp_path / "m.onnx")}]})
    ingest = Ingest(settings, {MODEL: ModelSchema(3, None, default_version="7")})
    ahead = DecodeAhead.of(ingest.decoder).decoder()
    value = doc(id="ahead")
    decoded = decode_ahead(ahead, value, None)
    assert decoded is not None
    into = Ingested()
    # the record's value says "ahead"; what was decoded ahead is taken as it is (no second parse)
    marked = decoded[:1] and ("taken-ahead", *decoded[1:])
    ingest.decode(RawRecord(value, (), "events", 0, 5, None, marked), 1.0, into)
    ingest.decode(RawRecord(doc(id="here"), (), "events", 0, 6), 1.0, into)
    assert [ev.event_id for ev, _ in into.events] == ["taken-ahead", "here"]
    assert into.events[0][0].origin == ("events", 0, 5)
    assert into.consumed == {MODEL: 2}


def test_the_child_decodes_the_share_of_each_batch_the_pipeline_waits_for() -> None:
    spec = DecodeAhead.of(decoder()).columns()
    values = [doc(id=f"e{i}") for i in range(8)]
    batch = ("events", 0, values, None, list(range(8)), [None] * 8)
    share = AheadShare()

    def rows(out: Any) -> list[int]:  # the batch's records decoded as columns
        return [r for cols in out or [] for r in cols.rows.tolist()]

    assert share.decoded(None, batch) is None  # no decoder state from the pipeline yet
    assert rows(share.decoded(spec, batch)) == list(range(8))
    share.adjust(0)  # nothing waiting in the outbox: the pipeline waits for this process, which decodes less
    share.adjust(0)
    assert rows(share.decoded(spec, batch)) == list(range(6))
    for _ in range(10):
        share.adjust(0)
    assert share.share == 0.0 and share.decoded(spec, batch) is None
    share.adjust(3)  # messages pile up: the pipeline is the slower one, this process decodes more
    assert share.share == AheadShare.STEP
    headers = [(("h", b"1"),)] + [()] * 7  # a record with headers is the joiner's (KServe binary mode)
    share.share = 1.0
    assert rows(share.decoded(spec, ("events", 0, values, headers, list(range(8)), [None] * 8))) == list(range(1, 8))


def test_a_default_model_off_the_fast_path_leaves_its_events_to_the_pipeline() -> None:
    here = EventDecoder(
        {"tabular": ModelSchema(3, None, default_version="1"), MODEL: ModelSchema(3, None, default_version="7")},
        default_model="tabular",
    )
    here._fast_models.pop("tabular")  # as for a model with held inputs (decoded by its signature)
    ahead = DecodeAhead.of(here).decoder()
    assert ahead is not None and ahead.default_model is None
    assert decode_ahead(ahead, doc(model=None), None) is None  # no "model": the default one's, the pipeline's
    assert decode_ahead(ahead, doc(), None) is not None
    here._fast_models.clear()
    assert DecodeAhead.of(here).decoder() is None  # nothing takes the fast path: nothing decoded ahead


def test_the_pipe_says_which_process_waits() -> None:
    share = AheadShare()
    share.adjust(1, 0)  # the pipe is empty: the pipeline read all and waits, however many wait in the outbox
    assert share.share == 1.0 - AheadShare.STEP
    share.adjust(0, 4096)  # bytes in the pipe, none behind them: neither waits
    assert share.share == 1.0 - AheadShare.STEP
    share.adjust(2, 4096)  # bytes unread and a message behind them: the pipeline is the slower one
    assert share.share == 1.0


def test_a_batch_split_between_polls_takes_its_columns_with_it() -> None:
    from monitor.source.columns import split_columns

    spec = DecodeAhead.of(decoder()).columns()
    assert spec is not None
    rng = np.random.default_rng(5)
    values = [doc(id=f"e{i}") if rng.random() < 0.8 else b"not json" for i in range(60)]
    columns, base = [], 0
    for size in (7, 20, 33):  # three partition batches, one after another in the buffer
        batch = ("events", 0, values[base : base + size], None, list(range(size)), [None] * size)
        columns += [c.shifted(base) for c in AheadShare().decoded(spec, batch) or []]
        base += size
    taken = sorted(r for c in columns for r in c.rows.tolist())
    for cuts in ([0, 60], [0, 5, 27, 28, 60], sorted({0, 60, *rng.integers(0, 60, 6).tolist()})):
        left, got = columns, []
        for start, end in itertools.pairwise(cuts):
            now, left = split_columns(left, start, end)
            for c in now:
                assert c.rows.min() >= 0 and c.rows.max() < end - start
                got += [start + r for r in c.rows.tolist()]
                assert c.ids == [json.loads(values[start + r])["id"] for r in c.rows.tolist()]
        assert sorted(got) == taken and not left
