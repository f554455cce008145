"""The demo's second model: a regressor with a labelled reference, so that its error estimated without labels
(``harmonic_estimated_error``, HarmonicErrorRise) shows beside the classifier's accuracy.

Data: scikit-learn's diabetes set (442 rows, 10 features, the disease progression a year later). The model is a
ridge regression inside a scaling pipeline; its reference (``reference-regressor.json``, what ``reference --labels``
writes for a regressor) holds the loss estimator fitted on the training rows and their true values. Its events run
beside the classifier's, one for every :data:`EVERY` of them, in the same event time:

- ``stationary``: training rows re-sampled with 2 % per-feature jitter;
- ``input-shift``: the same drawn from the 30 % of rows with the lowest predictions: the inputs move, and the
  error falls (about 29 against the reference's 43);
- ``harmful-shift``: drawn from the 30 % with the highest predictions, where this model errs more (about 48).

The truth of a re-sampled row is its dataset target (the populations move by selection, so the truth stays real).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: the regressor's model name in the demo's events and metrics
NAME = "demo-regressor"
#: one regressor event for every this many classifier events
EVERY = 10


@dataclass(frozen=True)
class RegressorDemo:
    model_path: Path
    reference_path: Path
    #: per phase, the events (JSON bytes), their inputs, predictions and true values
    phases: dict[str, list[bytes]]
    inputs: dict[str, NDArray[np.float64]]
    predictions: dict[str, NDArray[np.float64]]
    truth: dict[str, NDArray[np.float64]]


def build_regressor(workdir: Path, *, timestamps: dict[str, list[int]], seed: int) -> RegressorDemo:
    """Train, convert and reference the regressor; its events at every :data:`EVERY`-th of ``timestamps`` (the
    classifier's event times in ms, per phase)."""
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from monitor.model.convert import convert_estimator
    from monitor.offline.reference import reference

    x, y = load_diabetes(return_X_y=True)
    model = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(x, y)
    model_path = convert_estimator(model, x.shape[1], workdir / "demo-regressor.onnx")
    ref_path = workdir / "reference-regressor.json"
    reference(model_path, x, labels=y, model_kind="regressor", seed=seed, out=ref_path)
    rng = np.random.default_rng([seed, 0x4E6])
    std = x.std(axis=0)
    fitted = model.predict(x)
    low, high = np.quantile(fitted, [0.3, 0.7])
    pools = {
        "stationary": np.arange(x.shape[0]),
        "input-shift": np.flatnonzero(fitted <= low),
        "harmful-shift": np.flatnonzero(fitted >= high),
    }
    out: dict[str, Any] = {"phases": {}, "inputs": {}, "predictions": {}, "truth": {}}
    for phase, times in timestamps.items():
        stamps = times[::EVERY]
        pick = pools[phase][rng.integers(0, pools[phase].shape[0], size=len(stamps))]
        rows = x[pick] + rng.normal(0.0, 0.02, size=(len(stamps), x.shape[1])) * std
        pred = model.predict(rows)
        rows_of = zip(stamps, rows, pred, strict=True)
        out["phases"][phase] = [_event(i, phase, ts, row, p) for i, (ts, row, p) in enumerate(rows_of)]
        out["inputs"][phase], out["predictions"][phase], out["truth"][phase] = rows, pred, y[pick].astype(float)
    return RegressorDemo(model_path, ref_path, **out)


def _event(i: int, phase: str, ts: int, row: NDArray[np.float64], prediction: float) -> bytes:
    doc = {
        "id": f"{NAME}-{phase}-{i}",
        "ts": ts,
        "model": NAME,
        "model_version": "1",
        "features": [round(float(v), 6) for v in row],
        "prediction": {"value": float(prediction)},
    }
    return json.dumps(doc).encode()


def merged(classifier: list[bytes], regressor: list[bytes]) -> list[bytes]:
    """Both models' events of a phase in event-time order (the classifier's first at equal times)."""
    keyed = [(json.loads(line)["ts"], 0, k, line) for k, line in enumerate(classifier)]
    keyed += [(json.loads(line)["ts"], 1, k, line) for k, line in enumerate(regressor)]
    return [line for *_, line in sorted(keyed)]


def phase_error(demo: RegressorDemo, phase: str, fit: Any) -> dict[str, Any]:
    """The phase's MAE estimated without labels by ``fit`` (the pipeline's loss estimator,
    :mod:`monitor.accuracy.regression`, its default method) with its 90 % interval, beside the MAE it realized and the
    reference's."""
    from monitor.accuracy.regression import estimate_loss

    doc = estimate_loss(fit, demo.inputs[phase], demo.predictions[phase])
    mae = doc["mae"]
    realized = float(np.mean(np.abs(demo.truth[phase] - demo.predictions[phase])))
    return {
        "events": len(demo.phases[phase]),
        "method": doc["method"],
        "estimate": mae["estimate"],
        "lower": mae["lower"],
        "upper": mae["upper"],
        "realized": realized,
        "reference": fit.mae,
    }
