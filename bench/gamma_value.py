"""Where γ adds to confidence: AUC of γ, flicker, 1 − P, P_adj and a fitted combination, on image and tabular models.

Models (trained here per seed; torch is not needed):

- images, built by :mod:`gamma_fidelity` (its builders, not copies): ``digits-cnn`` and ``digits-mlp`` on digits
  upscaled to 20×20 raw pixels, ``shapes-cnn`` on 24×24 synthetic shapes; r = 100 grey levels (``space: raw``),
  flicker σ = 25 grey levels, P_adj with N = 25, γ from the default sampled hypercube with the control map fitted on
  the reference images (:mod:`monitor.signals.control`), as the scorer runs them;
- tables, through skl2onnx: ``wine-mlp`` (scikit-learn's wine, 13 features, 3 classes, an ``MLPClassifier`` behind a
  ``StandardScaler``), ``cancer-gbdt`` (breast cancer, 30 features, a ``GradientBoostingClassifier``, depth 3, 100
  trees) and ``credit-mlp`` (a synthetic credit table: five float columns and two string categories, ``purpose`` and
  ``housing``, one-hot encoded inside the graph and held fixed by the scorer; an ``MLPClassifier``); the scorer's
  defaults (r = σ = 0.05 standardized units, the default ball), the standardizer fitted on the reference.

Per seed every data set is split into training (50 %), a labelled reference (25 %) and held-out rows (25 %; images:
``--rows`` for each of reference and held-out). Signals per row: γ (on P) and γ_logit, flicker (32 copies), 1 − P,
−P_adj, ``LR(1 − P, γ)``: a logistic regression on 1 − P, γ and γ_logit, and ``LR(all)``: one on every signal, each
fitted on the reference rows for the target at hand (standardized inputs) and applied unchanged to the other rows.
Targets: Algorithm 2 flips (``--steps`` steps of γ ascent; the credit model's held categories stay fixed along the
path), flicker > 0 measured again with an independent draw (64 copies, another seed: as a signal flicker predicts
its own target almost by construction) and misclassification. Rows: the held-out rows, and the same rows shifted
(images: Gaussian pixel noise σ = 40 grey levels, clipped to 0–255; tables: Gaussian noise of 0.5 reference standard
deviations on every float feature). AUC is the mean over ``--seeds`` seeds with its standard deviation; a target with
one class on a seed's rows drops out of that seed's mean (the count column says how many unstable rows there were).

Usage::

    .venv/bin/python bench/gamma_value.py                                   # docs/BENCHMARKS.md (minutes)
    .venv/bin/python bench/gamma_value.py --rows 40 --seeds 1 --epochs 1 --steps 2 --models wine-mlp,digits-cnn
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
from gamma_fidelity import RADIUS, SIGMA, auc_unstable, cnn_onnx, digits, mlp_onnx, shapes, train_cnn
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.signals.adversarial import _hypercube_candidates, gamma_ascent_search
from monitor.signals.control import fit_control_map
from monitor.signals.scorer import RobustnessScorer, ScoreResult, ScoringConfig

IMAGES = ("digits-cnn", "digits-mlp", "shapes-cnn")
TABLES = ("wine-mlp", "cancer-gbdt", "credit-mlp")
SIGNALS = ("γ", "γ_logit", "flicker", "1 − P", "−P_adj", "LR(1 − P, γ)", "LR(all)")
TARGETS = ("flip", "flicker", "misclassified")
IMAGE_SHIFT = 40.0  # grey levels
TABLE_SHIFT = 0.5  # reference standard deviations
PURPOSES = ("car", "home", "education", "business", "other")
HOUSING = ("own", "rent", "free")


@dataclass(frozen=True)
class Setup:
    models: tuple[str, ...] = IMAGES + TABLES
    rows: int = 300
    seeds: int = 3
    epochs: int = 20
    steps: int = 25


@dataclass
class Built:
    """A trained model on disk and its rows: x (float features, raw units), held values, labels, per split."""

    path: Path
    x: dict[str, NDArray[np.float64]]
    held: dict[str, Held | None]
    y: dict[str, NDArray[np.int64]]
    image: bool


# -- models ----------------------------------------------------------------------------------------------------------
def _three_way(n: int, y: NDArray[np.int64], seed: int, rows: int | None) -> dict[str, NDArray[np.intp]]:
    idx = np.arange(n)
    size = rows if rows is not None else n // 4
    train, rest = train_test_split(idx, test_size=2 * size, random_state=seed, stratify=y)
    ref, test = train_test_split(rest, test_size=size, random_state=seed, stratify=y[rest])
    return {"train": train, "reference": ref, "test": test}


def build_image(name: str, root: Path, setup: Setup, seed: int) -> Built:
    x, y = shapes(24, seed=seed) if name == "shapes-cnn" else digits(20)
    split = _three_way(len(x), y, seed, min(setup.rows, len(x) // 4))
    path = root / f"{name}.onnx"
    if name.endswith("cnn"):
        size = 24 if name == "shapes-cnn" else 20
        cnn_onnx(train_cnn(x[split["train"]], y[split["train"]], size, epochs=setup.epochs, seed=seed), size, path)
    else:
        mlp_onnx(x[split["train"]], y[split["train"]], path, epochs=setup.epochs, seed=seed)
    return Built(
        path, {k: x[v] for k, v in split.items()}, dict.fromkeys(split), {k: y[v] for k, v in split.items()}, True
    )


def credit_table(n: int, seed: int) -> tuple[NDArray[Any], NDArray[np.int64]]:
    """n rows: income, debt, age, years of credit history, utilization (floats), purpose and housing (strings); the
    default label from a seeded logistic score with an interaction and a per-category offset."""
    rng = np.random.default_rng(seed)
    income = rng.lognormal(10.5, 0.5, n)
    debt = income * rng.beta(2, 5, n)
    age = rng.uniform(20, 70, n)
    history = np.clip(age - 18 - rng.exponential(5, n), 0, None)
    util = rng.beta(2, 3, n)
    purpose = rng.integers(0, len(PURPOSES), n)
    housing = rng.integers(0, len(HOUSING), n)
    score = (
        3 * debt / income
        + 2.5 * util
        - 0.04 * history
        - 0.5 * np.log(income / 30000)
        + 2 * util * (debt / income)
        + np.array([0.0, -0.3, 0.4, 0.6, 0.2])[purpose]
        + np.array([-0.4, 0.3, 0.0])[housing]
        - 1.6
    )
    label = (rng.random(n) < 1 / (1 + np.exp(-2 * score))).astype(np.int64)
    table = np.empty((n, 7), dtype=object)
    table[:, :5] = np.stack([income, debt, age, history, util], axis=1)
    table[:, 5] = np.asarray(PURPOSES, dtype=object)[purpose]
    table[:, 6] = np.asarray(HOUSING, dtype=object)[housing]
    return table, label


def _credit_pipeline(seed: int) -> Any:
    from sklearn.compose import ColumnTransformer
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder

    columns = ColumnTransformer(
        [("numeric", StandardScaler(), [0, 1, 2, 3, 4]), ("cats", OneHotEncoder(handle_unknown="ignore"), [5, 6])]
    )
    mlp = MLPClassifier(hidden_layer_sizes=(32,), max_iter=400, random_state=seed)
    return Pipeline([("columns", columns), ("model", mlp)])


def _credit_onnx(pipeline: Any, path: Path) -> Path:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    initial: list[tuple[str, Any]] = [(f"x{j + 1}", FloatTensorType([None, 1])) for j in range(5)]
    initial += [("purpose", StringTensorType([None, 1])), ("housing", StringTensorType([None, 1]))]
    onx = convert_sklearn(pipeline, initial_types=initial, options={id(pipeline): {"zipmap": False}}, target_opset=17)
    path.write_bytes(onx.SerializeToString())
    return path


def _credit_feeds(table: NDArray[Any]) -> dict[str, NDArray[Any]]:
    feeds: dict[str, NDArray[Any]] = {f"x{j + 1}": table[:, j : j + 1].astype(np.float32) for j in range(5)}
    feeds["purpose"] = table[:, 5:6].astype(str).astype(object)
    feeds["housing"] = table[:, 6:7].astype(str).astype(object)
    return feeds


def build_table(name: str, root: Path, seed: int) -> Built:
    from skl2onnx import to_onnx
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline

    path = root / f"{name}.onnx"
    if name == "credit-mlp":
        table, y = credit_table(4000, seed)
        split = _three_way(len(table), y, seed, None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            pipeline = _credit_pipeline(seed).fit(table[split["train"]], y[split["train"]])
        signature = OnnxModel(_credit_onnx(pipeline, path)).signature
        parts = {k: signature.split(_credit_feeds(table[v])) for k, v in split.items()}
        return Built(
            path,
            {k: p[0] for k, p in parts.items()},
            {k: p[1] for k, p in parts.items()},
            {k: y[v] for k, v in split.items()},
            False,
        )
    data = load_wine() if name == "wine-mlp" else load_breast_cancer()
    x, y = data.data.astype(np.float64), data.target.astype(np.int64)
    split = _three_way(len(x), y, seed, None)
    if name == "wine-mlp":
        est: Any = make_pipeline(
            StandardScaler(), MLPClassifier(hidden_layer_sizes=(32,), max_iter=500, random_state=seed)
        )
    else:
        est = GradientBoostingClassifier(max_depth=3, n_estimators=100, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(x[split["train"]], y[split["train"]])
    onx = to_onnx(est, x[:1].astype(np.float32), options={id(est): {"zipmap": False}}, target_opset=17)
    path.write_bytes(onx.SerializeToString())
    return Built(
        path, {k: x[v] for k, v in split.items()}, dict.fromkeys(split), {k: y[v] for k, v in split.items()}, False
    )


# -- signals and targets ---------------------------------------------------------------------------------------------
def ascent_flips(scorer: RobustnessScorer, x: NDArray[np.float64], held: Held | None, steps: int) -> NDArray[np.bool_]:
    """Algorithm 2 (``gamma_ascent_search``); with held values, the same ascent with each event's held values
    repeated for its candidates (the library's search takes float rows only)."""
    if held is None:
        cfg = replace(scorer.config, flicker_copies=0)
        return ~gamma_ascent_search(scorer.model, scorer.standardizer, x, steps=steps, config=cfg).stable
    plain = RobustnessScorer(scorer.model, scorer.standardizer, replace(scorer.config, flicker_copies=0), held)
    b, n, m = len(x), x.shape[1], plain.ball_size
    start = plain.score(x, held).predicted_class
    current, cls, flipped = x.copy(), start.copy(), np.zeros(b, dtype=bool)
    step_raw, offsets = plain.feature_step.astype(np.float64), plain.offsets.astype(np.float64)
    for _ in range(steps):
        if plain.per_event_ball:
            cand = _hypercube_candidates(current, plain.event_axes(current), step_raw)
        else:
            cand = current[:, None, :] + offsets[None, :, :]
        scored = plain.score(cand.reshape(b * m, n), held.repeat(m))
        g = scored.gamma.reshape(b, m)
        best = np.nanargmax(np.nan_to_num(g, nan=-1.0), axis=1)
        current = cand[np.arange(b), best]
        cls = scored.predicted_class.reshape(b, m)[np.arange(b), best]
        flipped |= cls != start
    return flipped


def signals(r: ScoreResult) -> NDArray[np.float64]:
    """(B, 5) γ, γ_logit, flicker, 1 − P, −P_adj."""
    return np.stack([r.gamma, r.gamma_logit, r.flicker, 1 - r.probability, -r.p_adj], axis=1)


def measure_rows(
    scorer: RobustnessScorer,
    check: RobustnessScorer,
    x: NDArray[np.float64],
    held: Held | None,
    y: NDArray[np.int64],
    steps: int,
) -> tuple[NDArray[np.float64], dict[str, NDArray[np.bool_]]]:
    r = scorer.score(x, held)
    targets = {
        "flip": ascent_flips(scorer, x, held, steps),
        "flicker": check.score(x, held).flicker > 0,
        "misclassified": r.predicted_class != y,
    }
    return signals(r), targets


def _fit_lr(
    s: NDArray[np.float64], t: NDArray[np.bool_], cols: list[int]
) -> Callable[[NDArray[np.float64]], NDArray[np.float64]] | None:
    if t.all() or not t.any():
        return None
    feats = np.nan_to_num(s[:, cols])
    scale = StandardScaler().fit(feats)
    lr = LogisticRegression(max_iter=2000).fit(scale.transform(feats), t.astype(int))
    return lambda z: lr.decision_function(scale.transform(np.nan_to_num(z[:, cols])))


def aucs(
    ref: tuple[NDArray[np.float64], dict[str, NDArray[np.bool_]]],
    rows: tuple[NDArray[np.float64], dict[str, NDArray[np.bool_]]],
) -> dict[str, dict[str, float]]:
    """AUC of every signal (and of both fitted combinations) on ``rows``, per target."""
    s_ref, t_ref = ref
    s, t = rows
    out: dict[str, dict[str, float]] = {}
    for target in TARGETS:
        u = t[target]
        row = {name: auc_unstable(np.nan_to_num(s[:, j]), u) for j, name in enumerate(SIGNALS[:5])}
        for name, cols in (("LR(1 − P, γ)", [0, 1, 3]), ("LR(all)", [0, 1, 2, 3, 4])):
            f = _fit_lr(s_ref, t_ref[target], cols)
            row[name] = float("nan") if f is None else auc_unstable(f(s), u)
        row["count"] = float(u.sum())
        out[target] = row
    return out


def shifted(built: Built, seed: int) -> NDArray[np.float64]:
    rng = np.random.default_rng(seed + 7919)
    x = built.x["test"]
    if built.image:
        out: NDArray[np.float64] = np.clip(x + rng.normal(0, IMAGE_SHIFT, x.shape), 0, 255)
        return out
    noise: NDArray[np.float64] = TABLE_SHIFT * built.x["reference"].std(axis=0) * rng.standard_normal(x.shape)
    return x + noise


def measure(name: str, built: Built, setup: Setup, seed: int) -> dict[str, dict[str, dict[str, float]]]:
    model = OnnxModel(built.path, OnnxRuntimeOptions(intra_op_threads=1), model_kind="classifier")
    ref_x, ref_held = built.x["reference"], built.held["reference"]
    if built.image:
        std = Standardizer.identity(model.n_features)
        cfg = ScoringConfig(radius=RADIUS, sigma=SIGMA, ball="hypercube", flicker_copies=32, steps=25, seed=seed)
        control = fit_control_map(model, std, ref_x, radius=RADIUS)
        scorer = RobustnessScorer(model, std, cfg, control=control if control.useful else None)
    else:
        std = Standardizer.fit(ref_x)
        cfg = ScoringConfig(seed=seed)
        scorer = RobustnessScorer(model, std, cfg, held_sample=ref_held)
    check = RobustnessScorer(model, std, replace(cfg, flicker_copies=64, seed=seed + 1000), held_sample=ref_held)
    ref = measure_rows(scorer, check, ref_x, ref_held, built.y["reference"], setup.steps)
    test_held, y_test = built.held["test"], built.y["test"]
    return {
        "held-out": aucs(ref, measure_rows(scorer, check, built.x["test"], test_held, y_test, setup.steps)),
        "shifted": aucs(ref, measure_rows(scorer, check, shifted(built, seed), test_held, y_test, setup.steps)),
    }


def run(setup: Setup) -> dict[str, list[dict[str, dict[str, dict[str, float]]]]]:
    results: dict[str, list[dict[str, dict[str, dict[str, float]]]]] = {m: [] for m in setup.models}
    for seed in range(setup.seeds):
        with TemporaryDirectory() as tmp:
            for name in setup.models:
                t0 = time.perf_counter()
                built = (
                    build_image(name, Path(tmp), setup, seed) if name in IMAGES else build_table(name, Path(tmp), seed)
                )
                results[name].append(measure(name, built, setup, seed))
                print(f"{name} seed {seed} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    return results


# -- report ----------------------------------------------------------------------------------------------------------
def _cell(values: list[float]) -> str:
    v = np.asarray([x for x in values if np.isfinite(x)])
    if v.size == 0:
        return "—"
    return f"{v.mean():.2f} ± {v.std():.2f}" if v.size > 1 else f"{v.mean():.2f}"


def markdown(results: dict[str, list[dict[str, dict[str, dict[str, float]]]]]) -> str:
    lines = [
        "| model | rows | target (unstable, mean) | " + " | ".join(SIGNALS) + " | LR(1 − P, γ) − (1 − P) |",
        "|---|---|---|" + "---|" * (len(SIGNALS) + 1),
    ]
    for name, runs in results.items():
        for rows in ("held-out", "shifted"):
            for target in TARGETS:
                cells = [r[rows][target] for r in runs]
                count = np.mean([c["count"] for c in cells])
                gain = [c["LR(1 − P, γ)"] - c["1 − P"] for c in cells]
                lines.append(
                    f"| {name} | {rows} | {target} ({count:.0f}) | "
                    + " | ".join(_cell([c[s] for c in cells]) for s in SIGNALS)
                    + f" | {_cell(gain)} |"
                )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(IMAGES + TABLES), help="comma-separated subset of the six models")
    ap.add_argument("--rows", type=int, default=300, help="image rows in each of the reference and held-out sets")
    ap.add_argument("--seeds", type=int, default=3, help="seeds: splits, training and scoring (default 3)")
    ap.add_argument("--epochs", type=int, default=20, help="training epochs of the CNNs (×10 iterations for the MLP)")
    ap.add_argument("--steps", type=int, default=25, help="Algorithm-2 steps (default 25)")
    args = ap.parse_args()
    models = tuple(m for m in args.models.split(",") if m)
    unknown = [m for m in models if m not in IMAGES + TABLES]
    if unknown:
        ap.error(f"--models takes {', '.join(IMAGES + TABLES)}; got {', '.join(unknown)}")
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn', load=True)}", flush=True)
    t0 = time.perf_counter()
    print(markdown(run(Setup(models, args.rows, args.seeds, args.epochs, args.steps))))
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
