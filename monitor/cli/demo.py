"""``harmonic-monitor demo``: the embedded end-to-end demo (no Kafka needed).

Without ``--workdir`` the model, the events and the state go to a temporary directory that is removed on every exit
path: the end of the demo, an error, Ctrl-C and SIGTERM. The progress line and the summary show the same numbers:
each phase's γ and flicker means are running means over every event scored in the phase, and the phase's last
progress line is rendered from the summary's row.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
from numpy.typing import NDArray

from monitor import telemetry as tel
from monitor.cli.flags import add_setting_flag
from monitor.config import AlertSettings, MetricsSettings, ScoringSettings
from monitor.errors import ConfigError
from monitor.source.replay import MemorySource, ReplaySource

if TYPE_CHECKING:
    from monitor.cli.demo_data import DemoData
    from monitor.cli.demo_regressor import RegressorDemo
    from monitor.runtime.service import Service
    from monitor.runtime.watch import ModelWatch


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="run the embedded demo: stationary, input-shift and harmful-shift phases through the real pipeline",
        description=(
            "Train a model on scikit-learn's breast-cancer data, convert it to ONNX, and replay a stream in three "
            "phases (stationary, input (covariate) shift, harmful shift toward the decision boundary) through the "
            "same pipeline as `run` — decode, sample, score, windows, drift, alerts, probes. Beside it a regressor "
            "(diabetes data, labelled reference) gets its error estimated without labels. Shows live progress, "
            "serves /metrics unless --no-serve, and ends with a per-phase summary."
        ),
    )
    p.add_argument("--events", type=int, default=30000, help="events in total, split over the 3 phases (default 30000)")
    add_setting_flag(p, ScoringSettings, "seed", "--seed", help="seed for the data, the ball and the noise")
    p.add_argument("--summary-json", help="write the per-phase summary here as JSON")
    p.add_argument("--no-serve", action="store_true", help="do not serve /metrics")
    add_setting_flag(p, MetricsSettings, "port", "--metrics-port")
    p.add_argument("--workdir", help="where to put the model, reference and state (default: a temp dir)")
    add_setting_flag(
        p,
        AlertSettings,
        "alertmanager_url",
        "--alertmanager-url",
        override=True,
        help="also deliver the demo's alerts to this Alertmanager",
    )
    p.add_argument(
        "--linger", type=float, default=0.0, help="keep serving /metrics this many seconds after the summary"
    )
    p.set_defaults(func=run)


class _PhaseSource(MemorySource):
    """Replays one phase at a time (a ReplaySource per phase), so each phase's verdict is read at its end."""

    def __init__(self) -> None:
        super().__init__()
        self.current = ReplaySource([])
        self._offset = 0
        # each run is a new stream: a state kept in --workdir holds the last run's position on its own topic, and
        # records below a saved position are skipped as already applied
        self._topic = f"demo-{time.time_ns()}"

    def load(self, lines: list[bytes]) -> None:
        self.current = ReplaySource(lines, topic=self._topic)

    def poll(self, timeout_seconds: float, max_records: int) -> list[Any]:
        from monitor.source.base import RawRecord

        out = []
        for r in self.current.poll(timeout_seconds, max_records):
            out.append(RawRecord(value=r.value, topic=self._topic, partition=0, offset=self._offset))
            self._offset += 1
        return out

    @property
    def exhausted(self) -> bool:
        return self.current.exhausted


def run(args: argparse.Namespace) -> int:
    if args.events < 3000:
        raise ConfigError(f"--events must be >= 3000 (1000 per phase, the drift window); got {args.events}")
    if args.workdir:
        return _run(args, Path(args.workdir), kept=True)
    with _removed_on_exit() as workdir:
        return _run(args, workdir, kept=False)


@contextlib.contextmanager
def _removed_on_exit() -> Iterator[Path]:
    """A temporary directory, removed however the block ends: SIGTERM raises SystemExit(143) meanwhile, so that
    this ``finally`` runs (Ctrl-C's KeyboardInterrupt and errors unwind through it anyway)."""
    restore = exit_on_sigterm()
    workdir: Path | None = None
    try:
        workdir = Path(tempfile.mkdtemp(prefix="harmonic-demo-"))
        yield workdir
    finally:
        if workdir is not None:
            with _ignoring_sigterm():  # a second SIGTERM must not cut the removal short
                shutil.rmtree(workdir, ignore_errors=True)
        restore()


