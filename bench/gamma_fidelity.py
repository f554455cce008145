"""γ at high dimension against the full hypercube: fidelity, cost and what it predicts, on three image models.

Models (trained here, seeded; torch is not needed):

- ``digits-cnn``: scikit-learn's 8×8 digits upscaled by nearest neighbour to 20×20 = 400 raw pixels (0–255), a small
  CNN (conv 3×3 × 8 → ReLU → 2×2 max-pool → linear → softmax) trained in numpy and written as an ONNX graph with
  a ``logits`` output beside ``proba``;
- ``digits-mlp``: the same images, an ``MLPClassifier`` (64 hidden units) through skl2onnx (probabilities only, so
  γ_logit is on the log-probability; its first layer is affine, so the scorer builds the ball in the graph);
- ``shapes-cnn``: a second image set, 24×24 = 576 pixels of six seeded shapes (bars, a square outline, a disk, a
  cross, a diagonal) at random places and sizes with Gaussian pixel noise, the same CNN architecture.

Per model, on the held-out images (450 by default), at r = 100 grey levels (``space: raw``): γ and γ_logit of the
full hypercube (all 2n points: the target), of today's default sample (m = max(16, 0.1 % of 2n) points), of m = 32,
and of both with the control map (:mod:`monitor.signals.control`) fitted on the first training images. Reported:
Spearman ρ with the full ball's γ_logit (and γ) averaged over ``--seeds`` scoring seeds; the share of events whose full
γ_logit lies within 1.96 standard errors (``gamma_logit_se``) of the estimate; ROC AUC of each γ, of 1 − P and of
−P_adj (P_adj = P·e^(−25·γ_logit)) for three kinds of instability: Algorithm 2 flips in 25 steps, flicker > 0 at σ = 25
grey levels (32 copies), misclassified; the model rows each estimate costs per event. ``--adaptive`` adds, simulated
on the full second differences, an adaptive allocation (k/2 axes first, k more for the half of events with the
larger standard error) and a stratified one (one axis in each of 4×4 blocks of the image).

Usage::

    .venv/bin/python bench/gamma_fidelity.py                                   # docs/BENCHMARKS.md (minutes)
    .venv/bin/python bench/gamma_fidelity.py --images 30 --reference 40 --seeds 1 --epochs 2 --steps 2   # seconds
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from scipy.stats import spearmanr
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer
from monitor.signals.adversarial import gamma_ascent_search
from monitor.signals.balls import default_hypercube_points
from monitor.signals.control import ControlMap, fit_control_map, second_differences
from monitor.signals.scorer import RobustnessScorer, ScoreResult, ScoringConfig

RADIUS = 100.0
SIGMA = 25.0
STEPS = 25


@dataclass(frozen=True)
class Setup:
    images: int = 450
    reference: int = 600
    seeds: int = 5
    epochs: int = 20
    steps: int = STEPS
    adaptive: bool = False
    seed: int = 0


# -- data ------------------------------------------------------------------------------------------------------------
def digits(size: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """(1797, size²) raw 0–255 pixels of the digits upscaled by nearest neighbour, and their labels."""
    data = load_digits()
    idx = (np.arange(size) * 8) // size
    images = data.images[:, idx][:, :, idx] * (255.0 / 16.0)
    return images.reshape(len(images), -1), data.target.astype(np.int64)


def shapes(size: int = 24, count: int = 1800, seed: int = 0) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """(count, size²) raw 0–255 pixels of six shape classes at random places and sizes, noise σ = 20, clipped."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size]
    out = np.zeros((count, size, size))
    labels = rng.integers(0, 6, size=count)
    for i, c in enumerate(labels):
        s = int(rng.integers(size // 4, size // 2))
        r0, c0 = rng.integers(1, size - s - 1, size=2)
        inside = (yy >= r0) & (yy < r0 + s) & (xx >= c0) & (xx < c0 + s)
        cy, cx, t = r0 + s / 2, c0 + s / 2, max(1, s // 5)
        if c == 0:  # horizontal bar
            mask = inside & (np.abs(yy - cy) < t)
        elif c == 1:  # vertical bar
            mask = inside & (np.abs(xx - cx) < t)
        elif c == 2:  # square outline
            mask = inside & ~((yy >= r0 + t) & (yy < r0 + s - t) & (xx >= c0 + t) & (xx < c0 + s - t))
        elif c == 3:  # disk
            mask = (yy - cy) ** 2 + (xx - cx) ** 2 < (s / 2) ** 2
        elif c == 4:  # cross
            mask = inside & ((np.abs(yy - cy) < t) | (np.abs(xx - cx) < t))
        else:  # diagonal
            mask = inside & (np.abs((yy - r0) - (xx - c0)) < t)
        out[i][mask] = rng.uniform(160, 255)
    out = np.clip(out + rng.normal(0, 20, out.shape), 0, 255)
    return out.reshape(count, -1), labels.astype(np.int64)


# -- models ----------------------------------------------------------------------------------------------------------
def _patches(x: NDArray[np.float64], size: int) -> NDArray[np.float64]:
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    cols = [padded[:, i : i + size, j : j + size] for i in range(3) for j in range(3)]
    return np.stack(cols, -1).reshape(len(x), size * size, 9)


def train_cnn(
    x: NDArray[np.float64], y: NDArray[np.int64], size: int, *, epochs: int, seed: int, channels: int = 8
) -> list[NDArray[np.float64]]:
    """conv 3×3 × channels (pad 1) → ReLU → 2×2 max-pool → linear, trained by Adam on softmax cross-entropy."""
    rng = np.random.default_rng(seed)
    half, classes = size // 2, int(y.max()) + 1
    flat = channels * half * half
    params = [
        rng.standard_normal((9, channels)) * np.sqrt(2 / 9),
        np.zeros(channels),
        rng.standard_normal((flat, classes)) / np.sqrt(flat),
        np.zeros(classes),
    ]
    m1 = [np.zeros_like(p) for p in params]
    m2 = [np.zeros_like(p) for p in params]
    images = (x / 255.0).reshape(-1, size, size)
    t = 0
    for _ in range(epochs):
        order = rng.permutation(len(images))
        for start in range(0, len(images), 64):
            idx = order[start : start + 64]
            grads = _cnn_grads(params, _patches(images[idx], size), y[idx], size, channels)
            t += 1
            for i, (p, g) in enumerate(zip(params, grads, strict=True)):
                m1[i] = 0.9 * m1[i] + 0.1 * g
                m2[i] = 0.999 * m2[i] + 0.001 * g * g
                p -= 0.003 * (m1[i] / (1 - 0.9**t)) / (np.sqrt(m2[i] / (1 - 0.999**t)) + 1e-8)
    return params


def _cnn_grads(
    params: list[NDArray[np.float64]], col: NDArray[np.float64], y: NDArray[np.int64], size: int, ch: int
) -> list[NDArray[np.float64]]:
    w, b, big_w, c = params
    n, half = len(y), size // 2
    a = col @ w + b
    r = np.maximum(a, 0).reshape(n, half, 2, half, 2, ch)
    pooled = r.max(axis=(2, 4))
    f = pooled.transpose(0, 3, 1, 2).reshape(n, -1)  # channel-major, as ONNX flattens NCHW
    z = f @ big_w + c
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    dz = p
    dz[np.arange(n), y] -= 1
    dz /= n
    df = (dz @ big_w.T).reshape(n, ch, half, half).transpose(0, 2, 3, 1)
    dr = (r == pooled[:, :, None, :, None, :]) * df[:, :, None, :, None, :]
    da = (dr.reshape(n, size * size, ch)) * (a > 0)
    return [np.einsum("nsk,nsc->kc", col, da), da.sum(axis=(0, 1)), f.T @ dz, dz.sum(axis=0)]


def cnn_onnx(params: list[NDArray[np.float64]], size: int, path: Path) -> Path:
    """The trained CNN as an ONNX graph on raw pixels (the /255 folded into the convolution): ``logits``, ``proba``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w, b, big_w, c = params
    ch, classes = w.shape[1], c.shape[0]
    inits = [
        numpy_helper.from_array(np.array([-1, 1, size, size], np.int64), "shape"),
        numpy_helper.from_array((w.T.reshape(ch, 1, 3, 3) / 255.0).astype(np.float32), "w"),
        numpy_helper.from_array(b.astype(np.float32), "b"),
        numpy_helper.from_array(big_w.astype(np.float32), "W"),
        numpy_helper.from_array(c.astype(np.float32), "c"),
    ]
    nodes = [
        helper.make_node("Reshape", ["pixels", "shape"], ["image"]),
        helper.make_node("Conv", ["image", "w", "b"], ["h"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "W", "c"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["proba"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", size * size])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes]),
            helper.make_tensor_value_info("proba", TensorProto.FLOAT, ["batch", classes]),
        ],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def mlp_onnx(x: NDArray[np.float64], y: NDArray[np.int64], path: Path, *, epochs: int, seed: int) -> Path:
    from skl2onnx import to_onnx

    mlp = MLPClassifier(hidden_layer_sizes=(64,), max_iter=max(10, 10 * epochs), random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp.fit(x / 255.0, y)
    mlp.coefs_[0] = mlp.coefs_[0] / 255.0  # the same model on raw 0–255 pixels
    onx = to_onnx(mlp, x[:1].astype(np.float32), options={id(mlp): {"zipmap": False}})
    path.write_bytes(onx.SerializeToString())
    return path


# -- measures --------------------------------------------------------------------------------------------------------
def auc_unstable(score: NDArray[np.float64], unstable: NDArray[np.bool_]) -> float:
    """ROC AUC of ``score`` (higher = predicted unstable); NaN when one class is absent."""
    if unstable.all() or not unstable.any():
        return float("nan")
    return float(roc_auc_score(unstable.astype(int), score))


def spearman(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    return float(spearmanr(a, b)[0])


def _scorer(model: OnnxModel, n: int, ball: str, seed: int, control: ControlMap | None = None) -> RobustnessScorer:
    cfg = ScoringConfig(radius=RADIUS, ball=ball, output="proba", flicker_copies=0, seed=seed, steps=STEPS)
    return RobustnessScorer(model, Standardizer.identity(n), cfg, control=control)


def measure(
    name: str,
    path: Path,
    train: NDArray[np.float64],
    test: NDArray[np.float64],
    labels: NDArray[np.int64],
    setup: Setup,
) -> dict[str, Any]:
    model = OnnxModel(path, OnnxRuntimeOptions(intra_op_threads=1), model_kind="classifier")
    n = model.n_features
    std = Standardizer.identity(n)
    t0 = time.perf_counter()
    control = fit_control_map(model, std, train[: setup.reference], radius=RADIUS)
    fit_seconds = time.perf_counter() - t0
    full = _scorer(model, n, f"hypercube:{2 * n}", 0).score(test)
    noisy = RobustnessScorer(
        model, std, ScoringConfig(radius=RADIUS, ball="hypercube", flicker_copies=32, sigma=SIGMA, seed=setup.seed)
    ).score(test)
    search_cfg = ScoringConfig(radius=RADIUS, ball="hypercube", flicker_copies=0, seed=setup.seed, steps=setup.steps)
    search = gamma_ascent_search(model, std, test, steps=setup.steps, config=search_cfg)
    unstable = {
        "flip": ~search.stable,
        "flicker": noisy.flicker > 0,
        "misclassified": full.predicted_class != labels,
    }
    m0 = default_hypercube_points(n)
    variants: dict[str, Callable[[int], ScoreResult]] = {
        f"sample m={m0}": lambda s: _scorer(model, n, f"hypercube:{m0}", s).score(test),
        "sample m=32": lambda s: _scorer(model, n, "hypercube:32", s).score(test),
        f"control m={m0}": lambda s: _scorer(model, n, f"hypercube:{m0}", s, control).score(test),
        "control m=32": lambda s: _scorer(model, n, "hypercube:32", s, control).score(test),
    }
    rows: list[dict[str, Any]] = []
    for label, score in variants.items():
        runs = [score(s) for s in range(setup.seeds)]
        m = int(label.split("m=")[1])
        rows.append(_row(label, m + 1, runs, full, unstable))
    full_row = _row(f"full ball m={2 * n}", 2 * n + 1, [full], full, unstable)
    prob = full.probability
    baselines = {
        "1 − P": {k: auc_unstable(1 - prob, u) for k, u in unstable.items()},
        "−P_adj (full γ_logit)": {k: auc_unstable(-full.p_adj, u) for k, u in unstable.items()},
    }
    out: dict[str, Any] = {
        "model": name,
        "pixels": n,
        "images": len(test),
        "accuracy": float(np.mean(full.predicted_class == labels)),
        "logits": bool(model.has_logits),
        "counts": {k: int(u.sum()) for k, u in unstable.items()},
        "rows": [*rows, full_row],
        "baselines": baselines,
        "fit": {
            "events": control.events,
            "rows": control.events * (2 * n + 1),
            "seconds": round(fit_seconds, 1),
            "variance_ratio": control.variance_ratio,
            "used": control.useful,
        },
    }
    if setup.adaptive:
        out["adaptive"] = _adaptive(model, std, test, control, full.gamma_logit, setup)
    return out


def _row(label: str, rows: int, runs: list[ScoreResult], full: ScoreResult, unstable: dict[str, Any]) -> dict[str, Any]:
    def mean(f: Callable[[ScoreResult], float]) -> float:
        return float(np.mean([f(r) for r in runs]))

    def within(r: ScoreResult) -> float:
        assert r.gamma_logit_se is not None
        return float(np.mean(np.abs(r.gamma_logit - full.gamma_logit) <= 1.96 * r.gamma_logit_se + 1e-12))

    return {
        "label": label,
        "rows_per_event": rows,
        "rho_logit": mean(lambda r: spearman(r.gamma_logit, full.gamma_logit)),
        "rho_prob": mean(lambda r: spearman(r.gamma, full.gamma)),
        "covered": mean(within),
        "auc_logit": {k: _mean_auc(runs, "gamma_logit", u) for k, u in unstable.items()},
        "auc_prob": {k: _mean_auc(runs, "gamma", u) for k, u in unstable.items()},
        "auc_p_adj": {k: _mean_auc(runs, "p_adj", u, sign=-1.0) for k, u in unstable.items()},
    }


def _mean_auc(runs: list[ScoreResult], name: str, unstable: NDArray[np.bool_], sign: float = 1.0) -> float:
    """Mean over the runs of the AUC of ``sign`` × the result's ``name`` column for ``unstable``."""
    return float(np.mean([auc_unstable(sign * getattr(r, name), unstable) for r in runs]))


def _adaptive(
    model: OnnxModel,
    std: Standardizer,
    test: NDArray[np.float64],
    control: ControlMap,
    full: NDArray[np.float64],
    setup: Setup,
) -> dict[str, float]:
    """Spearman with the full γ_logit of the estimator the scorer uses (with the control map where it is useful)
    at k axes for every event against k/2 first and k more
    for the half with the larger standard error (the same mean cost), simulated on the full second differences."""
    h, klass = second_differences(model, std, test, RADIUS)
    fitted = control.predict(klass, std.to_standardized(test)) if control.useful else np.zeros_like(h)  # as scored
    resid, base = h - fitted, fitted.mean(axis=1)
    rng = np.random.default_rng(setup.seed)
    b, n = h.shape
    side = int(round(np.sqrt(n)))
    rows, cols = np.divmod(np.arange(n), side)
    block = (rows * 4 // side) * 4 + cols * 4 // side  # 4×4 blocks of the square image: 16 strata
    strata = [np.flatnonzero(block == s) for s in range(16)]
    out: dict[str, list[float]] = {"uniform k=16": [], "adaptive 8 + 16 on half": [], "stratified 4×4 blocks": []}
    for _ in range(max(setup.seeds, 5)):
        order = np.argsort(rng.random((b, n)), axis=1)
        r16 = np.take_along_axis(resid, order[:, :16], axis=1)
        r8, r24 = r16[:, :8], np.take_along_axis(resid, order[:, :24], axis=1)
        out["uniform k=16"].append(spearman(np.abs(base + r16.mean(axis=1)), full))
        est = base + r8.mean(axis=1)
        top = np.argsort(-r8.std(axis=1, ddof=1))[: b // 2]
        est[top] = base[top] + r24[top].mean(axis=1)
        out["adaptive 8 + 16 on half"].append(spearman(np.abs(est), full))
        # one axis per block, each block weighted by its share of the axes (unbiased for the full mean)
        pick = np.stack([m[rng.integers(0, m.size, size=b)] for m in strata], axis=1)
        weights = np.array([m.size for m in strata]) / n
        strat = base + (np.take_along_axis(resid, pick, axis=1) * weights).sum(axis=1)
        out["stratified 4×4 blocks"].append(spearman(np.abs(strat), full))
    return {k: float(np.mean(v)) for k, v in out.items()}


def run(setup: Setup) -> list[dict[str, Any]]:
    results = []
    with TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, (x, y), size in (
            ("digits-cnn", digits(20), 20),
            ("digits-mlp", digits(20), 20),
            ("shapes-cnn", shapes(24, seed=setup.seed), 24),
        ):
            x_train, x_test, y_train, y_test = train_test_split(
                x, y, test_size=setup.images, random_state=setup.seed, stratify=y
            )
            if name.endswith("cnn"):
                params = train_cnn(x_train, y_train, size, epochs=setup.epochs, seed=setup.seed)
                path = cnn_onnx(params, size, root / f"{name}.onnx")
            else:
                path = mlp_onnx(x_train, y_train, root / f"{name}.onnx", epochs=setup.epochs, seed=setup.seed)
            results.append(measure(name, path, x_train, x_test, y_test, setup))
            print(f"{name} done", flush=True)
    return results


def markdown(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        c = r["counts"]
        axis = "logit" if r["logits"] else "log-probability"
        lines += [
            f"**{r['model']}**: {r['pixels']} pixels, {r['images']} held-out images, accuracy {r['accuracy']:.3f}, "
            f"γ_logit on the {axis}; unstable: {c['flip']} flip (Algorithm 2), {c['flicker']} flicker, "
            f"{c['misclassified']} misclassified; control map fitted on {r['fit']['events']} reference images "
            f"({r['fit']['rows']:,} model rows once, {r['fit']['seconds']} s), leaving "
            f"{r['fit']['variance_ratio']:.2f} of the variance on held-out ones: "
            + ("used." if r["fit"]["used"] else "not used (the control rows repeat the plain sample)."),
            "",
            "| γ estimate | rows / event | ρ γ_logit | ρ γ | within 1.96 se | AUC γ_logit: flip / flicker / miscl. "
            "| AUC γ: flip / flicker / miscl. | AUC −P_adj: flip / flicker / miscl. |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in r["rows"]:
            cells = [_triple(row[k]) for k in ("auc_logit", "auc_prob", "auc_p_adj")]
            lines.append(
                f"| {row['label']} | {row['rows_per_event']} | {row['rho_logit']:.3f} | {row['rho_prob']:.3f} | "
                f"{row['covered']:.2f} | " + " | ".join(cells) + " |"
            )
        for label, aucs in r["baselines"].items():
            lines.append(f"| {label} | — | — | — | — | {_triple(aucs)} | | |")
        if "adaptive" in r:
            a = r["adaptive"]
            lines.append("")
            lines.append(
                "Adaptive (simulated, ρ γ_logit, same mean cost): " + ", ".join(f"{k} {v:.3f}" for k, v in a.items())
            )
        lines.append("")
    return "\n".join(lines)


def _triple(d: dict[str, float]) -> str:
    return " / ".join(f"{d[k]:.2f}" for k in ("flip", "flicker", "misclassified"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=450, help="held-out images per model (default 450)")
    ap.add_argument("--reference", type=int, default=600, help="training images the control map is fitted on")
    ap.add_argument("--seeds", type=int, default=5, help="scoring seeds each sampled estimate is averaged over")
    ap.add_argument("--epochs", type=int, default=20, help="training epochs of the CNNs (×10 iterations for the MLP)")
    ap.add_argument("--steps", type=int, default=STEPS, help="Algorithm-2 steps (default 25)")
    ap.add_argument("--adaptive", action="store_true", help="add the simulated adaptive allocation")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn', load=True)}", flush=True)
    setup = Setup(args.images, args.reference, args.seeds, args.epochs, args.steps, args.adaptive, args.seed)
    t0 = time.perf_counter()
    results = run(setup)
    print(markdown(results))
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
