"""Signal scales: does flicker say more about correctness at a σ chosen from the reference?

Breast cancer (shipped inside scikit-learn; nothing downloaded). Per seed: a stratified split into reference (60 %)
and test (40 %) rows; a ``LogisticRegression`` (on standardized inputs, in a pipeline) and a
``GradientBoostingClassifier`` are trained on the reference rows and converted with skl2onnx; σ is chosen on the
reference rows so that half of them flicker (:func:`monitor.signals.scales.choose_scales`, what
``reference --scales from-reference`` does; r = σ). Each test row is scored at the fixed σ = r = 0.05 and at the
chosen σ (32 copies, seed 0, standardizer of the reference); the number reported is Spearman's ρ between the
per-event flicker and correctness (1 when the model's class is right), averaged over the seeds. Negative is good:
flickering events are the wrong ones.

Usage::

    .venv/bin/python bench/signal_scales.py              # the table in docs/BENCHMARKS.md (## Signal scales)
    .venv/bin/python bench/signal_scales.py --seeds 1    # seconds
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import spearmanr
from skl2onnx import to_onnx
from skl2onnx.common.data_types import FloatTensorType
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.signals.scales import choose_scales
from monitor.signals.scorer import RobustnessScorer, ScoringConfig

FIXED = 0.05
TARGET_SHARE = 0.5


def models() -> dict[str, Any]:
    return {
        "logistic": make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
        "gbdt": GradientBoostingClassifier(random_state=0),
    }


def spearman(flicker: NDArray[np.float64], correct: NDArray[np.float64]) -> float:
    if np.ptp(flicker) == 0 or np.ptp(correct) == 0:
        return float("nan")  # a constant signal carries no rank information
    rho, _ = spearmanr(flicker, correct)
    return float(rho)


def one(name: str, seed: int, root: Path) -> tuple[float, float, float, float, float]:
    """(σ chosen, ρ at 0.05, ρ at σ, share flickering at 0.05, share flickering at σ) on the test rows."""
    x, y = load_breast_cancer(return_X_y=True)
    x_ref, x_test, y_ref, y_test = train_test_split(x, y, test_size=0.4, random_state=seed, stratify=y)
    estimator = models()[name].fit(x_ref, y_ref)
    onx = to_onnx(
        estimator,
        initial_types=[("X", FloatTensorType([None, x.shape[1]]))],
        options={id(estimator): {"zipmap": False}} if name == "gbdt" else {"zipmap": False},
        target_opset={"": 17, "ai.onnx.ml": 3},
    )
    path = root / f"{name}-{seed}.onnx"
    path.write_bytes(onx.SerializeToString())
    model = OnnxModel(path)
    standardizer = Standardizer.fit(x_ref)
    scales = choose_scales(model, standardizer, x_ref, None, ScoringConfig(seed=0), target_share=TARGET_SHARE)
    correct = (estimator.predict(x_test) == y_test).astype(np.float64)
    out: list[float] = [scales.sigma]
    shares: list[float] = []
    for sigma in (FIXED, scales.sigma):
        result = RobustnessScorer(model, standardizer, ScoringConfig(sigma=sigma, radius=sigma, seed=0)).score(x_test)
        out.append(spearman(result.flicker, correct))
        shares.append(float(np.mean(result.flicker > 0)))
    return out[0], out[1], out[2], shares[0], shares[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="train/test splits (default 5)")
    args = parser.parse_args()
    print(f"breast cancer, {args.seeds} splits; Spearman ρ(flicker, correct) on the test rows (mean ± sd)")
    print(f"{'model':<9} {'σ chosen':>9} {'ρ @ 0.05':>14} {'ρ @ chosen σ':>14} {'flicker>0 @0.05':>16} {'@ chosen':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("logistic", "gbdt"):
            res = np.array([one(name, seed, Path(tmp)) for seed in range(args.seeds)])
            mean, sd = np.nanmean(res, axis=0), np.nanstd(res, axis=0)
            print(
                f"{name:<9} {mean[0]:>9.3g} {mean[1]:>7.3f} ± {sd[1]:.3f} {mean[2]:>7.3f} ± {sd[2]:.3f} "
                f"{mean[3]:>15.0%} {mean[4]:>9.0%}  (finite ρ in {int(np.isfinite(res[:, 1]).sum())} / "
                f"{int(np.isfinite(res[:, 2]).sum())} splits)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
