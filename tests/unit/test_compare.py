"""Two or more models on the same rows (monitor/comparison, ``harmonic-monitor compare``): inputs mapped by name, the
paired bootstrap, the Pareto statement, the fragility split, refusals, and the command on real skl2onnx models."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.cli import main
from monitor.comparison.columns import Columns, model_rows, read_columns
from monitor.comparison.fragility import split_fragilities
from monitor.comparison.paired import (
    Axis,
    PairedDifference,
    differences,
    normal_interval,
    paired_bootstrap,
    paired_differences,
    pareto,
    verdict,
)
from monitor.errors import DataError
from monitor.model.onnx import OnnxModel

NAMES = ["sl", "sw", "pl", "pw"]
#: the order the second model's inputs are declared in (one [N, 1] input per column)
SHUFFLED = ["pw", "sl", "pl", "sw"]


@pytest.fixture(scope="module")
def iris_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real converter output, fitted on iris: a logistic regression of one unnamed ``float_input [N, 4]``, a
    gradient-boosted pipeline of four named inputs in another order, a regressor, and a two-class classifier."""
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.datasets import load_iris
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    d = tmp_path_factory.mktemp("compare")
    frame, y = load_iris(return_X_y=True, as_frame=True)
    frame.columns = NAMES
    x = frame.to_numpy(dtype=np.float32)
    plain = [("float_input", FloatTensorType([None, 4]))]
    named = [(c, FloatTensorType([None, 1])) for c in SHUFFLED]
    gbdt = make_pipeline(
        ColumnTransformer([("num", StandardScaler(), SHUFFLED)]),
        GradientBoostingClassifier(n_estimators=20, max_depth=2, random_state=0),
    ).fit(frame[SHUFFLED], y)
    built = {
        "logreg": convert_sklearn(LogisticRegression(max_iter=500).fit(x, y), initial_types=plain),
        "gbdt": convert_sklearn(gbdt, initial_types=named, options={"zipmap": False}),
        "linear": convert_sklearn(LinearRegression().fit(x, y.to_numpy(dtype=float)), initial_types=plain),
        "binary": convert_sklearn(LogisticRegression().fit(x[y < 2], y[y < 2]), initial_types=plain),
    }
    paths = {}
    for name, proto in built.items():
        paths[name] = d / f"{name}.onnx"
        paths[name].write_bytes(proto.SerializeToString())
    data = frame.assign(label=y.to_numpy(), seg=np.where(frame["sl"] > 5.8, "long", "short"))
    data.to_csv(d / "iris.csv", index=False)
    paths["csv"] = d / "iris.csv"
    return paths


def _columns(n: int = 30, seed: int = 0) -> Columns:
    rng = np.random.default_rng(seed)
    return Columns({c: rng.normal(size=n) for c in ["extra", *reversed(NAMES)]}, "a test table")


def test_model_rows_maps_each_layout_by_name(iris_models: dict[str, Path]) -> None:
    cols = _columns()
    plain = model_rows(OnnxModel(iris_models["logreg"]), cols, NAMES, "logreg")
    named = model_rows(OnnxModel(iris_models["gbdt"]), cols, None, "gbdt")
    np.testing.assert_array_equal(plain.x, np.column_stack([cols.columns[c] for c in NAMES]))
    np.testing.assert_array_equal(named.x, np.column_stack([cols.columns[c] for c in SHUFFLED]))
    assert plain.how == named.how == "by name"


def test_model_rows_names_what_the_data_lacks(iris_models: dict[str, Path]) -> None:
    cols = Columns({c: np.zeros(5) for c in ["sl", "sw", "pl"]}, "a test table")
    with pytest.raises(DataError, match=r"model 'gbdt' reads 'pw', which a test table does not name"):
        model_rows(OnnxModel(iris_models["gbdt"]), cols, None, "gbdt")
    with pytest.raises(DataError, match="3 feature names given for 'logreg.onnx', which reads 4 features"):
        model_rows(OnnxModel(iris_models["logreg"]), cols, ["sl", "sw", "pl"], "logreg")


