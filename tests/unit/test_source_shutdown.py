"""Bounded shutdown of the Kafka consumer: timeouts where kafka-python takes them, and a child that hangs.

A consumer child that does not exit when asked is killed; before that it writes every thread's stack to its stderr,
so that the log says where it hung (the one time a CI run saw this, nothing said where).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO

import pytest
from kafka import KafkaConsumer

from monitor.cli import run as run_command
from monitor.source import kafka_process
from monitor.source.kafka import CLOSE_TIMEOUT_MS, COMMIT_TIMEOUT_MS
from monitor.source.kafka_client import timeout_kwargs
from monitor.source.kafka_process import ProcessKafkaSource


def test_commit_and_close_are_bounded_where_kafka_python_takes_atimeout_kwargs() -> None:
    assert timeout_kwargs(KafkaConsumer.commit, COMMIT_TIMEOUT_MS) == {"timeout_ms": COMMIT_TIMEOUT_MS}
    assert timeout_kwargs(KafkaConsumer.close, CLOSE_TIMEOUT_MS) == {"timeout_ms": CLOSE_TIMEOUT_MS}

    def old_commit(offsets: object = None) -> None:  # kafka-python releases without the argument
        del offsets

    assert timeout_kwargs(old_commit, COMMIT_TIMEOUT_MS) == {}


def _handles(pid: int, signum: int) -> bool:
    """Whether ``pid`` has installed a handler for ``signum`` (SigCgt in /proc/PID/status; Linux, as CI)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    raise AssertionError(f"no SigCgt line for pid {pid}")


def _hung_child(stderr_path: Path) -> tuple[ProcessKafkaSource, subprocess.Popen[bytes], IO[bytes]]:
    """The real child module, started as ProcessKafkaSource starts it and never sent its config: it waits forever."""
    assert kafka_process.STACKS_SIGNAL is not None
    cmd_read, cmd_write = os.pipe()
    out_read, out_write = os.pipe()
    stderr = stderr_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "monitor.source.kafka_process", str(cmd_read), str(out_write), str(os.getpid())],
        pass_fds=(cmd_read, out_write),
        stdin=subprocess.DEVNULL,
        stderr=stderr,
    )
    os.close(cmd_read)
    os.close(out_write)
    source = object.__new__(ProcessKafkaSource)
    source._process = process
    source._commands = Connection(cmd_write, readable=False)
    source._out = Connection(out_read, writable=False)
    # the handler is the child's first act; wait for it (bounded), or the signal would end the child by default
    deadline = time.monotonic() + 30
    while not _handles(process.pid, kafka_process.STACKS_SIGNAL):
        assert process.poll() is None and time.monotonic() < deadline, "the child never installed its handler"
        time.sleep(0.01)
    return source, process, stderr


def _is_child_dump(text: str) -> bool:
    return "most recent call first" in text and "kafka_process.py" in text and "_child_main" in text


def test_a_child_that_does_not_exit_writes_its_stacks_then_is_killed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    source, process, stderr = _hung_child(tmp_path / "child.stderr")
    monkeypatch.setattr(kafka_process, "EXIT_WAIT_SECONDS", 0.05)
    with caplog.at_level(logging.WARNING, logger="monitor.source.kafka_process"):
        source._stop_child()
    stderr.close()
    assert process.returncode == -signal.SIGKILL
    dump = (tmp_path / "child.stderr").read_text()
    assert _is_child_dump(dump), dump
    assert "did not exit; killing it; its threads' stacks are in its stderr above" in caplog.text
    assert source._commands.closed and source._out.closed


def test_a_shutdown_past_its_bound_dumps_the_stacks_of_the_sidecar_and_its_consumer_child(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source, process, stderr = _hung_child(tmp_path / "child.stderr")
    monkeypatch.setattr(kafka_process, "_LIVE", {source})

    def exit_(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(run_command.os, "_exit", exit_)
    try:
        with caplog.at_level(logging.ERROR, logger="monitor.cli.run"), pytest.raises(SystemExit) as exited:
            run_command._force_exit()
    finally:
        process.kill()
        process.wait(timeout=30)
        stderr.close()
    assert exited.value.code == 3
    assert "graceful shutdown exceeded its bound" in caplog.text
    own = capfd.readouterr().err
    assert "most recent call first" in own and "_force_exit" in own, own  # this process's threads
    dump = (tmp_path / "child.stderr").read_text()
    assert _is_child_dump(dump), dump  # the child's


def test_an_exited_child_is_not_signalled() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(timeout=30)
    assert kafka_process._dump_stacks(process) is False
