"""``check-config``, the settings ``run`` builds from its flags, ``--help`` for every command, ``python -m monitor``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import build_parser, main
from monitor.cli.run import log_start, settings_from_args
from monitor.config import Settings
from monitor.errors import ConfigError
from monitor.logs import JsonFormatter
from tests.unit import onnx_graphs


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No inherited HARMONIC_* variables; main() installs its own root log handler, so put pytest's back after."""
    for name in list(os.environ):
        if name.upper().startswith("HARMONIC_"):
            monkeypatch.delenv(name)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A 2-feature, 2-class ONNX classifier."""
    return onnx_graphs.linear_classifier(tmp_path / "fraud-v3.onnx", [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2])


def write_yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "monitor.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def check_config(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check-config", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_settings(*args: str) -> Settings:
    return settings_from_args(build_parser().parse_args(["run", *args]))


# -- check-config -----------------------------------------------------------------------------------------------
def test_check_config_valid_prints_json_and_exits_0(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = check_config(
        capsys, "--config", str(write_yaml(tmp_path, f"models:\n  - {{name: m, path: {model}}}\n"))
    )
    assert code == 0
    assert json.loads(out)["models"][0]["name"] == "m"


def test_check_config_unknown_key_exits_2_naming_it(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml(tmp_path, f"models:\n  - {{name: m, path: {model}}}\nkafka:\n  topik: x\n")
    code, out, err = check_config(capsys, "--config", str(path))
    assert (code, out) == (2, "")
    assert "error: invalid configuration: unknown key 'kafka.topik'" in err


def test_check_config_shows_an_env_override(
    model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARMONIC_KAFKA__TOPIC", "from-env")
    code, out, _ = check_config(capsys, "--model", str(model))
    assert (code, json.loads(out)["kafka"]["topic"]) == (0, "from-env")


def test_check_config_flag_beats_env(
    model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARMONIC_KAFKA__TOPIC", "from-env")
    _, out, _ = check_config(capsys, "--model", str(model), "--topic", "from-flag")
    assert json.loads(out)["kafka"]["topic"] == "from-flag"


def test_check_config_missing_model_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check_config(capsys, "--model", str(tmp_path / "absent.onnx"))
    assert code == 2 and "absent.onnx' does not exist" in err


def test_check_config_no_load_models_skips_the_onnx_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check_config(capsys, "--model", str(tmp_path / "absent.onnx"), "--no-load-models")
    assert (code, json.loads(out)["models"][0]["name"]) == (0, "absent")


def test_check_config_rejects_feature_names_of_the_wrong_count(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_yaml(tmp_path, f"models:\n  - {{name: m, path: {model}, feature_names: [a, b, c]}}\n")
    code, _, err = check_config(capsys, "--config", str(path))
    assert code == 2 and "model 'm': feature_names lists 3 names; the ONNX input takes 2 features" in err


def test_check_config_without_a_model_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check_config(capsys, "--no-load-models")
    assert code == 2 and "no model configured" in err


def test_check_config_bad_api_version_exits_2(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check_config(capsys, "--model", str(model), "--api-version", "latest")
    assert code == 2 and "'kafka.api_version': 'latest' is not a version" in err


# -- check-config refuses what `run` would refuse later -------------------------------------------
def write_reference_csv(tmp_path: Path, text: str, name: str = "reference.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def reference_rows(n_columns: int, n_rows: int = 20) -> str:
    rows = np.random.default_rng(0).normal(size=(n_rows, n_columns))
    return "".join(",".join(f"{v:.6f}" for v in row) + "\n" for row in rows)


def test_check_config_refuses_a_reference_wider_than_the_model(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide = write_reference_csv(tmp_path, reference_rows(5), "wide.csv")
    code, out, err = check_config(capsys, "--model", str(model), "--reference", str(wide))
    assert (code, out) == (2, "")
    assert "reference 'wide.csv' has 5 columns; model 'fraud-v3' expects 2 features" in err.replace(
        str(tmp_path) + "/", ""
    )


def test_check_config_refuses_a_wide_reference_with_raw_space_too(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide = write_reference_csv(tmp_path, reference_rows(5), "wide.csv")
    text = f"models:\n  - {{name: m, path: {model}, reference: {wide}, scoring: {{space: raw}}}}\n"
    code, _, err = check_config(capsys, "--config", str(write_yaml(tmp_path, text)))
    assert code == 2 and "has 5 columns; model 'm' expects 2 features" in err


def test_check_config_refuses_reference_names_that_differ_from_feature_names(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = write_reference_csv(tmp_path, "amount,age\n" + reference_rows(2))
    text = f"models:\n  - {{name: m, path: {model}, reference: {ref}, feature_names: [age, amount]}}\n"
    code, _, err = check_config(capsys, "--config", str(write_yaml(tmp_path, text)))
    assert code == 2
    assert "names its columns amount, age; model 'm' lists feature_names age, amount" in err


def test_check_config_refuses_a_reference_without_a_finite_row(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = write_reference_csv(tmp_path, "nan,1\n2,inf\n")
    code, _, err = check_config(capsys, "--model", str(model), "--reference", str(ref))
    assert code == 2 and "has 0 usable rows (2 with NaN or infinite values left out); the drift detectors need" in err


def test_check_config_names_an_input_nan_in_every_row_and_a_constant_one(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = write_reference_csv(tmp_path, "".join(f"{i / 7:.4f},nan\n" for i in range(30)))
    code, _, err = check_config(capsys, "--model", str(model), "--reference", str(ref))
    assert code == 2 and "input x[1] is NaN or infinite in every one of its 30 rows" in err and "fill the column" in err
    ref = write_reference_csv(tmp_path, "".join(f"{i / 7:.4f},2.5\n" for i in range(30)))
    code, _, err = check_config(capsys, "--model", str(model), "--reference", str(ref))
    assert code == 0 and "the reference holds input x[1] constant: any other live value counts as outside" in err


def test_check_config_reports_the_reference_it_read(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = write_reference_csv(tmp_path, "0,1\n" + reference_rows(2))
    code, out, err = check_config(capsys, "--model", str(model), "--reference", str(ref))
    assert code == 0 and json.loads(out)["models"][0]["reference"] == str(ref)
    assert "read 20 rows × 2 columns" in err and "header row detected: 0,1 (use --reference-header no" in err


def test_check_config_reference_header_no_reads_the_first_row_as_data(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ref = write_reference_csv(tmp_path, "0,1\n" + reference_rows(2))
    code, out, err = check_config(capsys, "--model", str(model), "--reference", str(ref), "--reference-header", "no")
    assert code == 0 and "read 21 rows × 2 columns" in err
    assert json.loads(out)["models"][0]["reference_header"] == "no"


def test_check_config_refuses_a_ball_the_scorer_cannot_build(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a reference the scorer is built after the warm-up: `run` would fail minutes into the stream."""
    text = f"models:\n  - {{name: m, path: {model}, scoring: {{ball: 'rotationz:4'}}}}\n"
    code, _, err = check_config(capsys, "--config", str(write_yaml(tmp_path, text)))
    assert code == 2 and "rotationz:4" in err


