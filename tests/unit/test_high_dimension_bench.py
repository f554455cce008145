"""bench/high_dimension.py (the seed's §5 on upscaled digits): the same seed gives the same figures.

Pins reproducibility, not values: the docs page's numbers come from the full run, not from this small one.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from high_dimension import Setup, markdown, run  # noqa: E402  (bench/ is not a package)

pytestmark = pytest.mark.slow

SMALL = Setup(size=24, images=12, steps=3, seed=1, variance_images=4, variance_seeds=2, max_iter=15)


def _figures(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k not in ("seconds",)}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_same_seed_same_figures() -> None:
    first, second = run(SMALL), run(SMALL)
    assert _same(_figures(first), _figures(second))
    assert first["pixels"] == 576 and first["ball_points"] == 16
    assert first["gamma_map"]["total"] == SMALL.images
    assert set(first["auc"]) == {"p_adj", "p", "neg_gamma", "neg_gamma_logit"}
    assert "images whose class flips within 3 steps" in markdown(first)
