"""Stage 3: how the model's onnxruntime sessions are made — the options, and which execution providers they run on.

Every session of a model (its own, the load-time trials of a rewritten graph, the wrapped neighbourhood graph) is
made with :func:`session_options` and the provider list :func:`resolve_providers` chose and
:func:`active_providers` confirmed, so they all run the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnxruntime as ort

from monitor.config import ModelSettings, setting_default
from monitor.cpus import CGROUP_ROOT, available_cpus

#: the model's load-time lines share one logger, wherever the code that says them lives
log = logging.getLogger("monitor.model.onnx")

_PROVIDER_ALIASES = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}


@dataclass(frozen=True, slots=True)
class OnnxRuntimeOptions:
    """How to run the session. ``providers`` accepts aliases (cpu, cuda) or full provider names.

    ``providers``, ``intra_op_threads`` (``threads``), ``max_rows_per_run`` and ``rows_in_graph`` are a model's
    settings (:class:`monitor.config.ModelSettings`), which declare their defaults and meaning.
    """

    providers: tuple[str, ...] = setting_default(ModelSettings, "providers")
    intra_op_threads: int = setting_default(ModelSettings, "threads")  # 0 = onnxruntime's default
    inter_op_threads: int = 0
    #: rows per ``session.run``. 16,384 rather than 65,536: an MLP ran 76,800 rows faster in 16,384-row chunks
    #: (its activations stay in cache) and no model got faster with larger chunks (``bench/engine_throughput.py``,
    #: its *1-run bound* column, which the docs' table leaves out); cheap models pay ~10-20 µs per extra run.
    max_rows_per_run: int = setting_default(ModelSettings, "max_rows_per_run")
    #: let :meth:`~monitor.model.onnx.OnnxModel.neighbourhood` wrap the graph so onnxruntime builds ball points
    #: and flicker copies itself (see :mod:`monitor.model.neighbourhood`); False: the scorer builds them in numpy
    rows_in_graph: bool = setting_default(ModelSettings, "rows_in_graph")
    #: let onnxruntime's intra-op threads keep spinning after a ``session.run`` returns (its default). False sets
    #: ``session.force_spinning_stop``: the threads spin while a run needs them and stop when it returns. A
    #: spinning thread holds a core that the next thing needs — the scorer's wrapped session right after the
    #: shadow check's run on the model's own session (each session has its own pool), another model's session, the
    #: consumer process, the model server beside the sidecar. With the threads stopped the whole pipeline ingests
    #: a clearly larger share of raw kafka-python's rate (``bench/stream.py throughput --variants raw pipeline``;
    #: docs/BENCHMARKS.md, *Ingest vs raw client*).
    spin_after_run: bool = False
    #: let onnxruntime's intra-op threads spin while they wait for work inside a run (its default). False sets
    #: ``session.intra_op.allow_spinning`` 0: a thread with nothing to do sleeps until the next parallel section.
    #: In ``run`` the model's sessions share their cores with the consumer, the HTTP process, a candidate's sessions
    #: run right after (``models[].compare_with``) and other models': on a busy 2-core machine a boosted-tree model
    #: scored with spinning threads took 1.5× the CPU and 1.8× the wall time, and a candidate scored after it 2.2× its
    #: scoring alone instead of 1.4× (``bench/live_candidate.py``; docs/BENCHMARKS.md, *A live candidate beside the
    #: served model*).
    spin: bool = False
    #: threads that run slices of each run of the model at once, cut along its batch axis
    #: (:class:`~monitor.model.split_runs.SplitSession`); 1 (``run``, which shares its cores): one run per call. The
    #: offline commands take a thread per CPU with one intra-op thread each (:func:`offline_options`)
    split_runs: int = 1


def offline_options(
    threads: int = setting_default(ModelSettings, "threads"), *, root: Path = CGROUP_ROOT, **given: Any
) -> OnnxRuntimeOptions:
    """The options of a command that has the machine to itself (``score``, ``reference``, ``estimate``, ``probe``,
    ``compare``, ``report``, the Python API): ``threads`` intra-op threads and one run at a time when set (> 0); at 0,
    a thread per CPU the process may use (:func:`~monitor.cpus.available_cpus`: its affinity capped by the cgroup's
    quota) running slices of each run, one intra-op thread each (:mod:`monitor.model.split_runs` says why).
    ``given``: the other fields."""
    if threads > 0:
        return OnnxRuntimeOptions(intra_op_threads=threads, **given)
    return OnnxRuntimeOptions(intra_op_threads=1, split_runs=available_cpus(root), **given)


def session_options(options: OnnxRuntimeOptions) -> ort.SessionOptions:
    """The onnxruntime options of every session of the model: thread counts, warnings and errors logged, and the
    intra-op threads stopped after each run unless ``spin_after_run`` and never spinning for work unless ``spin``."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = options.intra_op_threads
    so.inter_op_num_threads = options.inter_op_threads
    so.log_severity_level = 3
    if not options.spin_after_run:
        so.add_session_config_entry("session.force_spinning_stop", "1")
    if not options.spin:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


def quiet_session_options(options: OnnxRuntimeOptions) -> ort.SessionOptions:
    """:func:`session_options` with onnxruntime's own log silenced (fatal only): for load-time trials whose
    failure the monitor reports itself."""
    so = session_options(options)
    so.log_severity_level = 4
    return so


def resolve_providers(requested: Sequence[str]) -> list[str]:
    """The requested providers that this onnxruntime build has, in order, CPU always last as the fallback.

    A requested provider the build lacks (``cuda`` with the CPU-only ``onnxruntime`` wheel) is skipped with one
    warning for all of them; ``onnxruntime-gpu`` (with CUDA and cuDNN installed) provides CUDAExecutionProvider.
    """
    available = ort.get_available_providers()
    chosen: list[str] = []
    missing: list[str] = []
    for name in requested:
        full = _PROVIDER_ALIASES.get(name.lower(), name)
        if full in available:
            if full not in chosen:
                chosen.append(full)
        elif full != "CPUExecutionProvider":
            missing.append(full)
    if "CPUExecutionProvider" not in chosen:
        chosen.append("CPUExecutionProvider")
    if missing:
        log.warning(
            "execution provider not available, skipped: %s; running on %s (this onnxruntime build has %s; "
            "onnxruntime-gpu provides CUDAExecutionProvider)",
            ", ".join(missing),
            ", ".join(chosen),
            ", ".join(available),
            extra={"provider": missing, "available": sorted(available)},
        )
    return chosen


def active_providers(session: ort.InferenceSession, chosen: list[str], path: str) -> list[str]:
    """The providers the session really runs on. onnxruntime drops a provider that fails to initialise (the CUDA
    provider of onnxruntime-gpu without the CUDA libraries) and goes on with the next: say so once."""
    active = [p for p in session.get_providers() if p in chosen] or list(session.get_providers())
    dropped = [p for p in chosen if p not in active]
    if dropped:
        log.warning(
            "execution provider failed to initialise, skipped: %s; running on %s (are the CUDA and cuDNN libraries "
            "onnxruntime-gpu needs installed?)",
            ", ".join(dropped),
            ", ".join(active),
            extra={"model": path, "provider": dropped},
        )
    return active