def test_model_rows_takes_unnamed_features_in_order_only_at_their_width(iris_models: dict[str, Path]) -> None:
    arr = np.arange(12.0).reshape(3, 4)
    rows = model_rows(OnnxModel(iris_models["logreg"]), read_columns(arr), None, "logreg")
    np.testing.assert_array_equal(rows.x, arr)
    assert rows.how.startswith("in column order")
    with pytest.raises(DataError, match="model 'gbdt' reads 'pw', 'sl', 'pl', 'sw'"):
        model_rows(OnnxModel(iris_models["gbdt"]), read_columns(arr), None, "gbdt")


def test_paired_bootstrap_carries_the_shared_rows() -> None:
    rng = np.random.default_rng(1)
    hard = rng.normal(0, 1, size=(400, 1))  # per-row difficulty both models share
    a, b = hard + 0.05 + rng.normal(0, 0.01, size=(400, 1)), hard
    diff, lower, upper = paired_bootstrap(a, b, replicates=300, seed=3)
    assert 0.04 < lower[0] < diff[0] < upper[0] < 0.06
    # two separate intervals of the means would overlap: the spread of `hard` dwarfs the difference
    assert 1.64 * hard.std() / np.sqrt(400) > 0.05
    again = paired_bootstrap(a, b, replicates=300, seed=3)
    np.testing.assert_array_equal(np.array(again), np.array((diff, lower, upper)))


def test_paired_bootstrap_of_row_groups_matches_the_row_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.comparison import paired

    rng = np.random.default_rng(4)
    a = rng.exponential(1.0, size=(8000, 2))
    b = a * 0.9 + rng.normal(0, 0.3, size=(8000, 2))
    _, lo_g, hi_g = paired_bootstrap(a, b, replicates=400, seed=5)  # 8000 rows > EXACT_ROWS: groups
    monkeypatch.setattr(paired, "EXACT_ROWS", 10**9)
    _, lo_r, hi_r = paired_bootstrap(a, b, replicates=400, seed=5)
    np.testing.assert_allclose(hi_g - lo_g, hi_r - lo_r, rtol=0.15)
    np.testing.assert_allclose((hi_g + lo_g) / 2, (hi_r + lo_r) / 2, atol=0.1 * (hi_r - lo_r).max())


def test_paired_bootstrap_of_fewer_groups_groups_from_that_many_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.comparison import paired

    rng = np.random.default_rng(6)
    a = rng.exponential(1.0, size=(3000, 2))
    b = a * 0.9 + rng.normal(0, 0.3, size=(3000, 2))
    drawn: list[int] = []
    default_rng = np.random.default_rng

    class Counting:
        """The bootstrap's generator, counting the units each replicate resamples."""

        def __init__(self, seed: int) -> None:
            self.rng = default_rng(seed)

        def integers(self, low: int, high: int, size: tuple[int, int]) -> Any:
            drawn.append(size[1])
            return self.rng.integers(low, high, size=size)

        def permutation(self, n: int) -> Any:
            return self.rng.permutation(n)

    monkeypatch.setattr(np.random, "default_rng", Counting)  # the one paired draws from
    _, lo_g, hi_g = paired_bootstrap(a, b, replicates=400, seed=5, groups=200)  # 3000 rows < EXACT_ROWS, > 200
    assert set(drawn) == {200}
    drawn.clear()
    _, lo_r, hi_r = paired_bootstrap(a, b, replicates=400, seed=5)
    assert set(drawn) == {3000}
    np.testing.assert_allclose(hi_g - lo_g, hi_r - lo_r, rtol=0.2)
    np.testing.assert_allclose((hi_g + lo_g) / 2, (hi_r + lo_r) / 2, atol=0.1 * (hi_r - lo_r).max())
    assert paired.GROUPS > 200


def _skewed_pair(rng: np.random.Generator, n: int) -> tuple[Any, Any, float]:
    """n paired rows of γ-like values (skewed, zero-inflated): the candidate's are the served model's × 1.1 plus a
    sparse skewed term of its own; the true mean difference (served − candidate) with them."""
    a = rng.gamma(0.5, 0.1, size=(n, 1)) * (rng.random((n, 1)) < 0.7)
    b = a * 1.1 + rng.gamma(0.5, 0.02, size=(n, 1)) * (rng.random((n, 1)) < 0.3)
    mean_a, mean_own = 0.5 * 0.1 * 0.7, 0.5 * 0.02 * 0.3
    return a, b, mean_a - (1.1 * mean_a + mean_own)


