"""The embedded demo: a model trained on a dataset shipped with scikit-learn, an ONNX copy, and a replayed stream in
three phases — stationary, an input (covariate) shift, a harmful shift — pushed through the same pipeline as ``run``.

Data (breast-cancer, 30 features, binary). The model is an L1-regularised logistic regression inside a scaling
pipeline, so several features get weight exactly 0.

- ``stationary``: training rows re-sampled with 2 % per-feature jitter — the reference distribution.
- ``input-shift``: the same, with the zero-weight features moved by +1.5 standard deviations. The inputs move
  (per-feature KS fires) but the model's output, hence γ, flicker and confidence, cannot change: the verdict is
  ``input-shift`` (harm unknown from the outputs; here the accuracy estimate and the truth show none).
- ``harmful-shift``: half of the events are placed near the decision boundary (on the segment between a row of
  each class, at a logit drawn from N(0, 1.5)): inputs move *toward the boundary*, so γ and flicker rise and the
  model's confidence falls.

Event time advances 10 ms per event (100 events/s of event time), so alert ``for`` durations mean the same as live.

Truth, for the realized accuracy the demo prints beside its label-free estimate: a re-sampled row keeps its
dataset label; a row placed on the segment between two rows of different classes takes the class of the nearer
end. The labelled reference (``reference.json``, what ``reference --labels`` writes) is fitted on the training rows
with their labels: fine for this strongly regularised linear model, whose training accuracy is close to its
held-out accuracy; in production give ``reference --labels`` a validation set the model did not train on.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ModelError

PHASES = ("stationary", "input-shift", "harmful-shift")
EVENT_SPACING_MS = 10
START_MS = 1_795_000_000_000


@dataclass(frozen=True)
class DemoData:
    model_path: Path
    reference_path: Path
    n_features: int
    zero_weight_features: tuple[int, ...]
    phases: dict[str, list[bytes]]
    feature_names: tuple[str, ...] = ()
    #: per phase, the true class of each event (see the module docstring)
    labels: dict[str, list[int]] = field(default_factory=dict)
    #: the reference as JSON with the fitted accuracy estimators (``reference --labels`` on the training rows)
    labelled_reference_path: Path | None = None

    def realized_accuracy(self, phase: str) -> float:
        """The share of the phase's events whose live prediction equals its true class."""
        live = [int(json.loads(line)["prediction"]["label"]) for line in self.phases[phase]]
        truth = self.labels[phase]
        return sum(a == b for a, b in zip(live, truth, strict=True)) / len(truth) if truth else float("nan")


def build_demo(workdir: Path, *, events: int, seed: int) -> DemoData:
    """Train, convert and generate the three phases' raw events (JSON bytes, one plain event each) into ``workdir``."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from monitor.model.convert import convert_estimator

    dataset = load_breast_cancer()
    X, y = dataset.data, dataset.target
    names = tuple(str(n) for n in dataset.feature_names)
    rng = np.random.default_rng(seed)
    model = make_pipeline(StandardScaler(), LogisticRegression(penalty="l1", solver="liblinear", C=0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    coef = model[-1].coef_.ravel()
    zero = tuple(int(j) for j in np.flatnonzero(coef == 0.0))
    if len(zero) < 2:
        raise ModelError(f"demo model kept {len(zero)} zero-weight features; expected several (L1 regularisation)")
    workdir.mkdir(parents=True, exist_ok=True)
    model_path = convert_estimator(model, X.shape[1], workdir / "demo-model.onnx")
    reference_path = workdir / "reference.csv"
    np.savetxt(reference_path, X, delimiter=",")
    labelled_path = write_labelled_reference(
        model_path, reference_path, X, y, workdir / "reference.json", feature_names=names, seed=seed
    )

    std = X.std(axis=0)
    per_phase = [events // 3, events // 3, events - 2 * (events // 3)]

    def stationary(k: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        pick = rng.integers(0, X.shape[0], size=k)
        rows = X[pick]
        return np.asarray(rows + rng.normal(0.0, 0.02, size=rows.shape) * std), np.asarray(y[pick], dtype=np.int64)

    shifted, shifted_y = stationary(per_phase[1])
    moved = list(zero[: min(6, len(zero))])
    shifted[:, moved] += 1.5 * std[moved]

    harmful, harmful_y = stationary(per_phase[2])
    near = rng.random(per_phase[2]) < 0.5
    a = X[y == 0][rng.integers(0, int((y == 0).sum()), size=per_phase[2])]
    b = X[y == 1][rng.integers(0, int((y == 1).sum()), size=per_phase[2])]
    la, lb = model.decision_function(a), model.decision_function(b)
    target = rng.normal(0.0, 1.5, size=per_phase[2])
    t = np.clip((la - target) / (la - lb), 0.0, 1.0)  # the logit is affine along the segment
    boundary = a + t[:, None] * (b - a)
    harmful[near] = boundary[near]
    harmful_y[near] = (t[near] >= 0.5).astype(np.int64)  # the nearer end's class: a is class 0, b class 1

    phases: dict[str, list[bytes]] = {}
    first, first_y = stationary(per_phase[0])
    truth = dict(zip(PHASES, ([int(v) for v in phase_y] for phase_y in (first_y, shifted_y, harmful_y)), strict=True))
    counter = 0
    for name, rows in zip(PHASES, (first, shifted, harmful), strict=True):
        live = model.predict(rows)
        proba = model.predict_proba(rows)
        lines = []
        for i in range(rows.shape[0]):
            doc = {
                "id": f"demo-{counter}",
                "ts": START_MS + counter * EVENT_SPACING_MS,
                "model": "demo",
                "model_version": "1",
                "features": [round(float(v), 6) for v in rows[i]],
                "prediction": {"label": int(live[i]), "probabilities": [float(p) for p in proba[i]]},
            }
            lines.append(json.dumps(doc).encode())
            counter += 1
        phases[name] = lines
    return DemoData(model_path, reference_path, X.shape[1], zero, phases, names, truth, labelled_path)


def write_labelled_reference(
    model_path: Path,
    reference_csv: Path,
    rows: NDArray[np.float64],
    labels: NDArray[np.int64],
    out: Path,
    *,
    feature_names: tuple[str, ...],
    seed: int,
) -> Path:
    """What ``reference --labels`` writes, scored exactly as ``run`` scores the model with ``reference_csv`` as its
    reference (its standardizer, ``scoring.seed`` = ``seed``, the other scoring settings at their defaults)."""
    from monitor.accuracy.labelled import labelled_fit
    from monitor.config import ModelSettings
    from monitor.rolling.reference import Reference
    from monitor.rolling.reference_file import write_reference
    from monitor.runtime.models import load_model_runtime

    rt = load_model_runtime(
        ModelSettings(name="demo", path=model_path, reference=reference_csv, scoring={"seed": seed})
    )
    assert rt.scorer is not None and rt.standardizer is not None
    result = rt.scorer.score(rows)
    ok = result.valid
    ref = Reference.from_arrays(
        gamma=result.gamma[ok],
        flicker=result.flicker[ok],
        features=rows[ok],
        predicted_class=result.predicted_class[ok],
        feature_names=feature_names or None,
        confidence=result.probability[ok],
        margin=result.margin[ok],
    )
    fit = labelled_fit(rt.model, rows, None, result, labels, seed=seed)
    return write_reference(
        out, rt.standardizer, ref, model=str(model_path), space="standardized", accuracy_estimator=fit.to_dict()
    )