def exit_on_sigterm() -> Callable[[], None]:
    """Make SIGTERM raise SystemExit(128 + 15) in the main thread; returns what puts the previous handler back."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        return lambda: None

    def _on_sigterm(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _on_sigterm)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


@contextlib.contextmanager
def _ignoring_sigterm() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _PhaseTally:
    """γ and flicker of the events scored in one phase: running means for the progress line, the same means and
    the γ p95 for the summary (one number per thing)."""

    def __init__(self) -> None:
        self._gamma: list[NDArray[np.float64]] = []
        self._gamma_sum = 0.0
        self._flicker_sum = 0.0
        self._flicker_count = 0

    def update(self, gamma: NDArray[np.float64], flicker: NDArray[np.float64]) -> _PhaseTally:
        """Add a scored batch's values; NaN ones (a class score that overflowed in the model) are left out."""
        gamma = gamma[np.isfinite(gamma)]
        self._gamma.append(gamma)
        self._gamma_sum += float(gamma.sum())
        finite = flicker[np.isfinite(flicker)]
        self._flicker_sum += float(finite.sum())
        self._flicker_count += int(finite.size)
        return self

    @property
    def gamma_count(self) -> int:
        return sum(g.size for g in self._gamma)

    @property
    def gamma_mean(self) -> float:
        n = self.gamma_count
        return self._gamma_sum / n if n else float("nan")

    @property
    def flicker_mean(self) -> float:
        return self._flicker_sum / self._flicker_count if self._flicker_count else float("nan")

    def gamma_p95(self) -> float:
        return float(np.quantile(np.concatenate(self._gamma), 0.95)) if self.gamma_count else float("nan")


def _run(args: argparse.Namespace, workdir: Path, *, kept: bool) -> int:
    from monitor.cli.demo_data import PHASES, build_demo
    from monitor.cli.demo_regressor import NAME, build_regressor, merged, phase_error
    from monitor.clock import WatermarkClock
    from monitor.config import load_settings
    from monitor.runtime.models import load_model_runtime
    from monitor.runtime.service import Service
    from monitor.runtime.stage_results import ScoredBatch

    out = sys.stdout
    started = time.perf_counter()
    print(f"harmonic-monitor demo: training the model and generating {args.events} events in {workdir}", file=out)
    out.flush()  # a caller waiting for this line (a test, a wrapper script) sees it at once
    data = build_demo(workdir, events=args.events, seed=args.seed)
    times = {p: [int(json.loads(line)["ts"]) for line in data.phases[p]] for p in PHASES}
    reg = build_regressor(workdir, timestamps=times, seed=args.seed)
    settings = load_settings(None, _demo_flags(args, workdir, data, reg))
    source = _PhaseSource()
    runtimes = [load_model_runtime(m) for m in settings.models]
    phase_stats: dict[str, dict[str, Any]] = {}
    # a replay: windows and alerts run on the events' own time (the watermark), not the wall clock
    clock = WatermarkClock()
    with Service(settings, source, runtimes, serve_metrics=not args.no_serve, alert_clock=clock) as svc:
        pipeline = svc.pipeline
        watch = pipeline.runtimes["demo"].watch
        assert watch is not None
        tallies = {p: _PhaseTally() for p in PHASES}
        scores: dict[str, list[NDArray[np.float64]]] = {p: [] for p in PHASES}
        current = {"name": PHASES[0]}

        def collect(batch: ScoredBatch) -> None:
            if batch.model != "demo":
                return
            result = batch.result
            tallies[current["name"]].update(result.gamma[result.valid], result.flicker[result.valid])
            ok = result.valid
            scores[current["name"]].append(
                np.column_stack([result.probability[ok], result.gamma[ok], result.flicker[ok], result.p_adj[ok]])
            )

        pipeline.scored_hooks.append(collect)
        if svc.server is not None:
            print(
                f"metrics: http://127.0.0.1:{svc.server.port}/metrics  (probes: /probes, Gamma Map: /gammamap)",
                file=out,
            )
        stop = threading.Event()
        for name in PHASES:
            current["name"] = name
            tally = tallies[name]
            lines = merged(data.phases[name], reg.phases[name])
            source.load(lines)
            alerts_before = len(watch.fired)
            t0 = time.perf_counter()
            _feed(svc, source, watch, stop, out, name, len(lines), tally, t0)
            pipeline.flush()
            watch.evaluate(_last_ts(lines))
            svc.tick()  # the evaluation's series and alerts go out now, not at the next phase's flush
            phase_stats[name] = _phase_row(svc, data, name, tally, scores[name], alerts_before, t0, out)
            phase_stats[name]["regressor_error"] = phase_error(reg, name, pipeline.runtimes[NAME].accuracy_fit)
        svc.probes.run_once(time.time())
        pipeline.close()
        svc.tick(publish_now=True)  # the endpoints serve what the summary prints from the moment it prints
        summary = _summary(svc, data, workdir, kept, [phase_stats[p] for p in PHASES], started)
        _print_summary(out, summary)
        if args.summary_json:
            Path(args.summary_json).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
            print(f"summary written to {args.summary_json}", file=out)
        if args.linger > 0 and svc.server is not None:
            with contextlib.suppress(KeyboardInterrupt):
                print(f"serving /metrics for {args.linger:.0f} s more (Ctrl-C to stop)", file=out)
                _linger(svc, args.linger)
    return 0


