"""§5 of "Harmonic Machine Learning Models are Robust" (high dimension), reproduced on images that ship with scikit-learn.

The paper grey-scales images to 100×100 raw pixel units, samples 0.1 %
of the 2n ±e_j hypercube points of magnitude 100 per image, takes γ on the predicted class, runs the γ-gradient
search (Algorithm 2) for 25 steps, and finds that P_adj = P·e^(−Nγ) predicts which images stay stable, and that the
unstable images fill the high-γ / low-P corner of the Gamma Map (its Fig. 5).

Here: scikit-learn's 8×8 digits (0–16) upscaled by nearest neighbour to ``--size``² pixels in raw 0–255 units; an
``MLPClassifier`` (one hidden layer of 64, trained on pixels / 255, that scale folded into its first layer so the
ONNX model takes raw pixels) converted with skl2onnx; the held-out images scored by :class:`RobustnessScorer`
(``space: raw``, r = 100 grey levels, the per-event sampled hypercube with the default m = max(16, 0.1 % of 2n),
``output: proba`` so γ is on the predicted class's probability, γ_logit on its log-probability since skl2onnx exposes
no logits, P_adj = P·e^(−25·γ_logit)); Algorithm 2 for ``--steps`` from every image
(:func:`monitor.signals.adversarial.gamma_ascent_search`). Reported: the share of images whose class flips; the
ROC AUC of P_adj, of P alone, of −γ and of −γ_logit for predicting "stable after the steps"; the Gamma Map with each
cell's unstable share (an SVG, ``--svg``); the spread of the sampled γ around the full hypercube's γ (all 2n
points) over ``--variance-seeds`` seeds; scoring throughput against onnxruntime alone on the same rows.

``--probe-runs K`` instead times ``harmonic-monitor probe --space raw --steps 25 --threads 1`` on 20 digits of
64×64 = 4,096 pixels, K times, pinned to one core (``taskset -c 0`` where it exists).

Usage::

    .venv/bin/python bench/high_dimension.py                         # docs/HIGH-DIMENSION.md (about 2 min)
    .venv/bin/python bench/high_dimension.py --images 20 --steps 5   # seconds
    .venv/bin/python bench/high_dimension.py --probe-runs 3          # the probe at 4,096 pixels, one core
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from skl2onnx import to_onnx
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from monitor.gammamap import gamma_map, render_svg
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer
from monitor.signals.adversarial import gamma_ascent_search
from monitor.signals.balls import default_hypercube_points
from monitor.signals.scorer import RobustnessScorer, ScoringConfig

RADIUS = 100.0


@dataclass(frozen=True)
class Setup:
    size: int = 32
    images: int = 200
    steps: int = 25
    seed: int = 0
    variance_images: int = 10
    variance_seeds: int = 20
    max_iter: int = 200
    radius: float = RADIUS
    #: Gaussian noise (grey levels) added to the held-out images, clipped to 0–255: out-of-domain inputs, the paper's
    #: setting (ImageNet models on small grey pictures); 0 = the digits as they are
    noise: float = 0.0


def digits(size: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """(1797, size²) raw 0–255 pixels of the upscaled digits, and their labels."""
    data = load_digits()
    if size % 8:
        raise SystemExit(f"--size must be a multiple of 8 (the digits are 8×8); got {size}")
    f = size // 8
    images = np.kron(data.images, np.ones((f, f))) * (255.0 / 16.0)
    return images.reshape(len(images), -1), data.target.astype(np.int64)


def train(x: NDArray[np.float64], y: NDArray[np.int64], seed: int, root: Path, max_iter: int = 200) -> Path:
    mlp = MLPClassifier(hidden_layer_sizes=(64,), max_iter=max_iter, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a short training (the smoke test) is fine here
        mlp.fit(x / 255.0, y)
    mlp.coefs_[0] = mlp.coefs_[0] / 255.0  # the same model on raw 0–255 pixels
    onx = to_onnx(mlp, x[:1].astype(np.float32), options={id(mlp): {"zipmap": False}})
    path = root / "digits_mlp.onnx"
    path.write_bytes(onx.SerializeToString())
    return path


def auc(score: NDArray[np.float64], stable: NDArray[np.bool_]) -> float:
    """ROC AUC of ``score`` (higher = predicted stable) for the stable images; NaN when one class is absent."""
    if stable.all() or not stable.any():
        return float("nan")
    return float(roc_auc_score(stable.astype(int), score))


def run(setup: Setup) -> dict[str, Any]:
    x, y = digits(setup.size)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.4, random_state=setup.seed, stratify=y)
    with tempfile.TemporaryDirectory() as tmp:
        path = train(x_train, y_train, setup.seed, Path(tmp), setup.max_iter)
        model = OnnxModel(path, model_kind="classifier")
        n = model.n_features
        images = x_test[: setup.images]
        if setup.noise > 0:
            rng = np.random.default_rng(setup.seed + 1)
            images = np.clip(images + rng.normal(0.0, setup.noise, images.shape), 0.0, 255.0)
        labels = y_test[: setup.images]
        std = Standardizer.identity(n)
        config = ScoringConfig(
            radius=setup.radius, ball="hypercube", output="proba", flicker_copies=0, seed=setup.seed, steps=setup.steps
        )
        scorer = RobustnessScorer(model, std, config)
        t0 = time.perf_counter()
        scored = scorer.score(images)
        score_seconds = time.perf_counter() - t0
        rows = scorer.build_rows(images.astype(np.float32)).copy()
        t0 = time.perf_counter()
        model.evaluate(rows)
        bound_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        search = gamma_ascent_search(model, std, images, steps=setup.steps, config=config)
        search_seconds = time.perf_counter() - t0
        variance = _variance(model, std, images[: setup.variance_images], setup)
    stable = search.stable
    p, gamma, gamma_logit, p_adj = scored.probability, scored.gamma, scored.gamma_logit, scored.p_adj
    gmap = gamma_map(p, gamma, ~stable)
    return {
        "setup": setup.__dict__,
        "pixels": n,
        "ball_points": scorer.ball_size,
        "default_ball_points": default_hypercube_points(n),
        "test_accuracy": float(np.mean(scored.predicted_class == labels)),
        "flipped_share": float(np.mean(~stable)),
        "flip_step_median": float(np.median(search.flip_step[~stable])) if (~stable).any() else float("nan"),
        "auc": {
            "p_adj": auc(p_adj, stable),
            "p": auc(p, stable),
            "neg_gamma": auc(-gamma, stable),
            "neg_gamma_logit": auc(-gamma_logit, stable),
        },
        "unstable_mean": {
            "p": float(p[~stable].mean()) if (~stable).any() else float("nan"),
            "gamma": float(gamma[~stable].mean()) if (~stable).any() else float("nan"),
        },
        "stable_mean": {
            "p": float(p[stable].mean()) if stable.any() else float("nan"),
            "gamma": float(gamma[stable].mean()) if stable.any() else float("nan"),
        },
        "gamma_map": gmap.to_json(),
        "variance": variance,
        "seconds": {
            "score": round(score_seconds, 3),
            "onnxruntime_same_rows": round(bound_seconds, 3),
            "search": round(search_seconds, 3),
        },
        "search_rows": search.evaluations,
    }


def _variance(model: OnnxModel, std: Standardizer, images: NDArray[np.float64], setup: Setup) -> dict[str, float]:
    """γ of the sampled hypercube over several seeds against γ of the full one (all 2n points)."""
    n = model.n_features
    full_cfg = ScoringConfig(radius=setup.radius, ball=f"hypercube:{2 * n}", output="proba", flicker_copies=0)
    full = RobustnessScorer(model, std, full_cfg).score(images).gamma
    sampled = np.stack(
        [
            RobustnessScorer(
                model,
                std,
                ScoringConfig(radius=setup.radius, ball="hypercube", output="proba", flicker_copies=0, seed=s),
            )
            .score(images)
            .gamma
            for s in range(setup.variance_seeds)
        ]
    )
    ok = full > 0
    rel = (sampled[:, ok] - full[ok]) / full[ok]
    return {
        "images": int(ok.sum()),
        "seeds": setup.variance_seeds,
        "full_points": 2 * n,
        "mean_relative_bias": float(rel.mean()),
        "relative_spread": float(rel.std(axis=0).mean()),  # per image, the sd over seeds of (γ_S − γ) / γ
        "rank_corr_mean": float(np.mean([_spearman(sampled[s], full) for s in range(setup.variance_seeds)])),
    }


def _spearman(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def probe_timing(runs: int, *, size: int = 64, images: int = 20, steps: int = 25, seed: int = 0) -> list[float]:
    """Wall seconds of each of ``runs`` runs of ``probe --space raw --steps {steps} --threads 1`` on one core."""
    x, y = digits(size)
    x_train, x_test, y_train, _ = train_test_split(x, y, test_size=0.4, random_state=seed, stratify=y)
    seconds = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = train(x_train, y_train, seed, root)
        data = root / "images.npy"
        np.save(data, x_test[:images].astype(np.float32))
        pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
        cmd = [*pin, sys.executable, "-m", "monitor", "probe", "--model", str(model), "--data", str(data)]
        cmd += ["--space", "raw", "--steps", str(steps), "--threads", "1", "--json", str(root / "report.json")]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
            seconds.append(round(time.perf_counter() - t0, 2))
    return seconds


def conv_model(path: Path, size: int = 64, channels: int = 4, seed: int = 0) -> Path:
    """A small CNN on ``size``² raw pixels written with onnx.helper (conv 3×3 → ReLU → 2×2 max-pool → linear → softmax,
    seeded random weights): a model whose input feeds a convolution, not one affine layer, so the scorer builds
    its per-event ball rows in numpy."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    flat = channels * (size // 2) ** 2
    weights = [
        numpy_helper.from_array((rng.standard_normal((channels, 1, 3, 3)) / 255).astype(np.float32), "w"),
        numpy_helper.from_array(np.zeros(channels, np.float32), "b"),
        numpy_helper.from_array((rng.standard_normal((flat, 10)) / np.sqrt(flat)).astype(np.float32), "W"),
        numpy_helper.from_array(np.zeros(10, np.float32), "c"),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "w", "b"], ["h"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "W", "c"], ["z"]),
        helper.make_node("Softmax", ["z"], ["proba"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, size, size])],
        [helper.make_tensor_value_info("proba", TensorProto.FLOAT, ["batch", 10])],
        weights,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def throughput(runs: int, *, size: int = 64, batch: int = 256, seed: int = 0) -> list[tuple[float, ...]]:
    """Per run: seconds of onnxruntime alone on a batch's 1 + m rows per image, of the scorer with the ball in the
    graph (the MLP's first layer takes each image's moved pixels), of the scorer building the rows in numpy; then of
    onnxruntime alone and the scorer (rows in numpy: a convolution is not one affine layer) for a CNN
    (:func:`conv_model`); one intra-op thread each, the same images, each pair timed back to back. Last, the
    numpy path's row building alone (``build_rows``) and a plain copy of as many bytes (``np.copyto``)."""
    x, y = digits(size)
    x_train, x_test, y_train, _ = train_test_split(x, y, test_size=0.4, random_state=seed, stratify=y)
    out: list[tuple[float, ...]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = train(x_train, y_train, seed, Path(tmp))
        graph = OnnxModel(path, OnnxRuntimeOptions(intra_op_threads=1), model_kind="classifier")
        plain = OnnxModel(path, OnnxRuntimeOptions(intra_op_threads=1, rows_in_graph=False), model_kind="classifier")
        cnn = OnnxModel(
            conv_model(Path(tmp) / "cnn.onnx", size, seed=seed),
            OnnxRuntimeOptions(intra_op_threads=1),
            model_kind="classifier",
        )
        n = graph.n_features
        cfg = ScoringConfig(radius=RADIUS, ball="hypercube", output="proba", flicker_copies=0, seed=seed)
        in_graph = RobustnessScorer(graph, Standardizer.identity(n), cfg)
        in_numpy = RobustnessScorer(plain, Standardizer.identity(n), cfg)
        conv = RobustnessScorer(cnn, Standardizer.identity(n), cfg)
        if not in_graph.rows_built_in_graph:
            raise SystemExit("the per-event ball was not wrapped into the graph")
        if conv.rows_built_in_graph:
            raise SystemExit("the CNN's ball was wrapped into the graph; this cell times rows built in numpy")
        images = x_test[:batch].astype(np.float32)
        rows = in_numpy.build_rows(images).copy()
        copy = np.empty_like(rows)
        for _ in range(runs):
            t0 = time.perf_counter()
            plain.evaluate(rows)
            t1 = time.perf_counter()
            in_graph.score(images)
            t2 = time.perf_counter()
            in_numpy.score(images)
            t3 = time.perf_counter()
            cnn.evaluate(rows)
            t4 = time.perf_counter()
            conv.score(images)
            t5 = time.perf_counter()
            in_numpy.build_rows(images)
            t6 = time.perf_counter()
            np.copyto(copy, rows)
            t7 = time.perf_counter()
            out.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5, t7 - t6))
    return out


