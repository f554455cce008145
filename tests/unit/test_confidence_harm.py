"""A fall in confidence is harm evidence only where the labelled reference shows the least confident answers wrong.

- :class:`ConfidenceErrors` bounds what a fall can cost from the least confident tenth of the labelled rows; a model
  about as right there as overall (within ``accuracy.tolerance``) has its confidence and margin CUSUMs read as
  fragility (``input-shift``), a model wrong there keeps them as harm evidence, and too few rows to tell keep them too;
- the fit keeps the count through its JSON; a fit written before it was kept reads as "not measured" (harm evidence);
- ``drift.confidence_harm`` (auto / always / never) decides, in the engine and in a model's watch.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.accuracy import EstimatorFit, estimate, fit_estimators
from monitor.accuracy.confidence_errors import ConfidenceErrors, confidence_harm
from monitor.cli import main
from monitor.config import DriftSettings
from monitor.drift import VerdictEngine
from monitor.drift.verdict import Verdict
from monitor.runtime.watch import ACCURACY_ALERT, HARMFUL_ALERT, INPUT_ALERT

from .test_confidence_drift import _with_confidence, confidence_like, reference
from .test_watch import MODEL, Stream, fired, make_watch


def _labelled(seed: int, n: int, *, tracks: bool) -> tuple[np.ndarray, np.ndarray]:
    """Max-probabilities like a binary GBDT's and whether each answer is right: as often as the model is sure
    (``tracks``), or 99.9 % of the time whatever its confidence."""
    rng = np.random.default_rng(seed)
    conf = confidence_like(rng, n)
    return conf, rng.uniform(size=n) < (conf if tracks else 0.999)


def test_the_bound_follows_the_errors_of_the_least_confident_tenth() -> None:
    tracks = ConfidenceErrors.measure(*_labelled(0, 5000, tracks=True))
    flat = ConfidenceErrors.measure(*_labelled(0, 5000, tracks=False))
    assert tracks.rows == flat.rows == 500 and tracks.n == 5000
    assert tracks.low_accuracy < tracks.accuracy - 0.15 and tracks.harm_evidence(0.05)
    assert flat.loss_bound() < 0.02 and not flat.harm_evidence(0.05)
    assert flat.harm_evidence(0.001)  # a tighter tolerance: even a small loss counts
    # 60 rows, none wrong among the 6 least confident: too few to show that a fall costs nothing
    few = ConfidenceErrors.measure(*_labelled(1, 60, tracks=False))
    assert few.rows == 6 and few.errors == 0 and few.harm_evidence(0.05)
    all_wrong = ConfidenceErrors(rows=10, errors=10, n=100, accuracy=0.9, confidence=0.6)
    assert all_wrong.loss_bound() == pytest.approx(0.9)
    # right everywhere and sure everywhere: the reference has no unsure rows, so it cannot tell what a fall costs
    sure = ConfidenceErrors.measure(np.full(5000, 0.999), np.ones(5000, dtype=bool))
    assert sure.loss_bound() < 0.01 and not sure.unsure(0.05) and sure.harm_evidence(0.05)


def test_the_words_say_what_the_rows_show_and_what_follows() -> None:
    flat = ConfidenceErrors.measure(*_labelled(0, 5000, tracks=False))
    harm, why = confidence_harm("auto", flat, 0.05)
    assert not harm and "(500 rows, mean max-probability 0.808) were right 100.0%" in why
    assert "reported as fragility" in why and "accuracy estimate read from it" in why
    assert confidence_harm("always", flat, 0.05)[0] and not confidence_harm("never", None, 0.05)[0]
    harm, why = confidence_harm("auto", None, 0.05)
    assert harm and "no labelled reference" in why
    tracks = ConfidenceErrors.measure(*_labelled(0, 5000, tracks=True))
    assert confidence_harm("auto", tracks, 0.05)[1].endswith(
        "can cost up to 20.5 points (95 % bound): a fall in confidence or margin is harm evidence"
    )
    sure = ConfidenceErrors.measure(np.full(500, 0.999), np.ones(500, dtype=bool))
    assert "even those rows were sure" in confidence_harm("auto", sure, 0.05)[1]


def test_the_fit_keeps_the_count_and_an_older_fit_reads_as_not_measured() -> None:
    conf, ok = _labelled(2, 1000, tracks=False)
    rng = np.random.default_rng(2)
    fit = fit_estimators(conf, rng.exponential(size=1000), np.zeros(1000), conf, ok, draws=5)
    assert fit.confidence_errors == ConfidenceErrors.measure(conf, ok)
    doc = fit.to_dict()
    assert EstimatorFit.from_dict(doc).confidence_errors == fit.confidence_errors
    # the estimate says what this model's confidence can tell it
    window = estimate(fit, conf[:500], np.ones(500), np.zeros(500), conf[:500])
    assert any("barely tracks its errors" in c for c in window["caveats"])
    conf2, ok2 = _labelled(2, 1000, tracks=True)
    tracking = fit_estimators(conf2, np.ones(1000), np.zeros(1000), conf2, ok2, draws=5)
    assert not any("barely" in c for c in estimate(tracking, conf2, np.ones(1000), np.zeros(1000), conf2)["caveats"])
    del doc["confidence_errors"]
    assert EstimatorFit.from_dict(doc).confidence_errors is None
    with pytest.raises(Exception, match="damaged"):
        EstimatorFit.from_dict(
            {**fit.to_dict(), "confidence_errors": {"rows": 5, "errors": 9, "n": 10, "accuracy": 1, "confidence": 0.5}}
        )


def _falls(engine: VerdictEngine, seed: int) -> VerdictEngine:
    rng = np.random.default_rng(seed)
    for fall in [0.0] * 20 + [0.3] * 10:
        engine.update(
            gamma=rng.exponential(1e-3, 100),
            flicker=np.where(rng.random(100) < 0.05, 0.25, 0.0),
            features=rng.normal(size=(100, 3)),
            confidence=confidence_like(rng, 100, fall=fall),
        )
    return engine


def test_the_engine_reads_a_fall_as_fragility_when_confidence_is_no_harm_evidence() -> None:
    harm = _falls(VerdictEngine(reference(2)), 11).report
    assert harm.verdict is Verdict.HARMFUL_SHIFT and "confidence_cusum" in harm.fired
    engine = _falls(VerdictEngine(reference(2), confidence_harm=False), 11)
    fragile = engine.report
    assert fragile.verdict is Verdict.INPUT_SHIFT and "confidence_cusum" in fragile.fragility
    assert "confidence_cusum" in fragile.unsure and fragile.message.startswith("input-shift: confidence_cusum")
    assert "; confidence fell, no harm evidence for this model (drift.confidence_harm)" in fragile.message
    # the same detectors, thresholds and alarms: only what they are evidence of changed
    assert engine.thresholds == VerdictEngine(reference(2)).thresholds


@pytest.mark.parametrize("mode", ["auto", "always"])
def test_a_watch_follows_its_labelled_reference_unless_the_setting_says_otherwise(mode: str) -> None:
    detectors = DriftSettings(window=1000, every=100, confidence_harm=mode)
    watch, state = make_watch(with_reference=False, for_seconds=5.0, detectors=detectors)
    conf, ok = _labelled(3, 2000, tracks=False)
    rng = np.random.default_rng(3)
    watch.set_accuracy_fit(fit_estimators(conf, rng.exponential(size=2000), np.zeros(2000), conf, ok, draws=5))
    assert watch.verdicts.confidence_harm is (mode == "always")
    stream = Stream(seed=21)
    for fall in [0.0] * 25 + [0.3] * 30:  # a warm-up reference, then the model grows less sure
        watch.update(*_with_confidence(stream.batch(), confidence_like(rng, 100, fall=fall)))
    report = watch.last_reports["other"]
    assert "confidence_cusum" in report.fired
    # the rule is on /metrics: 1, a fall in confidence is harm evidence; 0, fragility
    assert tel.CONFIDENCE_HARM_EVIDENCE.get(state, tel.Model(MODEL)) == (1.0 if mode == "always" else 0.0)
    if mode == "always":
        assert report.verdict is Verdict.HARMFUL_SHIFT and not report.fragility and fired(watch, HARMFUL_ALERT)
    else:
        # the CUSUMs fired as fragility, and the estimate read from the same confidence (the fit's ATC reads
        # confidences below all but 0.1 % of the reference's as wrong answers) is shown and alerts on its own, but is
        # no harm evidence in the verdict
        assert {"confidence_cusum", "confidence_tail_cusum"} <= set(report.fragility) == set(report.unsure)
        assert report.verdict is Verdict.INPUT_SHIFT and report.accuracy_estimate is not None
        assert fired(watch, INPUT_ALERT) and fired(watch, ACCURACY_ALERT) and not fired(watch, HARMFUL_ALERT)
        # the input alert lists the confidence CUSUMs among its evidence and says why they are not harm
        shift = fired(watch, INPUT_ALERT)[0].alert.description
        assert "confidence_cusum CUSUM" in shift and "(confidence fell, no harm evidence for this model" in shift
        drop = fired(watch, ACCURACY_ALERT)[0].alert.description
        assert "least confident answers were right" in drop and "no harm evidence in the verdict" in drop


# -- end to end: a scikit-learn logistic regression, converted by skl2onnx, through reference, check-config, replay --
def _correlated(rho: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two inputs N(0, 1) correlated ``rho`` and two independent ones; the class is x0 + x1 > 0."""
    z = np.random.default_rng(seed).normal(size=(n, 4))
    x = np.column_stack([z[:, 0], rho * z[:, 0] + np.sqrt(1.0 - rho * rho) * z[:, 1], z[:, 2:]])
    return x, (x[:, 0] + x[:, 1] > 0.0).astype(np.int64)


