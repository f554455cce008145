"""``monitor.report`` on input a page cannot fully draw: one event, no reference, a log of which no line is valid,
10,000 inputs, labels for half the periods, a DataFrame over a DatetimeIndex. Each gives a page that says what it
could not draw, never an exception."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import monitor
from monitor.examples import linear_classifier
from monitor.reporting import Report

TS = 1_795_000_000_000


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("bad")
    model = linear_classifier(root / "m.onnx")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3))
    ref = monitor.reference(model, x, labels=(x[:, 0] > 0).astype(int), flicker_copies=4, out=root / "ref.json")
    assert ref.path is not None
    return model, ref.path, root


def log(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def empty_notes(r: Report) -> str:
    return " ".join(
        [r.data.timeline_note, r.data.drift_note, r.data.accuracy_note, r.data.periods_note, r.data.probe_note]
    )


def test_one_event(setup: tuple[Path, Path, Path]) -> None:
    model, ref, root = setup
    r = monitor.report(model, ref, log(root / "one.jsonl", [{"id": "a", "ts": TS, "features": [0.1, 0.2, 0.3]}]))
    assert r.data.n_events == 1 and r.data.periods == ()
    assert "no estimate per period: each period needs at least 30 scored events (1 here)" in r.data.periods_note
    assert '<section id="summary">' in r.html and "None" not in r.html


def test_no_reference_draws_what_the_events_alone_give_and_says_the_rest(setup: tuple[Path, Path, Path]) -> None:
    model, _, _ = setup
    r = monitor.report(model, None, np.random.default_rng(1).normal(size=(200, 3)))
    assert r.data.gamma_map is not None and r.data.signals and not r.data.drift
    assert "no reference to judge" in r.data.timeline_note and "no reference to compare" in r.data.drift_note
    assert "no reference to compare the inputs with" in r.html and "Not drawn" in r.html


def test_a_log_of_which_no_line_is_valid(setup: tuple[Path, Path, Path]) -> None:
    model, ref, root = setup
    bad = log(root / "bad.jsonl", [{"id": "a"}, {"id": "b", "ts": TS, "features": "x"}])
    for reference in (ref, None):
        r = monitor.report(model, reference, bad)
        assert r.data.n_events == 0 and r.data.n_lines == 2 and sum(r.data.invalid.values()) == 2
        assert "no event could be read" in empty_notes(r) and "invalid lines by reason" in r.html


def test_labels_for_half_the_periods(setup: tuple[Path, Path, Path]) -> None:
    model, ref, _ = setup
    x = np.random.default_rng(2).normal(size=(600, 3))
    labels = (x[:, 0] > 0).astype(float)
    labels[300:] = np.nan
    r = monitor.report(model, ref, x, labels=labels)
    assert r.data.accuracy is not None and r.data.accuracy.n_labelled == 300
    assert [p.realized is not None for p in r.data.periods] == [True] * 5 + [False] * 5
    assert "5 of 10 periods have no labels" in r.html and "labels for 300 of 600 events" in r.html
    with pytest.raises(monitor.api.DataError, match="labels: 5 values for 600 events"):
        monitor.report(model, ref, x, labels=labels[:5])


def test_ten_thousand_inputs_are_summarised(tmp_path: Path) -> None:
    from monitor.offline.report_page_inputs import CHART_INPUTS
    from tests.unit.onnx_graphs import linear_classifier as graph_classifier

    n = 10_000
    rng = np.random.default_rng(3)
    model = graph_classifier(tmp_path / "wide.onnx", rng.normal(size=(n, 2)) / 100.0, np.zeros(2))
    ref = monitor.reference(model, rng.normal(size=(60, n)), flicker_copies=2)
    r = monitor.report(model, ref, rng.normal(size=(60, n)), probe_points=0)
    assert len(r.data.drift) == n and r.html.count('class="dist"') == CHART_INPUTS
    assert f"{n - CHART_INPUTS} more inputs" in r.html and len(r.html) < 2_000_000


def test_a_dataframe_over_a_datetime_index_is_drawn_over_event_time(setup: tuple[Path, Path, Path]) -> None:
    import pandas as pd

    model, ref, _ = setup
    x = np.random.default_rng(4).normal(size=(400, 3))
    frame = pd.DataFrame(x, columns=["age", "income", "debt"], index=pd.date_range("2026-01-01", periods=400, freq="h"))
    r = monitor.report(model, ref, frame)
    assert r.data.axis == "time" and all(s.time is not None for s in r.data.signals)
    assert r.data.periods[0].start == pd.Timestamp("2026-01-01").timestamp()
    assert "event time (UTC" in r.html
    # ... and replayed as the event log it stands for: a verdict timeline over the same time axis
    assert r.data.timeline is not None and r.data.timeline.events == 400 and r.data.spans
    assert r.data.spans[0].t_start == pd.Timestamp("2026-01-01").timestamp()


def test_a_stable_verdict_beside_a_moved_input_says_why(setup: tuple[Path, Path, Path]) -> None:
    model, ref, root = setup
    x = np.random.default_rng(5).normal(size=(400, 3)) + [0.0, 0.6, 0.0]
    (root / "t.json").write_text(json.dumps({"events": 400, "changes": []}), encoding="utf-8")
    r = monitor.report(model, ref, x, timeline=root / "t.json")
    assert [d.name for d in r.data.drift if d.moved] == ["income"]
    assert [s.verdict for s in r.data.spans] == ["stable"]
    assert "the verdict stays stable although income moved over the whole log" in r.html


def test_the_probe_table_names_the_inputs_in_raw_units(tmp_path: Path) -> None:
    from tests.unit.onnx_graphs import linear_classifier as graph_classifier

    rng = np.random.default_rng(0)
    model = graph_classifier(tmp_path / "m.onnx", rng.normal(size=(5, 3)), np.zeros(3))
    ref = monitor.reference(model, rng.normal(size=(300, 5)) * 10 + 100, flicker_copies=2, out=tmp_path / "ref.json")
    events = rng.normal(size=(300, 5)) * 10 + 100
    events[:, 0] += 15
    assert ref.path is not None
    r = monitor.report(model, ref.path, events, feature_names=list("abcde"))
    assert r.data.probe is not None
    table = r.html[r.html.index('id="thresholds"') :]
    table = table[: table.index("</table>")]
    shifts = [t for t in r.data.probe.report["thresholds"] if t["feature"] is not None and t["eps_star"] is not None]
    assert shifts and "x[" not in table and "None" not in table and "all inputs" in table
    for t in shifts[:3]:  # each input by the given name, ε* in raw units beside the standardized one
        assert f'<td class="l">{"abcde"[t["feature"]]}</td>' in table and f"{t['eps_star_raw']:.3g}" in table


def test_the_gamma_map_draws_its_p_axis_from_one_over_k_as_gammamap_does(setup: tuple[Path, Path, Path]) -> None:
    model, ref, _ = setup
    r = monitor.report(model, ref, np.random.default_rng(2).normal(size=(300, 3)))
    k = r.data.gamma_map_classes
    assert k is not None and 2 <= k <= 3  # the classes the reference predicts
    section = r.html[r.html.index('<section id="gammamap"') :]
    section = section[: section.index("</section>")]
    # no P row below 1/K is drawn: the axis's lowest tick is 1/K (0.5 or about 0.33), never 0.1 or 0.2
    assert ">0.1<" not in section and ">0.2<" not in section and ">0.5<" in section
