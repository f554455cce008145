"""Logging set-up: one line per lifecycle event, plain or JSON (``--log-format json``)."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _RESERVED and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """Renders a record and its ``extra=`` fields as one JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        payload.update(_extras(record))
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str)


class PlainFormatter(logging.Formatter):
    """``time level logger: message key=value ...``"""

    def format(self, record: logging.LogRecord) -> str:
        base = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {record.getMessage()}"
        extras = " ".join(f"{k}={v}" for k, v in _extras(record).items())
        text = f"{base} {extras}" if extras else base
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class KafkaCloseRaceFilter(logging.Filter):
    """Demotes kafka-python's report of reading a socket that its own ``close`` has just torn down to DEBUG.

    kafka-python 3.0.12's transport sets its socket to None when it closes, while its network thread may still be
    in ``_sock_recv``; that thread then logs "Error receiving network data closing socket" at ERROR with an
    ``AttributeError: 'NoneType' object has no attribute 'recv'`` traceback. It happens as a consumer closes — in
    ``bench/stream.py throughput`` on 4 of the 40 closes of the consumer child in one run — so a clean shutdown
    would leave an ERROR and a traceback in the logs (and page whoever alerts on them). Only that signature is
    demoted: an AttributeError about None from that message; any other receive error stays an ERROR.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not (
            record.levelno >= logging.ERROR
            and isinstance(error, AttributeError)
            and str(error).startswith("'NoneType' object has no attribute")
            and "Error receiving network data" in record.getMessage()
        ):
            return True
        record.msg = "%s: socket closed while kafka-python's network thread was reading it (a close race; harmless)"
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.exc_info, record.exc_text = None, None
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


#: the logger kafka-python's transport writes to (``kafka/net/transport.py``)
KAFKA_TRANSPORT_LOGGER = "kafka.net.transport"


def setup_logging(level: str = "info", fmt: str = "plain") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else PlainFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("kafka", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    transport = logging.getLogger(KAFKA_TRANSPORT_LOGGER)
    if not any(isinstance(f, KafkaCloseRaceFilter) for f in transport.filters):
        transport.addFilter(KafkaCloseRaceFilter())


class RateLimitedLogger:
    """Logs at most one message per ``key`` every ``interval_seconds``, counting what it suppressed."""

    def __init__(self, logger: logging.Logger, interval_seconds: float = 10.0) -> None:
        self._log = logger
        self._interval = interval_seconds
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, key: str, msg: str, **extra: Any) -> None:
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        if len(self._last) > 1000:  # bounded: keys are reasons, but stay safe
            self._last.clear()
        self._last[key] = now
        suppressed = self._suppressed.pop(key, 0)
        self._log.warning(msg, extra={**extra, "suppressed_since_last": suppressed})