def _demo_flags(args: argparse.Namespace, workdir: Path, data: DemoData, reg: RegressorDemo) -> dict[str, Any]:
    """The demo's settings, as ``run`` would read them from flags: the trained models, their labelled references, an
    unlimited sampler, alerts on short timers."""
    from monitor.cli.demo_regressor import NAME

    return {
        "models": [
            {
                "name": "demo",
                "path": str(data.model_path),
                "version": "1",
                # the reference built with labels: the run estimates accuracy without labels from it
                "reference": str(data.labelled_reference_path or data.reference_path),
                "feature_names": list(data.feature_names),
                "scoring": {"seed": args.seed},
            },
            # the regressor: its reference holds the loss estimator (harmonic_estimated_error, HarmonicErrorRise)
            {
                "name": NAME,
                "path": str(reg.model_path),
                "version": "1",
                "reference": str(reg.reference_path),
                "scoring": {"seed": args.seed},
            },
        ],
        "state_dir": str(workdir / "state"),
        "sampler": {"events_per_second": 0},
        "batch": {"max_events": 512},
        "metrics": {"port": args.metrics_port, "host": "127.0.0.1"},
        # the demo lasts seconds and a region is probed only once the budget covers its whole plan: a larger share
        # than a sidecar's default lets the flagged regions be probed while it runs
        "probes": {"interval_seconds": 5.0, "budget_share": 0.5},
        "alerts": {"alertmanager_url": args.alertmanager_url, "for_seconds": 10.0, "resolve_after_seconds": 30.0},
    }


def _feed(
    svc: Service,
    source: _PhaseSource,
    watch: ModelWatch,
    stop: threading.Event,
    out: TextIO,
    name: str,
    total: int,
    tally: _PhaseTally,
    t0: float,
) -> None:
    """Run the pipeline over the phase's events as ``run``'s loop does, printing progress every half second (the
    time since ``t0``)."""
    pipeline = svc.pipeline
    last_print = 0.0
    while not source.exhausted and not stop.is_set():
        pipeline.step(0.0)
        svc.tick()  # as `run`'s loop: probes, alerts, and the snapshot the HTTP endpoints serve
        now = time.perf_counter()
        if now - last_print >= 0.5:
            last_print = now
            verdict = watch.verdict("other")
            _progress(
                out,
                name,
                source.current.emitted,
                total,
                now - t0,
                tally.gamma_mean,
                tally.flicker_mean,
                verdict.value if verdict is not None else "…",
            )