def markdown(r: dict[str, Any]) -> str:
    s, a, v, t = r["setup"], r["auc"], r["variance"], r["seconds"]
    rows_per_event = r["ball_points"] + 1
    lines = [
        f"{s['images']} held-out digits at {s['size']}×{s['size']} = {r['pixels']} raw pixels, r = {s['radius']:g}, "
        f"m = {r['ball_points']} sampled hypercube points per image, {s['steps']} Algorithm-2 steps, seed {s['seed']}, "
        f"noise {s['noise']:g}; "
        f"test accuracy {r['test_accuracy']:.3f}.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| images whose class flips within {s['steps']} steps | {r['flipped_share']:.1%} |",
        f"| median flip step | {r['flip_step_median']:g} |",
        f"| AUC of P_adj = P·e^(−{s['steps']}·γ_logit) for stability | {a['p_adj']:.3f} |",
        f"| AUC of P alone | {a['p']:.3f} |",
        f"| AUC of −γ alone (γ on the predicted class's probability) | {a['neg_gamma']:.3f} |",
        f"| AUC of −γ_logit alone (on its log-probability) | {a['neg_gamma_logit']:.3f} |",
        f"| mean P / γ of unstable images | {r['unstable_mean']['p']:.3f} / {r['unstable_mean']['gamma']:.3g} |",
        f"| mean P / γ of stable images | {r['stable_mean']['p']:.3f} / {r['stable_mean']['gamma']:.3g} |",
        f"| sampled γ vs full hypercube ({v['full_points']} points), {v['images']} images × {v['seeds']} seeds: "
        f"mean relative bias | {v['mean_relative_bias']:+.3f} |",
        f"| … relative spread (sd of (γ_S − γ) / γ per image) | {v['relative_spread']:.3f} |",
        f"| … Spearman ρ of sampled vs full γ across images | {v['rank_corr_mean']:.3f} |",
        f"| scoring {s['images']} images ({rows_per_event} rows each): scorer / onnxruntime alone on the same rows | "
        f"{t['score']:.3f} s / {t['onnxruntime_same_rows']:.3f} s |",
        f"| Algorithm 2 ({r['search_rows']:,} model rows) | {t['search']:.1f} s |",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=32, help="image side in pixels, a multiple of 8 (default 32)")
    ap.add_argument("--images", type=int, default=200, help="held-out images scored and searched (default 200)")
    ap.add_argument("--steps", type=int, default=25, help="Algorithm-2 steps (default 25)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--radius", type=float, default=RADIUS, help="ball radius in grey levels (default 100)")
    ap.add_argument("--noise", type=float, default=0.0, help="Gaussian noise (grey levels) on the held-out images")
    ap.add_argument("--variance-seeds", type=int, default=20)
    ap.add_argument("--svg", help="write the Gamma Map (with unstable shares) here")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--probe-runs", type=int, default=0, help="time the probe at 4,096 pixels this many times instead")
    ap.add_argument("--throughput-runs", type=int, default=0, help="time scoring 256 images of 4,096 pixels instead")
    args = ap.parse_args()
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn', load=True)}", flush=True)
    if args.throughput_runs:
        runs = throughput(args.throughput_runs, seed=args.seed)
        rows_mb = 256 * (1 + default_hypercube_points(64 * 64)) * 64 * 64 * 4 / 1e6
        print(
            "| run | MLP: onnxruntime alone on the rows (s) | scorer, ball in graph (s) | scorer, rows in numpy (s) "
            "| CNN: onnxruntime alone (s) | scorer, rows in numpy (s) | build_rows alone (s) | copy of as many bytes (s) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for i, cells in enumerate(runs, 1):
            print(f"| {i} | " + " | ".join(f"{t:.4f}" for t in cells) + " |")

        def median(ratios: list[float]) -> float:
            return sorted(ratios)[len(ratios) // 2]

        print(
            f"\nscored events/s relative to onnxruntime alone, median of {len(runs)} paired runs: MLP ball in graph "
            f"{median([r[0] / r[1] for r in runs]):.2f}, MLP rows in numpy {median([r[0] / r[2] for r in runs]):.2f}, "
            f"CNN rows in numpy {median([r[3] / r[4] for r in runs]):.2f}; median build_rows "
            f"{median([r[5] for r in runs]) * 1000:.0f} ms against {median([r[6] for r in runs]) * 1000:.0f} ms for a "
            f"copy of as many bytes ({rows_mb:.0f} MB)"
        )
        return
    if args.probe_runs:
        times = probe_timing(args.probe_runs, steps=args.steps, seed=args.seed)
        print(f"probe --space raw --steps {args.steps} on 20 images of 4,096 pixels, one core: {times} s")
        return
    setup = Setup(
        args.size,
        args.images,
        args.steps,
        args.seed,
        variance_seeds=args.variance_seeds,
        radius=args.radius,
        noise=args.noise,
    )
    result = run(setup)
    print(markdown(result))
    if args.svg:
        from monitor.gammamap import GammaMap

        m = GammaMap.from_json(result["gamma_map"])
        title = f"Gamma Map: digits {args.size}×{args.size}, red rings = share unstable after {args.steps} steps"
        svg = render_svg(m, title=title, labels=(f"{args.images} held-out digits", ""))
        Path(args.svg).write_text(svg + "\n", encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