@pytest.mark.parametrize("n", [50, 500])
def test_the_normal_paired_interval_covers_as_honestly_as_the_paired_bootstrap(n: int) -> None:
    rng = np.random.default_rng(n)
    windows = 300
    covered = {"normal": 0, "bootstrap": 0}
    widths: dict[str, list[float]] = {"normal": [], "bootstrap": []}
    for seed in range(windows):
        a, b, true = _skewed_pair(rng, n)
        got = {
            "normal": normal_interval(a - b),
            "bootstrap": paired_bootstrap(a, b, replicates=400, seed=seed, groups=200),
        }
        for name, (_, lo, hi) in got.items():
            covered[name] += bool(lo[0] <= true <= hi[0])
            widths[name].append(float(hi[0] - lo[0]))
    rate = {name: hits / windows for name, hits in covered.items()}
    assert 0.84 <= rate["normal"] <= 0.95, rate  # nominal 90 %; ±0.017 is one standard error of 300 windows
    assert abs(rate["normal"] - rate["bootstrap"]) <= 0.03, rate
    assert np.mean(widths["normal"]) == pytest.approx(np.mean(widths["bootstrap"]), rel=0.05)


def test_paired_differences_take_matrices_and_either_interval() -> None:
    axes = [Axis("gamma", "lower", ""), Axis("flicker", "lower", "")]
    rng = np.random.default_rng(4)
    a = rng.uniform(0, 1, (400, 2))
    b = a + np.array([0.05, 0.0]) + rng.normal(0, 0.01, (400, 2))
    b[0, 1] = np.nan  # a row missing for one model on one axis leaves every axis
    normal = paired_differences(a, b, axes, interval="normal")
    boot = paired_differences(a, b, axes, replicates=200)
    assert [d.n for d in normal] == [399, 399] and [d.favours for d in normal] == ["a", "tie"]
    assert [d.favours for d in boot] == ["a", "tie"]
    assert normal[0].difference == pytest.approx(boot[0].difference)
    assert normal[0].upper - normal[0].lower == pytest.approx(boot[0].upper - boot[0].lower, rel=0.2)
    with pytest.raises(ValueError, match=r"must be \(N, 2\) of one shape"):
        paired_differences(a, b[:, :1], axes)


def test_paired_bootstrap_refuses_unpaired_shapes() -> None:
    with pytest.raises(ValueError, match="must be \\(N, K\\) of one shape"):
        paired_bootstrap(np.zeros((4, 1)), np.zeros((5, 1)))


def test_differences_favour_by_direction_and_drop_rows_missing_for_either() -> None:
    axes = [Axis("gamma", "lower", ""), Axis("accuracy", "higher", ""), Axis("confidence", "none", "")]
    rng = np.random.default_rng(2)
    base = rng.uniform(0, 1, 300)
    a = {"gamma": base + 0.2, "accuracy": base + 0.2, "confidence": base + 0.2}
    b = {"gamma": base.copy(), "accuracy": base.copy(), "confidence": base.copy()}
    b["gamma"][:10] = np.nan
    out = {d.axis: d for d in differences(a, b, axes, replicates=200, seed=0)}
    assert (out["gamma"].favours, out["accuracy"].favours, out["confidence"].favours) == ("b", "a", "unranked")
    assert out["gamma"].n == 290


def _diff(axis: str, favours: str) -> PairedDifference:
    return PairedDifference(axis, 10, 0.0, 0.0, 0.0, -1.0, 1.0, favours)


