"""The HTTP endpoint's listening socket, bound before anything else starts: a port another process holds refuses the
start in one line (``run`` binds it before the Kafka consumer joins its group), naming the holder when this host's
``/proc`` says who it is."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from pathlib import Path

from monitor.errors import ConfigError

#: where to read which socket inode listens on a port, and the columns of those tables
_TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_LISTEN = "0A"
#: processes whose descriptors are looked through for the listening socket (a bound on the work, not a limit
#: that matters on a node: a pod sees its own few)
_MAX_PROCESSES = 4096


def listen(host: str, port: int, *, backlog: int = 128) -> socket.socket:
    """A socket bound to ``(host, port)`` and listening (port 0: a free one).

    Raises
    ------
    ConfigError
        The address cannot be bound: in use (with the process holding it, where ``/proc`` tells), not an address of
        this host, or a privileged port; with the fix (``--metrics-port``, ``metrics.host``).
    """
    try:
        return socket.create_server(
            (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET, backlog=backlog
        )
    except OSError as exc:
        raise ConfigError(_bind_message(host, port, exc)) from None


def _bind_message(host: str, port: int, exc: OSError) -> str:
    where = f"metrics port {port} on {host}"
    if exc.errno == errno.EADDRINUSE:
        holder = port_holder(port)
        held = f" (held by {holder})" if holder else ""
        return (
            f"{where} is in use{held}; stop what holds it or give this sidecar another port: --metrics-port N "
            "(metrics.port, HARMONIC_METRICS__PORT)"
        )
    if exc.errno == errno.EACCES:
        return (
            f"{where}: permission denied (ports below 1024 need privileges); use a port above 1023: --metrics-port N "
            "(metrics.port, HARMONIC_METRICS__PORT)"
        )
    return (
        f"cannot listen on {where}: {os.strerror(exc.errno) if exc.errno else exc}; set metrics.host (HARMONIC_METRICS__HOST) to an address of "
        "this host, e.g. 0.0.0.0, or pick another --metrics-port"
    )


def port_holder(port: int) -> str | None:
    """``"pid 1234 (python3)"`` for the process listening on TCP ``port`` on this host, as far as ``/proc`` shows it
    (a process of another user or another network namespace: None).

    >>> port_holder(0) is None
    True
    """
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    with contextlib.suppress(OSError):
        for n, entry in enumerate(os.scandir("/proc")):
            if n >= _MAX_PROCESSES:
                break
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                for fd in os.scandir(f"/proc/{entry.name}/fd"):
                    if os.readlink(fd.path) in targets:
                        return f"pid {entry.name} ({_command(entry.name)})"
    return None


def _listening_inodes(port: int) -> set[str]:
    """The inodes of the sockets listening on ``port`` (``/proc/net/tcp`` and ``tcp6``)."""
    if port <= 0:
        return set()
    hex_port = f"{port:04X}"
    found: set[str] = set()
    for table in _TCP_TABLES:
        with contextlib.suppress(OSError):
            for line in table.read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[1].rsplit(":", 1)[-1] == hex_port and fields[3] == _LISTEN:
                    found.add(fields[9])
    return found


def _command(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or "?"
    except OSError:
        return "?"
