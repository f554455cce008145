"""Stage 5a (rolling): the reference file ``harmonic-monitor reference`` writes and ``run`` reads.

A JSON document holding the standardizer and the reference γ/flicker/feature distributions, so that the sidecar
starts with a ready reference instead of re-scoring reference rows at start-up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from monitor.errors import DataError
from monitor.model.standardize import Standardizer
from monitor.rolling.reference import Reference

REFERENCE_FORMAT = "harmonic-monitor/reference"
REFERENCE_VERSION = 1


def write_reference(out: Path, standardizer: Standardizer, ref: Reference, *, model: str, space: str) -> Path:
    """Write ``ref`` and the standardizer it was computed with as a reference file; returns ``out``."""
    doc = {
        "format": REFERENCE_FORMAT,
        "version": REFERENCE_VERSION,
        "model": model,
        "n_features": standardizer.n_features,
        "space": space,
        "standardizer": standardizer.to_dict(),
        "reference": ref.to_dict(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, default=float) + "\n", encoding="utf-8")
    return out


def read_reference(path: str | Path, n_features: int) -> tuple[Standardizer, Reference]:
    """Load a file written by ``harmonic-monitor reference`` and check it fits the model."""
    p = Path(path)
    try:
        doc: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read reference JSON '{p}': {exc}", path=str(p)) from exc
    if not isinstance(doc, dict):
        raise DataError(
            f"'{p}' is not a harmonic-monitor reference (a JSON {type(doc).__name__}, not an object); "
            "build one with `harmonic-monitor reference`",
            path=str(p),
        )
    if doc.get("format") != REFERENCE_FORMAT or doc.get("version") != REFERENCE_VERSION:
        raise DataError(
            f"'{p}' is not a harmonic-monitor reference (format {doc.get('format')!r}, version {doc.get('version')!r}); "
            "build one with `harmonic-monitor reference`",
            path=str(p),
        )
    if doc.get("n_features") != n_features:
        raise DataError(
            f"reference '{p}' was built for {doc.get('n_features')} features; the model takes {n_features}",
            path=str(p),
        )
    try:
        return Standardizer.from_dict(doc["standardizer"]), Reference.from_dict(doc["reference"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a hand-edited file
        raise DataError(
            f"reference '{p}' is damaged ({type(exc).__name__}: {exc}); rebuild it with `harmonic-monitor reference`",
            path=str(p),
        ) from exc
