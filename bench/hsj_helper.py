"""IBM ART's HopSkipJump (L2, untargeted) on an ONNX classifier for ``bench/l2_boundary.py``; runs inside
``bench/.venv-art``, not the project's venv: ``hsj_helper.py IN.npz OUT.json``.

IN.npz holds ``model`` (the .onnx path), ``mean`` and ``scale`` (the standardizer: the attack works in standardized
units, as the monitor does), ``points`` (B, n) raw, and the settings ``max_iter``, ``max_eval``, ``init_eval``.
OUT.json gets per point the L2 distance (standardized; null when the attack failed), the model queries (rows) and
the seconds.
"""

from __future__ import annotations

import json
import sys
import time
import warnings

import numpy as np
import onnxruntime as ort

warnings.filterwarnings("ignore")

from art.attacks.evasion import HopSkipJump  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from art.estimators.classification import BlackBoxClassifier  # type: ignore[import-not-found, unused-ignore]  # noqa: E402


def main() -> int:
    data = np.load(sys.argv[1], allow_pickle=False)
    session = ort.InferenceSession(str(data["model"]), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    outputs = [o.name for o in session.get_outputs()]
    proba_name = next(o for o in outputs if "prob" in o.lower())
    mean, scale = data["mean"], data["scale"]
    points = data["points"]
    calls = {"rows": 0}

    def predict(z: np.ndarray) -> np.ndarray:
        calls["rows"] += z.shape[0]
        raw = (mean + scale * z).astype(np.float32)
        (p,) = session.run([proba_name], {name: raw})
        return np.asarray(p, dtype=np.float64)

    z = (points - mean) / scale
    n_classes = predict(z[:1]).shape[1]
    calls["rows"] = 0
    classifier = BlackBoxClassifier(predict, input_shape=(z.shape[1],), nb_classes=n_classes, clip_values=None)
    attack = HopSkipJump(
        classifier,
        targeted=False,
        norm=2,
        max_iter=int(data["max_iter"]),
        max_eval=int(data["max_eval"]),
        init_eval=int(data["init_eval"]),
        verbose=False,
    )
    out = []
    for i in range(z.shape[0]):
        calls["rows"] = 0
        start = time.perf_counter()
        adv = attack.generate(z[i : i + 1].astype(np.float64))
        seconds = time.perf_counter() - start
        flipped = predict(adv).argmax(1)[0] != predict(z[i : i + 1]).argmax(1)[0]
        calls["rows"] -= 2
        out.append(
            {
                "distance": float(np.linalg.norm(adv[0] - z[i])) if flipped else None,
                "rows": calls["rows"],
                "seconds": seconds,
            }
        )
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