@pytest.mark.parametrize("windows", ["[60, 0]", "[-60]", "[]", "[60, 60]"])
def test_check_config_refuses_time_windows_that_are_not_positive_and_distinct(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str], windows: str
) -> None:
    text = f"models:\n  - {{name: m, path: {model}}}\nwindows:\n  time_windows_seconds: {windows}\n"
    code, _, err = check_config(capsys, "--config", str(write_yaml(tmp_path, text)), "--no-load-models")
    assert code == 2 and "'windows.time_windows_seconds" in err


# -- secrets --------------------------------------------------------------------------------------------------------
SECRET = "hunter2"


def secret_config(tmp_path: Path, model: Path) -> Path:
    """A configuration with a password in every place a secret can hide: security, URLs' userinfo and query."""
    return write_yaml(
        tmp_path,
        f"models:\n  - {{name: m, path: {model}}}\n"
        f"kafka:\n  security: {{sasl_mechanism: PLAIN, sasl_plain_username: u, sasl_plain_password: {SECRET}}}\n"
        f"alerts:\n  alertmanager_url: https://am:{SECRET}@alertmanager:9093\n"
        f"  webhook_url: https://hooks.example/h?token={SECRET}\n",
    )


def test_check_config_never_prints_a_secret(
    tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARMONIC_KAFKA__SECURITY__SSL_PASSWORD", SECRET)
    code, out, err = check_config(capsys, "--config", str(secret_config(tmp_path, model)))
    assert code == 0 and SECRET not in out + err
    shown = json.loads(out)
    assert shown["kafka"]["security"] == {
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "***",
        "sasl_plain_password": "***",
        "ssl_password": "***",
    }
    assert shown["alerts"]["alertmanager_url"] == "https://***@alertmanager:9093"
    assert shown["alerts"]["webhook_url"] == "https://hooks.example/h?token=***"


@pytest.mark.parametrize(
    ("yaml_tail", "secret"),
    [
        ("kafka:\n  security: {ssl_password: 271.828}\n", "271.828"),  # not a str, int or bool: refused
        (f"kafka:\n  session_timeout_ms: https://u:{SECRET}@x\n", SECRET),
        (f"alerts:\n  for_seconds: 'token={SECRET}'\n", SECRET),
    ],
)
def test_config_errors_never_show_a_secret(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str], yaml_tail: str, secret: str
) -> None:
    path = write_yaml(tmp_path, f"models:\n  - {{name: m, path: {model}}}\n" + yaml_tail)
    code, out, err = check_config(capsys, "--config", str(path), "--no-load-models")
    assert code == 2 and "error: invalid configuration" in err
    assert secret not in out + err


