"""The benchmark scripts still run against the current code.

docs/BENCHMARKS.md quotes their commands, and they reach into the scorer and the sources (private helpers
included), so a refactor can break them while every other test passes: e57545f renamed the scorer's γ helper
and ``engine_breakdown.py`` failed with an AttributeError until this test existed. Each script runs here once,
in a subprocess, on the smallest settings that still take every code path the docs' commands take, and its
output is checked for the table it exists to print. These are smoke runs: the figures are not looked at.
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


#: the steps of ``RobustnessScorer.score`` the breakdown names: a binary classifier read from p (the MLP, see
#: ``monitor.model.neighbourhood.binary_positive``), or the class table (GradientBoosting's [N, 2] probabilities)
BREAKDOWN_STEPS = {
    "mlp": ("a binary classifier's scores from P(class 1) (all the steps below, in one)",),
    "gb": ("class indices at the centres", "flicker copies' class flips", "f at the class"),
}


@pytest.mark.parametrize("model", sorted(BREAKDOWN_STEPS))
def test_engine_breakdown_times_every_step_it_names(model: str) -> None:
    out = bench(
        "bench/engine_breakdown.py",
        "--model",
        model,
        "--batch",
        "16",
        "--threads",
        "1",
        "--repeats",
        "3",
        "--pollute",
        "--post",
    )
    for step in (
        "wrapped graph (NeighbourhoodEvaluator.evaluate)",
        "noise-bank refresh",
        *BREAKDOWN_STEPS[model],
        "γ and γ_logit means",
        "log-floor",
    ):
        assert f"| {step} | " in out, step
    assert "| post-processing right after the run | " in out
    assert "| the same, again on the same outputs | " in out
    out = bench(
        "bench/engine_breakdown.py", "--model", "lr", "--batch", "16", "--repeats", "3", "--broadcast", "--scalar"
    )
    assert "| row building in onnxruntime | time |" in out
    assert "| scalar operand (monitor/model/broadcast.py) | time |" in out


def test_engine_breakdown_profiles_every_node_of_both_graphs() -> None:
    out = bench(
        "bench/engine_breakdown.py", "--model", "mlp", "--batch", "16", "--threads", "1", "--repeats", "3", "--nodes"
    )
    assert "bound: the model on the rows: " in out
    assert "the scorer's wrapped graph: " in out
    assert out.count("| node | op | µs per run (median) |") == 2
    # the MLP's first layer runs on the centres in the wrapped graph (affine rewrite): its Expand nodes are profiled
    assert "| Expand |" in out


def test_engine_breakdown_rewrite_comparisons_run() -> None:
    out = bench(
        "bench/engine_breakdown.py", "--model", "mlp", "--batch", "16", "--threads", "1", "--affine", "--binary", "0.2"
    )
    assert "| scorer, first layer on the centres (default) | " in out
    assert "| scorer, every row multiplied | " in out
    assert "| scorer, binary classifier read from p (default) | " in out
    assert "| scorer, the [1 − p, p] table | " in out


def test_scorer_ab_checks_identical_results_before_timing() -> None:
    # the checkout against itself: both sides must agree bit for bit, and the table names both
    out = bench("bench/scorer_ab.py", "--old", str(ROOT), "--models", "lr", "--batch", "16", "--seconds", "0.2")
    assert "| LogisticRegression |" in out


def test_ort_spin_and_ingest_parts_print_their_tables() -> None:
    out = bench(
        "bench/ort_spin.py", "--model", "lr", "--threads", "1", "--batch", "16", "--poll", "64", "--rounds", "3"
    )
    assert "| idle CPU ms in the next gap |" in out
    out = bench("bench/ingest_parts.py", "--events", "500", "--repeats", "2")
    assert "| orjson.loads |" in out
    assert "| decode, fast path (as shipped) |" in out


def test_record_parse_checks_its_floor_against_kafka_python() -> None:
    # the script asserts that its floor loop and the lean parse give kafka-python's records before timing
    out = bench("bench/record_parse.py", "--records", "300", "--rounds", "2")
    assert "| PartitionRecords.take(), check_crcs on (the consumer's default) |" in out
    assert "lean parse usable with this kafka-python: yes" in out
    assert "| the lean parse (monitor/source/records.py): take(), check_crcs on |" in out
    assert "| floor: one loop to the same columns, batch CRC checked |" in out


def test_probe_overhead_runs() -> None:
    out = bench("bench/probe_overhead.py", "--models", "lr", "--events", "2000", "--repeats", "1")
    assert "| LogisticRegression |" in out


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
    assert "| broker | decode+sample-proc ÷ raw |" in out
    assert any(
        line.startswith("| kafka09 | ") and line.endswith((": met |", ": not met |", ": undecided |"))
        for line in out.splitlines()
    ), out[-2000:]


@pytest.mark.integration
def test_child_memory_traces_the_consumer_loop_against_a_real_broker() -> None:
    out = bench("bench/child_memory.py", "--rate", "2000", "--seconds", "12", "--warmup", "4", "--every", "4", "--trim")
    rows = [line for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) >= 2, out[-2000:]
    assert int(rows[-1].split("|")[2].strip().replace(",", "")) > 0  # records were consumed
    assert "allocation sites that grew most since the warm-up" in out
