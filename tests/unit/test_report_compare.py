"""The report page's section "Two models" (``monitor.report(..., candidate=)``, ``harmonic-monitor report
--candidate``): drawn from ``monitor.compare`` on the same events, on real skl2onnx models (test_compare's)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

import monitor
from monitor.cli import main
from monitor.reporting import SECTIONS
from tests.unit.test_compare import NAMES, iris_models  # noqa: F401  (the module's fixture of real models)
from tests.unit.test_report_page import render


def _section(page: str) -> str:
    found = re.search(r'<section id="models">(.*?)</section>', page, re.S)
    assert found, "no section 'Two models'"
    return found.group(1)


def _frame(models: dict[str, Path]) -> tuple[pd.DataFrame, np.ndarray]:
    frame = pd.read_csv(models["csv"])
    return frame[NAMES], frame["label"].to_numpy()


def test_two_models_side_by_side_from_the_comparison(iris_models: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    events, y = _frame(iris_models)
    out = tmp_path / "r.html"
    report = monitor.report(
        iris_models["logreg"],
        events,
        events,
        candidate=iris_models["gbdt"],
        labels=y,
        reference_labels=y,
        feature_names=NAMES,
        probe_points=0,
        out=out,
    )
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
    # both Gamma Maps, drawn by the one renderer, side by side in one figure
    assert 'data-models="logreg,gbdt"' in body and "logreg (n=150)" in body and "gbdt (n=150)" in body
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
    assert re.search(r"<td>0\.\d{3} \[0\.\d{3}, [01]\.\d{3}\]</td>", body)  # an estimate with its interval


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
