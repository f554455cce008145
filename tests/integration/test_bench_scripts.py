"""The benchmark scripts still run against the current code.

docs/BENCHMARKS.md quotes their commands, and they reach into the scorer and the sources (private helpers
included), so a refactor can break them while every other test passes. Each script runs here once, in a
subprocess, on the smallest settings that still take every code path the docs' commands take, and its output is
checked for the table it exists to print. These are smoke runs: the figures are not looked at.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def bench(*argv: str, timeout: float = 300.0) -> str:
    """Run ``bench/<argv>`` with this interpreter from the repository root; its stdout (stderr on failure)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-4000:]}"
    assert done.stdout.startswith("machine: ") or "\nmachine: " in done.stdout, done.stdout[:2000]
    return done.stdout


def test_engine_throughput_prints_its_tables_and_the_verdicts_of_its_runs() -> None:
    out = bench(
        "bench/engine_throughput.py",
        "--models",
        "lr,mlp",
        "--batch-sizes",
        "16",
        "--threads",
        "1",
        "--min-seconds",
        "0",
        "--min-repeats",
        "3",
        "--naive-events",
        "2",
        "--naive-point-events",
        "1",
        "--runs",
        "2",
    )
    assert "| scorer / bound, paired |" in out
    assert "| × ORT/event | × ORT/point | × sklearn/point |" in out
    verdicts = [line for line in out.splitlines() if line.startswith("| LogisticRegression | 1 | 16 | ")]
    assert len(verdicts) == 2  # the table's row and the verdict's
    assert any(line.endswith((": met |", ": not met |", ": undecided |")) for line in verdicts), verdicts


def test_any_model_prints_its_table_and_the_verdicts_of_its_runs() -> None:
    out = bench(
        "bench/any_model.py",
        "--batch-sizes",
        "8",
        "--threads",
        "1",
        "--min-seconds",
        "0",
        "--min-repeats",
        "2",
        "--runs",
        "2",
    )
    assert "| rows in graph | intra-op threads | B | scorer events/s | bound events/s |" in out
    kinds = ("→ LogisticRegression", "→ LinearRegression", "LightGBM", "XGBoost", "CNN 8×8", "int64 id", "batch 1")
    for label in kinds:
        rows = [line for line in out.splitlines() if line.startswith("| ") and label in line]
        assert len(rows) == 2, (label, rows)  # the table's row and the verdict's
        assert any(line.endswith((": met |", ": not met |", ": undecided |")) for line in rows), rows


def test_high_dimension_prints_its_table_and_times_the_probe() -> None:
    out = bench("bench/high_dimension.py", "--size", "24", "--images", "6", "--steps", "2", "--variance-seeds", "2")
    assert "| images whose class flips within 2 steps |" in out and "| AUC of P alone |" in out
    out = bench("bench/high_dimension.py", "--probe-runs", "1", "--steps", "1")
    assert "on 20 images of 4,096 pixels, one core:" in out
    out = bench("bench/high_dimension.py", "--throughput-runs", "1")
    assert "| CNN: onnxruntime alone (s) |" in out and "CNN rows in numpy" in out


def test_probe_overhead_runs() -> None:
    out = bench("bench/probe_overhead.py", "--models", "lr", "--events", "2000", "--repeats", "1")
    assert "| LogisticRegression |" in out


def test_torch_exports_prints_its_speed_and_precision_tables() -> None:
    """On the committed fixtures; torch itself (bench/make_torch_fixtures.py) is not run here."""
    out = bench("bench/torch_exports.py", "--events", "20", "--repeats", "1", "--radii", "0.5")
    assert "| dynamo=True (default), batch freed at load |" in out
    assert "| dynamo=True, batch kept at 1 |" in out
    assert "| 0.5 |" in out


def test_accuracy_estimate_prints_its_table() -> None:
    """CBPE is skipped here: NannyML lives in its own venv (bench/.venv-nannyml), not in CI's."""
    out = bench(
        "bench/accuracy_estimate.py", "--seeds", "1", "--datasets", "breast_cancer", "--models", "lr", "--no-cbpe"
    )
    assert "| sets | accuracy moved (points) | ours (harmonic) |" in out
    assert "IW (PAPE-like)" in out and "domain-classifier AUC" in out
    assert "| breast_cancer/lr |" in out


def test_loss_estimate_prints_its_table() -> None:
    out = bench("bench/loss_estimate.py", "--seeds", "1")
    assert "| mae | all |" in out and "| rmse | all |" in out


def test_compare_models_prints_its_tables() -> None:
    out = bench(
        "bench/compare_models.py",
        *("--seeds", "1", "--datasets", "wine", "--bootstrap", "50", "--probe-points", "3"),
        *("--rows", "600", "--repeats", "2"),
    )
    assert "| wine | gbdt-2 |" in out and "| test | pareto | " in out and "| shift | gamma | " in out
    assert "specific fragilities:" in out and "| 600 |" in out


