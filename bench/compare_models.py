"""Does the label-free ordering of two models match the ordering by accuracy? And what does ``compare`` cost?

Seed 001 (§4, Tables 1–2) claims that γ "reliably measures relative overfitting between two models on the same
training data": of a well-fit and an overfit model, the overfit one has the higher mean γ, without labels. This
script measures that claim on model pairs with a known ordering, through ``monitor.compare`` itself:

1. per data set bundled with scikit-learn (wine, breast cancer, digits) and seed: a stratified split into training
   (50 %), a labelled validation set (25 %, the reference: it standardizes every model and fits the label-free
   accuracy estimators) and a held-out test set (25 %);
2. four models, the seed's: ``gbdt-1`` (well fit: depth 2, 50 trees, learning rate 0.1), ``gbdt-2`` (overfit: no
   depth limit, 200 trees, learning rate 1), ``mlp-1`` (well fit: one hidden layer of 100, L2 1e-4, standardized
   inputs) and ``mlp-2`` (overfit: three layers of 256, no L2, learning rate 0.01), converted with
   skl2onnx;
3. ``monitor.compare`` of the four on the unlabelled test rows: mean γ, flicker, P_adj, the label-free accuracy
   estimate, and the Pareto relation of every pair on the label-free axes;
4. the truth: realized accuracy on the test rows (held out) and on the test rows with Gaussian noise of 0.5 training
   standard deviations per feature (under shift).

For each pair whose accuracies differ by at least ``--min-gap`` (2 points), a label-free signal *agrees* when it
prefers the more accurate model (lower mean γ, lower flicker, higher estimated accuracy; the Pareto relation when it
names a dominating model, else it makes no call). Then one pair that differs under one perturbation only: a logistic
regression and the same model whose one input is amplified outside the training range of that input (identical on
the data, fragile under ``shift`` of that input), and the ε* split of ``compare`` into universal and model-specific
fragilities. Last, the time of ``compare`` on two models over ``--rows`` rows against scoring each alone, side by
side (target: within 2×, judged on the paired ratios by ``bench/verdict.py``).

Usage::

    .venv/bin/python bench/compare_models.py                 # the tables in docs/BENCHMARKS.md
    .venv/bin/python bench/compare_models.py --seeds 1 --datasets wine --rows 2000   # seconds
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd  # type: ignore[import-untyped, unused-ignore]
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from onnx import helper, numpy_helper
from sklearn.datasets import load_breast_cancer, load_digits, load_wine, make_classification
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from verdict import verdict

import monitor
from monitor.model.convert import convert_estimator

DATASETS: dict[str, Callable[..., Any]] = {
    "wine": load_wine,
    "breast_cancer": load_breast_cancer,
    "digits": load_digits,
}
SHIFT_NOISE = 0.5


def models(seed: int) -> dict[str, Any]:
    """The seed's four: a well-fit and an overfit GBDT and MLP."""
    return {
        "gbdt-1": GradientBoostingClassifier(max_depth=2, n_estimators=50, learning_rate=0.1, random_state=seed),
        "gbdt-2": GradientBoostingClassifier(max_depth=None, n_estimators=200, learning_rate=1.0, random_state=seed),
        "mlp-1": make_pipeline(StandardScaler(), MLPClassifier((100,), alpha=1e-4, max_iter=500, random_state=seed)),
        "mlp-2": make_pipeline(
            StandardScaler(),
            MLPClassifier((256, 256, 256), alpha=0.0, learning_rate_init=0.01, max_iter=1000, random_state=seed),
        ),
    }


def split(x: NDArray[np.float64], y: NDArray[np.int64], seed: int) -> tuple[NDArray[Any], ...]:
    x_tr, x_rest, y_tr, y_rest = train_test_split(x, y, train_size=0.5, stratify=y, random_state=seed)
    x_va, x_te, y_va, y_te = train_test_split(x_rest, y_rest, train_size=0.5, stratify=y_rest, random_state=seed)
    return x_tr, y_tr, x_va, y_va, x_te, y_te


