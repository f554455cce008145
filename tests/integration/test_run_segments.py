"""End to end: ``harmonic-monitor run`` on a segmented stream judges each segment against its own baseline.

The stream of ``tests/unit/segmented_stream.py`` (a GBDT on 4 inputs, 5 segments that follow one input, 16,000
events, re-timed to now) goes through a real Kafka 0.9 broker. The reference carries the segment in a column, so every
segment has its baseline from the start: the reference CSV itself (``segments.reference_column``), or the reference
JSON ``monitor.reference`` builds in a notebook from a DataFrame of the same rows (``segment_column``). Segments that merely differ from
the average must not be called drift; when ``north``'s events move onto the class boundary from event 11,000,
``north`` alone turns ``harmful-shift`` and alone fires HarmonicHarmfulShift. With probes on, the regions are formed
within a segment, ranked by what moved, and each is probed to the end once the row budget covers it: the reports
from north's shift on are north's, with every target searched.
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
from monitor.runtime.watch import HARMFUL_ALERT, INPUT_ALERT
from tests.integration.brokers import Kafka09Broker
from tests.integration.sidecar import Scrape, Sidecar, sidecar_in
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


def run_until_firing(
    broker: Kafka09Broker,
    topic: str,
    tmp_path: Path,
    config: Path,
    messages: list[tuple[bytes, bytes]],
    alertname: str,
    segment: str,
) -> Scrape:
    """``run`` on ``topic`` until every one of ``messages`` is scored and ``alertname`` fires for ``segment``; the
    last scrape, after a clean exit."""
    sidecar = sidecar_in(tmp_path, broker, topic=topic, group_id=group_name(), config=config)
    with sidecar:
        sidecar.wait_ready()
        produce(broker, topic, messages)
        try:
            settled = sidecar.wait_for_metrics(
                lambda s: (
                    s.total(tel.EVENTS_SCORED_TOTAL.name, model=MODEL) >= len(messages)
                    and segment in firing(s, alertname)
                ),
                f"{len(messages)} events scored and {alertname} firing for {segment!r}",
                DRAIN_TIMEOUT_SECONDS,
                settle_seconds=1.0,
            )
        except AssertionError:
            last = sidecar.scrape()
            raise AssertionError(
                f"verdicts {verdicts(last)}; firing {firing(last, alertname)}; warming "
                f"{last.by_label(tel.SEGMENT_WARMING_UP.name, 'segment')}\n" + sidecar.log_tail(40)
            ) from None
        code, _ = sidecar.terminate()
    assert code == 0, sidecar.log_tail()
    return settled


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
    settled = run_until_firing(broker, topic, tmp_path, config, retimed(stream.shifted), HARMFUL_ALERT, SHIFTED)
    # every segment had its own baseline from the reference: none warmed up, none judged against the average
    warming = {lab["segment"]: v for lab, v in settled.samples.get(tel.SEGMENT_WARMING_UP.name, []) if v > 0}
    assert warming == {}, warming
    seen = verdicts(settled)
    assert seen[SHIFTED] == "harmful-shift", seen
    assert {s: v for s, v in seen.items() if s != SHIFTED} == {s: "stable" for s in SEGMENTS if s != SHIFTED}, seen
    assert firing(settled, HARMFUL_ALERT) == {SHIFTED}
    assert settled.total(tel.ALERTS_FIRED_TOTAL.name, model=MODEL, alertname=HARMFUL_ALERT) == 1


def probe_reports(sidecar: Sidecar) -> dict[str, Any]:
    """The model's part of ``GET /probes`` (empty until the first region was seen)."""
    status, body = sidecar.get("/probes")
    assert status == 200, body[:200]
    models: dict[str, dict[str, Any]] = json.loads(body)["models"]
    return models.get(MODEL, {})


def shifted_reports(sidecar: Sidecar) -> bool:
    reports = probe_reports(sidecar).get("reports", [])
    return any(r["rank"]["segment"] == SHIFTED and r["rank"]["verdict"] == "harmful-shift" for r in reports)