@pytest.mark.parametrize(
    ("favours", "relation", "words", "candidate"),
    [
        (("a", "tie"), "a-dominates", "'old' dominates 'new': better on gamma", "candidate-worse"),
        (("tie", "b"), "b-dominates", "'new' dominates 'old': better on flicker", "candidate-better"),
        (("a", "b"), "incomparable", "'old' is better on gamma, 'new' on flicker", "incomparable"),
        (("tie", "tie"), "no-difference", "no difference between 'old' and 'new'", "no-difference"),
    ],
)
def test_pareto_states_the_relation_without_a_composite(
    favours: tuple[str, str], relation: str, words: str, candidate: str
) -> None:
    axes = [Axis("gamma", "lower", ""), Axis("flicker", "lower", ""), Axis("confidence", "none", "")]
    diffs = [_diff("gamma", favours[0]), _diff("flicker", favours[1]), _diff("confidence", "a")]
    p = pareto(diffs, axes)
    assert p.relation == relation and words in p.statement("old", "new")
    assert verdict(p.relation) == candidate


def test_split_fragilities_universal_specific_and_robust() -> None:
    profiles = {
        "a": {("noise", None): 0.4, ("shift", "x"): 0.2, ("shift", "y"): None, ("scale", None): 1.0},
        "b": {("noise", None): 0.5, ("shift", "x"): None, ("shift", "y"): None, ("scale", None): 4.0},
    }
    kinds = {f.target: (f.kind, f.fragile_for, f.most_robust) for f in split_fragilities(profiles, ratio=1.5)}
    assert kinds == {
        "noise": ("universal", ("a", "b"), "b"),  # both cross, within 1.5× of each other: the shared floor
        "shift[x]": ("specific", ("a",), "b"),  # b never crosses
        "shift[y]": ("robust", (), None),
        "scale": ("specific", ("a",), "b"),  # both cross, a at a quarter of b's ε*
    }


def test_compare_refuses_a_classifier_beside_a_regressor(iris_models: dict[str, Path]) -> None:
    from monitor.api import compare

    with pytest.raises(DataError, match="'logreg' is a classifier, 'linear' is a regressor"):
        compare([iris_models["logreg"], iris_models["linear"]], iris_models["csv"], probe_points=0)


def test_compare_refuses_different_class_sets(iris_models: dict[str, Path]) -> None:
    from monitor.api import compare

    with pytest.raises(DataError, match=r"'logreg' predicts classes \{0, 1, 2\} and 'binary' \{0, 1\}"):
        compare([iris_models["logreg"], iris_models["binary"]], iris_models["csv"], probe_points=0)


def test_compare_refuses_one_model_and_a_reference_json(iris_models: dict[str, Path]) -> None:
    from monitor.api import compare

    with pytest.raises(DataError, match="compare needs two or more models; got 1"):
        compare([iris_models["logreg"]], iris_models["csv"])
    with pytest.raises(DataError, match="is a reference JSON of one model"):
        compare([iris_models["logreg"], iris_models["gbdt"]], iris_models["csv"], "ref.json")
    with pytest.raises(DataError, match=r"level must be in \(0, 1\), the intervals' coverage; got 90"):
        compare([iris_models["logreg"], iris_models["gbdt"]], iris_models["csv"], level=90)


def test_compare_frames_pair_the_same_rows(iris_models: dict[str, Path]) -> None:
    import pandas as pd

    from monitor.api import compare

    data = pd.read_csv(iris_models["csv"])
    result = compare(
        {"logreg": iris_models["logreg"], "gbdt": iris_models["gbdt"]},
        data,
        labels="label",
        segment_column="seg",
        feature_names={"logreg": NAMES},
        replicates=100,
        probe_points=0,
        flicker_copies=8,
    )
    frames = result.frames()
    models = frames["models"].set_index(["model", "segment"])
    assert set(models.index.get_level_values("segment")) == {"(all)", "long", "short"}
    assert models.loc[("logreg", "(all)"), "rows"] == 150
    # realized accuracy from the labels, as the models' own predictions give it
    assert 0.9 < models.loc[("gbdt", "(all)"), "accuracy"] <= 1.0
    pairs = frames["pairs"]
    acc = pairs[(pairs.axis == "accuracy") & (pairs.segment == "(all)")].iloc[0]
    assert acc.lower <= acc.difference <= acc.upper
    verdicts = frames["verdicts"].set_index("segment")
    assert set(verdicts.index) == {"(all)", "long", "short"}  # a verdict per segment too
    overall = verdicts.loc["(all)"]
    assert overall.relation in ("a-dominates", "b-dominates", "incomparable", "no-difference")
    assert 0.0 <= overall.disagreement <= overall.disagreement_upper <= 1.0