def one_dataset(
    name: str, seed: int, tmp: Path, args: argparse.Namespace
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The per-model rows and the per-pair rows of one data set and seed."""
    x, y = DATASETS[name](return_X_y=True)
    x = np.asarray(x, dtype=np.float64)
    cols = [f"f{j}" for j in range(x.shape[1])]
    x_tr, y_tr, x_va, y_va, x_te, y_te = split(x, y, seed)
    rng = np.random.default_rng(seed)
    x_sh = x_te + rng.normal(0, SHIFT_NOISE, size=x_te.shape) * x_tr.std(axis=0)
    paths, truth = {}, {}
    for label, est in models(seed).items():
        est.fit(x_tr, y_tr)
        paths[label] = convert_estimator(est, x.shape[1], tmp / f"{name}-{seed}-{label}.onnx")
        truth[label] = {
            "train": float(np.mean(est.predict(x_tr) == y_tr)),
            "test": float(np.mean(est.predict(x_te) == y_te)),
            "shift": float(np.mean(est.predict(x_sh) == y_te)),
        }
    ref = pd.DataFrame(x_va, columns=cols).assign(label=y_va)
    result = monitor.compare(
        paths,
        pd.DataFrame(x_te, columns=cols),
        ref,
        reference_labels="label",
        feature_names=dict.fromkeys(paths, cols),
        replicates=args.bootstrap,
        probe_points=0,
        seed=seed,
    )
    per_model = {r["model"]: r for r in result.rows("models")}
    model_rows = [
        {"dataset": name, "seed": seed, "model": m, **truth[m], **{k: per_model[m][k] for k in ("gamma", "flicker")}}
        | {"estimate": per_model[m]["accuracy_estimate"]}
        for m in paths
    ]
    pair_rows = []
    for v in result.rows("verdicts"):
        a, b = v["a"], v["b"]
        pair_rows.append(
            {
                "dataset": name,
                "seed": seed,
                "a": a,
                "b": b,
                "relation": v["relation"],
                **{
                    f"{k}_{side}": (truth[a][k] if side == "a" else truth[b][k])
                    for k in ("test", "shift")
                    for side in ("a", "b")
                },
                **{f"{k}_{side}": per_model[m][src] for k, src in SIGNALS.items() for side, m in (("a", a), ("b", b))},
            }
        )
    return model_rows, pair_rows


#: the label-free signals and their per-model column; lower is better for γ and flicker, higher for the estimate
SIGNALS = {"gamma": "gamma", "flicker": "flicker", "estimate": "accuracy_estimate"}
LOWER_BETTER = {"gamma", "flicker"}


def agreement(pairs: list[dict[str, Any]], truth: str, min_gap: float) -> list[str]:
    """Markdown rows: per signal, how often it prefers the more accurate model of the pairs ≥ ``min_gap`` apart."""
    decided = [p for p in pairs if abs(p[f"{truth}_a"] - p[f"{truth}_b"]) >= min_gap]
    rows = []
    for sig in (*SIGNALS, "pareto"):
        agree = calls = 0
        for p in decided:
            a_better = p[f"{truth}_a"] > p[f"{truth}_b"]
            if sig == "pareto":
                if p["relation"] not in ("a-dominates", "b-dominates"):
                    continue
                says_a = p["relation"] == "a-dominates"
            else:
                va, vb = p[f"{sig}_a"], p[f"{sig}_b"]
                if va is None or vb is None or va == vb:
                    continue
                says_a = (va < vb) if sig in LOWER_BETTER else (va > vb)
            calls += 1
            agree += says_a == a_better
        share = f"{agree / calls:.0%}" if calls else "-"
        rows.append(f"| {truth} | {sig} | {len(decided)} | {calls} | {agree} | {share} |")
    return rows


def seed_pairs(pairs: list[dict[str, Any]]) -> list[str]:
    """Seed 001's own comparison: per family, the overfit model beside the well-fit one on each data set and seed."""
    rows = [
        "| family | pairs | overfit has the higher mean γ | overfit has the lower test acc | both |",
        "|---|---|---|---|---|",
    ]
    for fam in ("gbdt", "mlp"):
        mine = [p for p in pairs if (p["a"], p["b"]) == (f"{fam}-1", f"{fam}-2")]
        higher = [p["gamma_b"] > p["gamma_a"] for p in mine]
        worse = [p["test_b"] < p["test_a"] for p in mine]
        both = sum(h and w for h, w in zip(higher, worse, strict=True))
        rows.append(f"| {fam} | {len(mine)} | {sum(higher)} | {sum(worse)} | {both} |")
    return rows


def amplified(src: Path, out: Path, column: int, low: float, high: float, gain: float = 100.0) -> Path:
    """The model at ``src`` with input ``column`` amplified ``gain``-fold outside [low, high]: the same on the data,
    fragile under a shift of that one input."""
    proto = onnx.load(str(src))
    graph = proto.graph
    name = graph.input[0].name
    d = graph.input[0].type.tensor_type.shape.dim[1].dim_value
    mask = np.zeros(d, dtype=np.float32)
    mask[column] = gain
    lo = np.full(d, -np.inf, dtype=np.float32)
    hi = np.full(d, np.inf, dtype=np.float32)
    lo[column], hi[column] = low, high
    consts = {"amp_lo": lo, "amp_hi": hi, "amp_gain": mask}
    graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items())
    for node in graph.node:
        node.input[:] = ["amp_x" if i == name else i for i in node.input]
    pre = [
        helper.make_node("Sub", [name, "amp_hi"], ["amp_above"]),
        helper.make_node("Relu", ["amp_above"], ["amp_up"]),
        helper.make_node("Sub", ["amp_lo", name], ["amp_below"]),
        helper.make_node("Relu", ["amp_below"], ["amp_down"]),
        helper.make_node("Sub", ["amp_up", "amp_down"], ["amp_out"]),
        helper.make_node("Mul", ["amp_out", "amp_gain"], ["amp_push"]),
        helper.make_node("Add", [name, "amp_push"], ["amp_x"]),
    ]
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(pre + nodes)
    onnx.checker.check_model(proto)
    onnx.save(proto, str(out))
    return out


