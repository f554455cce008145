"""Per-event costs of the ingest path's pieces (issue 3), in-process, no broker: the figures the code comments cite.

For N SPEC §1 events built as ``bench/stream.py`` builds them (20 features, a live prediction, 4 segments), each row
is the median over rounds of one pass over the N events, divided by N; within a round every piece runs once, in
turn, so a slow spell of the machine hits the pieces compared alike:

- ``orjson.loads`` of the event;
- decode (``KServeJoiner.update``) with the common-shape fast path (``EventDecoder._plain_common``) and with it
  disabled (the careful field-by-field path alone);
- the sidecar's malloc settings apply throughout; every row runs under its GC settings (``monitor/allocator.py``: thresholds raised, start-up objects
  frozen) but the last two, ``orjson.loads`` and decode again under CPython's defaults with nothing frozen — each
  pass keeps what it built alive, as a poll's events are;
- the sampler the service builds: ``sample`` on each event in turn against one ``sample_many`` call (a fresh
  sampler per pass, one clock reading, the 200 events/s default budget);
- ``RawRecord`` from column batches: the NamedTuple constructor in a loop, ``records_of``, and a frozen slots
  dataclass with the same fields (what RawRecord was before);
- ``InferenceEvent`` + ``LivePrediction``: the slots dataclasses as they are, and frozen copies of them;
- the consumer child's hand-over of a 2,000-record poll: pickling the column batch with its values, written to
  /dev/null (what ``multiprocessing.connection.Connection.send`` does);
- an event's features as an array: ``np.array`` per event (what the decoder did for every event before features
  became lazy, ``InferenceEvent.features``) against ``feature_rows`` of all the events in one call.

It also prints how many start-up objects were frozen out of the GC's sight. Usage::

    .venv/bin/python bench/ingest_parts.py
    .venv/bin/python bench/ingest_parts.py --events 50000 --repeats 15
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from stream import MODEL, N_FEATURES, build_fixture, encode_events, settings_for

from monitor.allocator import GC_THRESHOLDS, freeze_startup_objects, tune_malloc
from monitor.events import InferenceEvent, LivePrediction, feature_rows
from monitor.service import build_sampler
from monitor.source.base import RawRecord
from monitor.source.decode import EventDecoder, KServeJoiner, ModelSchema
from monitor.source.kafka import PartitionBatch, records_of


@dataclasses.dataclass(frozen=True, slots=True)
class _FrozenRecord:
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    topic: str = ""
    partition: int = -1
    offset: int = -1
    timestamp_ms: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class _FrozenPrediction:
    label: int | None = None
    probabilities: tuple[float, ...] | None = None
    value: tuple[float, ...] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class _FrozenEvent:
    event_id: str
    model: str
    model_version: str
    features: object
    timestamp_seconds: float
    segment: str = "other"
    prediction: object = None
    origin: object = None


def interleaved(fns: list[Callable[[], object]], n: int, repeats: int) -> list[float]:
    """µs per event of each fn: median over ``repeats`` rounds, the fns called in turn within a round (so a slow
    spell of the machine hits the pieces being compared alike)."""
    for fn in fns:
        fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            samples[i].append(time.perf_counter() - t0)
    return [statistics.median(s) / n * 1e6 for s in samples]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    tune_malloc()  # as `harmonic-monitor` does at start
    print(f"machine: {machine('numpy', 'orjson')}")
    print(f"command: .venv/bin/python bench/ingest_parts.py {' '.join(sys.argv[1:])}".rstrip())
    folder = Path(tempfile.mkdtemp(prefix="hm-ingest-"))
    fx = build_fixture(folder)
    values = encode_events(fx, args.events)
    n = len(values)
    settings = settings_for(fx, folder / "state", budget=200.0)

    def decoder() -> EventDecoder:
        return EventDecoder(
            {MODEL: ModelSchema(N_FEATURES, None, default_version="unknown")},
            default_model=MODEL,
            max_bytes=settings.max_event_bytes,
            segments=settings.segments.allowed,
            max_segments=settings.segments.max_segments,
        )

    now = time.time()
    fast = KServeJoiner(decoder())
    careful_decoder = decoder()
    careful_decoder._plain_common = lambda *_: None  # type: ignore[method-assign]
    careful = KServeJoiner(careful_decoder)
    origins = [("t", 0, i) for i in range(n)]

    def decode_with(joiner: KServeJoiner) -> Callable[[], list[InferenceEvent]]:
        def run() -> list[InferenceEvent]:
            out: list[InferenceEvent] = []
            for value, origin in zip(values, origins, strict=True):
                out.extend(joiner.update(value, (), origin, now=now))
            return out

        return run

    # everything below runs under the sidecar's GC settings (as `harmonic-monitor run` does), except the two rows
    # labelled "CPython GC", timed at the end with the defaults and nothing frozen
    default_thresholds = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    freeze_startup_objects()
    tracked = gc.get_freeze_count()
    parse = lambda: [orjson.loads(v) for v in values]  # noqa: E731
    events = decode_with(fast)()

    def sample_in_turn() -> None:
        sampler = build_sampler(settings)
        for e in events:
            sampler.sample(e, now)

    def sample_many() -> None:
        build_sampler(settings).sample_many(events, now)

    batch: PartitionBatch = ("t", 0, values, None, list(range(n)), [0] * n)
    unread = decode_with(fast)()  # events whose features were never read: the decoder's lists
    lists = [list(e._features) for e in unread]
    feats = [np.asarray(e.features) for e in events]

    def build_events(event: type, prediction: type) -> Callable[[], object]:
        def run() -> object:
            return [
                event(
                    event_id="e",
                    model=MODEL,
                    model_version="3",
                    features=f,
                    timestamp_seconds=1.0,
                    segment="eu",
                    prediction=prediction(label=1, probabilities=(0.2, 0.8)),
                    origin=None,
                )
                for f in feats
            ]

        return run

    poll = 2000
    polls = [("t", 0, values[i : i + poll], None, list(range(i, i + poll)), [0] * poll) for i in range(0, n, poll)]
    sink = os.open(os.devnull, os.O_WRONLY)

    def pickled() -> None:
        for b in polls:
            os.write(sink, pickle.dumps(("records", [b]), protocol=pickle.HIGHEST_PROTOCOL))

    pieces: list[tuple[str, Callable[[], object]]] = [
        ("orjson.loads", parse),
        ("decode, fast path (as shipped)", decode_with(fast)),
        ("decode, careful path only", decode_with(careful)),
        ("sampler: sample() on each event", sample_in_turn),
        ("sampler: one sample_many() call", sample_many),
        (
            "RawRecord: NamedTuple constructor in a loop",
            lambda: [RawRecord(v, (), "t", 0, i, 0) for i, v in enumerate(values)],
        ),
        ("RawRecord: records_of (map/zip)", lambda: list(records_of(batch))),
        (
            "frozen slots dataclass, same fields",
            lambda: [_FrozenRecord(v, (), "t", 0, i, 0) for i, v in enumerate(values)],
        ),
        ("InferenceEvent + LivePrediction (slots)", build_events(InferenceEvent, LivePrediction)),
        ("the same, frozen slots dataclasses", build_events(_FrozenEvent, _FrozenPrediction)),
        ("child hand-over: pickle a 2,000-record column batch", pickled),
        (
            "features: np.array per event (what decode did before)",
            lambda: [np.array(f, dtype=np.float64) for f in lists],
        ),
        ("features: feature_rows of all the events, one call", lambda: feature_rows(unread)),
    ]
    try:
        times = interleaved([fn for _, fn in pieces], n, args.repeats)
    finally:
        os.close(sink)
    rows = [(label, us) for (label, _), us in zip(pieces, times, strict=True)]

    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    cpython = interleaved([parse, decode_with(fast)], n, args.repeats)
    rows.append(("orjson.loads, CPython GC (700, 10, 10), nothing frozen", cpython[0]))
    rows.append(("decode, CPython GC (700, 10, 10), nothing frozen", cpython[1]))
    gc.set_threshold(*default_thresholds)

    print(f"\n{n:,} events of {sum(map(len, values)) / n:.0f} bytes; medians of {args.repeats} interleaved rounds; "
          f"start-up objects frozen out of the GC: {tracked:,}\n")  # fmt: skip
    print("| piece | µs per event |\n|---|---:|")
    for label, us in rows:
        print(f"| {label} | {us:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
