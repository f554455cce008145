"""What one connection of the HTTP endpoint costs in memory, and handing it back when connections end.

Two parts of :class:`~monitor.exporters.http.MetricsServer`:

- :func:`start_tls` upgrades an accepted connection to TLS like ``StreamWriter.start_tls``, but with a read buffer of
  :data:`TLS_READ_BUFFER_BYTES` (one TLS record and its overhead) instead of asyncio's 256 KiB. The buffer exists
  from the first byte of the handshake, so each connection that never finishes its handshake held 256 KiB: 500 such
  connections (under ``metrics.max_connections``) cost the process ~140 MB; with this buffer ~30 MB. Received bytes
  not yet decrypted (the application is not reading) stop at :data:`TLS_INCOMING_HIGH_WATER_BYTES`, not 256 KiB.
- :class:`HeapTrim` hands freed heap memory back to the operating system (glibc's ``malloc_trim``) once a burst of
  connections has ended. The allocator keeps what a burst freed for reuse, so without it the process stays at its
  peak after the connections are closed; with it, back near where it started. A no-op on other C libraries.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import cast

__all__ = ["TLS_INCOMING_HIGH_WATER_BYTES", "TLS_READ_BUFFER_BYTES", "HeapTrim", "start_tls"]

#: one TLS record (16 KiB of plaintext) and its header, MAC and padding
TLS_READ_BUFFER_BYTES = 16 * 1024 + 1024


#: encrypted bytes a connection may hold received but not yet decrypted (the application is not reading): asyncio's
#: default is 256 KiB per connection
TLS_INCOMING_HIGH_WATER_BYTES = 4 * TLS_READ_BUFFER_BYTES


class _LeanSSLProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol reading at most one record at a time into a buffer of that size, and holding at most
    :data:`TLS_INCOMING_HIGH_WATER_BYTES` received before it stops reading the socket."""

    max_size = TLS_READ_BUFFER_BYTES

    def _set_read_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        super()._set_read_buffer_limits(TLS_INCOMING_HIGH_WATER_BYTES if high is None else high, low)  # type: ignore[misc]


async def start_tls(writer: asyncio.StreamWriter, context: ssl.SSLContext) -> None:
    """The server side of the TLS handshake on ``writer``'s connection; afterwards ``writer`` and its reader speak
    TLS. Raises what the handshake raises; the connection is closed then.

    ``StreamWriter.start_tls`` and ``loop.start_tls`` take no buffer size, so this is their body (CPython 3.11 and
    later) with :class:`_LeanSSLProtocol`.
    """
    loop = asyncio.get_running_loop()
    transport = cast(asyncio.Transport, writer.transport)
    protocol = cast(asyncio.StreamReaderProtocol, transport.get_protocol())
    waiter: asyncio.Future[None] = loop.create_future()
    lean = _LeanSSLProtocol(loop, protocol, context, waiter, server_side=True, call_connection_made=False)
    transport.pause_reading()
    transport.set_protocol(lean)
    made = loop.call_soon(lean.connection_made, transport)
    resumed = loop.call_soon(transport.resume_reading)
    try:
        await waiter
    except BaseException:
        transport.close()
        made.cancel()
        resumed.cancel()
        raise
    writer._transport = lean._app_transport  # type: ignore[attr-defined]  # as StreamWriter.start_tls does
    protocol._replace_writer(writer)  # type: ignore[attr-defined]


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None on a C library without it."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class HeapTrim:
    """Trims the heap when at least ``burst`` connections have ended since the last trim.

    :meth:`ended` counts a connection that ended; :meth:`tick`, called every few seconds on the event loop (a trim
    takes a few milliseconds), trims when the count has reached ``burst``. Scrapers on keep-alive connections end
    few, so trims come after floods: refused, half-open and stalled-handshake connections. ``trims`` counts them.

    Examples
    --------
    >>> calls = []
    >>> heap = HeapTrim(burst=2, trim=lambda: calls.append(1))
    >>> heap.ended(); heap.tick()
    False
    >>> heap.ended(); heap.tick(), heap.tick(), heap.trims
    (True, False, 1)
    """

    def __init__(self, *, burst: int = 64, trim: Callable[[], object] | None = None) -> None:
        self._burst = burst
        self._trim = trim if trim is not None else _malloc_trim()
        self._ended = 0
        self.trims = 0

    def ended(self) -> None:
        """One connection ended."""
        self._ended += 1

    async def run(self, interval_seconds: float) -> None:
        """:meth:`tick` every ``interval_seconds``, until cancelled."""
        while True:
            await asyncio.sleep(interval_seconds)
            self.tick()

    def tick(self) -> bool:
        """Trim if ``burst`` connections have ended since the last trim; True when it did."""
        if self._trim is None or self._ended < self._burst:
            return False
        self._trim()
        self._ended = 0
        self.trims += 1
        return True
