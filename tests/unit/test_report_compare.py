"""The report page's section "Two models" (``monitor.report(..., candidate=)``, ``harmonic-monitor report
--candidate``): drawn from ``monitor.compare`` on the same events, on real skl2onnx models (test_compare's)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import monitor
from monitor.cli import main
from monitor.reporting import SECTIONS
from tests.unit.test_compare import NAMES, iris_models  # noqa: F401  (the module's fixture of real models)
from tests.unit.test_report_page import render


def _section(page: str, sid: str = "models") -> str:
    found = re.search(rf'<section id="{sid}">(.*?)</section>', page, re.S)
    assert found, f"no section '{sid}'"
    return found.group(1)


def _frame(models: dict[str, Path]) -> tuple[pd.DataFrame, np.ndarray]:
    frame = pd.read_csv(models["csv"])
    return frame[NAMES], frame["label"].to_numpy()


def _labelled_report(model: Path, reference: Any, events: Any, candidate: Path, y: np.ndarray, out: Path) -> Any:
    """The page of ``model`` beside ``candidate``, every event and reference row labelled ``y``."""
    return monitor.report(
        model,
        reference,
        events,
        candidate=candidate,
        labels=y,
        reference_labels=y,
        feature_names=NAMES,
        probe_points=0,
        out=out,
    )


def test_two_models_side_by_side_from_the_comparison(iris_models: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    events, y = _frame(iris_models)
    out = tmp_path / "r.html"
    report = _labelled_report(iris_models["logreg"], events, events, iris_models["gbdt"], y, out)
    cmp = report.data.comparison
    assert cmp is not None and report.data.comparison_note == ""
    body = _section(report.html)
    models = {r["model"]: r for r in cmp.rows("models") if r["segment"] == "(all)"}
    assert set(models) == {"logreg", "gbdt"}
    for name, r in models.items():  # the seed-001 table: mean γ per model, the estimate with its interval
        assert f'data-model="{name}" data-gamma="{r["gamma"]:.6g}"' in body
        assert f"{r['accuracy_estimate']:.3f} [{r['accuracy_lower']:.3f}, {r['accuracy_upper']:.3f}]" in body
        assert f"<td>{r['accuracy']:.3f}</td></tr>" in body
    (v,) = [v for v in cmp.rows("verdicts") if v["segment"] == "(all)"]
    assert f'data-verdict="{v["verdict"]}"' in body and v["verdict"] in body
    assert v["statement"].replace("'", "&#x27;") in body
    assert f'data-share="{v["disagreement"]:.6g}"' in body
    axes = [d["axis"] for d in cmp.rows("pairs") if d["segment"] == "(all)"]
    assert {"gamma", "flicker", "p_adj", "accuracy"} <= set(axes)
    assert all(f'data-axis="{a}"' in body for a in axes)
    # both Gamma Maps, drawn by the one renderer, side by side in one figure: in the section Gamma Map
    maps = _section(report.html, "gammamap")
    assert 'data-models="logreg,gbdt"' in maps and "logreg (n=150)" in maps and "gbdt (n=150)" in maps
    assert 'data-models="' not in body
    assert "ε* probe profile was skipped" not in body and "paired bootstrap of 1000 replicates" in body
    assert "None" not in body and "nan" not in body.lower()
    assert all(f'<section id="{s}">' in report.html for s in SECTIONS)
    dom, console = render(out, tmp_path, dump=True)
    assert console == [] and 'id="models-table"' in dom


def test_models_that_cannot_be_compared_say_why_and_the_page_still_renders(
    iris_models: dict[str, Path],  # noqa: F811
) -> None:
    events, _ = _frame(iris_models)
    report = monitor.report(
        iris_models["logreg"], events, events, candidate=iris_models["binary"], feature_names=NAMES, probe_points=0
    )
    assert report.data.comparison is None
    assert "different class sets" in report.data.comparison_note
    body = _section(report.html)
    assert 'class="empty"' in body and "predicts classes {0, 1, 2} and &#x27;binary&#x27; {0, 1}" in body
    assert report.data.gamma_map is not None and all(f'<section id="{s}">' in report.html for s in SECTIONS)
    without = monitor.report(iris_models["logreg"], events, events, feature_names=NAMES, probe_points=0)
    assert '<section id="models">' not in without.html


def test_the_cli_takes_a_candidate(iris_models: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    events, y = _frame(iris_models)
    events.to_csv(tmp_path / "ev.csv", index=False)
    np.save(tmp_path / "y.npy", y)
    args = ["report", "--model", str(iris_models["logreg"]), "--reference", str(tmp_path / "ev.csv")]
    args += ["--events", str(tmp_path / "ev.csv"), "--out", str(tmp_path / "r.html"), "--probe-points", "0"]
    args += ["--candidate", str(iris_models["gbdt"]), "--reference-labels", str(tmp_path / "y.npy")]
    args += ["--feature-names", ",".join(NAMES)]
    assert main(args) == 0
    body = _section((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert 'data-model="logreg"' in body and 'data-model="gbdt"' in body and "data-verdict=" in body
    assert re.search(
        r"<td>0\.\d{3} \[0\.\d{3}, [01]\.\d{3}\] (iw|atc)</td>", body
    )  # an estimate, its interval, its method


def test_on_a_log_cut_short_the_comparison_says_what_it_read(iris_models: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    import json

    events, y = _frame(iris_models)
    log = tmp_path / "ev.jsonl"
    log.write_text(
        "".join(
            json.dumps({"id": str(i), "ts": 1_700_000_000_000 + 1000 * i, "features": r}) + "\n"
            for i, r in enumerate(events.to_numpy().tolist())
        )
    )
    report = monitor.report(
        iris_models["logreg"],
        events,
        log,
        candidate=iris_models["logreg"],
        labels=y[:100],
        max_events=100,
        feature_names=NAMES,
        probe_points=0,
    )
    assert report.data.n_events == 100 and report.data.comparison is not None
    note = report.data.comparison_note
    assert (
        "compared on every event (max_events=100 cuts the other sections only)" in note
        and "no realized accuracy per model: labels: 100 values" in note
    )
    assert {r["rows"] for r in report.data.comparison.rows("models")} == {150}
    assert 'data-model="logreg-candidate"' in _section(report.html)


def test_the_sections_pair_the_candidate_with_the_model_per_segment(
    iris_models: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    import json

    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.linear_model import LogisticRegression

    frame = pd.read_csv(iris_models["csv"])
    events, y, seg = frame[NAMES], frame["label"].to_numpy(), frame["seg"].to_numpy()
    x = events.to_numpy(dtype=np.float32)
    proto = convert_sklearn(
        LogisticRegression(C=0.02, max_iter=500).fit(x, y), initial_types=[("float_input", FloatTensorType([None, 4]))]
    )
    flat = tmp_path / "flat.onnx"  # a weaker, flatter model of the same input
    flat.write_bytes(proto.SerializeToString())
    log = tmp_path / "ev.jsonl"
    log.write_text(
        "".join(
            json.dumps({"id": str(i), "ts": 1_700_000_000_000 + 1000 * i, "features": r, "segment": s}) + "\n"
            for i, (r, s) in enumerate(zip(events.to_numpy().tolist(), seg.tolist(), strict=True))
        )
    )
    out = tmp_path / "r.html"
    report = _labelled_report(iris_models["logreg"], events, log, flat, y, out)
    cmp = report.data.comparison
    assert cmp is not None
    # the verdict timeline: per segment, both models' γ, the paired difference and the comparison's verdict
    verdicts = {v["segment"]: v["verdict"] for v in cmp.rows("verdicts")}
    assert set(verdicts) == {"(all)", "long", "short"}
    timeline = _section(report.html, "verdicts")
    rows = re.findall(r'<tr data-segment="([^"]+)" data-verdict="([^"]*)">', timeline)
    assert dict(rows) == verdicts
    gamma = {(r["model"], r["segment"]): r["gamma"] for r in cmp.rows("models")}
    assert all(f"<td>{gamma[(m, 'short')]:.4g}</td>" in timeline for m in ("logreg", "flat"))
    # the performance estimate: both models' estimates per segment, and the realized accuracy
    accuracy = _section(report.html, "accuracy")
    assert 'id="paired-accuracy"' in accuracy
    assert all(r["accuracy_estimate"] is not None for r in cmp.rows("models"))
    for r in cmp.rows("models"):  # per segment an estimate without its interval (fewer events than it needs)
        band = "" if r["accuracy_lower"] is None else f" [{r['accuracy_lower']:.3f}, {r['accuracy_upper']:.3f}]"
        assert f"<td>{r['accuracy_estimate']:.3f}{band}</td><td>{r['accuracy']:.3f}</td>" in accuracy, r
    # the summary says the verdict; the Gamma Map section holds both maps
    summary = _section(report.html, "summary")
    assert f'<span id="summary-comparison">{verdicts["(all)"]}</span>' in summary
    assert 'data-models="logreg,flat"' in _section(report.html, "gammamap")
    assert "None" not in report.html and "nan" not in _section(report.html, "accuracy").lower()
    _, console = render(out, tmp_path, dump=False)
    assert console == []


def test_with_a_reference_json_the_model_is_paired_as_the_page_scores_it(
    iris_models: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    """A reference JSON is the model's alone: the section scores the model with its standardizer and scales (its γ is
    the page's) and takes its estimate from the reference's labelled fit (the summary's figure); the candidate,
    without labelled reference rows, says what would fit it."""
    events, y = _frame(iris_models)
    ref = monitor.reference(iris_models["logreg"], events, labels=y, feature_names=NAMES, flicker_copies=8)
    report = monitor.report(
        iris_models["logreg"], ref, events, candidate=iris_models["gbdt"], feature_names=NAMES, probe_points=0
    )
    cmp, acc = report.data.comparison, report.data.accuracy
    assert cmp is not None and acc is not None
    models = {r["model"]: r for r in cmp.rows("models") if r["segment"] == "(all)"}
    assert models["logreg"]["accuracy_estimate"] == pytest.approx(acc.estimate, abs=1e-12)
    assert models["logreg"]["accuracy_method"] == acc.method
    assert models["logreg"]["gamma"] == pytest.approx(float(np.nanmean(report.data.scores.columns["gamma"])), rel=1e-9)
    assert models["gbdt"]["accuracy_estimate"] is None
    body = _section(report.html)
    assert f"{acc.estimate:.3f} [{acc.lower:.3f}, {acc.upper:.3f}] {acc.method}" in body
    assert "the candidate&#x27;s needs labelled reference rows" in body and "no reference labels" not in body


def test_a_given_standardizer_follows_each_models_columns_by_name() -> None:
    from monitor.comparison.run import _given_standardizer
    from monitor.model.standardize import Standardizer

    given = Standardizer(np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0, 30.0]))
    std, first = _given_standardizer(given, None, ("a", "b", "c"), 3)
    assert std is given and first == ("a", "b", "c")
    std, _ = _given_standardizer(given, first, ("c", "a", "b"), 3)  # the same inputs in another order
    assert std is not None and std.mean.tolist() == [3.0, 1.0, 2.0] and std.scale.tolist() == [30.0, 10.0, 20.0]
    assert _given_standardizer(given, first, ("a", "b", "z"), 3)[0] is None  # another input: not this scale
