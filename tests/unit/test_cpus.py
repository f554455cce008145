"""CPU count for threads and the consumer process: affinity capped by the cgroup quota (fake cgroup trees)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import monitor.config_stream as config_module
from monitor import cpus
from monitor.config import KafkaSettings


def _v2(root: Path, cpu_max: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.max").write_text(cpu_max + "\n")
    return root


def _v1(root: Path, quota: str, period: str, folder: str = "cpu") -> Path:
    (root / folder).mkdir(parents=True, exist_ok=True)
    (root / folder / "cpu.cfs_quota_us").write_text(quota + "\n")
    (root / folder / "cpu.cfs_period_us").write_text(period + "\n")
    return root


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [("max 100000", None), ("150000 100000", 1.5), ("200000 100000", 2.0), ("50000 100000", 0.5), ("junk", None)],
)
def test_cgroup_v2_quota_is_read_from_cpu_max(tmp_path: Path, cpu_max: str, expected: float | None) -> None:
    assert cpus.cgroup_cpu_limit(_v2(tmp_path, cpu_max)) == expected


@pytest.mark.parametrize("folder", ["cpu", "cpu,cpuacct"])
def test_cgroup_v1_quota_is_read_from_cfs_files(tmp_path: Path, folder: str) -> None:
    assert cpus.cgroup_cpu_limit(_v1(tmp_path, "250000", "100000", folder)) == 2.5


def test_cgroup_v1_quota_of_minus_one_is_no_quota(tmp_path: Path) -> None:
    assert cpus.cgroup_cpu_limit(_v1(tmp_path, "-1", "100000")) is None


def test_no_cgroup_files_is_no_quota(tmp_path: Path) -> None:
    assert cpus.cgroup_cpu_limit(tmp_path / "absent") is None


@pytest.mark.parametrize(
    ("cpu_max", "available", "threads"),
    [
        ("max 100000", 8, 0),  # no quota: onnxruntime's own default
        ("150000 100000", 2, 2),  # 1.5 CPUs: two threads, not one per core of the node
        ("50000 100000", 1, 1),
        ("800000 100000", 8, 0),  # a quota as large as the affinity: onnxruntime's default
        ("1600000 100000", 8, 0),
    ],
)
def test_available_cpus_and_default_threads_follow_the_quota_below_the_affinity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_max: str, available: int, threads: int
) -> None:
    monkeypatch.setattr(cpus, "affinity_cpus", lambda: 8)
    root = _v2(tmp_path, cpu_max)
    assert cpus.available_cpus(root) == available
    assert cpus.default_intra_op_threads(root) == threads


def test_intra_op_threads_keeps_an_explicit_count_and_logs_a_capped_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(cpus, "affinity_cpus", lambda: 64)
    root = _v2(tmp_path, "200000 100000")
    with caplog.at_level(logging.INFO, logger="monitor.cpus"):
        assert cpus.intra_op_threads(5, "m.onnx", root) == 5
        assert not caplog.records
        assert cpus.intra_op_threads(0, "m.onnx", root) == 2
    (record,) = caplog.records
    assert "CPU quota" in record.getMessage()
    assert (record.model, record.threads, record.cpu_quota) == ("m.onnx", 2, 2.0)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("available", "expected"), [(1, False), (2, True)])
def test_consumer_process_default_counts_the_quota(
    monkeypatch: pytest.MonkeyPatch, available: int, expected: bool
) -> None:
    monkeypatch.setattr(config_module, "available_cpus", lambda: available)
    assert KafkaSettings().use_consumer_process() is expected
    assert KafkaSettings(consumer_process=not expected).use_consumer_process() is (not expected)
