"""Logging set-up: one line per lifecycle event, plain or JSON (``--log-format json``), and the one redaction of
secrets (:func:`redact`, :func:`redact_text`) used wherever settings, URLs or errors are printed or logged."""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

#: what replaces a secret
REDACTED = "***"
#: setting names whose values are secrets: passwords, tokens, keys, credentials, and every SASL setting but the
#: mechanism (kafka-python's sasl_plain_username/password, sasl_oauth_token_provider, ...). Not ``ssl_keyfile``: a path.
_SECRET_NAME = re.compile(
    r"pass|secret|token|credential|private|auth|api_?key|(?:^|_)key$|^sasl_(?!mechanism$)", re.IGNORECASE
)
#: a URL in free text: its userinfo (``user:password@``) and its query string are what can carry secrets
_URL = re.compile(r"\b(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?:(?P<userinfo>[^\s/?#'\"<>]*)@)?(?P<rest>[^\s'\"<>]*)")
_QUERY_VALUE = re.compile(r"(?P<name>[?&;][^=&;#]*=)[^&;#]*")
#: ``name=value`` / ``'name': 'value'`` in free text (an exception's repr of a settings dict) with a secret name;
#: after a colon only a quoted value counts (prose such as "'x.password': Input should be ..." is left alone)
_NAMED_VALUE = re.compile(
    r"(?P<name>[\w.-]*(?:pass|secret|token|credential|private|auth|api_?key|sasl_plain_)[\w.-]*)(?P<q>['\"]?)"
    r"(?:(?P<sep>\s*[:=]\s*)(?P<vq>['\"])(?:(?!(?P=vq)).)*(?P=vq)|(?P<eq>\s*=\s*)(?!(?:bearer|basic)\s)[^\s,;&}\])]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(?P<scheme>bearer|basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether a setting, header or query parameter called ``name`` holds a secret.

    >>> [is_secret_name(n) for n in ("sasl_plain_password", "ssl_password", "sasl_mechanism", "ssl_keyfile", "topic")]
    [True, True, False, False, False]
    """
    return bool(_SECRET_NAME.search(name))


def _redact_url(match: re.Match[str]) -> str:
    userinfo = f"{REDACTED}@" if match.group("userinfo") is not None else ""
    rest = match.group("rest")
    path, mark, query = rest.partition("?")
    if mark:
        query = _QUERY_VALUE.sub(lambda m: m.group("name") + REDACTED, "?" + query)[1:]
    return f"{match.group('scheme')}{userinfo}{path}{mark}{query}"


def _redact_named(match: re.Match[str]) -> str:
    quote = match.group("vq") or ""
    sep = match.group("sep") if quote else match.group("eq")
    return f"{match.group('name')}{match.group('q')}{sep}{quote}{REDACTED}{quote}"


def redact_text(text: str) -> str:
    """``text`` with the secrets it may carry replaced by ``***``: a URL's userinfo and query values, the value of a
    ``name=value`` or ``'name': 'value'`` pair whose name is secret-like, and ``Bearer``/``Basic`` credentials.

    >>> redact_text("POST https://am:s3cret@alertmanager:9093/api/v2/alerts?token=abc&x=1 failed")
    'POST https://***@alertmanager:9093/api/v2/alerts?token=***&x=*** failed'
    >>> redact_text("Unrecognized configs: {'sasl_plain_passwrd': 'hunter2'}")
    "Unrecognized configs: {'sasl_plain_passwrd': '***'}"
    """
    if "://" in text:
        text = _URL.sub(_redact_url, text)
    text = _BEARER.sub(lambda m: f"{m.group('scheme')} {REDACTED}", text)
    return _NAMED_VALUE.sub(_redact_named, text)


def redact(value: object, key: str = "") -> object:
    """Settings (or any JSON-like value) as they may be printed or logged: the value of every secret-named key
    (:func:`is_secret_name`) replaced by ``***``, every string through :func:`redact_text`.

    The one redaction used wherever settings, URLs or errors reach stdout or a log line: ``check-config``,
    the start-up line of ``run``, error messages and every formatted log record (:class:`JsonFormatter`,
    :class:`PlainFormatter`).

    >>> redact({"kafka": {"security": {"sasl_plain_password": "p", "sasl_mechanism": "PLAIN"}},
    ...         "alerts": {"webhook_url": "https://hooks.example/h?token=t"}})
    {'kafka': {'security': {'sasl_plain_password': '***', 'sasl_mechanism': 'PLAIN'}}, \
'alerts': {'webhook_url': 'https://hooks.example/h?token=***'}}
    """
    if isinstance(value, Mapping):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, key) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v, key) for v in value)
    if value not in (None, "") and key and is_secret_name(key):
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    return value


def with_fields(text: str, **fields: object) -> str:
    """``text`` followed by ``key=value`` of each field: a record printed without this module's formatters (a
    notebook's default handler prints the message alone) still says which alert, model and segment it is about.
    :class:`PlainFormatter` leaves out the extras the message already carries.

    >>> with_fields("alert firing", alert="HarmonicInputDrift", model="credit", segment="eu")
    'alert firing alert=HarmonicInputDrift model=credit segment=eu'
    """
    return " ".join([text, *(f"{k}={v}" for k, v in fields.items())])


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: redact(v, k) for k, v in vars(record).items() if k not in _RESERVED and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """Renders a record and its ``extra=`` fields as one JSON object per line, secrets redacted (:func:`redact`)."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact_text(record.getMessage()),
        }
        payload.update(_extras(record))
        if record.exc_info:
            payload["exc"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(payload, default=lambda obj: redact_text(str(obj)))  # e.g. an exception as an extra


class PlainFormatter(logging.Formatter):
    """``time level logger: message key=value ...``, secrets redacted (:func:`redact`)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        base = f"{self.formatTime(record, '%H:%M:%S')} {record.levelname:<7} {record.name}: {message}"
        # an empty field says nothing (an alert without a detail); none twice what the message says (with_fields)
        pairs = (f"{k}={v}" for k, v in _extras(record).items() if v not in ("", None))
        extras = " ".join(p for p in pairs if p not in message)
        text = f"{base} {extras}" if extras else base
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return redact_text(text)


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
#: the loggers of the Kafka client libraries: kafka-python's (``kafka.*``) and the one librdkafka's log callback
#: writes to (``monitor.source.rdkafka``'s ``client_log``)
CLIENT_LOGGER_PREFIXES = ("kafka", "monitor.source.rdkafka.librdkafka")
#: at most one line of a client library's kind of line this often (:class:`ClientLogFloods`)
FLOOD_INTERVAL_SECONDS = 30.0
#: numbers and hexadecimal words (ports, node ids, offsets, addresses, uuids): they do not make a line another kind
_VARYING = re.compile(r"0x[0-9a-fA-F]+|[0-9a-fA-F]*[0-9][0-9a-fA-F]*")


class ClientLogFloods(logging.Filter):
    """Holds back a client library's floods: of each kind of line, at most one every ``interval_seconds``; the next
    one that passes says how many were held back since the last (``(repeated K times in the last S s)``).

    A kind is (logger, level, message with its numbers left out): kafka-python retrying a batch after
    ``UnknownProducerIdError`` writes the same line a thousand times a second, and a broker that refuses connections
    gets the same few lines per reconnect attempt. Only records of the ``prefixes`` loggers are counted (the client
    libraries'); the sidecar's own lines pass untouched. Put on the handler, so that it sees every client logger's
    records (a logger's own filters do not apply to its children's).

    Parameters
    ----------
    prefixes : logger names (and their children) whose lines are held back.
    interval_seconds : one line of a kind at most this often.
    clock : monotonic seconds.
    max_kinds : kinds remembered; past it they are forgotten (bounded memory whatever the lines say).
    """

    def __init__(
        self,
        prefixes: tuple[str, ...] = CLIENT_LOGGER_PREFIXES,
        interval_seconds: float = FLOOD_INTERVAL_SECONDS,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_kinds: int = 1000,
    ) -> None:
        super().__init__()
        if interval_seconds <= 0:
            raise ValueError(f"interval_seconds must be > 0; got {interval_seconds!r}")
        self.prefixes = prefixes
        self.interval_seconds = interval_seconds
        self.max_kinds = max_kinds
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[tuple[str, int, str], float] = {}
        self._held: dict[tuple[str, int, str], int] = {}
        #: lines held back so far (monotone)
        self.held_total = 0

    def _counted(self, name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in self.prefixes)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._counted(record.name):
            return True
        kind = (record.name, record.levelno, _VARYING.sub("#", record.getMessage())[:300])
        with self._lock:
            now = self._clock()
            last = self._last.get(kind)
            if last is not None and now - last < self.interval_seconds:
                self._held[kind] = self._held.get(kind, 0) + 1
                self.held_total += 1
                return False
            if len(self._last) >= self.max_kinds:
                self._last.clear()
                self._held.clear()
            self._last[kind] = now
            held = self._held.pop(kind, 0)
        if held and last is not None:
            # the record's own text, then the count: its args are formatted into it first (a line's msg may be any
            # object; getMessage is what every formatter prints)
            record.msg = f"{record.getMessage()} (repeated {held} times in the last {now - last:.0f} s)"
            record.args = None
        return True


def setup_logging(level: str = "info", fmt: str = "plain") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else PlainFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("kafka", "urllib3"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    # kafka-python's group lines (joining, elected leader, joined generation N, partitions set or revoked) come a few
    # per rebalance and say where a member that does not get its partitions waits: kept at the sidecar's level
    logging.getLogger("kafka.coordinator").setLevel(root.level)
    logging.getLogger("kafka.coordinator.heartbeat").setLevel(max(logging.WARNING, root.level))
    transport = logging.getLogger(KAFKA_TRANSPORT_LOGGER)
    if not any(isinstance(f, KafkaCloseRaceFilter) for f in transport.filters):
        transport.addFilter(KafkaCloseRaceFilter())
    handler.addFilter(ClientLogFloods())


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
