"""``harmonic-monitor report`` / ``monitor.report``: the page is self-contained, renders in headless Chromium (Debian's
``chromium`` package, installed by scripts/test.sh) without console errors, and every section draws the typed
results it was given — or says why it is empty."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import monitor
from monitor.cli import main
from monitor.cli.demo_data import PHASES, build_demo
from monitor.examples import FEATURES, linear_classifier
from monitor.reporting import SECTIONS, Report

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
)


@dataclass(frozen=True)
class Demo:
    model: Path
    reference: Path
    events: Path
    labels: Path
    n_events: int


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The demo's model, labelled reference and 3000 events in three phases (stationary, input shift, harmful
    shift) as a .jsonl log with three invalid lines (one of them for a null input), and the events' true classes."""
    root = tmp_path_factory.mktemp("report")
    d = build_demo(root / "demo", events=3000, seed=0)
    lines = [line for phase in PHASES for line in d.phases[phase]]
    labels = [v for phase in PHASES for v in d.labels[phase]]
    events = root / "events.jsonl"
    null_input = json.dumps({"id": "null-input", "ts": 1, "features": [None] + [1.0] * (len(d.feature_names) - 1)})
    events.write_bytes(
        b"\n".join([*lines, b"{not json", b'{"id": "no-features", "ts": 1}', null_input.encode()]) + b"\n"
    )
    np.save(root / "labels.npy", np.asarray(labels))
    assert d.labelled_reference_path is not None
    return Demo(d.model_path, d.labelled_reference_path, events, root / "labels.npy", len(lines))


@pytest.fixture(scope="module")
def report(demo: Demo, tmp_path_factory: pytest.TempPathFactory) -> Report:
    out = tmp_path_factory.mktemp("page") / "report.html"
    return monitor.report(demo.model, demo.reference, demo.events, out=out, labels=np.load(demo.labels))


