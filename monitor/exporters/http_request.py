"""Stage 6 (exporters): an HTTP/1.x request head read into what the endpoint needs (method, path, query, keep-alive,
credentials), or refused with the status that says why (:class:`BadRequest`). Requests to the endpoint carry no
body.
"""

from __future__ import annotations

from urllib.parse import parse_qs

__all__ = ["MAX_HEAD_BYTES", "BadRequest", "Request", "parse_head"]

#: request line and headers together; a longer head is refused with 431
MAX_HEAD_BYTES = 8192


class Request:
    __slots__ = ("authorization", "keep_alive", "method", "path", "query")

    def __init__(
        self, method: str, path: str, keep_alive: bool, authorization: str | None = None, query: str = ""
    ) -> None:
        self.method, self.path, self.keep_alive = method, path, keep_alive
        self.authorization = authorization
        self.query = query

    def params(self) -> dict[str, str]:
        """The query string's parameters, the first value of each."""
        return {k: v[0] for k, v in parse_qs(self.query, keep_blank_values=True).items()}


class BadRequest(Exception):
    """A request head the endpoint refuses: ``status`` (400, 505) and the reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def parse_head(head: bytes) -> Request:
    """A request head (up to and including the blank line) → method, path without query, keep-alive.

    Raises
    ------
    BadRequest
        With 400 for a malformed line or a request with a body, 505 for a version other than HTTP/1.x.
    """
    lines = head.removesuffix(b"\r\n\r\n").split(b"\r\n")
    parts = lines[0].decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[1]:
        raise BadRequest(400, f"malformed request line {lines[0][:80]!r}")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(505, f"HTTP/1.0 or HTTP/1.1 expected; got {version[:20]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise BadRequest(400, f"malformed header line {line[:80]!r}")
        headers[name.decode("latin-1").lower()] = value.strip().decode("latin-1")
    if "transfer-encoding" in headers or headers.get("content-length", "0") not in ("", "0"):
        raise BadRequest(400, "requests to this endpoint carry no body")
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    path, _, query = target.partition("?")
    return Request(method, path, keep_alive, headers.get("authorization"), query)
