"""Checks of setting values that need more than a type or a bound: broker address lists, alert receiver URLs, and
topics that would feed the sidecar's own output back into its input. Each returns what is wrong (one sentence with
the fix) or None; :mod:`monitor.config` raises it at load, so ``check-config`` and ``run`` refuse alike, whether the
value came from a flag, a ``HARMONIC_*`` variable or the file.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Mapping

#: a host name or IPv4 address as both Kafka clients take it (container names may hold underscores)
_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?")
#: ``PROTOCOL://`` before an address, which both clients drop (``SASL_SSL://broker:9093``)
_PROTOCOL = re.compile(r"[A-Za-z_]+://")


def bootstrap_problem(text: str) -> str | None:
    """What is wrong with the comma-separated broker list ``text`` (``host:port``, ``[ipv6]:port``, a host alone
    meaning port 9092), or None.

    >>> bootstrap_problem("broker-0:9092, 10.0.0.7:9093,[::1]:9092")
    >>> bootstrap_problem("not a host::::")
    "'not a host::::' is not host:port; expected a comma-separated list such as 'broker:9092,[::1]:9092'"
    """
    entries = [entry.strip() for entry in text.split(",")]
    if not any(entries):
        return "no broker given; expected a comma-separated list such as 'broker:9092,[::1]:9092'"
    for entry in entries:
        if entry and not _is_address(_PROTOCOL.sub("", entry, count=1)):
            hint = " (write an IPv6 address in brackets: '[::1]:9092')" if _is_ipv6(entry.rsplit(":", 1)[0]) else ""
            return f"{entry!r} is not host:port{hint}; expected a comma-separated list such as 'broker:9092,[::1]:9092'"
    return None


def _is_address(entry: str) -> bool:
    if entry.startswith("["):
        host, bracket, rest = entry[1:].partition("]")
        return bool(bracket) and _is_ipv6(host) and (rest == "" or (rest[:1] == ":" and _is_port(rest[1:])))
    host, colon, port = entry.partition(":")
    return _HOST.fullmatch(host) is not None and (not colon or _is_port(port))


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit() and 0 < int(text) <= 65535


def http_url_problem(url: str) -> str | None:
    """What is wrong with an alert receiver's ``url`` (it must be an absolute http(s) URL), or None.

    >>> http_url_problem("ftp://alerts.example/hook")
    "must be an absolute http(s) URL such as 'http://alertmanager:9093'; got 'ftp://alerts.example/hook'"
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        return None
    return f"must be an absolute http(s) URL such as 'http://alertmanager:9093'; got {url!r}"


#: the settings a sidecar writes records to, and those it reads records from, by setting name
TOPIC_OUTPUTS = ("dead_letter_topic", "scores_topic")
TOPIC_INPUTS = ("topic", "labels_topic")


def topic_loop_problem(topics: Mapping[str, str | None]) -> str | None:
    """What makes a feedback loop or mixes records among ``topics`` (setting name → topic; ``kafka.*``), or None.

    A dead letter or a score written to a topic the sidecar reads comes back as an input: an invalid one is
    dead-lettered again, without end. Scores written to the dead-letter topic mix two kinds of records there. A
    topic starting with ``^`` is a pattern subscription (librdkafka): an output topic it matches is read back too.

    >>> topic_loop_problem({"topic": "events", "dead_letter_topic": "events"}).split(":")[0]
    "dead_letter_topic and topic are both 'events'"
    >>> topic_loop_problem({"topic": "^events.*", "scores_topic": "events-scores"}).split(":")[0]
    "scores_topic 'events-scores' matches topic '^events.*' (a pattern subscription)"
    """
    pairs = [(out, inp) for out in TOPIC_OUTPUTS for inp in TOPIC_INPUTS] + [("scores_topic", "dead_letter_topic")]
    for out, other in pairs:
        written, read = topics.get(out), topics.get(other)
        if not written or not read:
            continue
        if written == read:
            clash = f"{out} and {other} are both {written!r}"
            fix = f"give {out} a topic of its own, e.g. --{out.replace('_', '-')} {written}-{_SUFFIX[out]}"
        elif other in TOPIC_INPUTS and read.startswith("^") and _matches(read, written):
            clash = f"{out} {written!r} matches {other} {read!r} (a pattern subscription)"
            fix = f"give {out} a topic the pattern does not match"
        else:
            continue
        if other in TOPIC_INPUTS:
            why = "every record written there would be read back as an input and written again (a feedback loop)"
        else:
            why = "scores would be mixed with the dead letters"
        return f"{clash}: {why}; {fix}"
    return None


_SUFFIX = {"dead_letter_topic": "dlq", "scores_topic": "scores"}


def _matches(pattern: str, topic: str) -> bool:
    try:
        return re.search(pattern, topic) is not None
    except re.error:
        return False  # not a pattern Python reads; librdkafka refuses it at subscription
