"""How many CPUs this process may use: its CPU affinity, capped by its cgroup's CPU quota.

Why: in a Kubernetes pod with ``limits.cpu: 2`` on a 64-core node, ``os.sched_getaffinity`` (and onnxruntime's
default thread count) still see the node's cores; only the cgroup's CFS quota says the container gets two CPUs'
worth of time per period. onnxruntime left at its default would start a thread per physical core of the node and
be throttled by the quota, and the Kafka consumer's child process would be started on a 1-CPU container where it
only competes with the decoding for the same core.

Read from the container's own cgroup (the root of the cgroup namespace, ``/sys/fs/cgroup``): v2 ``cpu.max``
(``"max 100000"`` or ``"<quota> <period>"``), else v1 ``cpu/cpu.cfs_quota_us`` and ``cpu.cfs_period_us`` (quota −1
= none). A quota set on a parent cgroup only (outside the namespace) is not seen; ``models[].threads`` set
explicitly always wins.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def cgroup_cpu_limit(root: Path = CGROUP_ROOT) -> float | None:
    """CPUs' worth of time the cgroup's quota allows per period (e.g. 1.5), or None when no quota is set or readable."""
    v2 = _read(root / "cpu.max")
    if v2 is not None:
        parts = v2.split()
        if len(parts) == 2 and parts[0] != "max":
            return _ratio(parts[0], parts[1])
        return None
    for folder in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        quota = _read(root / folder / "cpu.cfs_quota_us")
        period = _read(root / folder / "cpu.cfs_period_us")
        if quota is not None and period is not None:
            return _ratio(quota, period)
    return None


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def affinity_cpus() -> int:
    """CPUs this process may be scheduled on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def available_cpus(root: Path = CGROUP_ROOT) -> int:
    """``min(affinity, ⌈quota⌉)``, at least 1."""
    cpus = affinity_cpus()
    limit = cgroup_cpu_limit(root)
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(1, cpus)


def default_intra_op_threads(root: Path = CGROUP_ROOT) -> int:
    """The intra-op thread count for ``threads: 0``: 0 (onnxruntime's own default: a thread per physical core it
    sees) unless a cgroup quota allows fewer CPUs than this process may run on — then ``⌈quota⌉``."""
    cpus = available_cpus(root)
    return 0 if cpus >= affinity_cpus() else cpus


def intra_op_threads(requested: int, model: str, root: Path = CGROUP_ROOT) -> int:
    """``requested`` when set (> 0); for 0, :func:`default_intra_op_threads`, logged when a quota caps it."""
    if requested > 0:
        return requested
    threads = default_intra_op_threads(root)
    if threads:
        log.info(
            "onnxruntime intra-op threads capped by the container's CPU quota",
            extra={"model": model, "threads": threads, "cpu_quota": cgroup_cpu_limit(root)},
        )
    return threads
