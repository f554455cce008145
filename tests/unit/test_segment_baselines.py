"""Each segment against its own baseline (monitor/rolling/segment_baselines.py, ModelWatch.baseline): from reference
data that carries the segment, or from the segment's own first events; the reference file's per-segment baselines."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.cli import main
from monitor.drift.verdict import Verdict, VerdictEngine
from monitor.errors import DataError
from monitor.exporters.prometheus import MetricsState
from monitor.gammamap import GAMMA_EDGES
from monitor.model.standardize import Standardizer
from monitor.rolling.reference import Basis
from monitor.rolling.reference_file import (
    REFERENCE_VERSION,
    read_reference,
    read_segment_references,
    write_reference,
)
from monitor.rolling.segment_baselines import MIN_SEGMENT_ROWS, segment_references, split_segment_column
from monitor.runtime.watch import ModelWatch
from tests.unit.onnx_graphs import training_blobs, zipmap_classifier
from tests.unit.test_watch import MODEL, Stream, make_watch, reference


def warming(state: MetricsState, segment: str) -> float | None:
    return state.gauge(tel.SEGMENT_WARMING_UP.name, (MODEL, segment))


def test_a_segment_unlike_the_average_is_judged_against_its_own_warm_up_baseline() -> None:
    watch, state = make_watch()  # model-wide reference: feature 1 centred at 0; this segment's sits at +1.5
    stream = Stream(seed=1)
    model_wide = VerdictEngine(watch.reference, watch.config.detectors)  # type: ignore[arg-type]
    for _ in range(4):
        watch.update(*stream.batch(segment="east", moved=True))
    # warming up (500 events): no verdict, the gauge and /readyz's source say so
    assert watch.verdict("east") is None
    assert warming(state, "east") == 1.0
    assert watch.warming_up == {"east": {"events": 400, "of": 500}}
    verdicts = []
    for _ in range(40):
        events, x, result, shadow = stream.batch(segment="east", moved=True)
        watch.update(events, x, result, shadow)
        model_wide.update(gamma=result.gamma, flicker=result.flicker, features=x)
        verdicts.append(watch.verdict("east"))
    assert warming(state, "east") == 0.0 and watch.warming_up == {}
    assert "east" in watch.segment_references
    assert set(verdicts[1:]) == {Verdict.STABLE}, verdicts
    # the same events against the model-wide reference: what the segment was wrongly called before
    assert model_wide.verdict == Verdict.INPUT_SHIFT


def test_a_segment_still_sees_a_harmful_shift_against_its_own_baseline() -> None:
    watch, _ = make_watch(for_seconds=1.0)
    stream = Stream(seed=2)
    for _ in range(20):
        watch.update(*stream.batch(segment="east", moved=True))
    assert watch.verdict("east") == Verdict.STABLE
    for _ in range(30):
        watch.update(*stream.batch(segment="east", moved=True, harmful=True))
    assert watch.verdict("east") == Verdict.HARMFUL_SHIFT


def test_other_warms_up_its_own_baseline_once_named_segments_appear() -> None:
    watch, state = make_watch()
    stream = Stream(seed=3)
    for _ in range(3):
        watch.update(*stream.batch())  # an unsegmented stream: "other" is the whole stream, the model-wide reference
    assert watch.verdict("other") == Verdict.STABLE and not watch.segmented
    assert watch.baseline("other") is watch.reference
    watch.update(*stream.batch(segment="eu"))
    watch.update(*stream.batch())
    assert watch.segmented and watch.baseline("other") is None
    assert watch.verdict("other") is None and set(watch.warming_up) == {"eu", "other"}
    assert warming(state, "other") == 1.0
    for _ in range(5):
        watch.update(*stream.batch())
    assert watch.baseline("other") is not None and watch.baseline("other") is not watch.reference
    assert watch.verdict("other") == Verdict.STABLE


def test_learned_baselines_are_kept_with_the_state() -> None:
    watch, _ = make_watch()
    stream = Stream(seed=4)
    for _ in range(6):
        watch.update(*stream.batch(segment="eu", moved=True))
    saved = json.loads(json.dumps(watch.dump()))
    again, state = make_watch(with_reference=False)
    again.restore(saved)
    assert again.segmented and sorted(again.segment_references) == ["eu"]
    assert again.segment_references["eu"].n_events == 500
    assert np.allclose(again.segment_references["eu"].feature_mean, watch.segment_references["eu"].feature_mean)
    assert warming(state, "eu") == 0.0
    again.update(*stream.batch(segment="eu", moved=True))
    assert again.verdict("eu") == Verdict.STABLE  # judged at once: no second warm-up


def test_reference_rows_with_segments_give_each_segment_its_baseline() -> None:
    stream = Stream(seed=5)
    events, x, result, shadow = stream.batch(n=1000)
    segs = np.array(["a"] * 600 + ["b"] * 300 + ["c"] * 100)
    watch, _ = make_watch(with_reference=False)
    watch.set_reference(x, result, segs)
    # "c" has half of MIN_SEGMENT_ROWS rows, like the rest: shrunk toward them, its own rows half of its baseline
    assert sorted(watch.segment_references) == ["a", "b", "c"]
    assert watch.segment_references["a"].n_events == 600
    assert watch.segment_references["c"].basis == Basis("shrunk", 100, 0.5)
    assert watch.segment_references["c"].n_events == MIN_SEGMENT_ROWS
    bases = {"a": "own (600 rows)", "b": "own (300 rows)", "c": "shrunk (100 rows, weight 0.50)"}
    # until a named segment appears live, "other" is the whole stream: the model-wide reference
    assert watch.baselines.bases == {**bases, "other": "model-wide (1000 rows)"}
    assert watch.reference is not None and watch.reference.n_events == 1000
    watch.update(*stream.batch(segment="a"))
    assert watch.verdict("a") == Verdict.STABLE and watch.warming_up == {}


def test_segment_references_fold_rare_segments_into_other() -> None:
    rng = np.random.default_rng(0)
    segs = np.array(["a"] * 300 + ["b"] * 150 + ["c"] * 150 + ["other"] * 10)
    n = segs.size
    refs = segment_references(
        segs, gamma=rng.exponential(size=n), flicker=np.zeros(n), features=rng.normal(size=(n, 2)), max_segments=1
    )
    assert sorted(refs) == ["a", "other"] and refs["other"].n_events == 310
    with pytest.raises(DataError, match="segment labels for"):
        segment_references(segs[:5], gamma=np.zeros(n), flicker=np.zeros(n), features=np.zeros((n, 2)))
    assert MIN_SEGMENT_ROWS == 200


def test_the_segment_column_is_read_out_of_a_csv(tmp_path: Path) -> None:
    csv = tmp_path / "ref.csv"
    csv.write_text("a,city,b\n1,paris,2\n3,,4\n", encoding="utf-8")
    with split_segment_column(csv, "city") as (path, segments):
        assert path.read_text(encoding="utf-8").splitlines() == ["a,b", "1,2", "3,4"]
        assert segments.tolist() == ["paris", "other"]
    assert not path.exists()
    with (
        pytest.raises(DataError, match=r"names no such column \(it names \['a', 'city', 'b'\]\)"),
        split_segment_column(csv, "town"),
    ):
        pass
    with (
        pytest.raises(DataError, match="needs a CSV with a header row"),
        split_segment_column(tmp_path / "x.npy", "city"),
    ):
        pass


def test_reference_file_keeps_per_segment_baselines_and_reads_the_old_version(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    std = Standardizer.identity(2)
    out = write_reference(
        tmp_path / "ref.json",
        std,
        reference(),
        model="m",
        space="raw",
        segments={"eu": reference(7, 300)},
        segment_column="city",
    )
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["version"] == REFERENCE_VERSION == 2 and doc["segments"]["column"] == "city"
    refs = read_segment_references(out, 2)
    assert sorted(refs) == ["eu"] and refs["eu"].n_events == 300
    with pytest.raises(DataError, match=r"segments \['eu'\] for another feature count"):
        read_segment_references(out, 3)
    doc["version"] = 1
    del doc["segments"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc), encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="monitor.rolling.reference_file"):
        _, ref = read_reference(old, 2)
    assert ref.n_events == 5000 and read_segment_references(old, 2) == {}
    assert any("older version" in r.getMessage() for r in caplog.records)
    doc["segments"] = {"baselines": {"eu": 3}}
    old.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(DataError, match="damaged per-segment baselines"):
        read_segment_references(old, 2)


def test_reference_command_stores_a_baseline_per_segment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, _ = zipmap_classifier(tmp_path / "clf.onnx", seed=0)
    x, _ = training_blobs(seed=3, n_rows=600)
    segs = np.where(x[:, 0] > np.median(x[:, 0]), "high", "low")
    csv = tmp_path / "ref.csv"
    csv.write_text(
        "f0,region,f1\n" + "".join(f"{a:.5f},{s},{b:.5f}\n" for (a, b), s in zip(x, segs, strict=True)),
        encoding="utf-8",
    )
    out = tmp_path / "ref.json"
    assert (
        main(["reference", "--model", str(model), "--data", str(csv), "--segment-column", "region", "--out", str(out)])
        == 0
    )
    refs = read_segment_references(out, 2)
    assert sorted(refs) == ["high", "low"]
    assert refs["high"].feature_mean[0] > refs["low"].feature_mean[0]
    _, whole = read_reference(out, 2)
    assert whole.n_events == 600
    # every baseline's Gamma Map is on the model's own γ edges (they add up cell by cell), and the command says so
    assert whole.gamma_edges != GAMMA_EDGES and all(r.gamma_edges == whole.gamma_edges for r in refs.values())
    assert "Gamma Map: the model's own γ edges" in capsys.readouterr().err
    assert main(["reference", "--model", str(model), "--data", str(csv), "--segment-column", "zone", "--out", str(out)])
    assert "segment column 'zone'" in capsys.readouterr().err


def test_a_watch_without_segments_is_judged_against_the_model_wide_reference_at_once() -> None:
    watch, state = make_watch()
    stream = Stream(seed=6)
    watch.update(*stream.batch())
    assert watch.verdict("other") == Verdict.STABLE and watch.warming_up == {}
    assert warming(state, "other") is None
    assert isinstance(watch, ModelWatch)


def test_reference_says_what_each_baseline_allows_and_names_small_segments_and_constant_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, _ = zipmap_classifier(tmp_path / "clf.onnx", seed=0)
    x, _ = training_blobs(seed=3, n_rows=1200)
    x[:, 1] = 2.5  # a constant input
    segs = np.array(["big"] * 1000 + ["small"] * 199 + ["one"])
    csv = tmp_path / "ref.csv"
    csv.write_text(
        "f0,region,f1\n" + "".join(f"{a:.5f},{s},{b:.5f}\n" for (a, b), s in zip(x, segs, strict=True)),
        encoding="utf-8",
    )
    out = tmp_path / "ref.json"
    args = ["reference", "--model", str(model), "--data", str(csv), "--segment-column", "region", "--out", str(out)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert (
        "the range test flags an input from this share of a 1000-event window outside its range: big (1000 rows)" in err
    )
    assert (
        "per-segment baselines: big own (1000 rows), one borrowed (1 row), small shrunk (199 rows, weight 0.99)" in err
    )
    assert "baselines 'big', 'one', 'small' hold f1 constant" in err
    # check-config reads the same file and says the same of each baseline
    config = tmp_path / "monitor.yaml"
    config.write_text(f"models:\n  - {{name: m, path: {model}, reference: {out}}}\n", encoding="utf-8")
    assert main(["check-config", "--config", str(config)]) == 0
    err = capsys.readouterr().err
    assert "one borrowed (1 row) " in err and "small shrunk (199 rows, weight 0.99) " in err
    assert "model 'm': note: baselines 'big', 'one', 'small' hold f1 constant" in err
    assert "a segment without a baseline here warms up on its own first events live" in err


def test_reference_refuses_an_input_that_is_nan_in_every_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, _ = zipmap_classifier(tmp_path / "clf.onnx", seed=0)
    x, _ = training_blobs(seed=3, n_rows=300)
    csv = tmp_path / "ref.csv"
    csv.write_text("f0,f1\n" + "".join(f"{a:.5f},nan\n" for a, _ in x), encoding="utf-8")
    assert main(["reference", "--model", str(model), "--data", str(csv), "--out", str(tmp_path / "r.json")]) == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "every one of its" in ln]
    assert "input f1 is NaN or infinite in every one of its 300 rows" in line and "fill the column" in line
