"""``harmonic-monitor replay`` (monitor/cli/replay.py): the ``run`` pipeline over a JSON-lines file, in event time.

The stream is the demo's (monitor/cli/demo_data.py: a logistic regression on breast-cancer data): a stationary
part, then the harmful shift toward the decision boundary, with invalid and blank lines in the stationary part.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.cli.demo_data import build_demo

#: where the invalid lines go (0-based line numbers in the file), and how many shifted events follow
BAD_AT = 500
HARMFUL_EVENTS = 2000


@dataclass(frozen=True)
class Stream:
    model: Path
    reference: Path
    events: Path
    config: Path
    lines: int  # non-blank lines
    first_shifted: int  # 0-based line of the first harmful-shift event


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Stream:
    tmp = tmp_path_factory.mktemp("replay")
    data = build_demo(tmp / "demo", events=6000, seed=0)
    stationary = data.phases["stationary"]
    bad = [b"not json", b'{"ts": 1795000000000, "model": "demo"}', b"[1, 2]"]
    lines = [*stationary[:BAD_AT], *bad, b"", *stationary[BAD_AT:]]
    first_shifted = len(lines)
    lines += data.phases["harmful-shift"][:HARMFUL_EVENTS]
    events = tmp / "events.jsonl"
    events.write_bytes(b"\n".join(lines) + b"\n")
    config = tmp / "monitor.yaml"
    # alerts held 1 s of event time (100 events at the demo's 10 ms spacing) fire within the replay
    config.write_text("alerts:\n  for_seconds: 1\n  resolve_after_seconds: 5\n", encoding="utf-8")
    return Stream(data.model_path, data.reference_path, events, config, len(lines) - 1, first_shifted)


def replay(s: Stream, timeline: Path, *extra: str) -> int:
    return main(
        [
            "replay",
            "--model",
            str(s.model),
            "--model-name",
            "demo",
            "--reference",
            str(s.reference),
            "--events",
            str(s.events),
            "--config",
            str(s.config),
            "--timeline",
            str(timeline),
            *extra,
        ]
    )


@pytest.fixture(scope="module")
def first_run(stream: Stream, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], str, Path]:
    """One replay with the default (temporary) state dir: the timeline, stderr, and where temp files would go."""
    tmp = tmp_path_factory.mktemp("replay_run")
    out = tmp / "timeline.json"
    scratch = tmp / "scratch"
    scratch.mkdir()
    err = io.StringIO()
    saved = tempfile.tempdir
    tempfile.tempdir = str(scratch)  # the replay's temporary state dir goes here, to check it is removed
    try:
        with contextlib.redirect_stderr(err):
            assert replay(stream, out) == 0
    finally:
        tempfile.tempdir = saved
    return json.loads(out.read_text(encoding="utf-8")), err.getvalue(), scratch


def test_timeline_has_the_fixed_keys_and_decides_the_shift_after_it_starts(
    first_run: tuple[dict[str, object], str, Path], stream: Stream
) -> None:
    doc, _, _ = first_run
    assert set(doc) == {"events", "changes", "alerts", "crossings", "accuracy"}
    assert doc["events"] == stream.lines
    changes = doc["changes"]
    assert isinstance(changes, list) and changes
    for c in changes:
        assert {"index", "ts", "verdict"} <= set(c)
        assert isinstance(c["index"], int) and 0 <= c["index"] <= stream.lines
    shifted = [c for c in changes if c["verdict"] != "stable"]
    assert shifted, changes
    # nothing before the shift: the first non-stable verdict is decided at or after the first shifted line
    assert stream.first_shifted <= shifted[0]["index"] < stream.first_shifted + HARMFUL_EVENTS
    assert shifted[0]["verdict"] == "harmful-shift"
    alerts = doc["alerts"]
    assert isinstance(alerts, list)
    assert any(a["alertname"] == "HarmonicHarmfulShift" and a["state"] == "firing" for a in alerts), alerts
    for a in alerts:
        assert a["state"] in ("firing", "resolved")
        # each says what fired (or what it resolved) in one line, and the detectors' clauses once
        assert a["summary"].startswith(f"{a['alertname']} " if a["state"] == "firing" else "resolved: ")
        assert len(a["summary"]) <= 200 and a["detail"], a
        assert a["index"] >= shifted[0]["index"]  # held for_seconds after the verdict


def test_invalid_lines_are_counted_and_skipped(first_run: tuple[dict[str, object], str, Path]) -> None:
    _, err, _ = first_run
    summary = next(line for line in err.splitlines() if line.startswith("replay: "))
    assert "3 invalid" in summary, summary
    assert "not_json: 1" in summary and "missing_field: 1" in summary, summary
    # every valid event was scored: the invalid lines did not stop the replay
    assert f"{6000 // 3 + HARMFUL_EVENTS} scored" in summary, summary


def test_no_state_dir_is_left_behind(first_run: tuple[dict[str, object], str, Path]) -> None:
    _, _, scratch = first_run
    assert list(scratch.iterdir()) == []


def test_same_file_same_timeline_and_state_dir_kept(
    first_run: tuple[dict[str, object], str, Path], stream: Stream, tmp_path: Path
) -> None:
    out = tmp_path / "again.json"
    state = tmp_path / "state"
    assert replay(stream, out, "--state-dir", str(state)) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == first_run[0]
    assert (state / "state.json").is_file()


def test_a_file_of_invalid_lines_replays_to_an_empty_timeline(
    stream: Stream, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "bad.jsonl"
    events.write_text("nope\n\n{}\n", encoding="utf-8")
    out = tmp_path / "t.json"
    bad = Stream(stream.model, stream.reference, events, stream.config, 2, 0)
    assert replay(bad, out) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == {
        "events": 2,
        "changes": [],
        "alerts": [],
        "crossings": [],
        "accuracy": [],
    }
    assert "2 invalid" in capsys.readouterr().err


def test_a_missing_events_file_is_an_error(stream: Stream, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = Stream(stream.model, stream.reference, tmp_path / "none.jsonl", stream.config, 0, 0)
    assert replay(missing, tmp_path / "t.json") == 2
    assert "does not exist" in capsys.readouterr().err


def test_indices_are_lines_of_the_file(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from monitor.cli.replay import Timeline, read_lines

    path = tmp_path / "e.jsonl"
    path.write_bytes(b"a\n\nb\r\n \n\nc")
    records, numbers = read_lines(path)
    assert records == [b"a", b"b", b"c"] and numbers == [0, 2, 5]
    timeline = Timeline(numbers, last_read=lambda: 1)
    assert timeline._index(SimpleNamespace(origin=("replay", 0, 2))) == 5
    assert timeline._index(None) == 2  # between batches: the last line read


@pytest.mark.parametrize("skew", [None, 1e12], ids=["default-skew", "unbounded"])
def test_one_event_stamped_in_the_year_3000_before_the_shift_does_not_stop_the_alert(
    stream: Stream, tmp_path: Path, skew: float | None
) -> None:
    """The clock is bounded to ``alerts.max_event_skew_seconds`` ahead of the watermark: the stray event is placed at
    the watermark and the shift still fires. Unbounded (the old behaviour), the one event moves the clock past every
    window and the shift fires nothing."""
    lines = stream.events.read_bytes().split(b"\n")
    doc = json.loads(lines[100])
    doc.update(id="from-the-future", ts=32_503_680_000_000)  # 3000-01-01 in ms
    lines.insert(101, json.dumps(doc).encode())
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(lines))
    config = tmp_path / "monitor.yaml"
    extra = f"  max_event_skew_seconds: {skew}\n" if skew is not None else ""
    config.write_text(stream.config.read_text(encoding="utf-8") + extra, encoding="utf-8")
    out = tmp_path / "timeline.json"
    poisoned = Stream(stream.model, stream.reference, events, config, stream.lines + 1, stream.first_shifted + 1)
    with contextlib.redirect_stderr(io.StringIO()):
        assert replay(poisoned, out) == 0
    alerts = json.loads(out.read_text(encoding="utf-8"))["alerts"]
    fired = any(a["alertname"] == "HarmonicHarmfulShift" and a["state"] == "firing" for a in alerts)
    assert fired is (skew is None), alerts