def test_run_start_up_line_shows_the_settings_without_a_secret(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = run_settings("--config", str(secret_config(tmp_path, model)))
    log_start(settings)
    err = capsys.readouterr().err
    assert "harmonic-monitor run starting" in err and "alertmanager:9093" in err
    assert SECRET not in err


# -- logging: one choice for the process and its consumer child ----------------------------------------------------
@pytest.mark.parametrize(
    ("env", "flags", "expected"),
    [
        ({}, [], ("info", "plain")),
        ({"HARMONIC_LOG_FORMAT": "json", "HARMONIC_LOG_LEVEL": "warning"}, [], ("warning", "json")),
        ({"HARMONIC_LOG_FORMAT": "json"}, ["--log-format", "plain", "--log-level", "debug"], ("debug", "plain")),
    ],
)
def test_run_logging_takes_the_flag_else_the_settings(
    model: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], flags: list[str], expected: tuple[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = settings_from_args(build_parser().parse_args([*flags, "run", "--model", str(model)]))
    assert (settings.log_level, settings.log_format) == expected


def test_run_logging_applies_the_settings_format_to_this_process(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = run_settings(
        "--config", str(write_yaml(tmp_path, f"models: [{{name: m, path: {model}}}]\nlog_format: json\n"))
    )
    log_start(settings)  # what `run` does before it starts the consumer child with the same two settings
    (line,) = capsys.readouterr().err.splitlines()
    assert json.loads(line)["msg"] == "harmonic-monitor run starting"
    assert isinstance(logging.getLogger().handlers[0].formatter, JsonFormatter)


# -- run's settings -----------------------------------------------------------------------------------------------
def test_run_settings_model_name_defaults_to_the_onnx_stem(tmp_path: Path) -> None:
    settings = run_settings("--model", str(tmp_path / "models" / "fraud-v3.onnx"))
    assert settings.models[0].name == "fraud-v3"


def test_run_settings_model_name_flag_overrides_the_stem(tmp_path: Path) -> None:
    settings = run_settings("--model", str(tmp_path / "fraud-v3.onnx"), "--model-name", "fraud")
    assert settings.models[0].name == "fraud"


def test_run_settings_model_flag_replaces_the_file_models(tmp_path: Path) -> None:
    path = write_yaml(tmp_path, "models:\n  - {name: a, path: a.onnx}\n  - {name: b, path: b.onnx}\n")
    settings = run_settings("--config", str(path), "--model", "c.onnx")
    assert [m.name for m in settings.models] == ["c"]


def test_run_settings_reference_flag_needs_model() -> None:
    with pytest.raises(ConfigError, match=r"--model-name, --reference and --reference-header need --model"):
        run_settings("--reference", "ref.csv")


def test_run_settings_maps_kafka_and_metrics_flags() -> None:
    settings = run_settings(
        "--model", "m.onnx", "--bootstrap-servers", "b:9092", "--api-version", "0.9", "--metrics-port", "0"
    )
    assert (settings.kafka.bootstrap_servers, settings.kafka.api_version_tuple(), settings.metrics.port) == (
        "b:9092",
        (0, 9),
        0,
    )


# -- --help -------------------------------------------------------------------------------------------------------
def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", ["score", "convert", "reference", "run", "check-config", "report"])
def test_help_documents_every_option_of(command: str) -> None:
    undocumented = [a.option_strings for a in _subparsers()[command]._actions if not a.help]
    assert undocumented == []


def test_help_documents_every_top_level_option() -> None:
    assert [a.option_strings for a in build_parser()._actions if not a.help] == []


@pytest.mark.parametrize("command", ["score", "convert", "reference", "run", "check-config", "report"])
def test_help_exits_0_for(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0 and f"harmonic-monitor {command}" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "check-config", "replay"])
def test_help_says_reference_takes_a_reference_json_or_rows(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--reference REFERENCE A reference JSON built by `harmonic-monitor reference` (recommended" in text
    assert "or reference rows (.csv/.npy/.npz)" in text


# -- python -m monitor --------------------------------------------------------------------------------------------
def test_python_m_monitor_lists_the_commands() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "monitor", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0
    assert all(c in completed.stdout for c in ("score", "convert", "reference", "run", "check-config"))


def test_python_m_monitor_check_config_exits_2_with_the_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("HARMONIC_")}
    completed = subprocess.run(
        [sys.executable, "-m", "monitor", "check-config", "--no-load-models"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    assert completed.returncode == 2
    assert completed.stderr.startswith("error: invalid configuration:")


def test_check_config_says_what_each_segments_baseline_allows(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = np.random.default_rng(1).normal(size=(700, 2))
    labels = ["us"] * 500 + ["eu"] * 199 + ["nz"]
    body = "".join(f"{a:.5f},{s},{b:.5f}\n" for s, (a, b) in zip(labels, rows, strict=True))
    ref = write_reference_csv(tmp_path, "x0,region,x1\n" + body)
    text = f"models:\n  - {{name: m, path: {model}, reference: {ref}}}\nsegments:\n  reference_column: region\n"
    code, _, err = check_config(capsys, "--config", str(write_yaml(tmp_path, text)))
    assert code == 0, err
    assert "us own (500 rows): range test from 3." in err  # about 3.4 % of a 1000-event window at 500 rows
    assert "eu shrunk (199 rows, weight 0.99): range test from 7." in err  # a baseline of 200 rows: 7.4 %
    assert "nz borrowed (1 row): range test from 2." in err  # the model-wide baseline's 700 rows: 2.7 %


def test_check_config_reads_a_reference_with_a_segment_column(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = np.random.default_rng(1).normal(size=(30, 2))
    body = "".join(f"{a:.5f},{'eu' if i % 2 else 'us'},{b:.5f}\n" for i, (a, b) in enumerate(rows))
    ref = write_reference_csv(tmp_path, "x0,region,x1\n" + body)
    text = f"models:\n  - {{name: m, path: {model}, reference: {ref}}}\nsegments:\n  reference_column: region\n"
    code, _, err = check_config(capsys, "--config", str(write_yaml(tmp_path, text)))
    assert code == 0, err
    assert "reference of 30 rows in 2 segment(s) of column 'region'" in err
    wrong = f"models:\n  - {{name: m, path: {model}, reference: {ref}}}\nsegments:\n  reference_column: city\n"
    code, _, err = check_config(capsys, "--config", str(write_yaml(tmp_path, wrong)))
    assert code == 2 and "segments.reference_column 'city'" in err and "names no such column" in err
