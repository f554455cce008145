"""NannyML's DLE on the sets of ``bench/loss_estimate.py``; runs inside a NannyML venv (``bench/.venv-nannyml``),
not the project's (NannyML is no dependency of the monitor).

``python dle_helper.py SETS.npz OUT.json``: for each group ``g`` of the .npz (``g{i}_ref_x``, ``_ref_pred``,
``_ref_true``, ``_pool_x``, ``_pool_pred``, ``_sets`` and ``_offsets``: the sets' rows of the pool, concatenated) fit
DLE (metrics mae and rmse, one chunk) on the reference and estimate every set; writes ``[[{"mae", "rmse"} per set]
per group]``.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any


def main(argv: list[str]) -> int:
    import nannyml as nml  # type: ignore[import-not-found, unused-ignore]
    import numpy as np
    import pandas as pd  # type: ignore[import-untyped, unused-ignore]

    warnings.filterwarnings("ignore")
    data = np.load(argv[0])
    out: list[list[dict[str, float]]] = []
    for g in range(int(data["groups"])):
        ref_x = data[f"g{g}_ref_x"]
        names = [f"x{j}" for j in range(ref_x.shape[1])]
        estimator = nml.DLE(
            feature_column_names=names,
            y_pred="y_pred",
            y_true="y_true",
            metrics=["mae", "rmse"],
            chunk_number=1,
            tune_hyperparameters=False,
        )
        estimator.fit(_frame(pd, names, ref_x, data[f"g{g}_ref_pred"], data[f"g{g}_ref_true"]))
        pool = _frame(pd, names, data[f"g{g}_pool_x"], data[f"g{g}_pool_pred"])
        rows, offsets = data[f"g{g}_sets"], data[f"g{g}_offsets"]
        results = []
        for i in range(offsets.shape[0] - 1):
            part = pool.iloc[rows[offsets[i] : offsets[i + 1]]].reset_index(drop=True)
            df = estimator.estimate(part).filter(period="analysis").to_df()
            results.append({m: float(df[(m, "value")].iloc[0]) for m in ("mae", "rmse")})
        out.append(results)
    with open(argv[1], "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    return 0


def _frame(pd: Any, names: list[str], x: Any, pred: Any, true: Any = None) -> Any:
    frame = pd.DataFrame(x, columns=names)
    frame["y_pred"] = pred
    if true is not None:
        frame["y_true"] = true
    return frame


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
