"""The ``machine:`` line every benchmark prints: CPU model, cores available, OS, and the versions that matter."""

from __future__ import annotations

import importlib
import os
import platform
from pathlib import Path


def machine(*packages: str, load: bool = False) -> str:
    """``"<CPU>, <n> cores available[, load average …], <OS>; Python x, <package> <version>, …"``.

    ``packages`` are import names (``onnxruntime``, ``kafka``…); a package that is not installed is left out.
    """
    cpu = platform.processor() or platform.machine() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    parts = [f"{cpu}, {cores} cores available"]
    if load and hasattr(os, "getloadavg"):
        parts.append("load average " + " ".join(f"{v:.1f}" for v in os.getloadavg()) + " at start")
    versions = [f"Python {platform.python_version()}"]
    for name in packages:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        label = {"kafka": "kafka-python", "sklearn": "scikit-learn"}.get(name, name)
        versions.append(f"{label} {getattr(module, '__version__', '?')}")
    return ", ".join(parts) + f", {platform.system()} {platform.release()}; " + ", ".join(versions)