def perturbation_pair(tmp: Path, args: argparse.Namespace) -> list[str]:
    """A logistic regression beside its twin amplified on one input outside that input's training range."""
    x, y = load_breast_cancer(return_X_y=True)
    cols = [f"f{j}" for j in range(x.shape[1])]
    x_tr, y_tr, x_va, y_va, x_te, y_te = split(x, y, 0)
    lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(x_tr, y_tr)
    base = convert_estimator(lr, x.shape[1], tmp / "lr.onnx")
    j = 0
    twin = amplified(base, tmp / "lr-amplified.onnx", j, float(x[:, j].min()), float(x[:, j].max()))
    result = monitor.compare(
        {"lr": base, "lr-amplified": twin},
        pd.DataFrame(x_te, columns=cols).assign(label=y_te),
        pd.DataFrame(x_va, columns=cols),
        labels="label",
        feature_names={"lr": cols, "lr-amplified": cols},
        replicates=args.bootstrap,
        probe_points=args.probe_points,
    )
    v = result.rows("verdicts")[0]
    lines = [
        f"- verdict on the test rows: {v['statement']}; predicted classes differ on {v['disagreement']:.1%} of rows",
    ]
    for d in result.rows("pairs"):
        if d["segment"] == "(all)" and d["axis"] in ("gamma", "flicker", "accuracy"):
            lines.append(
                f"- {d['axis']}: {d['mean_a']:.4g} vs {d['mean_b']:.4g}, difference {d['difference']:+.3g} "
                f"[{d['lower']:+.3g}, {d['upper']:+.3g}]"
            )
    frag = result.rows("fragility")
    for kind in ("universal", "specific"):
        targets = [
            f"{f['target']} ({f['fragile_for']})" if kind == "specific" else f["target"]
            for f in frag
            if f["kind"] == kind
        ]
        lines.append(f"- {kind} fragilities: {', '.join(targets) or 'none'}")
    f0 = next((f for f in frag if f["target"] == f"shift[{cols[j]}]"), None)
    if f0 is not None:
        lines.append(
            f"- ε* of shift[{cols[j]}]: lr {_eps(f0['eps_star_lr'])}, lr-amplified {_eps(f0['eps_star_lr-amplified'])}"
        )
    return lines


def _eps(v: float | None) -> str:
    return "not crossed" if v is None else f"{v:.3g}"


