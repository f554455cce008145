"""A mistyped flag is refused by the sub-command that got it: its own usage, and the flags close to the one typed."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from monitor.cli import build_parser, main


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


COMMANDS = _commands()


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    with pytest.raises(SystemExit) as stop:
        main(list(argv))
    assert stop.value.code == 2
    return capsys.readouterr().err.strip().splitlines()


def test_run_port_suggests_metrics_port_with_runs_usage(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, "run", "--port", "19109")
    assert err[0].startswith("usage: harmonic-monitor run ")
    assert err[-1] == "harmonic-monitor run: error: unrecognized arguments: --port 19109 (did you mean --metrics-port?)"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_an_unknown_flag_with_its_own_usage(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    err = refused(capsys, command, "--no-such-flag-at-all")
    assert err[0].startswith(f"usage: harmonic-monitor {command} ")
    assert f"harmonic-monitor {command}: error: unrecognized arguments: --no-such-flag-at-all" in err[-1]


def test_a_typo_in_a_required_flag_is_named_beside_the_missing_one(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, "score", "--modle", "m.onnx", "--data", "rows.csv", "--out", "out.csv")
    assert err[-1] == (
        "harmonic-monitor score: error: unrecognized arguments: --modle (did you mean --model?); "
        "the following arguments are required: --model"
    )


def test_several_mistyped_flags_are_each_answered(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(capsys, "check-config", "--model", "m.onnx", "--port=1", "--referense", "r.json")
    assert err[-1] == (
        "harmonic-monitor check-config: error: unrecognized arguments: --port=1 --referense r.json "
        "(--port: did you mean --metrics-port?; --referense: did you mean --reference?)"
    )


def test_abbreviations_and_stray_words_keep_arguments_meaning(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["run", "--metrics-p", "19109"])
    assert args.metrics_port == 19109
    err = refused(capsys, "convert", "--sklearn", "m.joblib", "--out", "m.onnx", "stray")
    assert err[-1] == "harmonic-monitor convert: error: unrecognized arguments: stray"


def test_the_installed_command_answers_the_same() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "monitor", "run", "--port", "19109"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.startswith("usage: harmonic-monitor run ")
    assert done.stderr.rstrip().endswith("(did you mean --metrics-port?)")
