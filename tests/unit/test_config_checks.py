"""Settings refused at load whatever layer gives them (flag, HARMONIC_* variable, YAML): broker lists that are not
host:port, alert URLs that are not http(s), and output topics the sidecar would read back (feedback loops)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.config import load_settings
from monitor.config_checks import bootstrap_problem, http_url_problem, topic_loop_problem
from monitor.errors import ConfigError

MODEL = {"models": [{"name": "m", "path": "m.onnx"}]}


@pytest.fixture(autouse=True)
def _no_inherited_harmonic_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("HARMONIC_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    "servers",
    [
        "127.0.0.1:9092",
        "broker-0.kafka.svc:9092, broker-1.kafka.svc:9092",
        "kafka",  # both clients default the port to 9092
        "[::1]:9092",
        "[fe80::1]",
        "SASL_SSL://b-1.msk.example:9096",
        "kafka_1:29092",  # a compose service name
    ],
)
def test_bootstrap_problem_accepts_what_both_clients_take(servers: str) -> None:
    assert bootstrap_problem(servers) is None


@pytest.mark.parametrize(
    ("servers", "shown"),
    [
        ("not a host::::", "'not a host::::' is not host:port"),
        ("broker:", "'broker:' is not host:port"),
        ("broker:0", "'broker:0' is not host:port"),
        ("broker:70000", "'broker:70000' is not host:port"),
        ("broker:90 92", "'broker:90 92' is not host:port"),
        ("[::1:9092", "'[::1:9092' is not host:port"),
        ("::1:9092", "(write an IPv6 address in brackets: '[::1]:9092')"),
        ("a:1,b:x", "'b:x' is not host:port"),
        (" , ", "no broker given"),
    ],
)
def test_bootstrap_problem_names_the_entry_and_the_form(servers: str, shown: str) -> None:
    problem = bootstrap_problem(servers)
    assert problem is not None and shown in problem and "such as 'broker:9092,[::1]:9092'" in problem


def test_load_settings_refuses_a_bad_broker_list_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, {**MODEL, "kafka": {"bootstrap_servers": "not a host::::"}})
    assert str(info.value) == (
        "invalid configuration: 'kafka.bootstrap_servers': 'not a host::::' is not host:port; expected a "
        "comma-separated list such as 'broker:9092,[::1]:9092'"
    )


@pytest.mark.parametrize(
    ("topics", "clash"),
    [
        ({"topic": "ev", "dead_letter_topic": "ev"}, "dead_letter_topic and topic are both 'ev'"),
        ({"labels_topic": "lb", "dead_letter_topic": "lb"}, "dead_letter_topic and labels_topic are both 'lb'"),
        ({"topic": "ev", "scores_topic": "ev"}, "scores_topic and topic are both 'ev'"),
        ({"labels_topic": "lb", "scores_topic": "lb"}, "scores_topic and labels_topic are both 'lb'"),
        ({"dead_letter_topic": "dl", "scores_topic": "dl"}, "scores_topic and dead_letter_topic are both 'dl'"),
        (
            {"topic": "^ev.*", "dead_letter_topic": "ev-dlq"},
            "dead_letter_topic 'ev-dlq' matches topic '^ev.*' (a pattern subscription)",
        ),
    ],
)
def test_topic_loop_problem_names_both_settings_and_the_topic(topics: dict[str, str], clash: str) -> None:
    problem = topic_loop_problem(topics)
    assert problem is not None and problem.startswith(clash + ":")
    assert "give " in problem  # the fix


def test_topic_loop_problem_passes_topics_of_their_own() -> None:
    topics = {"topic": "ev", "labels_topic": "lb", "dead_letter_topic": "ev-dlq", "scores_topic": "ev-scores"}
    assert topic_loop_problem(topics) is None
    assert topic_loop_problem({"topic": "^ev$", "dead_letter_topic": "ev-dlq"}) is None  # the pattern does not match
    assert topic_loop_problem({"topic": "ev", "dead_letter_topic": None, "scores_topic": None}) is None


def test_topic_loop_problem_says_the_fix_with_the_flag() -> None:
    problem = topic_loop_problem({"topic": "events", "dead_letter_topic": "events"})
    assert problem is not None and problem.endswith("e.g. --dead-letter-topic events-dlq")
    assert "feedback loop" in problem


def test_load_settings_refuses_a_dead_letter_topic_equal_to_the_topic_from_each_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = r"^invalid configuration: 'kafka': dead_letter_topic and topic are both 'ev': [^\n]*feedback loop"
    with pytest.raises(ConfigError, match=expected):
        load_settings(None, {**MODEL, "kafka": {"topic": "ev", "dead_letter_topic": "ev"}})
    path = tmp_path / "monitor.yaml"
    path.write_text("models: [{name: m, path: m.onnx}]\nkafka: {topic: ev, dead_letter_topic: ev}\n")
    with pytest.raises(ConfigError, match=expected):
        load_settings(path)
    monkeypatch.setenv("HARMONIC_KAFKA__TOPIC", "ev")
    monkeypatch.setenv("HARMONIC_KAFKA__DEAD_LETTER_TOPIC", "ev")
    with pytest.raises(ConfigError, match=expected):
        load_settings(None, MODEL)


def test_load_settings_refuses_a_dead_letter_topic_a_flag_makes_equal_to_the_files_topic(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text("models: [{name: m, path: m.onnx}]\nkafka: {topic: ev, dead_letter_topic: ev-dlq}\n")
    assert load_settings(path).kafka.dead_letter_topic == "ev-dlq"
    with pytest.raises(ConfigError, match="dead_letter_topic and topic are both 'ev'"):
        load_settings(path, {"kafka": {"dead_letter_topic": "ev"}})


@pytest.mark.parametrize("setting", ["webhook_url", "alertmanager_url"])
def test_load_settings_refuses_an_alert_url_that_is_not_http(setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, {**MODEL, "alerts": {setting: "ftp://alerts.example/hook"}})
    assert str(info.value) == (
        f"invalid configuration: 'alerts.{setting}': must be an absolute http(s) URL such as "
        "'http://alertmanager:9093'; got 'ftp://alerts.example/hook'"
    )


def test_load_settings_hides_a_password_in_a_refused_url() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, {**MODEL, "alerts": {"webhook_url": "ftp://am:s3cret@alerts.example/hook"}})
    assert "s3cret" not in str(info.value)


def test_http_url_problem_passes_http_and_https() -> None:
    assert http_url_problem("https://am:pw@alertmanager:9093/prefix") is None
    assert http_url_problem("http://hooks.example/x") is None
    assert http_url_problem("alertmanager:9093") is not None


def test_load_settings_lists_several_problems_one_per_line() -> None:
    flags = {**MODEL, "kafka": {"bootstrap_servers": "a b"}, "alerts": {"webhook_url": "ftp://x/y"}}
    with pytest.raises(ConfigError) as info:
        load_settings(None, flags)
    lines = str(info.value).splitlines()
    assert lines[0] == "invalid configuration: " and len(lines) == 3


@pytest.mark.parametrize(
    "argv",
    [
        ["--topic", "ev", "--dead-letter-topic", "ev"],
        ["--topic", "ev", "--scores-topic", "ev"],
        ["--dead-letter-topic", "dl", "--scores-topic", "dl"],
        ["--bootstrap-servers", "not a host::::"],
    ],
)
def test_check_config_refuses_in_one_line_with_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-config", "--no-load-models", "--model", "m.onnx", *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: invalid configuration: 'kafka") and err.count("\n") == 1


def test_check_config_refuses_an_ftp_webhook_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARMONIC_ALERTS__WEBHOOK_URL", "ftp://alerts.example/hook")
    assert main(["check-config", "--no-load-models", "--model", "m.onnx"]) == 2
    assert "'alerts.webhook_url': must be an absolute http(s) URL" in capsys.readouterr().err