@pytest.fixture(scope="module")
def unsure_but_right(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A regularised logistic regression (underconfident: its least confident tenth is right 97.5 % of the time at
    a mean max-probability of 0.61), its labelled reference of 4,000 rows, and 8,000 live events whose inputs'
    correlation flips halfway: confidence falls 0.92 → 0.75, accuracy 0.998 → 0.984."""
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    root = tmp_path_factory.mktemp("unsure_but_right")
    x, y = _correlated(0.9, 3000, 0)
    model = LogisticRegression(C=0.1).fit(x, y)
    onx = to_onnx(model, x[:1].astype(np.float32), options={id(model): {"zipmap": False}})
    (root / "lr.onnx").write_bytes(onx.SerializeToString())
    xr, yr = _correlated(0.9, 4000, 1)
    np.savetxt(root / "ref.csv", xr, delimiter=",")
    np.savetxt(root / "y.csv", yr, fmt="%d")
    live = np.vstack([_correlated(0.9, 4000, 2)[0], _correlated(-0.9, 4000, 3)[0]])
    lines = (
        json.dumps({"id": f"e{i}", "ts": 1_795_000_000_000 + 10 * i, "model": "m", "features": row})
        for i, row in enumerate(live.tolist())
    )
    (root / "live.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_reference_check_config_and_replay_say_a_fall_of_this_models_confidence_is_not_harm(
    unsure_but_right: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unsure_but_right
    ref = tmp_path / "ref.json"
    args = ["--data", str(root / "ref.csv"), "--header", "no", "--labels", str(root / "y.csv"), "--out", str(ref)]
    assert main(["reference", "--model", str(root / "lr.onnx"), *args]) == 0
    err = capsys.readouterr().err
    assert "confidence: the least confident 10% of the labelled reference (400 rows" in err
    assert "reported as fragility (input-shift), not harm" in err

    verdicts = {}
    for mode in ("auto", "always"):
        config = tmp_path / f"{mode}.yaml"
        config.write_text(
            f"models:\n  - {{name: m, path: {root / 'lr.onnx'}, reference: {ref}}}\n"
            f"drift:\n  confidence_harm: {mode}\n",
            encoding="utf-8",
        )
        assert main(["check-config", "--config", str(config)]) == 0
        err = capsys.readouterr().err
        assert ("reported as fragility" in err) is (mode == "auto")
        timeline = tmp_path / f"{mode}.json"
        replay = ["--model-name", "m", "--reference", str(ref), "--events", str(root / "live.jsonl")]
        code = main(
            ["replay", "--model", str(root / "lr.onnx"), *replay, "--config", str(config), "--timeline", str(timeline)]
        )
        assert code == 0
        capsys.readouterr()  # the replay's own log lines
        changes = json.loads(timeline.read_text(encoding="utf-8"))["changes"]
        assert changes and all(c["index"] >= 4000 for c in changes)  # nothing before the flip
        verdicts[mode] = {c["verdict"] for c in changes}
        unsure = "confidence fell, no harm evidence for this model (drift.confidence_harm)"
        assert all((unsure in c["not_harm"]) is (mode == "auto") for c in changes)
    # accuracy fell 1.4 points: the labelled reference said so in advance; `always` calls it harm all the same
    assert verdicts == {"auto": {"input-shift"}, "always": {"harmful-shift"}}

    # the report page, from the `auto` replay's timeline, says why the confidence CUSUMs that fired are not harm
    page = tmp_path / "page.html"
    report = ["--events", str(root / "live.jsonl"), "--timeline", str(tmp_path / "auto.json"), "--out", str(page)]
    args = ["--model-name", "m", "--config", str(tmp_path / "auto.yaml"), "--probe-points", "0"]
    assert main(["report", "--model", str(root / "lr.onnx"), "--reference", str(ref), *report, *args]) == 0
    printed = capsys.readouterr()
    assert "no probe profile: probe points 0 (none asked for)" in printed.out + printed.err
    summary = page.read_text(encoding="utf-8").split("Verdict timeline per segment")[0]
    assert "input-shift</span> at the end, on confidence" in summary and f"({unsure})" in summary
    assert "grew less sure or more fragile with no evidence of lost performance" in summary
