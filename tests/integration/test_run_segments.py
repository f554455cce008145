"""End to end: ``harmonic-monitor run`` on a segmented stream judges each segment against its own baseline.

The stream of ``tests/unit/segmented_stream.py`` (a GBDT on 4 inputs, 5 segments that follow one input, 16,000
events, re-timed to now) goes through a real Kafka 0.9 broker. The reference carries the segment in a column, so every
segment has its baseline from the start: the reference CSV itself (``segments.reference_column``), or the reference
JSON ``monitor.reference`` builds in a notebook from a DataFrame of the same rows (``segment_column``). Segments that merely differ from
the average must not be called drift; when ``north``'s events move onto the class boundary from event 11,000,
``north`` alone turns ``harmful-shift`` and alone fires HarmonicHarmfulShift.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

import monitor
from monitor import telemetry as tel
from monitor.runtime.watch import HARMFUL_ALERT
from tests.integration.brokers import Kafka09Broker
from tests.integration.sidecar import Scrape, sidecar_in
from tests.integration.test_run_kafka import DRAIN_TIMEOUT_SECONDS, group_name, new_topic, produce
from tests.unit.segmented_stream import NAMES, SEGMENTS, SHIFTED, SegmentedStream, build

MODEL = "gbdt"
#: the re-timed stream's event-time span (ending a few seconds before it is produced)
SPAN_SECONDS = 40.0


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> SegmentedStream:
    return build(tmp_path_factory.mktemp("segmented"))


def retimed(path: Path) -> list[tuple[bytes, bytes]]:
    """The stream's events stamped over the last SPAN_SECONDS, in order, keyed by segment."""
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    start = time.time() * 1000 - (SPAN_SECONDS + 5) * 1000
    step = SPAN_SECONDS * 1000 / len(docs)
    out = []
    for i, doc in enumerate(docs):
        doc["ts"] = int(start + i * step)
        out.append((doc["segment"].encode(), json.dumps(doc).encode()))
    return out


def verdicts(scrape: Scrape) -> dict[str, str]:
    """segment → current verdict (the series at 1)."""
    return {
        lab["segment"]: lab["verdict"]
        for lab, v in scrape.samples.get(tel.DRIFT_VERDICT.name, [])
        if lab["model"] == MODEL and v == 1.0
    }


def firing(scrape: Scrape, alertname: str) -> set[str]:
    return {
        lab["segment"]
        for lab, v in scrape.samples.get(tel.ALERTS_FIRING.name, [])
        if lab["model"] == MODEL and lab["alertname"] == alertname and v > 0
    }


@pytest.fixture(scope="module")
def api_reference(stream: SegmentedStream) -> Path:
    """The reference JSON of the reference CSV's rows, built from a DataFrame by the Python API."""
    frame = pd.read_csv(stream.reference)
    out = stream.model.parent / "api-reference.json"
    monitor.reference(stream.model, frame, segment_column="city", feature_names=NAMES, out=out)
    return out


@pytest.mark.parametrize("built_by", ["csv", "api"])
def test_run_judges_each_segment_against_its_own_baseline(
    kafka09_broker: Kafka09Broker, stream: SegmentedStream, api_reference: Path, tmp_path: Path, built_by: str
) -> None:
    broker = kafka09_broker
    # one partition: read in event-time order, as replay reads the file. With the segments spread over partitions
    # a backlog is read partition by partition, the shared clock reaches the last event's time before north's shift
    # is seen, and a pending alert then waits for the clock to move again (new events, or the wall clock past
    # alerts.allowed_lag_seconds)
    topic = new_topic(broker, "segments", partitions=1)
    config = tmp_path / "monitor.yaml"
    reference = stream.reference if built_by == "csv" else api_reference
    settings: dict[str, Any] = {
        "models": [{"name": MODEL, "path": str(stream.model), "reference": str(reference)}],
        "sampler": {"events_per_second": 0},  # every event scored: the verdicts do not depend on the draw
        "batch": {"max_events": 100},
        "alerts": {"for_seconds": 1.0, "resolve_after_seconds": 600.0},
        "probes": {"enabled": False},
    }
    if built_by == "csv":
        settings["segments"] = {"reference_column": "city"}
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    messages = retimed(stream.shifted)
    sidecar = sidecar_in(tmp_path, broker, topic=topic, group_id=group_name(), config=config)
    with sidecar:
        sidecar.wait_ready()
        produce(broker, topic, messages)
        try:
            settled = sidecar.wait_for_metrics(
                lambda s: (
                    s.total(tel.EVENTS_SCORED_TOTAL.name, model=MODEL) >= len(messages)
                    and SHIFTED in firing(s, HARMFUL_ALERT)
                ),
                f"{len(messages)} events scored and {HARMFUL_ALERT} firing for {SHIFTED!r}",
                DRAIN_TIMEOUT_SECONDS,
                settle_seconds=1.0,
            )
        except AssertionError:
            last = sidecar.scrape()
            raise AssertionError(
                f"verdicts {verdicts(last)}; firing {firing(last, HARMFUL_ALERT)}; warming "
                f"{last.by_label(tel.SEGMENT_WARMING_UP.name, 'segment')}\n" + sidecar.log_tail(40)
            ) from None
        code, _ = sidecar.terminate()
    assert code == 0, sidecar.log_tail()
    # every segment had its own baseline from the reference: none warmed up, none judged against the average
    warming = {lab["segment"]: v for lab, v in settled.samples.get(tel.SEGMENT_WARMING_UP.name, []) if v > 0}
    assert warming == {}, warming
    seen = verdicts(settled)
    assert seen[SHIFTED] == "harmful-shift", seen
    assert {s: v for s, v in seen.items() if s != SHIFTED} == {s: "stable" for s in SEGMENTS if s != SHIFTED}, seen
    assert firing(settled, HARMFUL_ALERT) == {SHIFTED}
    assert settled.total(tel.ALERTS_FIRED_TOTAL.name, model=MODEL, alertname=HARMFUL_ALERT) == 1
