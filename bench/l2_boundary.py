"""Nearest class boundary in L2: the monitor's black-box search vs IBM ART's HopSkipJump, and the closed form.

Data shipped inside scikit-learn (breast cancer; nothing downloaded). Two models, trained on all rows and converted
with skl2onnx: ``lr`` (StandardScaler + LogisticRegression: the nearest boundary has a closed form,
|logit| / ‖w·s‖ in standardized units) and ``gbdt`` (GradientBoostingClassifier). ``--points`` rows drawn at random
are attacked, every distance in standardized units (the reference standardizer of all rows):

- **ours**: :func:`monitor.probes.boundary.minimal_l2` (``probe --l2-boundary``), alone and with 200 reference
  rows as anchors (each point also bisects towards its nearest anchor of another class; the anchors' classes are
  charged to the points' rows, shared);
- **single feature**: the smallest single-feature ε* over the features, per point (the funnel's threshold search on
  that one point, every feature searched, default range);
- **HopSkipJump** (ART 1.20, L2, untargeted) at its defaults (``max_iter`` 50, ``max_eval`` 10000,
  ``init_eval`` 100) and at a small budget (``max_iter`` 10, ``max_eval`` 100, ``init_eval`` 10), run in its own
  venv ``bench/.venv-art`` through ``bench/hsj_helper.py``.

Per method: points where the class changed, median distance, the median and largest ratio to the closed form (lr),
Spearman's ρ of the per-point distance with HopSkipJump's (defaults), and model rows and seconds per point.

Usage::

    python3 -m venv bench/.venv-art && bench/.venv-art/bin/pip install adversarial-robustness-toolbox==1.20.1 \\
        onnxruntime scikit-learn scipy                                          # optional
    .venv/bin/python bench/l2_boundary.py                                       # the table in docs/BENCHMARKS.md
    .venv/bin/python bench/l2_boundary.py --points 5 --models lr --no-art       # seconds
    .venv/bin/python bench/l2_boundary.py --families --points 20                # per model family (docs/PROBES.md)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from machine import machine  # bench/machine.py: the script's folder is on sys.path
from numpy.typing import NDArray
from scipy.stats import spearmanr
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from monitor.model.convert import convert_estimator
from monitor.model.onnx import OnnxModel
from monitor.model.standardize import Standardizer
from monitor.probes.boundary import minimal_l2
from monitor.probes.funnel import FunnelConfig, run_funnel

HERE = Path(__file__).resolve().parent
ART_PYTHON = HERE / ".venv-art" / "bin" / "python"
#: reference rows the anchored search may bisect towards (their classes cost ANCHORS rows, shared by the points)
ANCHORS = 200
HSJ_SETTINGS = {"defaults": (50, 10_000, 100), "small": (10, 100, 10)}


def _models(names: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in names:
        if name == "lr":
            out[name] = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
        elif name == "gbdt":
            out[name] = GradientBoostingClassifier(n_estimators=50, max_depth=3, random_state=0)
        else:
            raise SystemExit(f"unknown model {name!r}; use lr, gbdt")
    return out


def _hsj(path: Path, std: Standardizer, points: NDArray[np.float64], setting: str, tmp: Path) -> list[dict[str, Any]]:
    max_iter, max_eval, init_eval = HSJ_SETTINGS[setting]
    inp, out = tmp / f"hsj_{setting}.npz", tmp / f"hsj_{setting}.json"
    np.savez(
        inp,
        model=str(path),
        mean=std.mean,
        scale=std.scale,
        points=points,
        max_iter=max_iter,
        max_eval=max_eval,
        init_eval=init_eval,
    )
    subprocess.run([str(ART_PYTHON), str(HERE / "hsj_helper.py"), str(inp), str(out)], check=True, timeout=3600)
    result: list[dict[str, Any]] = json.loads(out.read_text(encoding="utf-8"))
    return result


def _single_feature(
    model: OnnxModel, std: Standardizer, points: NDArray[np.float64]
) -> tuple[NDArray[np.float64], float, float]:
    cfg = FunnelConfig(perturbations=("shift",), search_all=True, steps=0)
    dist = np.full(points.shape[0], np.nan)
    rows = 0
    start = time.perf_counter()
    for i in range(points.shape[0]):
        res = run_funnel(model, std, points[i : i + 1], cfg)
        eps = [t.result.eps_star for t in res.thresholds if t.result.eps_star is not None]
        dist[i] = min(eps) if eps else np.nan
        rows += res.total_rows
    return dist, rows / points.shape[0], (time.perf_counter() - start) / points.shape[0]


def _row(
    name: str,
    dist: NDArray[np.float64],
    closed: NDArray[np.float64] | None,
    ref: NDArray[np.float64] | None,
    rows: float,
    seconds: float,
) -> str:
    ok = np.isfinite(dist)
    ratio = "—"
    if closed is not None and ok.any():
        r = dist[ok] / closed[ok]
        ratio = f"{np.median(r):.4f} / {r.max():.3f}"
    rho = "—"
    if ref is not None:
        both = ok & np.isfinite(ref)
        if both.sum() >= 3:
            rho = f"{spearmanr(dist[both], ref[both]).statistic:.3f}"
    med = f"{np.median(dist[ok]):.3f}" if ok.any() else "—"
    return f"| {name} | {int(ok.sum())}/{dist.size} | {med} | {ratio} | {rho} | {rows:,.0f} | {seconds:.4f} |"


FAMILIES = {"breast cancer": load_breast_cancer, "wine": load_wine, "iris": load_iris, "digits 8×8": load_digits}


def families(points: int, seed: int) -> None:
    """Our search against the exact nearest boundary of a linear-logit model on each of scikit-learn's bundled
    classification sets: min over the other classes j of |z_c − z_j| / ‖(w_c − w_j)·s/σ‖ (the distance to the union
    of the half-spaces where j beats c), in the reference standardizer's units."""
    print(
        "| data (classes, features) | class changed | ratio to exact: median / worst | points off by > 2 % | rows per point |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp_name:
        for name, load in FAMILIES.items():
            x, y = load(return_X_y=True)
            std = Standardizer.fit(x)
            est = make_pipeline(StandardScaler(), LogisticRegression(max_iter=5000)).fit(x, y)
            model = OnnxModel(convert_estimator(est, x.shape[1], Path(tmp_name) / f"{name[:4]}.onnx"))
            pts = x[np.random.default_rng(seed).choice(x.shape[0], points, replace=False)]
            z = est.decision_function(pts)
            lr = est[1]
            w = lr.coef_ / est[0].scale_ * std.scale  # (C, n) logit gradients in standardized units
            if w.shape[0] == 1:  # binary: one logit, the boundary at 0
                exact = np.abs(z) / np.linalg.norm(w[0])
            else:
                c = z.argmax(axis=1)
                norms = np.linalg.norm(w[c][:, None, :] - w[None, :, :], axis=2)
                norms[np.arange(len(z)), c] = 1.0  # the class itself: no boundary (set to inf below)
                gaps = (z[np.arange(len(z)), c][:, None] - z) / norms
                gaps[np.arange(len(z)), c] = np.inf
                exact = gaps.min(axis=1)
            ours = minimal_l2(model, std, pts)
            ok = np.isfinite(ours.distance)
            ratio = ours.distance[ok] / exact[ok]
            off = int(np.sum(np.abs(ratio - 1) > 0.02)) + int((~ok).sum())
            print(
                f"| {name} ({len(np.unique(y))}, {x.shape[1]}) | {int(ok.sum())} of {points} | "
                f"{np.median(ratio):.3f} / {ratio[np.argmax(np.abs(ratio - 1))]:.3f} | {off} of {points} | "
                f"{ours.rows.mean():.0f} |"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=50)
    parser.add_argument("--models", default="lr,gbdt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-art", action="store_true", help="skip HopSkipJump (no ART venv needed)")
    parser.add_argument(
        "--families",
        action="store_true",
        help="instead: our search against the exact boundary of logistic "
        "regressions on breast cancer, wine, iris and digits",
    )
    args = parser.parse_args(argv)
    if args.families:
        print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn', load=True)}", flush=True)
        print(f"{args.points} points per data set (seed {args.seed}); distances in standardized L2 units\n")
        families(args.points, args.seed)
        return 0
    x, y = load_breast_cancer(return_X_y=True)
    std = Standardizer.fit(x)
    idx = np.random.default_rng(args.seed).choice(x.shape[0], args.points, replace=False)
    points = x[idx]
    anchors = x[np.random.default_rng(args.seed + 1).choice(x.shape[0], ANCHORS, replace=False)]
    print(f"machine: {machine('numpy', 'onnxruntime', 'sklearn', load=True)}", flush=True)
    print(f"breast cancer, {args.points} points (seed {args.seed}); distances in standardized L2 units\n")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for name, est in _models(args.models.split(",")).items():
            est.fit(x, y)  # type: ignore[attr-defined]
            path = convert_estimator(est, x.shape[1], tmp / f"{name}.onnx")
            model = OnnxModel(path)
            closed = None
            if name == "lr":
                w = est[1].coef_[0] / est[0].scale_ * std.scale  # type: ignore[index]
                closed = np.abs(est.decision_function(points)) / np.linalg.norm(w)  # type: ignore[attr-defined]
            start = time.perf_counter()
            ours = minimal_l2(model, std, points)
            ours_s = (time.perf_counter() - start) / args.points
            start = time.perf_counter()
            anchored = minimal_l2(model, std, points, anchors=anchors)
            anchored_s = (time.perf_counter() - start) / args.points
            single, single_rows, single_s = _single_feature(model, std, points)
            hsj: dict[str, tuple[NDArray[np.float64], float, float]] = {}
            skipped = ""
            if args.no_art or not ART_PYTHON.exists():
                skipped = "HopSkipJump skipped: " + ("--no-art" if args.no_art else f"no ART venv at {ART_PYTHON}")
            else:
                for setting in HSJ_SETTINGS:
                    res = _hsj(path, std, points, setting, tmp)
                    d = np.array([np.nan if r["distance"] is None else float(r["distance"]) for r in res])
                    hsj[setting] = (
                        d,
                        float(np.mean([r["rows"] for r in res])),
                        float(np.mean([r["seconds"] for r in res])),
                    )
            ref = hsj["defaults"][0] if "defaults" in hsj else None
            print(f"### {name}\n")
            print(
                "| method | class changed | median distance | ratio to closed form (median / max) | Spearman ρ vs HSJ defaults | model rows per point | seconds per point |"
            )
            print("|---|---|---|---|---|---|---|")
            if closed is not None:
                print(_row("closed form", closed, closed, ref, 0, 0.0))
            print(_row("ours (`--l2-boundary`)", ours.distance, closed, ref, float(ours.rows.mean()), ours_s))
            print(
                _row(
                    f"ours + {ANCHORS} reference anchors",
                    anchored.distance,
                    closed,
                    ref,
                    float(anchored.rows.mean()) + ANCHORS / args.points,
                    anchored_s,
                )
            )
            print(_row("single feature (min ε*)", single, closed, ref, single_rows, single_s))
            for setting, (d, rows, secs) in hsj.items():
                print(_row(f"HopSkipJump ({setting})", d, closed, ref if setting != "defaults" else None, rows, secs))
            if skipped:
                print(f"\n{skipped}")
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