@pytest.fixture(scope="module")
def dom(report: Report, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """The report page as Chromium built it, and the console messages it logged."""
    assert report.path is not None
    return render(report.path, tmp_path_factory.mktemp("dom"), dump=True)


# ------------------------------------------------------------------------------------------------ chromium


def chromium() -> str:
    path = shutil.which("chromium")
    assert path, "headless Chromium is needed: apt-get install -y chromium (scripts/test.sh installs it)"
    return path


def render(page: Path, tmp: Path, *, dump: bool) -> tuple[str, list[str]]:
    """Chromium's DOM dump (or a screenshot at tmp/shot.png) and the console messages it logged."""
    args = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp / ('ud-dump' if dump else 'ud-shot')}"]
    args += ["--dump-dom"] if dump else ["--window-size=1000,3000", f"--screenshot={tmp / 'shot.png'}"]
    done = subprocess.run([*args, page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def png_ink(path: Path) -> float:
    """The share of a PNG's filtered scanline bytes that are not zero: 0 for a page of one colour (every PNG filter
    predicts a uniform image exactly, whichever filter the encoder picked per row), well above 0 once anything is
    drawn. Reads 8-bit RGB/RGBA, as Chromium writes its screenshots."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    rows = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, width * channels + 1)
    residuals = rows[1:, 1 + channels :]  # the first row and pixel are predicted from nothing
    return float(np.count_nonzero(residuals)) / residuals.size


class Points(HTMLParser):
    """Every element of class ``point`` (with its attributes) under its section, and each section's empty note."""

    def __init__(self) -> None:
        super().__init__()
        self.section: str | None = None
        self.points: dict[str, list[dict[str, str]]] = {s: [] for s in SECTIONS}
        self.empty: dict[str, str] = {}
        self.svgs: dict[str, int] = dict.fromkeys(SECTIONS, 0)
        self._in_empty = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "section":
            self.section = a.get("id")
        if self.section is None:
            return
        if tag == "svg":
            self.svgs[self.section] += 1
        if "point" in a.get("class", "").split():
            self.points[self.section].append(a)
        if tag == "rect" and self.section == "gammamap" and "stroke" in a:
            self.points[self.section].append(a)  # the Gamma Map's cells
        self._in_empty = tag == "p" and a.get("class") == "empty"

    def handle_data(self, data: str) -> None:
        if self._in_empty and self.section is not None:
            self.empty[self.section] = self.empty.get(self.section, "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self.section = None
        if tag == "p":
            self._in_empty = False


# ------------------------------------------------------------------------------------------------ tests


def test_the_page_is_self_contained(report: Report) -> None:
    page = report.html
    assert all(f'<section id="{s}">' in page for s in SECTIONS)
    assert "<script" not in page and " src=" not in page and " href=" not in page and "@import" not in page
    assert page.count("http") == page.count('xmlns="http://www.w3.org/2000/svg"')  # no address but the SVG namespace


def test_chromium_renders_it_with_no_console_error_and_a_picture_in_each_section(
    report: Report, dom: tuple[str, list[str]], tmp_path: Path
) -> None:
    assert report.path is not None
    assert dom[1] == []
    parsed = Points()
    parsed.feed(dom[0])
    for section in SECTIONS[1:]:  # every section but the summary draws
        assert parsed.svgs[section] >= 1 and parsed.points[section], (section, parsed.empty.get(section))
    _, console = render(report.path, tmp_path, dump=False)
    assert console == [] and png_ink(tmp_path / "shot.png") > 0.01


def test_the_harness_sees_console_errors_and_blank_screens(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('boom'); missing();</script></body></html>")
    _, console = render(bad, tmp_path, dump=False)
    assert any("boom" in c for c in console) and any("missing is not defined" in c for c in console)
    assert png_ink(tmp_path / "shot.png") < 1e-4  # a blank page reads as blank


def test_the_figures_equal_the_typed_results(report: Report, dom: tuple[str, list[str]]) -> None:
    page = dom[0]
    p = Points()
    p.feed(page)
    d = report.data
    # verdict timeline: one bar per span, as the replay decided (and the shifts were found)
    spans = [
        (a["data-segment"], a["data-verdict"], int(a["data-start"]), int(a["data-end"])) for a in p.points["verdicts"]
    ]
    assert spans == [(s.segment, s.verdict, s.start, s.end) for s in d.spans]
    assert {s.verdict for s in d.spans} >= {"input-shift", "harmful-shift"}
    # signals: every binned mean, in order
    ys = [float(a["data-y"]) for a in p.points["signals"]]
    assert ys == [float(v) for s in d.signals for v in s.mean]
    # ... over event time: each bin at its events' mean timestamp, the bins in event-time order
    assert all(s.time is not None and s.time.size == s.mean.size for s in d.signals)
    times = [float(a["data-time"]) for a in p.points["signals"]]
    assert times == [float(v) for s in d.signals if s.time is not None for v in s.time]
    assert all(s.time is not None and bool(np.all(np.diff(s.time) >= 0)) for s in d.signals)
    assert times[0] >= 1_700_000_000 and "event time: seconds after" in page
    # Gamma Map: the cells hold the typed map's counts
    assert d.gamma_map is not None and d.gamma_map.total == d.n_events
    assert f'data-total="{d.gamma_map.total}"' in page
    # drift: one bar per input, value = KS D
    drift = {a["data-name"]: float(a["data-value"]) for a in p.points["drift"]}
    assert drift == {x.name: x.statistic for x in d.drift}
    # accuracy: each method's estimate and interval, and the realized accuracy
    assert d.accuracy is not None and d.accuracy.realized is not None
    acc = {a["data-method"]: float(a["data-estimate"]) for a in p.points["accuracy"] if "data-method" in a}
    assert acc == {k: v["estimate"] for k, v in d.accuracy.methods.items()}
    realized = [float(a["data-realized"]) for a in p.points["accuracy"] if "realized" in a.get("class", "").split()]
    assert realized == [d.accuracy.realized]
    # the estimate per period: a point per period with its band, the realized accuracy of each (all labelled)
    periods = [a for a in p.points["accuracy"] if "period" in a.get("class", "").split()]
    assert [(float(a["data-estimate"]), float(a["data-lower"]), float(a["data-upper"])) for a in periods] == [
        (x.estimate, x.lower, x.upper) for x in d.periods
    ]
    assert len(d.periods) == 10 and all(x.realized is not None for x in d.periods)
    assert [float(a["data-start"]) for a in periods] == [x.start for x in d.periods]  # event time
    # one time axis: the verdict spans are placed at event times too, and the changes say when
    assert all(np.isfinite(s.t_start) for s in d.spans) and "UTC (line " in page
    # ... at the line an editor shows: the timeline's 0-based index + 1
    assert d.timeline is not None
    indices = {int(c["index"]) for c in d.timeline.changes}
    at = next(i for i in sorted(indices) if i not in {j + 1 for j in indices})
    assert f"UTC (line {at + 1})" in page and f"UTC (line {at})" not in page
    # probes: the MRI of the flagged events
    assert d.probe is not None
    assert {a["data-perturbation"]: float(a["data-value"]) for a in p.points["probes"]} == d.probe.mri
    # invalid lines are counted by reason and listed, and the one refused for a null input by that input's name
    assert d.invalid == {"not_json": 1, "missing_field": 1, "bad_type": 1} and "not_json: 1" in page
    assert d.invalid_inputs == {"mean radius: missing": 1} and "invalid values by input: mean radius: missing 1" in page


def test_the_cli_writes_the_page_and_max_events_cuts_the_log(demo: Demo, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    args = ["report", "--model", str(demo.model), "--reference", str(demo.reference), "--events", str(demo.events)]
    assert main([*args, "--out", str(out), "--max-events", "900", "--probe-points", "5"]) == 0
    page = out.read_text(encoding="utf-8")
    assert all(f'<section id="{s}">' in page for s in SECTIONS)
    assert "900 events scored of 900 lines" in page


def test_sections_with_nothing_to_draw_say_why(tmp_path: Path) -> None:
    model = linear_classifier(tmp_path / "m.onnx")
    rng = np.random.default_rng(0)
    ref = monitor.reference(model, rng.normal(size=(200, 3)), flicker_copies=4)  # no labels
    r = monitor.report(model, ref, rng.normal(size=(300, 3)), out=tmp_path / "r.html")
    assert r.path is not None
    dom, console = render(r.path, tmp_path, dump=True)
    p = Points()
    p.feed(dom)
    assert console == []
    assert "events are rows" in p.empty["verdicts"] and "no fitted estimator" in p.empty["accuracy"]
    assert p.points["signals"] and p.points["drift"] and p.points["gammamap"]
    assert r.data.timeline is None and r.data.accuracy is None
    # a reference JSON (or ReferenceResult) keeps its Gamma Map: drawn beside the live one as rows' is
    assert r.data.reference_gamma_map is not None and r.data.reference_gamma_map.total == 200
    saved = ref.save(tmp_path / "ref.json")
    assert json.loads(saved.read_text())["reference"]["gamma_map"]["total"] == 200
    from_json = monitor.report(model, saved, rng.normal(size=(300, 3)))
    assert from_json.data.reference_gamma_map is not None and from_json.data.reference_gamma_map.total == 200
    assert "reference (n=200)" in from_json.html
    # rows without timestamps: the signals over the line
    assert all(s.time is None for s in r.data.signals) and 'data-axis="line"' in r.html
    rows_ref = monitor.report(model, rng.normal(size=(200, 3)), rng.normal(size=(300, 3)))
    assert rows_ref.data.reference_gamma_map is not None and rows_ref.data.reference_gamma_map.total == 200
    assert "reference (n=200)" in rows_ref.html and "live (n=300)" in rows_ref.html
    assert len(FEATURES) == len(r.data.drift) and [x.name for x in r.data.drift] == list(FEATURES)


def test_the_replay_command_gives_the_timeline_the_page_draws(demo: Demo, report: Report, tmp_path: Path) -> None:
    args = ["--model", str(demo.model), "--reference", str(demo.reference), "--events", str(demo.events)]
    (tmp_path / "c.yaml").write_text("batch:\n  max_events: 100\n")  # the page's replay batches (REPLAY_BATCH)
    assert main(["replay", *args, "--config", str(tmp_path / "c.yaml"), "--timeline", str(tmp_path / "t.json")]) == 0
    assert report.data.timeline is not None
    assert report.data.timeline.document() == json.loads((tmp_path / "t.json").read_text())
    assert report.data.timeline.invalid == {"not_json": 1, "missing_field": 1, "bad_type": 1}


def test_a_regressor_over_rows_with_a_given_timeline(tmp_path: Path) -> None:
    from tests.unit.onnx_graphs import linear_regressor

    model = linear_regressor(tmp_path / "reg.onnx", [1.0, 2.0])
    rng = np.random.default_rng(0)
    doc = {"events": 50, "changes": [{"index": 20, "verdict": "input-shift", "segment": "a", "detectors": ["x"]}]}
    (tmp_path / "t.json").write_text(json.dumps(doc))
    r = monitor.report(
        model, rng.normal(size=(100, 2)), rng.normal(size=(80, 2)), timeline=tmp_path / "t.json", max_events=50
    )
    d = r.data
    assert d.n_events == 50 and d.gamma_map is None and "regressor" in d.gamma_map_note
    assert d.accuracy is None and "for classifiers" in d.accuracy_note
    assert [(s.segment, s.verdict, s.start, s.end) for s in d.spans] == [
        ("a", "stable", 0, 20),
        ("a", "input-shift", 20, 50),
    ]
    assert '<section id="gammamap"><h2>Gamma Map</h2>\n<p class="empty">' in r.html
    with pytest.raises(monitor.api.DataError, match="cannot read the timeline"):
        monitor.report(model, rng.normal(size=(100, 2)), rng.normal(size=(80, 2)), timeline=tmp_path / "absent.json")


def test_the_cli_names_a_missing_labels_file(demo: Demo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["report", "--model", str(demo.model), "--reference", str(demo.reference), "--events", str(demo.events)]
    assert main([*args, "--out", str(tmp_path / "r.html"), "--labels", str(tmp_path / "absent.npy")]) == 2
    assert "--labels '" in capsys.readouterr().err and not (tmp_path / "r.html").exists()


# ------------------------------------------------------------------------------------------------ as a person reads it


def visible_text(dom: str) -> str:
    """The page's text as a reader sees it (tags and attributes dropped)."""

    class Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.parts: list[str] = []

        def handle_data(self, data: str) -> None:
            self.parts.append(data)

    t = Text()
    t.feed(dom)
    return " ".join(t.parts)


COLOURS = ("red", "green", "blue")


def colour_rows(
    rng: np.random.Generator, n: int, shift_from: int | None = None
) -> tuple[list[dict[str, object]], list[int]]:
    """Rows of the zoo's ColumnTransformer classifier (x1..x3 and the string input ``colour``) and their classes
    (the zoo's own rule); from ``shift_from`` on, every colour is red."""
    rows, classes = [], []
    for i in range(n):
        x = rng.normal(size=3)
        c = int(rng.integers(0, 3)) if shift_from is None or i < shift_from else 0
        s = x @ np.array([[1.0, -1.0, 0.0], [0.0, 1.0, -1.0], [0.5, 0.5, -1.0]])
        s = s + np.array([[0.0, 0.5, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.5]])[c]
        rows.append({"x1": float(x[0]), "x2": float(x[1]), "x3": float(x[2]), "colour": COLOURS[c]})
        classes.append(int(np.argmax(s)))
    return rows, classes


@pytest.fixture(scope="module")
def categorical(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """A model with a string input ``colour``: a labelled reference, a log of 1,500 events whose colour is all red
    from event 800, labels for the first half of the events only."""
    from tests.model_zoo import build_column_transformer_classifier

    root = tmp_path_factory.mktemp("categorical")
    zoo = build_column_transformer_classifier(root)
    rng = np.random.default_rng(1)
    ref_rows, ref_y = colour_rows(rng, 1500)
    import csv

    with (root / "ref.csv").open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["x1", "x2", "x3", "colour"])
        writer.writeheader()
        writer.writerows(ref_rows)
    ref = monitor.reference(zoo.path, root / "ref.csv", labels=np.asarray(ref_y), out=root / "ref.json")
    rows, y = colour_rows(rng, 1500, shift_from=800)
    lines = [json.dumps({"id": f"e{i}", "ts": 1_795_000_000_000 + 1000 * i, "features": r}) for i, r in enumerate(rows)]
    (root / "events.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    labels = np.asarray(y, dtype=np.float64)
    labels[750:] = np.nan  # labels arrive for the first half only
    assert ref.path is not None
    return monitor.report(zoo.path, ref.path, root / "events.jsonl", labels=labels, out=root / "report.html")


def test_a_categorical_model_shows_each_input_its_categories_and_the_period_chart(
    categorical: Report, tmp_path: Path
) -> None:
    assert categorical.path is not None
    dom, console = render(categorical.path, tmp_path, dump=True)
    assert console == []
    text = visible_text(dom)
    d = categorical.data
    # every input by name, the string input among them, with its categories drawn as bars of both distributions
    assert {x.name for x in d.drift} == {"x1", "x2", "x3", "colour"}
    assert all(f'data-input="{n}"' in dom for n in ("x1", "x2", "x3", "colour")) and "colour" in text
    colour = next(x for x in d.drift if x.name == "colour")
    assert colour.kind == "categorical" and colour.test == "chi-square" and colour.moved
    assert set(colour.bins) >= set(COLOURS)
    bars = [a for a in Points_all(dom) if a.get("data-category")]
    assert {a["data-category"] for a in bars} >= set(COLOURS) and {a["data-who"] for a in bars} == {
        "reference",
        "current",
    }
    assert all(c in text for c in COLOURS)
    # moved inputs come first, the categorical one (all red) ahead of the floats that did not move
    assert d.drift and sorted(d.drift, key=lambda x: not x.moved)[0].moved
    assert "colour (TV" in text and "of 4 inputs" in text
    # the estimate per period with its band, the realized line where labels exist (the first half) and not after
    assert len(d.periods) == 10 and 'aria-label="estimated accuracy per period"' in dom
    assert [p.realized is not None for p in d.periods] == [True] * 5 + [False] * 5
    assert "5 of 10 periods have no labels" in text
    # the verdict left stable on the held input and the page says which inputs and what to do
    assert any("held_inputs" in s.detectors for s in d.spans), d.spans
    # every detector turning on is listed, not only those at a verdict change
    assert 'id="crossings"' in dom and d.timeline is not None and d.timeline.crossings
    assert "What to do" in text and "Verdict per segment" in text
    # a reader never sees a bare None or an unnamed input
    assert "None" not in text and "input[" not in text


def Points_all(dom: str) -> list[dict[str, str]]:
    """Every element's attributes, in page order."""

    class All(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.attrs: list[dict[str, str]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.attrs.append({k: v or "" for k, v in attrs})

    a = All()
    a.feed(dom)
    return a.attrs


def test_an_image_model_is_summarised_by_name_not_drawn_input_by_input(tmp_path: Path) -> None:
    """784 inputs (a 28×28 image) given names by the caller: the top inputs by effect are drawn, the rest counted;
    the probe table and the drift table use the given names, never ``input[13]``."""
    from monitor.offline.report_page_inputs import CHART_INPUTS, TABLE_INPUTS
    from tests.unit.onnx_graphs import linear_classifier as graph_classifier

    n = 784
    rng = np.random.default_rng(2)
    w = rng.normal(size=(n, 3)) / np.sqrt(n)
    model = graph_classifier(tmp_path / "image.onnx", w, np.zeros(3))
    names = [f"px_{i // 28}_{i % 28}" for i in range(n)]
    ref = monitor.reference(model, rng.normal(size=(300, n)), flicker_copies=2)
    events = rng.normal(size=(300, n))
    events[:, :20] += 1.5  # the top rows of the image brighten
    r = monitor.report(model, ref, events, feature_names=names, out=tmp_path / "image.html", probe_points=3)
    assert r.path is not None
    dom, console = render(r.path, tmp_path, dump=True)
    text = visible_text(dom)
    assert console == []
    assert [x.name for x in r.data.drift][:3] == names[:3] and len(r.data.drift) == n
    assert dom.count('class="dist"') == CHART_INPUTS and f"{n - CHART_INPUTS} more inputs" in text
    table = dom[dom.index('id="drift-table"') :]
    assert table[: table.index("</table>")].count("<tr>") == TABLE_INPUTS + 1  # the table stops at TABLE_INPUTS rows
    moved = {x.name for x in r.data.drift if x.moved}
    assert moved and moved <= set(names[:20]) and f"{len(moved)} of {n} inputs moved" in text
    assert "input[" not in text and "None" not in text
    with pytest.raises(monitor.api.DataError, match="expected 784 names"):
        monitor.report(model, ref, events[:10], feature_names=names[:3])


def test_the_cli_takes_feature_names(tmp_path: Path) -> None:
    from tests.unit.onnx_graphs import linear_classifier as graph_classifier

    rng = np.random.default_rng(3)
    model = graph_classifier(tmp_path / "m.onnx", rng.normal(size=(3, 2)), np.zeros(2))
    np.save(tmp_path / "ref.npy", rng.normal(size=(200, 3)))
    np.save(tmp_path / "ev.npy", rng.normal(size=(200, 3)) + [0.0, 0.0, 2.0])
    args = ["report", "--model", str(model), "--reference", str(tmp_path / "ref.npy"), "--events"]
    args += [str(tmp_path / "ev.npy"), "--out", str(tmp_path / "r.html"), "--feature-names", "age, income, debt"]
    assert main(args) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'data-name="debt"' in page and 'data-name="income"' in page and "input[" not in page


def test_a_move_in_one_segment_is_shown_beside_the_pooled_figures(tmp_path: Path) -> None:
    """The per-input drift pools every event; where a segment's verdict names inputs, the page shows those inputs
    over that segment's events alone, and the summary says the pooled figure can hide them."""
    from monitor.model.onnx import OnnxModel

    model = linear_classifier(tmp_path / "m.onnx")
    name = OnnxModel(str(model)).feature_names[0]
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2000, 3))
    segment = np.where(np.arange(2000) % 10 == 0, "eu", "us")
    x[segment == "eu", 0] += 1.5
    with (tmp_path / "ev.jsonl").open("w") as fh:
        for i, (row, s) in enumerate(zip(x.tolist(), segment, strict=True)):
            fh.write(json.dumps({"id": str(i), "ts": 1_700_000_000_000 + 1000 * i, "features": row, "segment": s}))
            fh.write("\n")
    change = {"index": 1500, "verdict": "input-shift", "segment": "eu", "detectors": ["features_ks"]}
    doc = {"events": 2000, "changes": [change | {"features": [name]}]}
    (tmp_path / "t.json").write_text(json.dumps(doc))
    ref = rng.normal(size=(2000, 3))
    r = monitor.report(model, ref, tmp_path / "ev.jsonl", timeline=tmp_path / "t.json", probe_points=0)
    (sd,) = r.data.segment_drift
    assert (sd.segment, sd.events, sd.baseline, [d.name for d in sd.drift]) == ("eu", 200, "model-wide", [name])
    pooled = next(d for d in r.data.drift if d.name == name)
    assert sd.drift[0].moved and sd.drift[0].statistic > 2 * pooled.statistic
    assert 'id="segment-drift"' in r.html and f'data-segment="eu" data-name="{name}"' in r.html
    assert "in segment eu, whose verdict names them" in r.html


def test_the_cli_prints_the_realized_accuracy_beside_the_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = linear_classifier(tmp_path / "m.onnx")
    rng = np.random.default_rng(5)
    x = rng.normal(size=(600, 3))
    y = (x[:, 0] + 0.5 * rng.normal(size=600) > 0).astype(int)
    monitor.reference(model, x[:400], labels=y[:400], flicker_copies=4, out=tmp_path / "ref.json")
    np.savetxt(tmp_path / "ev.csv", x[400:], delimiter=",")
    np.savetxt(tmp_path / "y.csv", y[400:], fmt="%d")
    args = ["report", "--model", str(model), "--reference", str(tmp_path / "ref.json"), "--events"]
    args += [str(tmp_path / "ev.csv"), "--probe-points", "0", "--out", str(tmp_path / "r.html")]
    assert main([*args, "--labels", str(tmp_path / "y.csv")]) == 0
    acc = monitor.report(model, tmp_path / "ref.json", tmp_path / "ev.csv", labels=y[400:], probe_points=0).data
    assert acc.accuracy is not None and acc.accuracy.realized is not None
    printed = capsys.readouterr().err
    assert f"accuracy: estimated {acc.accuracy.estimate:.3f} [" in printed
    assert f"realized {acc.accuracy.realized:.3f} on 200 labelled events" in printed
    assert main(args) == 0
    assert "no labels: realized accuracy not shown" in capsys.readouterr().err
