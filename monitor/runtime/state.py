"""The runtime's durable state: ``<state_dir>/state.json`` (counters, standardizers, references and windows).

:class:`StateStore` reads and writes the file; :func:`restore_model` puts one model's saved part back when it still
describes the model that was loaded, and :func:`model_state` is that part as the pipeline saves it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from monitor.errors import DataError
from monitor.model.standardize import Standardizer
from monitor.runtime.models import ModelRuntime

log = logging.getLogger("monitor.runtime.state")
STATE_FILE = "state.json"
STATE_VERSION = 1


class StateStore:
    """``<state_dir>/state.json``, written atomically (temp file + rename)."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = Path(state_dir)
        self.path = self.dir / STATE_FILE

    def load(self) -> dict[str, Any]:
        if not self.path.is_file():
            return {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and data.get("version") == STATE_VERSION:
                check_state(data)
        except (OSError, ValueError) as exc:  # ValueError: bad JSON, bad UTF-8, or not the shape persist() writes
            # a corrupt state file must not keep the sidecar down: start fresh, keep the bad file for inspection
            bad = self.path.with_suffix(f".corrupt-{int(time.time())}")
            self.path.rename(bad)
            log.error("state file unreadable; starting fresh", extra={"moved_to": str(bad), "error": str(exc)})
            return {}
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            log.warning("state file has an unknown version; ignoring it", extra={"path": str(self.path)})
            return {}
        return data

    def save(self, data: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": STATE_VERSION, **data}, default=float), encoding="utf-8")
        os.replace(tmp, self.path)


def check_state(data: dict[str, Any]) -> None:
    """Raise ValueError when a parsed state file does not have the shape :meth:`StateStore.save` is given by the pipeline."""
    counters, models = data.get("counters", []), data.get("models", {})
    if not isinstance(counters, list) or not all(
        isinstance(row, dict)
        and isinstance(row.get("name"), str)
        and isinstance(row.get("labels"), list)
        and isinstance(row.get("value"), int | float)
        for row in counters
    ):
        raise ValueError("state 'counters' is not a list of {name, labels, value} objects")
    if not isinstance(models, dict) or not all(
        isinstance(m, dict) and all(isinstance(m.get(k, {}), dict) for k in ("standardizer", "watch"))
        for m in models.values()
    ):
        raise ValueError("state 'models' is not an object of per-model objects")


def restore_model(rt: ModelRuntime, saved: dict[str, Any]) -> None:
    """Re-install a model's saved standardizer (when none is configured) and reference, if they fit the model.

    The saved reference and windows are dropped (and the reference rebuilt from the file or a new warm-up)
    when the model file, the reference file or the scoring settings changed since they were written: their γ
    and flicker are not comparable with what this process computes. A saved warm-up standardizer is kept (it
    describes the traffic, not the model) unless a reference file is configured now.
    """
    assert rt.watch is not None
    n = rt.model.n_features
    current = rt.fingerprint()
    saved_fingerprint = saved.get("fingerprint")
    if "watch" in saved and saved_fingerprint != current:
        changed = (
            ["state written by a version without fingerprints"]
            if not isinstance(saved_fingerprint, dict)
            else [key.removesuffix("_sha256") for key in current if saved_fingerprint.get(key) != current[key]]
        )
        log.warning(
            "saved reference and windows were computed with another model, reference or scoring settings; "
            "rebuilding them",
            extra={"model": rt.name, "changed": changed},
        )
        saved = {k: v for k, v in saved.items() if k != "watch"}
    if rt.standardizer is None and "standardizer" in saved:
        std = Standardizer.from_dict(saved["standardizer"])
        if std.n_features != n:
            raise DataError(f"saved standardizer has {std.n_features} features; model '{rt.name}' expects {n}")
        rt.activate(std)
        log.info("standardizer restored from state", extra={"model": rt.name})
    if "watch" in saved:
        rt.watch.restore(saved["watch"])
        ref = rt.watch.reference
        if ref is not None and ref.n_features != n:
            raise DataError(f"saved reference has {ref.n_features} features; model '{rt.name}' expects {n}")


def model_state(rt: ModelRuntime) -> dict[str, Any]:
    """One model's part of the state file: its standardizer, and its watch with the fingerprint it was built on."""
    entry: dict[str, Any] = {}
    if rt.standardizer is not None:
        entry["standardizer"] = rt.standardizer.to_dict()
    if rt.watch is not None:
        entry["watch"] = rt.watch.dump()
        entry["fingerprint"] = rt.fingerprint()
    return entry
