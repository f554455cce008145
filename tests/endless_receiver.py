"""Test tooling: an HTTP receiver on 127.0.0.1 that takes a POST, answers 200 and then streams a body that never ends.

:class:`EndlessReceiver` records each request's JSON body, then writes the answer's body in 64 KiB pieces for as long
as the client reads, and counts what it sent. ``framing="close"`` sends no length (the body lasts until the
connection closes); ``framing="chunked"`` sends ``Transfer-Encoding: chunked`` chunks with no last chunk. A client
that reads the whole answer never returns; one that stops reading and closes the connection ends that stream.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any, Literal, Self

_PIECE = b"x" * 65536


class EndlessReceiver:
    """Answers every POST with 200 and an endless body; ``bodies`` holds the POSTed JSON, ``sent_bytes`` the answer
    bytes written so far (all connections)."""

    def __init__(self, framing: Literal["close", "chunked"] = "close") -> None:
        self.framing = framing
        self.bodies: list[Any] = []
        self.sent_bytes = 0
        self.arrived = threading.Condition()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/hook"
        self._threads = [threading.Thread(target=self._accept, name="endless-accept", daemon=True)]

    def __enter__(self) -> Self:
        self._threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self._listener.close()

    def wait_for_posts(self, count: int, timeout_seconds: float) -> bool:
        """Block until ``count`` POSTs have arrived, or the timeout passes."""
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.bodies) >= count, timeout_seconds)

    def _accept(self) -> None:
        self._listener.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), name="endless-serve", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10.0)
            try:
                body = self._read_post(conn)
            except (OSError, ValueError):
                return
            with self.arrived:
                self.bodies.append(json.loads(body))
                self.arrived.notify_all()
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            head += b"Transfer-Encoding: chunked\r\n\r\n" if self.framing == "chunked" else b"Connection: close\r\n\r\n"
            piece = b"10000\r\n" + _PIECE + b"\r\n" if self.framing == "chunked" else _PIECE
            try:
                conn.sendall(head)
                while not self._stop.is_set():
                    conn.sendall(piece)
                    self.sent_bytes += len(piece)
            except OSError:  # the client closed the connection: the stream ends
                return

    @staticmethod
    def _read_post(conn: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                raise ValueError("the client closed before its request head ended")
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = int(next(h for h in lines if h.lower().startswith(b"content-length")).split(b":")[1])
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                raise ValueError("the client closed before its request body ended")
            body += chunk
        return body
