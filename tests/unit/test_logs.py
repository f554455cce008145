"""Logging set-up: kafka-python's close race is demoted, other receive errors are not; secrets never reach a line."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from monitor.logs import KAFKA_TRANSPORT_LOGGER, KafkaCloseRaceFilter, redact, redact_text, setup_logging

SECRET = "hunter2"


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    loggers = [logging.getLogger(name) for name in ("kafka", "urllib3", KAFKA_TRANSPORT_LOGGER)]
    saved = [(lg.level, lg.filters[:]) for lg in loggers]
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for lg, (lvl, filters) in zip(loggers, saved, strict=True):
        lg.setLevel(lvl)
        lg.filters[:] = filters


def _receive_error(error: BaseException) -> None:
    """What kafka-python 3.0.12's ``KafkaTCPTransport._sock_recv`` logs when ``recv`` raises."""
    log = logging.getLogger(KAFKA_TRANSPORT_LOGGER)
    try:
        raise error
    except BaseException:
        log.exception("%s: Error receiving network data closing socket", "<KafkaTCPTransport [none] (closed)>")


def _close_race() -> None:
    sock = None
    try:
        sock.recv(4096)  # type: ignore[attr-defined]  # the very AttributeError the race raises
    except AttributeError as exc:
        _receive_error(exc)


def _lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


def test_the_close_race_leaves_no_error_at_info(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("info", "json")
    _close_race()
    assert capsys.readouterr().err == ""


def test_the_close_race_is_one_debug_line_without_traceback_at_debug(capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging("debug", "json")
    logging.getLogger("kafka").setLevel(logging.DEBUG)  # setup_logging keeps kafka at WARNING at least
    _close_race()
    (line,) = _lines(capsys.readouterr().err)
    assert line["level"] == "debug"
    assert line["logger"] == KAFKA_TRANSPORT_LOGGER
    assert "close race" in str(line["msg"]) and "<KafkaTCPTransport [none] (closed)>" in str(line["msg"])
    assert "exc" not in line


@pytest.mark.parametrize(
    "error",
    [ConnectionResetError(104, "Connection reset by peer"), AttributeError("'Foo' object has no attribute 'recv'")],
)
def test_other_receive_errors_stay_errors_with_their_traceback(
    capsys: pytest.CaptureFixture[str], error: BaseException
) -> None:
    setup_logging("info", "json")
    _receive_error(error)
    (line,) = _lines(capsys.readouterr().err)
    assert line["level"] == "error"
    assert "Error receiving network data" in str(line["msg"])
    assert type(error).__name__ in str(line["exc"])


def test_setup_logging_installs_the_filter_once() -> None:
    setup_logging("info")
    setup_logging("debug")
    filters = logging.getLogger(KAFKA_TRANSPORT_LOGGER).filters
    assert sum(isinstance(f, KafkaCloseRaceFilter) for f in filters) == 1


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("https://am:hunter2@alertmanager:9093/api", "https://***@alertmanager:9093/api"),
        ("https://hunter2@hooks.example/x", "https://***@hooks.example/x"),
        ("http://h/hook?token=hunter2&channel=ops", "http://h/hook?token=***&channel=***"),
        ("{'sasl_plain_password': 'hunter2 with spaces', 'x': 1}", "{'sasl_plain_password': '***', 'x': 1}"),
        ("ssl_password=hunter2 topic=t", "ssl_password=*** topic=t"),
        ("Authorization: Bearer hunter2", "Authorization: Bearer ***"),
        ("nothing secret at kafka:9092", "nothing secret at kafka:9092"),
    ],
)
def test_redact_text_hides(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_redact_hides_secret_keys_and_urls_at_any_depth() -> None:
    settings = {
        "kafka": {
            "bootstrap_servers": "k:9092",
            "security": {"sasl_plain_password": SECRET, "sasl_mechanism": "PLAIN"},
        },
        "alerts": {"alertmanager_url": f"https://am:{SECRET}@am:9093", "webhook_url": None},
        "headers": [{"api_key": SECRET}],
    }
    shown = redact(settings)
    assert SECRET not in str(shown)
    assert shown == {
        "kafka": {"bootstrap_servers": "k:9092", "security": {"sasl_plain_password": "***", "sasl_mechanism": "PLAIN"}},
        "alerts": {"alertmanager_url": "https://***@am:9093", "webhook_url": None},
        "headers": [{"api_key": "***"}],
    }


@pytest.mark.parametrize("fmt", ["plain", "json"])
def test_no_log_line_shows_a_secret(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    setup_logging("info", fmt)
    log = logging.getLogger("monitor.test")
    url = f"https://u:{SECRET}@am/x?token={SECRET}"
    log.warning("POST %s failed", url, extra={"sasl_plain_password": SECRET, "error": OSError(f"refused: {url}")})
    try:
        raise ValueError(f"Unrecognized configs: {{'ssl_password': '{SECRET}'}}")
    except ValueError:
        log.exception("producer failed", extra={"settings": {"security": {"ssl_password": SECRET}}})
    err = capsys.readouterr().err
    assert err.count("***") >= 7 and "Unrecognized configs" in err and "refused: https://***@am/x" in err
    assert SECRET not in err