def test_run_probes_whole_regions_of_the_segment_that_moved(
    kafka09_broker: Kafka09Broker, stream: SegmentedStream, tmp_path: Path
) -> None:
    broker = kafka09_broker
    topic = new_topic(broker, "segments-probes", partitions=1)
    config = tmp_path / "monitor.yaml"
    settings = {
        "models": [{"name": MODEL, "path": str(stream.model), "reference": str(stream.reference)}],
        "segments": {"reference_column": "city"},
        "sampler": {"events_per_second": 0},
        "batch": {"max_events": 100},
        "alerts": {"for_seconds": 1.0, "resolve_after_seconds": 600.0},
        # a round a second (and whenever the rows earned cover the first queued region), two regions a round
        "probes": {"enabled": True, "interval_seconds": 1.0, "budget_share": 0.5, "regions_per_run": 2},
    }
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    messages = retimed(stream.shifted)
    sidecar = sidecar_in(tmp_path, broker, topic=topic, group_id=group_name(), config=config)
    with sidecar:
        sidecar.wait_ready()
        produce(broker, topic, messages)
        try:
            sidecar.wait_until(
                lambda: shifted_reports(sidecar), f"a probe report of {SHIFTED!r}", DRAIN_TIMEOUT_SECONDS
            )
        except AssertionError:
            last = sidecar.scrape()
            raise AssertionError(
                f"verdicts {verdicts(last)}; probes {json.dumps(probe_reports(sidecar), default=str)[:3000]}\n"
                + sidecar.log_tail(40)
            ) from None
        mp = probe_reports(sidecar)
        scrape = sidecar.scrape()
        code, _ = sidecar.terminate()
    assert code == 0, sidecar.log_tail()
    reports = mp["reports"]
    assert reports
    for rep in reports:  # every region probed to the end: no target left unsearched for lack of budget
        assert rep["complete"] and rep["stopped_at"] is None, rep["region"]
        assert [t["key"] for t in rep["thresholds"] if t["status"] == "not_searched"] == [], rep["region"]
        assert rep["evaluations"]["total"] <= rep["plan"]["total"]
        assert rep["region"]["segment"] == rep["rank"]["segment"] in SEGMENTS  # one segment a region
    # while the shifted segment is harmful, only its regions are probed: every report from its first one on is its
    first = min(r["probed_at"] for r in reports if r["rank"]["verdict"] == "harmful-shift")
    since = [r for r in reports if r["probed_at"] >= first]
    assert {r["rank"]["segment"] for r in since} == {SHIFTED}, [(r["rank"], r["probed_at"]) for r in reports]
    assert mp["regions"][0]["segment"] == SHIFTED  # ranked by what moved
    assert all(r["segment"] in SEGMENTS for r in mp["regions"])
    completed = scrape.total(tel.PROBE_REGIONS_TOTAL.name, model=MODEL, outcome="completed")
    assert completed >= len(reports)
    spent = scrape.value(tel.PROBE_BUDGET_ROWS.name, state="spent")
    earned = scrape.value(tel.PROBE_BUDGET_ROWS.name, state="earned")
    assert spent is not None and earned is not None and 0 < spent <= earned


def test_a_small_segment_is_tested_from_its_200th_event(
    kafka09_broker: Kafka09Broker, stream: SegmentedStream, tmp_path: Path
) -> None:
    """A segment whose first events arrive with an input moved is tested from its 200th scored event
    (``drift.first_test_events``) on the events it has, not after a full ``drift.window``: 400 of ``west``'s events,
    ``x3`` moved by 2, fire HarmonicInputDrift with ``x3`` the input that moved most, though the window (1,000) is
    never full."""
    broker = kafka09_broker
    topic = new_topic(broker, "small-segment", partitions=1)
    config = tmp_path / "monitor.yaml"
    settings: dict[str, Any] = {
        "models": [{"name": MODEL, "path": str(stream.model), "reference": str(stream.reference)}],
        "segments": {"reference_column": "city"},
        "sampler": {"events_per_second": 0},
        "batch": {"max_events": 100},
        "alerts": {"for_seconds": 1.0, "resolve_after_seconds": 600.0},
        "probes": {"enabled": False},
    }
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    docs = [json.loads(line) for line in stream.stationary.read_text(encoding="utf-8").splitlines() if line.strip()]
    west = [d for d in docs if d["segment"] == "west"][:400]
    start = time.time() * 1000 - 10_000
    messages = []
    for i, doc in enumerate(west):
        doc["features"][3] = round(doc["features"][3] + 2.0, 6)
        doc["ts"] = int(start + 20 * i)
        doc.pop("prediction")
        messages.append((b"west", json.dumps(doc).encode()))
    settled = run_until_firing(broker, topic, tmp_path, config, messages, INPUT_ALERT, "west")
    assert verdicts(settled)["west"] in {"input-shift", "harmful-shift"}
    ks = {
        lab["feature"]: v
        for lab, v in settled.samples.get(tel.FEATURE_DRIFT_STATISTIC.name, [])
        if lab["model"] == MODEL and lab["segment"] == "west"
    }
    assert max(ks, key=ks.__getitem__) == "x3", ks