def timing(tmp: Path, args: argparse.Namespace) -> list[str]:
    """``compare`` of a GBDT and an MLP over ``--rows`` rows against ``score`` of each alone (same settings)."""
    x, y = make_classification(n_samples=args.rows + 2000, n_features=20, n_informative=10, random_state=0)
    cols = [f"f{j}" for j in range(20)]
    fit_x, fit_y = x[:2000], y[:2000]
    a = convert_estimator(
        GradientBoostingClassifier(n_estimators=100, max_depth=3).fit(fit_x, fit_y), 20, tmp / "ta.onnx"
    )
    b = convert_estimator(
        make_pipeline(StandardScaler(), MLPClassifier((64,), max_iter=300, random_state=0)).fit(fit_x, fit_y),
        20,
        tmp / "tb.onnx",
    )
    data = pd.DataFrame(x[2000:], columns=cols)
    alone: list[float] = []
    together: list[float] = []

    def score_both() -> None:
        monitor.score(a, data.to_numpy(), as_frame=False)
        monitor.score(b, data.to_numpy(), as_frame=False)

    def compare_both() -> None:
        monitor.compare({"a": a, "b": b}, data, feature_names={"a": cols, "b": cols}, probe_points=args.probe_points)

    for k in range(args.repeats):  # side by side, in alternating order: a slow spell of the machine moves both
        for which in ("alone", "together") if k % 2 == 0 else ("together", "alone"):
            t0 = time.perf_counter()
            (score_both if which == "alone" else compare_both)()
            (alone if which == "alone" else together).append(time.perf_counter() - t0)
    ratios = [s / c for s, c in zip(alone, together, strict=True)]
    judged = str(verdict(ratios, 0.5)) if len(ratios) > 1 else f"{ratios[0]:.2f} (one pair: no verdict)"
    return [
        "| rows | score a + score b (s), median | compare (s), median | (score a + score b) / compare, paired |",
        "|---|---|---|---|",
        f"| {args.rows:,} | {np.median(alone):.1f} | {np.median(together):.1f} | {judged} |",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated: " + ", ".join(DATASETS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--min-gap", type=float, default=0.02, help="accuracy gap of a decided pair (0.02: 2 points)")
    p.add_argument("--bootstrap", type=int, default=500)
    p.add_argument("--probe-points", type=int, default=20)
    p.add_argument("--rows", type=int, default=100_000, help="rows of the timing run (0 skips it)")
    p.add_argument("--repeats", type=int, default=6, help="paired timings (target: compare within 2x: ratio >= 0.5)")
    args = p.parse_args()
    print(f"machine: {machine('onnxruntime', 'sklearn', 'skl2onnx', load=True)}")
    all_models: list[dict[str, Any]] = []
    all_pairs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, seed in itertools.product(args.datasets.split(","), range(args.seeds)):
            m, pr = one_dataset(name, seed, tmp, args)
            all_models += m
            all_pairs += pr
        print("\n### Per model (mean over seeds), as seed 001's Tables 1–2\n")
        print("| data set | model | train acc | test acc | shift acc | mean γ | flicker | estimated acc |")
        print("|---|---|---|---|---|---|---|---|")
        frame = pd.DataFrame(all_models).groupby(["dataset", "model"], sort=False).mean(numeric_only=True)
        for (ds, m), r in frame.iterrows():
            print(
                f"| {ds} | {m} | {r.train:.3f} | {r.test:.3f} | {r['shift']:.3f} | {r.gamma:.3g} | {r.flicker:.3f} "
                f"| {r.estimate:.3f} |"
            )
        print("\n### Seed 001's pairs: the overfit model beside the well-fit one of its family\n")
        print("\n".join(seed_pairs(all_pairs)))
        print(f"\n### Label-free ordering vs accuracy ({len(all_pairs)} pairs; decided: gap ≥ {args.min_gap:.0%})\n")
        print("| truth | signal | decided pairs | calls | agree | agree share |")
        print("|---|---|---|---|---|---|")
        for truth in ("test", "shift"):
            print("\n".join(agreement(all_pairs, truth, args.min_gap)))
        print("\n### A pair that differs under one perturbation only\n")
        print("\n".join(perturbation_pair(tmp, args)))
        if args.rows > 0:
            print("\n### Time: compare of two models vs scoring each alone\n")
            print("\n".join(timing(tmp, args)))


if __name__ == "__main__":
    main()
