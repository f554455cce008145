"""``replay`` on a segmented stream: a GBDT on 4 inputs, 5 segments that follow one input, 16,000 events
(tests/unit/segmented_stream.py). Every segment is judged against its own baseline — from a reference that carries
the segment, or learned from the segment's first events — so a stationary stream changes no verdict and fires no
alert, and when one segment's events move onto the class boundary from event 11,000 that segment, and only that one,
is called harmful-shift within 1,500 events.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from monitor.cli import main
from tests.unit.segmented_stream import SHIFT_AT, SHIFTED, SegmentedStream, build

pytestmark = pytest.mark.slow

#: the harmful verdict must come within this many events of the shift
WITHIN = 1500


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> SegmentedStream:
    return build(tmp_path_factory.mktemp("segmented"))


@pytest.fixture(scope="module")
def config(stream: SegmentedStream) -> Path:
    path = stream.model.parent / "monitor.yaml"
    # micro-batches of 100 events (a change lands within 100 events of its cause); alerts held 1 s of event time
    path.write_text(
        "alerts:\n  for_seconds: 1\n  resolve_after_seconds: 5\nbatch:\n  max_events: 100\n", encoding="utf-8"
    )
    return path


@pytest.fixture(scope="module")
def segment_json(stream: SegmentedStream) -> Path:
    out = stream.model.parent / "reference.json"
    with contextlib.redirect_stderr(io.StringIO()):
        assert (
            main(
                [
                    "reference",
                    "--model",
                    str(stream.model),
                    "--data",
                    str(stream.reference),
                    "--segment-column",
                    "city",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
    return out


def replay(stream: SegmentedStream, config: Path, events: Path, reference: Path, *extra: str) -> dict[str, Any]:
    out = events.with_suffix(f".{reference.stem}.{len(extra)}.timeline.json")
    args = ["replay", "--model", str(stream.model), "--model-name", "gbdt", "--reference", str(reference)]
    args += ["--events", str(events), "--config", str(config), "--timeline", str(out), *extra]
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(args) == 0
    doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return doc


def assert_quiet(doc: dict[str, Any]) -> None:
    assert doc["events"] == 16_000
    assert doc["changes"] == [] and doc["alerts"] == [], (doc["changes"], doc["alerts"])


def assert_only_the_shifted_segment(doc: dict[str, Any]) -> None:
    changes = doc["changes"]
    assert {c["segment"] for c in changes} == {SHIFTED}, changes
    harmful = [c for c in changes if c["verdict"] == "harmful-shift"]
    assert harmful, changes
    assert changes[0]["index"] >= SHIFT_AT and harmful[0]["index"] < SHIFT_AT + WITHIN, changes
    assert {a["segment"] for a in doc["alerts"]} == {SHIFTED}, doc["alerts"]


def test_reference_json_with_segment_baselines(stream: SegmentedStream, config: Path, segment_json: Path) -> None:
    assert_quiet(replay(stream, config, stream.stationary, segment_json))
    assert_only_the_shifted_segment(replay(stream, config, stream.shifted, segment_json))


def test_reference_csv_with_segment_column(stream: SegmentedStream, config: Path) -> None:
    # the shifted stream's first 11,000 events are stationary: nothing may change before the shift
    assert_only_the_shifted_segment(
        replay(stream, config, stream.shifted, stream.reference, "--segment-column", "city")
    )


def test_warm_up_baselines(stream: SegmentedStream, config: Path) -> None:
    # a model-wide reference without segments: each segment learns its own baseline from its first events
    assert_quiet(replay(stream, config, stream.stationary, stream.reference_plain))
    assert_only_the_shifted_segment(replay(stream, config, stream.shifted, stream.reference_plain))
