"""The Python API (``monitor.score`` …): DataFrames, arrays, event logs and parquet in; typed results out; the same
numbers as the CLI commands."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import monitor
from monitor.api import MissingExtraError, ReferenceResult, ScoreTable, read_rows
from monitor.cli import main
from monitor.errors import DataError
from monitor.examples import FEATURES, linear_classifier
from monitor.model.onnx import OnnxModel
from tests.unit.onnx_graphs import linear_regressor
from tests.unit.test_offline_signatures import COLOUR_VALUE, string_model


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return linear_classifier(tmp_path_factory.mktemp("api") / "linear.onnx")


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(60, 3))
    df = pd.DataFrame(x, columns=list(FEATURES), index=[f"r{i}" for i in range(60)])
    df["y"] = np.argmax(x @ np.asarray([[1.0, -0.5, 0.2], [0.3, 0.8, -1.0], [-0.7, 0.1, 0.9]]), axis=1)
    return df


def _events(path: Path, rows: np.ndarray, *, bad: bool = True) -> Path:
    lines = [
        json.dumps(
            {"id": f"e{i}", "ts": 1_700_000_000_000 + i, "features": dict(zip(FEATURES, map(float, r), strict=True))}
        )
        for i, r in enumerate(rows)
    ]
    if bad:
        lines += ["{not json", json.dumps({"id": "x", "ts": 1}), json.dumps({"id": "y", "features": {"age": 1.0}})]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_score_a_frame_gives_one_row_per_input_row_with_gamma_flicker_class(model: Path, frame: pd.DataFrame) -> None:
    out = monitor.score(model, frame, reference=frame, flicker_copies=8)  # a frame in, a frame out
    assert isinstance(out, pd.DataFrame)
    table = out.attrs["score"]
    assert isinstance(table, ScoreTable) and table.to_frame().equals(out)
    assert list(out.columns) == ["gamma", "flicker", "p_adj", "class", "probability", "margin", "gamma_se"]
    assert list(out.index) == list(frame.index)  # the frame's own row labels
    assert (out["gamma"] >= 0).all() and out["flicker"].between(0, 1).all()
    live = OnnxModel(str(model)).evaluate(frame[list(FEATURES)].to_numpy(np.float32).reshape(60, 3), None)
    np.testing.assert_array_equal(out["class"].to_numpy(), live.label)
    assert table.yardstick == ()  # the data is its own reference: nothing to compare with


def test_score_equals_the_cli_on_the_same_rows(model: Path, frame: pd.DataFrame, tmp_path: Path) -> None:
    data = tmp_path / "rows.csv"
    frame[list(FEATURES)].to_csv(data, index=False)
    assert main(["score", "--model", str(model), "--data", str(data), "--out", str(tmp_path / "o.csv")]) == 0
    with (tmp_path / "o.csv").open() as fh:
        cli = list(csv.DictReader(fh))
    api = monitor.score(model, frame, reference=frame)
    np.testing.assert_allclose([float(r["gamma"]) for r in cli], api["gamma"], rtol=1e-8)
    np.testing.assert_allclose([float(r["flicker"]) for r in cli], api["flicker"], rtol=1e-8)
    np.testing.assert_array_equal([int(r["predicted_class"]) for r in cli], api["class"])


def test_a_frame_missing_columns_is_refused_naming_them(model: Path, frame: pd.DataFrame) -> None:
    with pytest.raises(DataError, match=r"lacks columns 'income', 'debt'"):
        monitor.score(model, frame[["age", "y"]])


def test_an_array_reads_as_the_inputs_in_graph_order(model: Path, frame: pd.DataFrame) -> None:
    a = monitor.score(model, frame[list(FEATURES)].to_numpy(), flicker_copies=4).columns["gamma"]
    b = monitor.score(model, frame, flicker_copies=4)["gamma"].to_numpy()
    np.testing.assert_array_equal(a, b)
    with pytest.raises(DataError, match="an array cannot carry"):
        monitor.score(model, np.zeros((3, 5)))


def test_a_regressors_rows_have_no_class(tmp_path: Path) -> None:
    path = linear_regressor(tmp_path / "reg.onnx", [1.0, 2.0])
    x = np.random.default_rng(0).normal(size=(20, 2))
    out = monitor.score(path, x, flicker_copies=4).to_frame()
    assert list(out.columns) == ["gamma", "flicker", "p_adj", "predicted_value", "gamma_se"]
    np.testing.assert_allclose(out["predicted_value"], x @ [1.0, 2.0], rtol=1e-5, atol=1e-5)  # its prediction


def test_a_categorical_string_column_is_a_held_input(tmp_path: Path) -> None:
    path = string_model(tmp_path / "s.onnx")
    colours = list(COLOUR_VALUE)
    df = pd.DataFrame(
        {
            "a": np.linspace(0, 1, 12),
            "b": np.linspace(1, 0, 12),
            "colour": pd.Categorical([colours[i % len(colours)] for i in range(12)]),
        }
    )
    rows = read_rows(df, OnnxModel(str(path)))
    assert rows.held is not None and list(rows.held.values["colour"].reshape(-1)) == list(df["colour"].astype(str))
    assert len(monitor.score(path, df, flicker_copies=4)) == 12


def test_an_event_log_counts_invalid_lines_by_reason(model: Path, frame: pd.DataFrame, tmp_path: Path) -> None:
    log = _events(tmp_path / "events.jsonl", frame[list(FEATURES)].to_numpy())
    table = monitor.score(model, log, reference=frame, flicker_copies=4)
    assert len(table) == 60
    assert sum(table.invalid.values()) == 3 and table.invalid["not_json"] == 1
    same = monitor.score(model, frame, reference=frame, flicker_copies=4)
    np.testing.assert_allclose(table.columns["gamma"], same["gamma"], rtol=1e-6)


def test_parquet_reads_like_the_frame(model: Path, frame: pd.DataFrame, tmp_path: Path) -> None:
    frame.to_parquet(tmp_path / "rows.parquet")
    a = monitor.score(model, tmp_path / "rows.parquet", reference=frame, flicker_copies=4).columns["gamma"]
    b = monitor.score(model, frame, reference=frame, flicker_copies=4, as_frame=False).columns["gamma"]
    np.testing.assert_array_equal(a, b)


def test_reference_and_estimate_with_labels_give_the_realized_accuracy(
    model: Path, frame: pd.DataFrame, tmp_path: Path
) -> None:
    ref = monitor.reference(model, frame, labels="y", flicker_copies=8, out=tmp_path / "ref.json")
    assert isinstance(ref, ReferenceResult) and ref.fit is not None and ref.path == tmp_path / "ref.json"
    est = monitor.estimate(model, frame, tmp_path / "ref.json", labels="y", flicker_copies=8)
    live = OnnxModel(str(model)).evaluate(frame[list(FEATURES)].to_numpy(np.float32), None).label
    assert est.lower <= est.estimate <= est.upper and est.n_labelled == 60
    assert est.realized == pytest.approx(float(np.mean(live == frame["y"].to_numpy())))
    assert set(est.to_frame().index) == set(est.methods)
    table = monitor.score(model, frame, reference=tmp_path / "ref.json", flicker_copies=8, as_frame=False)
    assert [y.signal for y in table.yardstick] == ["gamma", "flicker", "confidence"]
    assert "reference" in table.summary()


def test_labels_that_disagree_while_the_inputs_stay_are_named_right(model: Path, frame: pd.DataFrame) -> None:
    ref = monitor.reference(model, frame, labels="y", flicker_copies=4)
    flipped = frame.assign(y=1 - frame["y"])  # the label given the inputs changes; the inputs do not
    est = monitor.estimate(model, flipped, ref, labels="y", flicker_copies=4)
    assert est.realized is not None and est.realized < est.lower
    assert est.document["domain"]["auc"] < 0.55
    assert "cannot see a change of the label given the inputs" in est.caveats[0]
    assert "the labels are right" in est.caveats[-1] and "the label given the inputs changed" in est.caveats[-1]


def test_the_estimate_over_time_has_a_row_per_period_with_the_realized_accuracy(
    model: Path, frame: pd.DataFrame
) -> None:
    ref = monitor.reference(model, frame, labels="y", flicker_copies=4)
    y = frame["y"].to_numpy(np.float64)
    y[:10] = np.nan  # rows without a label
    est = monitor.estimate(model, frame, ref, labels=y, flicker_copies=4, period_events=45)
    df = est.over_time()
    assert list(df.index) == [0.0, 45.0] and list(df["n"]) == [45, 15]
    assert list(df["n_labelled"]) == [35, 15] and est.n_labelled == 50
    assert df["lower"].iloc[0] <= df["estimate"].iloc[0] <= df["upper"].iloc[0]
    assert df["realized"].notna().all()
    assert np.isnan(df["estimate"].iloc[1]) and "too few to estimate" in df["note"].iloc[1]  # no number from noise
    whole = monitor.estimate(model, frame, ref, labels="y", flicker_copies=4)
    assert len(whole.periods) == 1 and whole.periods[0]["estimate"] == pytest.approx(whole.estimate)


def test_estimate_without_a_fitted_reference_says_how_to_build_one(model: Path, frame: pd.DataFrame) -> None:
    ref = monitor.reference(model, frame, flicker_copies=4)
    with pytest.raises(DataError, match=r"labels=y"):
        monitor.estimate(model, frame, ref)


def test_probe_returns_the_funnel_and_its_report(model: Path, frame: pd.DataFrame) -> None:
    r = monitor.probe(model, frame.iloc[:4], reference=frame, steps=0)
    assert r.result.n_points == 4 and r.mri == r.report["mri"] and set(r.mri) >= {"noise", "dropout"}


def test_to_frame_without_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    table = ScoreTable({"gamma": np.zeros(2)})
    with pytest.raises(MissingExtraError, match=r"in the clone, pip install -e '\.\[frame\]'"):
        table.to_frame()


def test_import_monitor_stays_cheap() -> None:
    code = "import sys, monitor; print(sorted(m for m in ('numpy', 'monitor.api', 'onnxruntime') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_bad_inputs_say_what_was_expected(model: Path, frame: pd.DataFrame, tmp_path: Path) -> None:
    m = OnnxModel(str(model))
    with pytest.raises(DataError, match="expected a pandas DataFrame"):
        read_rows(object(), m)
    (tmp_path / "r.json").write_text("{}")
    with pytest.raises(DataError, match="is a JSON file"):
        read_rows(tmp_path / "r.json", m)
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(DataError, match="not a readable parquet"):
        read_rows(tmp_path / "bad.parquet", m)
    with pytest.raises(DataError, match="cannot be read"):
        read_rows(tmp_path / "absent.jsonl", m)
    (tmp_path / "none.jsonl").write_text("{oops\n\n")
    with pytest.raises(DataError, match=r"holds no valid event .*not_json: 1"):
        read_rows(tmp_path / "none.jsonl", m)
    with pytest.raises(DataError, match="no label column 'z'"):
        monitor.reference(model, frame, labels="z")
    with pytest.raises(DataError, match="3 values for 60 rows"):
        monitor.reference(model, frame, labels=[0, 1, 2])
    with pytest.raises(DataError, match="must be numbers"):
        monitor.score(model, frame.assign(age=["a"] * 60))
    with pytest.raises(DataError, match="feature_names lists 1 names"):
        monitor.reference(model, frame, feature_names=["a"], flicker_copies=4)
    with pytest.raises(DataError, match="integer classes"):
        monitor.reference(model, frame, labels=np.full(60, 0.5), flicker_copies=4)
    with pytest.raises(DataError, match="NaN or infinite"):
        monitor.probe(model, frame.assign(age=np.nan), reference=frame)
    with pytest.raises(DataError, match="batch size"):
        monitor.score(model, frame, batch_rows=0)
    with pytest.raises(DataError, match="file path or monitor.reference"):
        monitor.replay(model, tmp_path / "none.jsonl", frame)


def test_a_plain_model_takes_arrays_and_frames_by_feature_name(tmp_path: Path) -> None:
    path = linear_regressor(tmp_path / "reg.onnx", [1.0, 2.0])
    rows = np.random.default_rng(0).normal(size=(30, 2))
    by_order = monitor.score(path, pd.DataFrame(rows, columns=["u", "v"]), flicker_copies=4, as_frame=False)
    by_name = monitor.score(path, pd.DataFrame(rows, columns=["x[0]", "x[1]"]), flicker_copies=4, as_frame=False)
    np.testing.assert_array_equal(by_order.columns["gamma"], by_name.columns["gamma"])
    np.testing.assert_array_equal(
        monitor.score(path, rows, flicker_copies=4).columns["gamma"], by_name.columns["gamma"]
    )
    with pytest.raises(DataError, match=r"shape \(30, 3\)"):
        monitor.score(path, np.zeros((30, 3)))
    with pytest.raises(DataError, match="no fitted loss estimator"):
        monitor.estimate(path, rows, rows)
    assert "no separate reference" in by_order.summary()


def test_a_reference_result_and_rows_give_the_yardstick_and_replay_takes_the_result(
    model: Path, frame: pd.DataFrame, tmp_path: Path
) -> None:
    ref = monitor.reference(model, frame, flicker_copies=8)
    shifted = frame.assign(income=frame["income"] + 2.0)
    from_result = monitor.score(model, shifted, reference=ref, flicker_copies=8).attrs["score"]
    from_rows = monitor.score(model, shifted, reference=frame, flicker_copies=8).attrs["score"]
    assert [y.signal for y in from_result.yardstick] == [y.signal for y in from_rows.yardstick]
    assert all(np.isfinite(y.ratio) and 0 <= y.percentile <= 100 for y in from_rows.yardstick)
    assert "× reference" in from_rows.yardstick[0].describe()
    log = _events(tmp_path / "e.jsonl", frame[list(FEATURES)].to_numpy())
    tl = monitor.replay(model, log, ref)
    assert tl.events == 63 and tl.invalid["not_json"] == 1 and list(tl.to_frame().columns)[:2] == ["index", "ts"]
    again = monitor.replay(model, log, None, model_name="linear")
    assert again.events == 63
    assert monitor.api.ReplayTimeline.from_document(tl.document()).changes == tl.changes
    with pytest.raises(DataError, match="not a replay timeline"):
        monitor.api.ReplayTimeline.from_document({})


def test_probe_report_to_frame_lists_the_threshold_searches(model: Path, frame: pd.DataFrame) -> None:
    r = monitor.probe(model, frame.iloc[:6], reference=frame, steps=0, space="raw")
    out = r.to_frame()
    assert list(out.columns) == ["perturbation", "feature", "eps_star"] and len(out) == len(r.result.thresholds)


def test_the_commands_read_event_logs_parquet_and_the_reference_json(
    model: Path, frame: pd.DataFrame, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _events(tmp_path / "events.jsonl", frame[list(FEATURES)].to_numpy())
    monitor.reference(model, frame, labels="y", out=tmp_path / "ref.json")
    frame.to_parquet(tmp_path / "rows.parquet")
    base = ["--model", str(model), "--reference", str(tmp_path / "ref.json")]
    assert main(["score", *base, "--data", str(log), "--out", str(tmp_path / "s.csv")]) == 0
    err = capsys.readouterr().err
    assert "60 events from" in err and "not_json: 1" in err and "× reference" in err
    assert main(["score", *base, "--data", str(tmp_path / "rows.parquet"), "--out", str(tmp_path / "p.csv")]) == 0
    assert (tmp_path / "s.csv").read_text() == (tmp_path / "p.csv").read_text()  # the same rows, the same scores
    assert main(["estimate", *base, "--data", str(log), "--json", str(tmp_path / "e.json")]) == 0
    assert json.loads((tmp_path / "e.json").read_text())["n"] == 60
    out = tmp_path / "probe.json"
    assert main(["probe", *base, "--data", str(tmp_path / "rows.parquet"), "--json", str(out), "--steps", "0"]) == 0
    assert json.loads(out.read_text())["n_points"] == 60


def test_the_library_never_imports_the_cli() -> None:
    """Layering: the commands wrap the library, never the other way round (only monitor/cli and __main__ import
    monitor.cli)."""
    import ast

    root = Path(monitor.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] == "cli" or rel.name == "__main__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            offenders += [f"{rel}: {n}" for n in names if n == "monitor.cli" or n.startswith("monitor.cli.")]
    assert offenders == []


def test_the_score_estimate_and_probe_commands_give_the_api_results(
    model: Path, frame: pd.DataFrame, tmp_path: Path
) -> None:
    """Each command is a wrapper over the API function: the same options give the same numbers."""
    data, ref = tmp_path / "rows.csv", tmp_path / "ref.json"
    frame[list(FEATURES)].iloc[:40].to_csv(data, index=False)
    monitor.reference(model, frame, labels="y", out=ref, flicker_copies=8)
    opts = ["--sigma", "0.2", "--radius", "0.1", "--flicker-copies", "8", "--seed", "3"]
    base = ["--model", str(model), "--data", str(data), *opts]
    kw = {"sigma": 0.2, "radius": 0.1, "flicker_copies": 8, "seed": 3}
    # score, with reference rows standardizing
    assert main(["score", *base, "--reference", str(data), "--out", str(tmp_path / "s.csv")]) == 0
    with (tmp_path / "s.csv").open() as fh:
        cli = list(csv.DictReader(fh))
    api = monitor.score(model, data, reference=str(data), **kw)
    np.testing.assert_allclose([float(r["flicker"]) for r in cli], api.columns["flicker"], rtol=1e-8)
    np.testing.assert_allclose([float(r["gamma"]) for r in cli], api.columns["gamma"], rtol=1e-8)
    # estimate, from the reference JSON's fit
    assert main(["estimate", *base, "--reference", str(ref), "--json", str(tmp_path / "e.json")]) == 0
    doc = json.loads((tmp_path / "e.json").read_text())
    est = monitor.estimate(model, data, ref, **kw)
    assert doc["accuracy"]["estimate"] == pytest.approx(est.estimate) and doc["n"] == est.n == 40
    assert doc["methods"].keys() == est.methods.keys()
    # probe, with the certified radius, the L2 boundary and a budget
    extra = ["--steps", "2", "--certify-copies", "4", "--l2-boundary", "--budget", "100000", "--seed", "3"]
    probe_args = ["--model", str(model), "--data", str(data), "--reference", str(ref), *extra]
    assert main(["probe", *probe_args, "--json", str(tmp_path / "p.json")]) == 0
    from monitor.probes.offline import ProbeOptions

    r = monitor.probe(
        model,
        data,
        ref,
        options=ProbeOptions(certify_copies=4, l2_boundary=True),
        steps=2,
        seed=3,
        budget_rows=100000,
    )
    got = json.loads((tmp_path / "p.json").read_text())
    want = json.loads(json.dumps(r.report))
    for key in ("mri", "thresholds", "certified", "boundary_l2", "evaluations"):
        assert got[key] == want[key], key


def test_the_reference_command_writes_a_classifiers_gamma_map(model: Path, frame: pd.DataFrame, tmp_path: Path) -> None:
    data, out = tmp_path / "rows.csv", tmp_path / "ref.json"
    frame[list(FEATURES)].to_csv(data, index=False)
    assert (
        main(["reference", "--model", str(model), "--data", str(data), "--flicker-copies", "4", "--out", str(out)]) == 0
    )
    from monitor.gammamap import GammaMap

    stored = GammaMap.from_json(json.loads(out.read_text())["reference"]["gamma_map"])
    assert stored.total == 60


def test_monitor_estimate_is_the_api_function_whatever_is_imported() -> None:
    import importlib

    importlib.import_module("monitor.accuracy")  # the estimators' package: it no longer shares the name
    from monitor import api

    assert monitor.estimate is api.estimate and callable(monitor.estimate)
