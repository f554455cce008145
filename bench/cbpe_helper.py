"""NannyML's CBPE on the sets of ``bench/accuracy_estimate.py``; runs inside ``bench/.venv-nannyml``, not the project's
venv (NannyML is no dependency of the monitor).

``python cbpe_helper.py SETS.npz OUT.json``: for each group ``g`` of the .npz (``g{i}_ref_proba``, ``_ref_pred``,
``_ref_true``, ``_pool_proba``, ``_pool_pred``, ``_sets`` and ``_offsets``: the sets' rows of the pool, concatenated)
fit CBPE (metric accuracy, one chunk) on the reference and estimate every set; writes
``[[{"estimate", "lower", "upper"} per set] per group]``. Its band is NannyML's: ±3 standard errors of sampling.
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
        ref_proba = data[f"g{g}_ref_proba"]
        n_classes = ref_proba.shape[1]
        binary = n_classes == 2

        estimator = nml.CBPE(
            y_pred_proba="p" if binary else {c: f"p{c}" for c in range(n_classes)},
            y_pred="y_pred",
            y_true="y_true",
            problem_type="classification_binary" if binary else "classification_multiclass",
            metrics=["accuracy"],
            chunk_number=1,
        )
        estimator.fit(_frame(pd, ref_proba, data[f"g{g}_ref_pred"], data[f"g{g}_ref_true"]))
        pool = _frame(pd, data[f"g{g}_pool_proba"], data[f"g{g}_pool_pred"])
        rows, offsets = data[f"g{g}_sets"], data[f"g{g}_offsets"]
        results = []
        for i in range(offsets.shape[0] - 1):
            part = pool.iloc[rows[offsets[i] : offsets[i + 1]]].reset_index(drop=True)
            df = estimator.estimate(part).filter(period="analysis").to_df()
            value = float(df[("accuracy", "value")].iloc[0])
            lower = df[("accuracy", "lower_confidence_boundary")].iloc[0]
            upper = df[("accuracy", "upper_confidence_boundary")].iloc[0]
            results.append(
                {
                    "estimate": value,
                    "lower": float(lower) if lower == lower else value,
                    "upper": float(upper) if upper == upper else value,
                }
            )
        out.append(results)
    with open(argv[1], "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    return 0


def _frame(pd: Any, proba: Any, pred: Any, true: Any = None) -> Any:
    """The columns CBPE reads: y_pred, the probability of class 1 ("p", binary) or of each class ("p0".."pC-1")."""
    cols: dict[str, Any] = {"y_pred": pred}
    if proba.shape[1] == 2:
        cols["p"] = proba[:, 1]
    else:
        for c in range(proba.shape[1]):
            cols[f"p{c}"] = proba[:, c]
    if true is not None:
        cols["y_true"] = true
    return pd.DataFrame(cols)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
