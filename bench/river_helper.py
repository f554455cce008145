"""River's synthetic classification streams as fixed tables, for ``bench/accuracy_estimate.py``; runs inside
``bench/.venv-river`` (river is no dependency of the monitor).

``python river_helper.py OUT.npz ROWS``: for each generator of :data:`GENERATORS` the first ``ROWS`` rows of its
stream (seed 0), features in the generator's order (Agrawal's categorical codes as numbers), saved as
``{name}_x`` (float64) and ``{name}_y`` (int64, classes 0..C−1). The benchmark then shifts them as it shifts every
other dataset (a biased source, feature-quantile selections, reweightings): river supplies the data, not the drift.
"""

from __future__ import annotations

import sys
from typing import Any


def generators() -> dict[str, Any]:
    from river.datasets import synth

    return {
        "river_agrawal": synth.Agrawal(classification_function=2, perturbation=0.05, seed=0),
        "river_hyperplane": synth.Hyperplane(seed=0, n_features=10, noise_percentage=0.05),
        "river_rbf": synth.RandomRBF(seed_model=0, seed_sample=0, n_classes=3, n_features=10, n_centroids=30),
        "river_sea": synth.SEA(variant=1, noise=0.05, seed=0),
    }


GENERATORS = ("river_agrawal", "river_hyperplane", "river_rbf", "river_sea")


def main(argv: list[str]) -> int:
    import numpy as np

    out, rows = argv[0], int(argv[1])
    arrays: dict[str, Any] = {}
    for name, stream in generators().items():
        xs, ys = [], []
        for x, y in stream.take(rows):
            xs.append([float(v) for v in x.values()])
            ys.append(int(y))
        y_arr = np.asarray(ys, dtype=np.int64)
        _, y_arr = np.unique(y_arr, return_inverse=True)
        arrays[f"{name}_x"], arrays[f"{name}_y"] = np.asarray(xs, dtype=np.float64), y_arr.astype(np.int64)
    np.savez(out, **arrays)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
