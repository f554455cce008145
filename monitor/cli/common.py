"""Options and builders shared by the offline commands (score, reference, probe)."""

from __future__ import annotations

import argparse

import numpy as np
from numpy.typing import NDArray

from monitor.cpus import intra_op_threads
from monitor.errors import DataError
from monitor.metrics.scorer import RobustnessScorer, ScoringConfig
from monitor.model.io import load_rows
from monitor.model.onnx import OnnxModel, OnnxRuntimeOptions
from monitor.model.standardize import Standardizer


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the ONNX model file")
    p.add_argument(
        "--providers",
        default="cpu",
        help="comma-separated onnxruntime execution providers, in order (cpu, cuda, or full names); default cpu",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="onnxruntime intra-op threads (0 = its default, capped by the cgroup CPU quota)",
    )
    p.add_argument("--max-rows", type=int, default=16384, help="rows per session.run chunk (default 16384)")


def add_scoring_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reference", help="reference data (.csv/.npy) for standardization; default: the data itself")
    p.add_argument("--radius", type=float, default=0.05, help="ball radius r (default 0.05, in --space units)")
    p.add_argument(
        "--space",
        choices=["standardized", "raw"],
        default="standardized",
        help="units of --radius/--sigma: standardized by the reference (default) or raw feature units",
    )
    p.add_argument(
        "--ball",
        default="auto",
        help="simplex | simplex+anti | rotations:K | hypercube:m | auto (= simplex+anti, hypercube:128 above 256 features)",
    )
    p.add_argument(
        "--output",
        default="auto",
        choices=["auto", "proba", "logit", "label", "value"],
        help="what f is for gamma (auto = proba for classifiers, value for regressors)",
    )
    p.add_argument("--flicker-copies", type=int, default=32, help="Gaussian copies per row for flicker (K, default 32)")
    p.add_argument("--sigma", type=float, default=0.05, help="flicker noise scale σ (default 0.05, in --space units)")
    p.add_argument("--steps", type=int, default=25, help="N in p_adj = P·exp(−N·γ_logit) (default 25)")
    p.add_argument("--seed", type=int, default=0, help="seed for ball rotations/samples and flicker noise")


def load_model(args: argparse.Namespace) -> OnnxModel:
    providers = tuple(p.strip() for p in str(args.providers).split(",") if p.strip())
    return OnnxModel(
        args.model,
        OnnxRuntimeOptions(
            providers=providers,
            intra_op_threads=intra_op_threads(args.threads, str(args.model)),
            max_rows_per_run=args.max_rows,
        ),
    )


def load_points(path: str, n_features: int, *, what: str) -> NDArray[np.float64]:
    rows = load_rows(path)
    if rows.shape[1] != n_features:
        raise DataError(
            f"{what} '{path}' has {rows.shape[1]} columns; the model expects {n_features} features", path=path
        )
    return rows


def build_standardizer(args: argparse.Namespace, n_features: int, data_path: str) -> Standardizer:
    if args.space == "raw":
        return Standardizer.identity(n_features)
    ref_path = args.reference or data_path
    ref = load_points(ref_path, n_features, what="--reference" if args.reference else "--data")
    finite = ref[np.all(np.isfinite(ref), axis=1)]
    if finite.shape[0] == 0:
        raise DataError(f"'{ref_path}' has no finite rows to standardize with", path=ref_path)
    return Standardizer.fit(finite)


def build_scorer(args: argparse.Namespace) -> tuple[OnnxModel, Standardizer, RobustnessScorer]:
    model = load_model(args)
    standardizer = build_standardizer(args, model.n_features, args.data)
    config = ScoringConfig(
        radius=args.radius,
        ball=args.ball,
        output=args.output,
        flicker_copies=args.flicker_copies,
        sigma=args.sigma,
        steps=args.steps,
        seed=args.seed,
    )
    return model, standardizer, RobustnessScorer(model, standardizer, config)