def _phase_row(
    svc: Service,
    data: DemoData,
    name: str,
    tally: _PhaseTally,
    scores: list[NDArray[np.float64]],
    alerts_before: int,
    t0: float,
    out: TextIO,
) -> dict[str, Any]:
    """Phase ``name``'s row of the summary (its signals, verdict, alerts fired since ``alerts_before``, accuracy),
    printed as its last progress line."""
    watch = svc.pipeline.runtimes["demo"].watch
    assert watch is not None
    fired = [ev.alert.labels["alertname"] for ev in watch.fired[alerts_before:] if ev.alert.state.value == "firing"]
    verdict = watch.verdict("other")
    report = watch.last_reports.get("other")
    seconds = time.perf_counter() - t0
    stats: dict[str, Any] = {
        "name": name,
        "events": len(data.phases[name]),
        "gamma_mean": tally.gamma_mean,
        "gamma_p95": tally.gamma_p95(),
        "flicker_mean": tally.flicker_mean,
        "verdict": verdict.value if verdict is not None else "stable",
        "alerts": sorted(set(fired)),
        "detectors_fired": list(report.fired) if report else [],
        "features_moved": [n for n, _ in report.top_features] if report else [],
        "accuracy": _phase_accuracy(
            svc.pipeline.runtimes["demo"].accuracy_fit,
            scores,
            svc.settings.accuracy.method,
            data.realized_accuracy(name) if data.labels else float("nan"),
        ),
        "seconds": round(seconds, 2),
        "gamma_map": _phase_gamma_map(scores),
    }
    # the phase's last progress line: the summary's row, so that the two never disagree
    _progress(
        out,
        name,
        len(data.phases[name]),
        len(data.phases[name]),
        seconds,
        stats["gamma_mean"],
        stats["flicker_mean"],
        stats["verdict"],
        final=True,
    )
    return stats


def _summary(
    svc: Service, data: DemoData, workdir: Path, kept: bool, phases: list[dict[str, Any]], started: float
) -> dict[str, Any]:
    """What the demo prints at the end (and writes with ``--summary-json``)."""
    elapsed = time.perf_counter() - started
    yardstick = _reference_yardstick(data.labelled_reference_path, data.n_features, {p["name"]: p for p in phases})
    return {
        "phases": phases,
        "model": str(data.model_path),
        "workdir": str(workdir),
        "workdir_kept": kept,
        "zero_weight_features": [data.feature_names[j] for j in data.zero_weight_features],
        "events_scored": int(tel.EVENTS_SCORED_TOTAL.total(svc.state)),
        "events_invalid": int(tel.EVENTS_INVALID_TOTAL.total(svc.state)),
        "probe_regions": sum(len(m["reports"]) for m in svc.probes.report()["models"].values()),
        "reference": yardstick,
        "seconds": round(elapsed, 2),
    }


def _linger(svc: Service, seconds: float) -> None:
    """Keep the service ticking for ``seconds``, as ``run`` does on a quiet topic: the HTTP endpoints keep serving
    the final state, its probes go on, and ``/healthz`` stays live."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        svc.tick()
        time.sleep(min(0.25, left))


def _phase_accuracy(fit: Any, parts: list[NDArray[np.float64]], method: str, realized: float) -> dict[str, Any] | None:
    """The phase's accuracy estimated without labels (every event scored in it; ``estimate`` of monitor.accuracy)
    by the primary method with its 90 % interval, beside the accuracy it realized; None without a labelled
    reference."""
    if fit is None or not parts:
        return None
    from monitor.accuracy import estimate

    x = np.concatenate(parts)
    out = estimate(fit, x[:, 0], x[:, 1], x[:, 2], x[:, 3], method=method)
    acc = out["accuracy"]
    return {
        "method": acc["method"],
        "estimate": acc["estimate"],
        "lower": acc["lower"],
        "upper": acc["upper"],
        "realized": realized,
        "reference": out["reference_accuracy"],
        "methods": {k: v["estimate"] for k, v in out["methods"].items()},
    }


def _phase_gamma_map(parts: list[NDArray[np.float64]]) -> dict[str, Any]:
    """The Gamma Map of every event scored in the phase (columns: probability, γ, flicker, P_adj)."""
    from monitor.gammamap import gamma_map

    rows = np.concatenate(parts) if parts else np.zeros((0, 4))
    m = gamma_map(rows[:, 0], rows[:, 1])
    p, g = m.centroid()
    return {**m.to_json(), "centroid": {"p": p, "gamma_bin": g}}


def _last_ts(lines: list[bytes]) -> float:
    return float(json.loads(lines[-1])["ts"]) / 1000.0


def _progress(
    out: Any,
    phase: str,
    done: int,
    total: int,
    seconds: float,
    gamma_mean: float,
    flicker_mean: float,
    verdict: str,
    *,
    final: bool = False,
) -> None:
    """One progress line: the phase's running γ and flicker means (over every event scored in it so far)."""
    rate = done / seconds if seconds > 0 else 0.0
    line = (
        f"[{phase:>13}] {done:>6}/{total:<6} events  {rate:>8.0f} ev/s  "
        f"γ {gamma_mean:.2e}  flicker {flicker_mean:.4f}  verdict {verdict}"
    )
    tty = hasattr(out, "isatty") and out.isatty()
    if tty:
        out.write("\r" + line + ("\n" if final else ""))
        out.flush()
    elif final:
        print(line, file=out)


