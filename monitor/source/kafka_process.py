"""``ProcessKafkaSource``: the kafka-python consumer in a child process, records handed over in column batches.

Why: kafka-python parses every fetched record in Python — most of a raw consumer's CPU (docs/BENCHMARKS.md,
*Ingest vs raw client*) — and decoding plus sampling an event costs
about as much again, all under one GIL. With the consumer in its own process the two run on two cores: the child
fetches, parses and ships each poll's records as one message of plain lists per partition (values, headers, offsets,
timestamps), with the common events of a share of them decoded as columns (:mod:`monitor.source.columns`:
:class:`AheadShare`); this process decodes the rest, samples and scores. The child keeps fetching while this process
works, up to the pipe's buffer plus one batch in flight (bounded memory, natural back-pressure).

The :class:`~monitor.source.base.Source` contract is unchanged:

- ``poll`` returns records in the order the child fetched them;
- ``commit`` forwards positions to the child, which commits them between its polls in the order given;
  ``close`` waits until the child has committed everything sent before it and closed the consumer
  (the final commit of a SIGTERM is durable when ``close`` returns);
- rebalances: the child's listener (on kafka-python's thread) sends ``revoked`` and *waits* (bounded) for this
  process to flush: ``poll`` meets the message after every record fetched before it, calls the handler's
  ``before_revoke`` (the pipeline flushes and commits), and sends the resulting positions back, which the child
  commits before the group re-forms — as the in-process :class:`~monitor.source.kafka.KafkaSource` does.
  Records of revoked partitions still buffered here, not yet returned by ``poll``, are dropped: they were never
  applied, and the partition's next owner reads them from the committed offset;
- the child dies with this process (``PR_SET_PDEATHSIG`` on Linux; elsewhere it notices its parent is gone at its
  next poll), so a SIGKILLed sidecar does not leave a consumer holding its partitions; the child ignores SIGINT and
  SIGTERM: shutdown is this process's decision.

The child's group consumer is not sought (a seek there, at a restart that met a rebalance at once, was seen to stop
consumption; the cause is not found): the records a restart compares with its saved fingerprints are read in this
process by ``side_reader`` (:class:`~monitor.source.side_read.SideReader`), in no group.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import faulthandler
import itertools
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler as _ForkingPickler
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor.errors import SourceError
from monitor.source.base import DecodesAhead, Lagging, Polled, Positions, RawRecord, RebalanceHandler, SideReading
from monitor.source.columns import ColumnSpec, EventColumns, decode_columns, split_columns
from monitor.source.decode_ahead import DecodeAhead
from monitor.source.kafka import GroupMember, PartitionBatch, records_of
from monitor.source.kafka_config import ConsumerConfig
from monitor.source.kafka_outage import outage_message
from monitor.source.side_read import SideReader

if TYPE_CHECKING:
    from monitor.allocator import TimedCollector
    from monitor.source.kafka import KafkaSource
    from monitor.source.rdkafka import RdKafkaSource

log = logging.getLogger(__name__)

#: how long the child's rebalance listener waits for this process to flush and answer
REVOKE_REPLY_TIMEOUT_SECONDS = 60.0
#: messages (poll batches, ~1.2 MB each at 2,000 events) the child may hold fetched ahead of what this process has
#: read, besides the pipe's: enough that neither process stalls on the other's hiccups (2 stalled visibly)
OUTBOX_MESSAGES = 6
#: the child→parent pipe's buffer (Linux F_SETPIPE_SZ; capped by /proc/sys/fs/pipe-max-size, default 1 MiB)
PIPE_BYTES = 1 << 20
#: how long ``close`` waits for the child to exit after it reported "closed" (or did not in time), before killing it
EXIT_WAIT_SECONDS = 10.0
#: the signal on which the child writes its threads' stacks to stderr (faulthandler), before a kill; None off POSIX
STACKS_SIGNAL: signal.Signals | None = getattr(signal, "SIGUSR1", None)
STACKS_WAIT_SECONDS = 1.0
#: the sources whose child is running (started, not closed): :func:`dump_consumer_stacks` asks each of them
_LIVE: weakref.WeakSet[ProcessKafkaSource] = weakref.WeakSet()


class ProcessKafkaSource(GroupMember, SideReading, Lagging, DecodesAhead):
    """A :class:`~monitor.source.kafka.KafkaSource` running in a child process (see the module docstring).

    Parameters
    ----------
    consumer : the child's :class:`~monitor.source.kafka.KafkaSource`'s :class:`~monitor.source.kafka.ConsumerConfig`.
    rebalance : told before partitions are revoked (flush + commit) and after they are assigned, from ``poll``.
    start_timeout_seconds : bound on the child's start (imports, first connection).
    log_level, log_format : the child's logging, as this process's.

    Raises
    ------
    SourceError
        The child could not create the consumer (the message is the child's error) or did not start in time.
    """

    def __init__(
        self,
        consumer: ConsumerConfig,
        *,
        rebalance: RebalanceHandler | None = None,
        start_timeout_seconds: float = 60.0,
        log_level: str,
        log_format: str,
        client: str,
    ) -> None:
        self._handler = rebalance
        self._assigned: set[tuple[str, int]] = set()
        #: log-end offsets per partition, as the child last reported them
        self._highwaters: dict[tuple[str, int], int] = {}
        # records received, not yet returned by poll: self._buffer[self._next:] (slices, not a deque: no Python-level
        # loop per record)
        self._buffer: list[RawRecord] = []
        self._next = 0
        #: the buffered records' common events decoded as columns by the child, their rows counted in the buffer
        self._columns: list[EventColumns] = []
        self._revoking = False
        self._revoke_positions: Positions = {}
        self._closed = False
        self._bootstrap_servers = consumer.bootstrap_servers
        #: reads records at given offsets in this process, beside the child's group consumer (which does not seek)
        self.side_reader = SideReader(consumer)
        #: the child's report while its broker is away: (since, monotonic; the error)
        self._away: tuple[float, str] | None = None
        #: the decoder state last sent to the child (it decodes ahead with it: :meth:`decode_ahead`)
        self._ahead: DecodeAhead | None = None
        # a fresh interpreter running this module (not fork: the parent holds onnxruntime and other threads; not
        # multiprocessing's spawn: it re-imports the parent's __main__), talking over two inherited pipes
        cmd_read, cmd_write = os.pipe()
        out_read, out_write = os.pipe()
        _grow_pipe(out_write)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "monitor.source.kafka_process", str(cmd_read), str(out_write), str(os.getpid())],
            pass_fds=(cmd_read, out_write),
            stdin=subprocess.DEVNULL,
        )
        os.close(cmd_read)
        os.close(out_write)
        self._commands = Connection(cmd_write, readable=False)
        self._out = Connection(out_read, writable=False)
        self._send(
            ("config", {"consumer": consumer, "log_level": log_level, "log_format": log_format, "client": client})
        )
        deadline = time.monotonic() + start_timeout_seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._out.poll(remaining):
                self._stop_child()
                raise SourceError(f"the Kafka consumer process did not start within {start_timeout_seconds:.0f} s")
            kind, payload = self._recv()
            if kind == "started":
                break
            if kind == "error":
                self._stop_child()
                raise SourceError(str(payload))
        _LIVE.add(self)
        log.info("Kafka consumer process started", extra={"pid": self._process.pid})

    # -- Source ------------------------------------------------------------------------------------------
    def poll(self, timeout_seconds: float, max_records: int) -> list[RawRecord]:
        deadline = time.monotonic() + timeout_seconds
        while self._next >= len(self._buffer):
            remaining = max(0.0, deadline - time.monotonic())
            if not self._out.poll(remaining):
                return []
            self._handle(*self._recv())
            if remaining == 0.0:
                break
        start = self._next
        out = self._buffer[start : start + max_records]
        self._next = end = start + len(out)
        columns, self._columns = split_columns(self._columns, start, end)
        return Polled(out, columns)

    @property
    def degraded(self) -> str | None:
        """None while the child's broker answers; else what is wrong and what to fix (as the child reports it)."""
        return outage_message(self._bootstrap_servers, self._away)

    def highwaters(self) -> dict[tuple[str, int], int]:
        """Log-end offsets of the assigned partitions as the child's last fetches reported them."""
        return {key: end for key, end in self._highwaters.items() if key in self._assigned}

    def buffered(self) -> list[RawRecord]:
        """Records received from the child and not yet returned by :meth:`poll`."""
        return self._buffer[self._next :]

    def decode_ahead(self, spec: DecodeAhead) -> None:
        """Have the child decode each poll's common plain events as columns with ``spec`` (the pipeline's decoder
        state) as it reads them (:mod:`monitor.source.columns`); sent again only when it changed (a segment
        admitted)."""
        if spec != self._ahead:
            self._ahead = spec
            self._send(("decode_ahead", spec))

    def commit(self, positions: Positions) -> None:
        owned = self._owned(positions)
        if not owned:
            return
        if self._revoking:  # answered with the revoke, committed by the child's listener before the group re-forms
            self._revoke_positions.update(owned)
            return
        self._send(("commit", owned))

    def close(self, timeout_seconds: float = 30.0) -> None:
        """Have the child commit what was sent, close the consumer and exit; wait for it (bounded).

        Each of the child's commits is bounded by ``COMMIT_TIMEOUT_MS`` and its close by ``CLOSE_TIMEOUT_MS``
        (:mod:`monitor.source.kafka`); a child not done after ``timeout_seconds`` plus ``EXIT_WAIT_SECONDS`` writes
        its threads' stacks to stderr and is killed.
        """
        if self._closed:
            return
        self._closed = True
        self.side_reader.close()
        try:
            self._send(("close", None))
            deadline = time.monotonic() + timeout_seconds
            while time.monotonic() < deadline:
                if not self._out.poll(max(0.0, deadline - time.monotonic())):
                    break
                kind, payload = self._recv()
                if kind == "closed":
                    break
                if kind == "revoked":  # a rebalance raced the close: nothing more to flush here
                    self._send(("revoke_done", (payload[0], {})))
        except (SourceError, OSError):
            pass  # the child is gone already: nothing left to commit there
        finally:
            self._stop_child()
            _LIVE.discard(self)

    # -- messages from the child ---------------------------------------------------------------------------
    def _handle(self, kind: str, payload: Any) -> None:
        if kind == "records":
            if self._next >= len(self._buffer):  # all returned: start afresh rather than grow
                self._buffer, self._next, self._columns = [], 0, []
            batches, decoded = payload
            for batch, columns in zip(batches, decoded, strict=True):
                base = len(self._buffer)
                self._buffer.extend(records_of(batch))
                self._columns.extend(c.shifted(base) for c in columns or ())
        elif kind == "assigned":
            self._note_assigned([(str(t), int(p)) for t, p in payload], log)
        elif kind == "revoked":
            token, raw_parts = payload
            parts = [(str(t), int(p)) for t, p in raw_parts]
            gone = set(parts)
            # buffered records of these partitions were never applied: their next owner reads them
            self._buffer = [r for r in self.buffered() if (r.topic, r.partition) not in gone]
            self._next, self._columns = 0, []  # the rest is decoded record by record
            self._revoking, self._revoke_positions = True, {}
            try:
                if self._handler is not None and parts:
                    self._handler.before_revoke(parts)
            finally:
                self._revoking = False
                self._send(("revoke_done", (token, self._revoke_positions)))
                self._assigned.difference_update(parts)
            log.info("partitions revoked", extra={"partitions": sorted(parts)})
        elif kind == "highwaters":
            self._highwaters.update(payload)
        elif kind == "away":
            self._away = None if payload is None else (float(payload[0]), str(payload[1]))
        elif kind == "fatal":
            raise SourceError(f"the Kafka consumer process failed: {payload}")
        elif kind == "log":
            pass

    def _recv(self) -> tuple[str, Any]:
        try:
            kind, payload = self._out.recv()
        except (EOFError, OSError) as exc:
            code = self._process.poll()
            raise SourceError(f"the Kafka consumer process exited (exit code {code}): {exc!r}") from exc
        return str(kind), payload

    def _send(self, message: tuple[str, Any]) -> None:
        try:
            self._commands.send(message)
        except (BrokenPipeError, OSError) as exc:
            raise SourceError(f"the Kafka consumer process is gone (exit code {self._process.poll()})") from exc

    def _stop_child(self) -> None:
        try:
            self._process.wait(timeout=EXIT_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            # where it hangs is what an operator needs: the child writes its threads' stacks to its stderr (ours)
            dumped = _dump_stacks(self._process)
            log.warning(
                "Kafka consumer process did not exit; killing it"
                + ("; its threads' stacks are in its stderr above" if dumped else ""),
                extra={"pid": self._process.pid},
            )
            self._process.kill()
            self._process.wait(timeout=5.0)
        for conn in (self._commands, self._out):
            conn.close()


def dump_consumer_stacks() -> int:
    """Have every running consumer child write its threads' stacks to stderr (a shutdown past its bound calls this
    before it exits, so the log says where the child hung); returns how many were asked."""
    return sum(_dump_stacks(source._process) for source in list(_LIVE))


def _dump_stacks(process: subprocess.Popen[bytes]) -> bool:
    """Have the child write every thread's stack to its stderr (its ``faulthandler`` on SIGUSR1); True if asked."""
    if STACKS_SIGNAL is None or process.poll() is not None:
        return False
    try:
        process.send_signal(STACKS_SIGNAL)
        process.wait(timeout=STACKS_WAIT_SECONDS)  # it does not exit on the signal: this is time to write the dump
    except subprocess.TimeoutExpired:
        pass
    except OSError:
        return False
    return True


# ---------------------------------------------------------------------- the child


def _grow_pipe(fd: int) -> None:
    """Give the pipe a 1 MiB buffer where Linux allows it (a bigger buffer only means fewer stalls)."""
    try:
        import fcntl

        limit = int(Path("/proc/sys/fs/pipe-max-size").read_text())
        fcntl.fcntl(fd, 1031, min(PIPE_BYTES, limit))  # F_SETPIPE_SZ
    except (ImportError, OSError, ValueError):
        pass


def _pipe_bytes(fd: int) -> int | None:
    """Bytes in the pipe of ``fd`` not yet read (Linux answers FIONREAD on either end); None where not answered."""
    try:
        import fcntl
        import termios

        got = array.array("i", [0])
        fcntl.ioctl(fd, termios.FIONREAD, got)
    except (ImportError, OSError, AttributeError):
        return None
    return got[0]


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies; elsewhere the poll loop checks ``getppid``."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


class _Outbox:
    """Every message to the parent goes through one bounded queue, in order, written by one sender thread: the poll
    loop fetches the next batch while the parent still reads the previous one (a pipe holds at most 1 MiB, a batch
    of 2,000 events ~1.2 MB), and a rebalance message never overtakes the records fetched before it.

    A message is pickled by :meth:`send`, on the caller's thread; the sender thread only writes the bytes, holding
    the GIL for a moment per message. Pickled on the sender thread, the child's three busy threads (the poll loop,
    kafka-python's IO thread, the sender) passed the GIL back and forth many times per message, and on a shared
    machine each pass may wait for a core (docs/BENCHMARKS.md, *Ingest vs raw client*: the hand-off). A payload that
    cannot be pickled fails in :meth:`send`, not on the sender thread."""

    def __init__(self, out: Connection) -> None:
        self._out = out
        self._queue: queue.Queue[bytes | memoryview | None] = queue.Queue(maxsize=OUTBOX_MESSAGES)
        self.parent_gone = threading.Event()
        self._writer = threading.Thread(target=self._write, name="sender", daemon=True)
        self._writer.start()

    def send(self, kind: str, payload: Any) -> None:
        data = _ForkingPickler.dumps((kind, payload))
        while not self.parent_gone.is_set():
            try:
                self._queue.put(data, timeout=0.5)
                return
            except queue.Full:
                continue

    def queued(self) -> int:
        """Messages not yet written to the pipe."""
        return self._queue.qsize()

    def piped(self) -> int | None:
        """Bytes written to the pipe and not yet read by the parent (None where the system does not say)."""
        return _pipe_bytes(self._out.fileno())

    def finish(self) -> None:
        """Let the sender write what is queued, then stop it."""
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=REVOKE_REPLY_TIMEOUT_SECONDS)
        self._writer.join(timeout=REVOKE_REPLY_TIMEOUT_SECONDS)

    def _write(self) -> None:
        while True:
            message = self._queue.get()
            if message is None:
                return
            try:
                self._out.send_bytes(message)
            except (BrokenPipeError, OSError):
                self.parent_gone.set()
                return


class _Inbox:
    """The parent's commands, read on their own thread: answers to "revoked" wake the waiting listener at once, the
    rest wait in ``todo`` for the poll loop.

    It reads until the parent closes the pipe, "close" included: a rebalance can start after the parent sent "close"
    and before the poll loop gets to it (the poll loop is then inside poll(), in the rebalance), and the parent's
    answer to that "revoked" must still be read, or the listener waits, the poll never returns and the close never
    happens (seen once in CI: the child killed, its last commit lost).
    """

    def __init__(self, commands: Connection) -> None:
        self._commands = commands
        self.replies: dict[int, Positions] = {}
        self.answered: dict[int, threading.Event] = {}
        self.todo: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.closing = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._read, name="commands", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                kind, payload = self._commands.recv()
            except (EOFError, OSError):
                self.todo.put(("close", None))  # the parent is gone: stop
                return
            if kind == "revoke_done":
                token, positions = payload
                self.replies[token] = positions
                event = self.answered.pop(token, None)
                if event is not None:
                    event.set()
            else:
                if kind == "close":
                    self.closing.set()  # a rebalance from here on does not ask the parent to flush: it did, before
                self.todo.put((kind, payload))


class _Forward:
    """The in-process source's rebalance handler, forwarding to the parent and waiting for its flush."""

    def __init__(self, outbox: _Outbox, inbox: _Inbox) -> None:
        self._outbox, self._inbox = outbox, inbox
        self._tokens = itertools.count()
        self.source: KafkaSource | RdKafkaSource | None = None

    def before_revoke(self, partitions: Sequence[tuple[str, int]]) -> None:
        if self._inbox.closing.is_set():  # consumer.close() revokes too: the parent flushed and committed before
            return
        token = next(self._tokens)
        done = self._inbox.answered[token] = threading.Event()
        self._outbox.send("revoked", (token, list(partitions)))
        if not done.wait(REVOKE_REPLY_TIMEOUT_SECONDS):
            log.warning("no flush from the parent in time; partitions revoked without a commit")
            return
        positions = self._inbox.replies.pop(token, {})
        if positions and self.source is not None:
            self.source.commit(positions)  # on kafka-python's thread: queued as an async commit there

    def after_assign(self, partitions: Sequence[tuple[str, int]]) -> None:
        self._outbox.send("assigned", list(partitions))


def _child_main(commands: Connection, out: Connection, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if STACKS_SIGNAL is not None:  # asked by the parent before it kills a child that does not exit (_dump_stacks)
        faulthandler.register(STACKS_SIGNAL, all_threads=True)
    _die_with_parent(parent)
    from monitor.allocator import TimedCollector, freeze_startup_objects, tune_gc, tune_malloc
    from monitor.logs import setup_logging
    from monitor.source.kafka import KafkaSource
    from monitor.source.rdkafka import RdKafkaSource

    tune_malloc()  # the same memory settings as the sidecar (the environment is inherited)
    tune_gc()

    kind, config = commands.recv()
    assert kind == "config", kind
    consumer: ConsumerConfig = config["consumer"]
    setup_logging(config["log_level"], config["log_format"])
    outbox, inbox = _Outbox(out), _Inbox(commands)
    forward = _Forward(outbox, inbox)
    try:
        source = (
            RdKafkaSource(consumer, rebalance=forward)
            if config["client"] == "librdkafka"
            else KafkaSource(consumer, rebalance=forward)
        )
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it as SourceError
        outbox.send("error", str(exc))
        outbox.finish()
        return
    forward.source = source
    freeze_startup_objects()
    outbox.send("started", None)
    inbox.start()
    # kafka-python's timed-out fetches leave cycles holding the poll's records: collect them by time as well
    _serve(source, outbox, inbox, parent, consumer.max_poll_records, TimedCollector())


def _serve(
    source: KafkaSource | RdKafkaSource,
    outbox: _Outbox,
    inbox: _Inbox,
    parent: int,
    max_records: int,
    collector: TimedCollector,
) -> None:
    """The poll loop: the parent's commands between polls, each poll's batches (a share decoded as columns) out."""
    ahead = AheadShare()
    decoder: ColumnSpec | None = None  # set by the parent's "decode_ahead"
    away = source.away
    if away is not None:
        outbox.send("away", away)
    try:
        while True:
            collector.maybe_collect()
            decoder, closed = _run_commands(source, inbox, outbox, decoder)
            if closed or os.getppid() != parent or outbox.parent_gone.is_set():
                return
            batches = source.poll_columns(0.2, max_records)
            if batches:
                if decoder is not None:
                    ahead.adjust(outbox.queued(), outbox.piped())
                outbox.send("records", (batches, [ahead.decoded(decoder, batch) for batch in batches]))
                outbox.send("highwaters", source.highwaters())
            if (source.away is None) != (away is None):  # the broker went away or came back: tell the parent
                away = source.away
                outbox.send("away", away)
    except (BrokenPipeError, EOFError, OSError):
        return  # the parent is gone
    except Exception as exc:  # noqa: BLE001 - reported, then the parent raises SourceError from poll
        log.exception("Kafka consumer process failed")
        outbox.send("fatal", repr(exc))
        outbox.finish()


def _run_commands(
    source: KafkaSource | RdKafkaSource, inbox: _Inbox, outbox: _Outbox, decoder: ColumnSpec | None
) -> tuple[ColumnSpec | None, bool]:
    """The commands waiting since the last poll: the column spec now in force, and whether the child closed."""
    while True:
        try:
            kind, payload = inbox.todo.get_nowait()
        except queue.Empty:
            return decoder, False
        if kind == "commit":
            source.commit(payload)
        elif kind == "decode_ahead":
            try:
                decoder = payload.columns()
            except Exception:  # noqa: BLE001 - decoding ahead is an optimisation: the pipeline decodes all
                log.exception("cannot decode ahead; the pipeline decodes every record")
                decoder = None
        elif kind == "close":
            inbox.closing.set()
            source.close()
            outbox.send("closed", None)
            outbox.finish()
            return decoder, True


class AheadShare:
    """Which share of each batch the child decodes ahead, so that neither process waits for the other.

    Decoding moves CPU from the pipeline's process to this one: all of it when the pipeline is the slower one, less
    when this process is. Which one waits is read off the pipe: when it is empty as a poll's message is about to be
    sent, the pipeline has read everything this process wrote and waits (or soon will) for the next message, so this
    process decodes less; when the pipe holds bytes the pipeline has not read and another message waits behind them,
    the pipeline is the slower one, so this process decodes more. The share moves by an eighth per poll. (The
    outbox's queue alone does not say it: its sender thread waits for the GIL while the poll loop decodes, so a
    message may wait there while the pipeline waits too.) Where the pipe's fill is not known, the queue decides:
    two messages or more waiting, more; none, less.
    """

    STEP = 0.125

    def __init__(self) -> None:
        self.share = 1.0

    def adjust(self, queued: int, piped: int | None = None) -> None:
        """After a poll, with ``queued`` messages waiting in the outbox and ``piped`` bytes in the pipe (None:
        unknown)."""
        if piped is None:
            more, less = queued >= 2, queued == 0
        else:
            more, less = piped > 0 and queued >= 1, piped == 0
        if more:
            self.share = min(1.0, self.share + self.STEP)
        elif less:
            self.share = max(0.0, self.share - self.STEP)

    def decoded(self, spec: ColumnSpec | None, batch: PartitionBatch) -> list[EventColumns] | None:
        """The common events among the first ``share`` of the batch's records, as columns per model (the pipeline
        decodes every other record itself), or None when none are decoded here."""
        values = batch[2]
        ahead = 0 if spec is None else round(self.share * len(values))
        if ahead == 0:
            return None
        try:
            return decode_columns(spec, values, batch[3], batch[5], ahead)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - an optimisation: the pipeline decodes the records in full and says why
            log.exception("cannot decode a batch as columns; the pipeline decodes its records")
            return None


if __name__ == "__main__":
    _child_main(
        Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False), int(sys.argv[3])
    )
