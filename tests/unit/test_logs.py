"""Logging set-up: kafka-python's close race is demoted, other receive errors are not."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from monitor.logs import KAFKA_TRANSPORT_LOGGER, KafkaCloseRaceFilter, setup_logging


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