def test_compare_reads_an_event_log_as_run_decodes_it(iris_models: dict[str, Path], tmp_path: Path) -> None:
    import pandas as pd

    from monitor.api import compare

    data = pd.read_csv(iris_models["csv"])
    log = tmp_path / "events.jsonl"
    lines = [
        json.dumps(
            {
                "id": f"e{i}",
                "ts": f"2026-11-20T10:{i // 60:02d}:{i % 60:02d}Z",
                "model": "credit",
                "features": {c: float(data[c][i]) for c in NAMES},
                "segment": data["seg"][i],
            }
        )
        for i in range(len(data))
    ]
    log.write_text("\n".join([*lines, "not json"]) + "\n", encoding="utf-8")
    models = {"logreg": iris_models["logreg"], "gbdt": iris_models["gbdt"]}
    keys = {"feature_names": {"logreg": NAMES}, "replicates": 50, "probe_points": 0, "flicker_copies": 8}
    from_log = compare(models, log, iris_models["csv"], segment_column="segment", **keys)
    from_table = compare(models, iris_models["csv"], segment_column="seg", **keys)
    a, b = from_log.rows("models"), from_table.rows("models")
    assert [(r["model"], r["segment"], r["rows"]) for r in a] == [(r["model"], r["segment"], r["rows"]) for r in b]
    assert [r["gamma"] for r in a] == pytest.approx([r["gamma"] for r in b])
    assert any("refused lines" in n and "not_json: 1" in n for n in from_log.notes)