def _reference_yardstick(
    path: Path | None, n_features: int, phases: dict[str, dict[str, Any]]
) -> dict[str, float] | None:
    """The reference's γ mean, γ p95 and flicker mean; each phase gets its ratios to them (``gamma_ratio`` …)."""
    if path is None:
        return None
    from monitor.rolling.reference_file import read_reference

    _, ref = read_reference(path, n_features)
    out = {
        "gamma_mean": float(ref.gamma_mean),
        "gamma_p95": float(np.quantile(ref.gamma_sample, 0.95)),
        "flicker_mean": float(ref.flicker_mean),
    }
    pairs = (
        ("gamma_ratio", "gamma_mean", "gamma_mean"),
        ("gamma_p95_ratio", "gamma_p95", "gamma_p95"),
        ("flicker_ratio", "flicker_mean", "flicker_mean"),
    )
    for stats in phases.values():
        for key, live_key, ref_key in pairs:
            stats[key] = stats[live_key] / out[ref_key] if out[ref_key] > 0 else float("nan")
    return out


def _print_summary(out: Any, summary: dict[str, Any]) -> None:
    print("\nsummary", file=out)
    print(f"{'phase':<14} {'events':>7} {'γ mean':>10} {'γ p95':>10} {'flicker':>8}  {'verdict':<14} alerts", file=out)
    for p in summary["phases"]:
        print(
            f"{p['name']:<14} {p['events']:>7} {p['gamma_mean']:>10.2e} {p['gamma_p95']:>10.2e} "
            f"{p['flicker_mean']:>8.4f}  {p['verdict']:<14} {', '.join(p['alerts']) or '-'}",
            file=out,
        )
    ref = summary.get("reference")
    if ref:
        print(
            f"\neach phase beside the reference (phase mean ÷ reference mean; reference γ mean {ref['gamma_mean']:.2e}, "
            f"γ p95 {ref['gamma_p95']:.2e}, flicker mean {ref['flicker_mean']:.4f})",
            file=out,
        )
        for p in summary["phases"]:
            print(
                f"  {p['name']:<14} γ {p['gamma_ratio']:.2f}×  γ p95 {p['gamma_p95_ratio']:.2f}×  "
                f"flicker {p['flicker_ratio']:.2f}×",
                file=out,
            )

    print(
        "\nGamma Map (P of the predicted class × γ; GET /gammamap?format=svg while serving): where the mass sits",
        file=out,
    )
    for p in summary["phases"]:
        c = p["gamma_map"]["centroid"]
        print(f"  {p['name']:<14} mean P {c['p']:.3f}  mean γ bin {c['gamma_bin']:.2f}", file=out)
    rows = [(p["name"], p["accuracy"]) for p in summary["phases"] if p.get("accuracy")]
    if rows:
        first = rows[0][1]
        print(
            f"\naccuracy without labels ({first['method']}, 90 % interval; reference accuracy "
            f"{first['reference']:.3f}) vs realized",
            file=out,
        )
        for name, a in rows:
            print(
                f"  {name:<14} estimated {a['estimate']:.3f} [{a['lower']:.3f}, {a['upper']:.3f}]  "
                f"realized {a['realized']:.3f}",
                file=out,
            )
    errors = [(p["name"], p["regressor_error"]) for p in summary["phases"] if p.get("regressor_error")]
    if errors:
        first = errors[0][1]
        print(
            f"\nregressor's MAE without labels (demo-regressor, {first['method']}, 90 % interval; reference MAE "
            f"{first['reference']:.1f}) vs realized",
            file=out,
        )
        for name, e in errors:
            print(
                f"  {name:<14} estimated {e['estimate']:.1f} [{e['lower']:.1f}, {e['upper']:.1f}]  "
                f"realized {e['realized']:.1f}",
                file=out,
            )
    print(
        f"{summary['events_scored']} events scored, {summary['probe_regions']} region(s) probed, "
        f"{summary['seconds']} s",
        file=out,
    )
    if summary["workdir_kept"]:
        print(f"files kept in {summary['workdir']} (--workdir): the model, its reference and the state", file=out)
    else:
        print(
            f"temporary files in {summary['workdir']} are removed at exit (pass --workdir DIR to keep them)", file=out
        )