def test_live_candidate_prints_its_ratios() -> None:
    out = bench("bench/live_candidate.py", *("--events", "600", "--rounds", "2", "--batch", "100"))
    assert "the candidate's CPU in the pipeline / its scoring alone: median" in out and "comparisons" in out


def test_l2_boundary_prints_its_tables() -> None:
    """HopSkipJump is skipped here: ART lives in its own venv (bench/.venv-art), not in CI's."""
    out = bench("bench/l2_boundary.py", "--points", "3", "--models", "lr,gbdt", "--no-art")
    assert "| ours (`--l2-boundary`) | 3/3 |" in out and "### gbdt" in out
    assert "HopSkipJump skipped: --no-art" in out
    out = bench("bench/l2_boundary.py", "--families", "--points", "3")
    assert "| wine (3, 13) | 3 of 3 |" in out and "| digits 8×8 (10, 64) |" in out


def test_gamma_fidelity_prints_its_tables_for_the_three_image_models() -> None:
    out = bench(
        "bench/gamma_fidelity.py",
        "--images",
        "30",
        "--reference",
        "40",
        "--seeds",
        "1",
        "--epochs",
        "2",
        "--steps",
        "2",
        "--adaptive",
    )
    for model in ("digits-cnn", "digits-mlp", "shapes-cnn"):
        assert f"**{model}**" in out
    assert "| control m=32 | 33 |" in out and "| full ball m=800 | 801 |" in out and "Adaptive (simulated" in out


def test_gamma_value_prints_the_auc_table_for_an_image_and_the_categorical_model() -> None:
    out = bench(
        "bench/gamma_value.py",
        "--models",
        "digits-mlp,credit-mlp",
        "--rows",
        "30",
        "--seeds",
        "1",
        "--epochs",
        "1",
        "--steps",
        "1",
    )
    assert "| model | rows | target (unstable, mean) | γ | γ_logit | flicker | 1 − P | −P_adj |" in out
    for model in ("digits-mlp", "credit-mlp"):
        for rows in ("held-out", "shifted"):
            assert f"| {model} | {rows} | misclassified (" in out


def test_burst_compares_the_old_sampler_with_the_event_time_reservoir() -> None:
    out = bench("bench/burst.py")
    assert "| burst, 500 at once, 53 µs | new (event-time reservoir) | 500 of 500 |" in out
    assert "| 1 h backlog at 50,000/s, 1 ms | old (offered-rate division, 7a02537) |" in out


def test_abuse_runs_every_phase_against_the_endpoint() -> None:
    out = bench(
        "bench/abuse.py",
        "--variants",
        "new",
        "--seconds",
        "1",
        "--settle",
        "0.5",
        "--half-open",
        "20",
        "--scrapers",
        "2",
    )
    for phase in ("idle", "scrapers", "half-open", "both"):
        assert f"| new | {phase} |" in out, out


@pytest.mark.integration
def test_stream_throughput_against_a_real_broker_prints_the_verdict() -> None:
    out = bench(
        "bench/stream.py",
        "throughput",
        "--brokers",
        "kafka09",
        "--events",
        "3000",
        "--repeats",
        "2",
        "--variants",
        "raw",
        "decode+sample-proc",
        timeout=600.0,
    )
    assert "| kafka09 | decode+sample-proc |" in out
    assert "| broker | path | ÷ raw |" in out
    assert any(
        line.startswith("| kafka09 | decode+sample-proc | ")
        and line.endswith((": met |", ": not met |", ": undecided |"))
        for line in out.splitlines()
    ), out[-2000:]


@pytest.mark.integration
def test_scrape_storm_on_the_real_sidecar_prints_the_paired_ratios() -> None:
    out = bench(
        "bench/scrape_storm.py",
        "--events",
        "100000",  # ~0.5 s of drain at ~200,000 events/s: several renders of /metrics between 5 % and 95 %
        "--repeats",
        "1",
        "--loops",
        "2",
        "--render-interval",
        "0.05",
        timeout=600.0,
    )
    assert "| repeat | order | quiet events/s | storm events/s | ratio | scrapes/s " in out
    assert "| 1 | quiet first |" in out and "median ratio" in out, out[-2000:]


def test_kill_storm_sums_the_replicas_counters() -> None:
    out = bench(
        "bench/kill_storm.py",
        "--events",
        "60",
        "--rate",
        "20",
        "--replicas",
        "2",
        "--partitions",
        "2",
        "--kill-every",
        "1.5",
        "--drain-seconds",
        "120",
        timeout=400.0,
    )
    assert "\n| 60 | " in out, out[-2000:]  # exit 0 above: no event missing from the summed counters
