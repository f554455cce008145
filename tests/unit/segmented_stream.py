"""A segmented stream for the per-segment baseline tests: a GBDT on 4 inputs, 5 segments that follow input ``x0``.

Each segment (a city) sits at its own value of ``x0``, so its inputs, γ and flicker differ from the model-wide
average by construction. Events are stationary, except that from :data:`SHIFT_AT` on the events of one segment
(:data:`SHIFTED`) move onto the model's class boundary. Event time advances 10 ms per event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from tests.unit.onnx_graphs import sklearn_to_onnx

SEGMENTS = ("north", "east", "south", "west", "centre")
#: each segment's share of the events and its value of x0
SHARES = (0.24, 0.22, 0.2, 0.18, 0.16)
CENTRES = (-2.0, -1.0, 0.0, 1.0, 2.0)
NAMES = ("x0", "x1", "x2", "x3")
SHIFTED = "north"
EVENTS = 16_000
SHIFT_AT = 11_000
START_MS = 1_795_000_000_000


@dataclass(frozen=True)
class SegmentedStream:
    model: Path
    reference: Path  # CSV with a header: x0..x3 and the segment column "city"
    reference_plain: Path  # the same rows without the segment column
    stationary: Path  # EVENTS stationary events
    shifted: Path  # the same, SHIFTED's events on the boundary from SHIFT_AT on


def _rows(rng: np.random.Generator, n: int) -> tuple[NDArray[np.float64], NDArray[np.str_]]:
    seg = rng.choice(len(SEGMENTS), size=n, p=SHARES)
    x = rng.normal(size=(n, 4))
    x[:, 0] = np.asarray(CENTRES)[seg] + 0.3 * x[:, 0]
    return x, np.asarray(SEGMENTS)[seg]


def _logit(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(x[:, 1] + x[:, 2] - 0.5 * x[:, 3] + 0.4 * x[:, 0])


def build(root: Path, *, seed: int = 0) -> SegmentedStream:
    from sklearn.ensemble import GradientBoostingClassifier

    rng = np.random.default_rng(seed)
    x_train, _ = _rows(rng, 4000)
    y_train = (_logit(x_train) + rng.normal(0.0, 0.3, size=4000) > 0).astype(int)
    gbdt = GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=seed).fit(x_train, y_train)
    model = sklearn_to_onnx(root / "gbdt.onnx", gbdt, 4, zipmap=False)

    x_ref, seg_ref = _rows(rng, 12_000)
    root.mkdir(parents=True, exist_ok=True)
    reference = root / "reference.csv"
    plain = root / "reference-plain.csv"
    with reference.open("w", encoding="utf-8") as fh:
        fh.write(",".join((*NAMES, "city")) + "\n")
        for row, s in zip(x_ref, seg_ref, strict=True):
            fh.write(",".join(f"{v:.6f}" for v in row) + f",{s}\n")
    np.savetxt(plain, x_ref, delimiter=",", header=",".join(NAMES), comments="", fmt="%.6f")

    x, seg = _rows(rng, EVENTS)
    stationary = root / "stationary.jsonl"
    _write(stationary, gbdt, x, seg)
    moved = x.copy()
    on = (np.arange(EVENTS) >= SHIFT_AT) & (seg == SHIFTED)
    # onto the boundary: x1 chosen so that the logit is near 0, the other inputs unchanged
    target = rng.normal(0.0, 0.15, size=int(on.sum()))
    moved[on, 1] = target - (_logit(moved[on]) - moved[on, 1])
    shifted = root / "shifted.jsonl"
    _write(shifted, gbdt, moved, seg)
    return SegmentedStream(model, reference, plain, stationary, shifted)


def _write(path: Path, gbdt: object, x: NDArray[np.float64], seg: NDArray[np.str_]) -> None:
    proba = gbdt.predict_proba(x)  # type: ignore[attr-defined]
    lines = []
    for i in range(x.shape[0]):
        doc = {
            "id": f"e{i}",
            "ts": START_MS + 10 * i,
            "model": "gbdt",
            "model_version": "1",
            "segment": str(seg[i]),
            "features": [round(float(v), 6) for v in x[i]],
            "prediction": {"label": int(proba[i].argmax()), "probabilities": [float(p) for p in proba[i]]},
        }
        lines.append(json.dumps(doc))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