def test_compare_command_on_two_converted_models(
    iris_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "compare.json"
    argv = ["--log-level", "warning", "compare", "--model", f"logreg={iris_models['logreg']}"]
    argv += ["--model", str(iris_models["gbdt"]), "--data", str(iris_models["csv"]), "--labels", "label"]
    argv += ["--reference-labels", "label", "--feature-names", "logreg=" + ",".join(NAMES), "--bootstrap", "100"]
    argv += ["--probe-points", "5", "--flicker-copies", "8", "--json", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "logreg vs gbdt:" in printed and "verdict for 'gbdt' beside 'logreg'" in printed
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert {r["model"] for r in doc["models"]} == {"logreg", "gbdt"}
    assert all(r["accuracy_estimate"] is not None for r in doc["models"])
    assert {r["axis"] for r in doc["pairs"]} >= {"gamma", "flicker", "p_adj", "estimated_accuracy", "accuracy"}
    # one estimate per model, by estimate's default method, in the table and the pair line alike
    table = {r["model"]: r for r in doc["models"] if r["segment"] == "(all)"}
    assert {r["accuracy_method"] for r in table.values()} == {"iw"}
    pair = next(r for r in doc["pairs"] if r["axis"] == "estimated_accuracy" and r["segment"] == "(all)")
    assert (pair["mean_a"], pair["mean_b"]) == pytest.approx(
        (table["logreg"]["accuracy_estimate"], table["gbdt"]["accuracy_estimate"]), abs=1e-9
    )
    assert f"{table['logreg']['accuracy_estimate']:.3f} [" in printed and "estimated (iw)" in printed
    assert next(r for r in doc["pairs"] if r["axis"] == "confidence")["favours"] == "unranked"
    targets = {r["target"]: r for r in doc["fragility"]}
    assert {"noise", "shift[sl]", "shift[pw]"} <= set(targets)  # both layouts' inputs line up by column name
    assert all(r["kind"] in ("universal", "specific", "robust") for r in targets.values())
    sd = float(np.std(np.loadtxt(iris_models["csv"], delimiter=",", skiprows=1, usecols=0)))
    for model in ("logreg", "gbdt"):  # a shift's ε* also in the input's own units: × the reference's SD
        std, raw = targets["shift[sl]"][f"eps_star_{model}"], targets["shift[sl]"][f"eps_raw_{model}"]
        assert (std is None and raw is None) or raw == pytest.approx(std * sd)
    assert targets["noise"]["eps_raw_gbdt"] is None


def test_compare_command_refuses_unmapped_inputs(
    iris_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--model", str(iris_models["logreg"]), "--model", str(iris_models["gbdt"])]
    argv += ["--data", str(iris_models["csv"]), "--feature-names", "logreg=sl,sw,pl,petal"]
    assert main(argv) == 2
    assert "model 'logreg' reads 'petal', which" in capsys.readouterr().err


def test_read_columns_takes_every_table_kind(tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame({"a": [1.0, 2.0], "city": ["x", "y"]})
    frame.to_parquet(tmp_path / "t.parquet")
    np.save(tmp_path / "t.npy", np.eye(2))
    (tmp_path / "plain.csv").write_text("1,2\n3,4\n", encoding="utf-8")
    assert read_columns(frame).columns["city"].tolist() == ["x", "y"]
    assert read_columns(tmp_path / "t.parquet").names == ("a", "city")
    assert read_columns({"a": [1, 2]}).columns["a"].dtype == np.float64
    unnamed = read_columns(tmp_path / "t.npy")
    assert (unnamed.names, unnamed.named) == (("0", "1"), False)
    assert read_columns(tmp_path / "plain.csv").named is False  # numbers on the first line: no header
    assert read_columns(tmp_path / "plain.csv", header="yes").names == ("1", "2")


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        ("a,b\n1,2\n3\n", "ragged.csv", "line 3: 1 values; the first line has 2"),
        ("", "empty.csv", "holds no rows"),
        ("x", "rows.txt", "compare reads a .csv"),
        ("not numpy", "bad.npy", "is not a readable .npy file"),
    ],
)
def test_read_columns_refuses_bad_files(tmp_path: Path, content: str, name: str, message: str) -> None:
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        read_columns(tmp_path / name)


def test_read_columns_refuses_other_objects_and_a_flat_array() -> None:
    with pytest.raises(DataError, match="expected a DataFrame, a mapping of columns, an array or a file path; got int"):
        read_columns(3)
    with pytest.raises(DataError, match=r"expected rows \(N, D\); got an array of shape \[3\]"):
        read_columns(np.zeros(3))


def test_model_rows_refuses_text_where_a_model_reads_numbers(iris_models: dict[str, Path]) -> None:
    cols = Columns({"sl": np.array(["a", "b"], dtype=object), **{c: np.zeros(2) for c in NAMES[1:]}}, "a table")
    with pytest.raises(DataError, match="column 'sl' holds text"):
        model_rows(OnnxModel(iris_models["logreg"]), cols, NAMES, "logreg")


def test_compare_labels_from_a_file_and_folded_segments(iris_models: dict[str, Path], tmp_path: Path) -> None:
    from monitor.api import compare

    labels = tmp_path / "y.npy"
    np.save(labels, np.repeat([0, 1, 2], 50))
    models = {"logreg": iris_models["logreg"], "gbdt": iris_models["gbdt"]}
    result = compare(
        models,
        iris_models["csv"],
        labels=labels,
        segment_column="sl",  # many values: the most frequent one kept, the rest folded into `other`
        max_segments=1,
        feature_names={"logreg": NAMES},
        replicates=20,
        probe_points=0,
        flicker_copies=4,
    )
    segments = {r["segment"] for r in result.rows("models")}
    assert len(segments) == 3 and {"(all)", "other"} <= segments
    with pytest.raises(DataError, match="labels 'nope' is neither a column of"):
        compare(models, iris_models["csv"], labels="nope", feature_names={"logreg": NAMES})
    with pytest.raises(DataError, match=r"feature names given for \['mlp'\], which name no model"):
        compare(models, iris_models["csv"], feature_names={"mlp": NAMES})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--feature-names", "logreg"], "--feature-names expects NAME=VALUE; got 'logreg'"),
        (["--level", "1.5"], r"--level must be in \(0, 1\); got 1.5"),
    ],
)
def test_compare_command_refuses_bad_options(
    iris_models: dict[str, Path], capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = ["compare", "--model", f"logreg={iris_models['logreg']}", "--model", str(iris_models["gbdt"])]
    assert main([*argv, "--data", str(iris_models["csv"]), *extra]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_compare_command_needs_two_models(iris_models: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--model", str(iris_models["gbdt"]), "--data", str(iris_models["csv"])]) == 2
    assert "compare needs two or more --model; got 1" in capsys.readouterr().err
