"""Run ``harmonic-monitor run`` as a real subprocess against a test broker, and read its HTTP endpoints.

Test tooling, not a pipeline stage. :class:`Sidecar` starts ``python -m monitor run`` with the flags and
``HARMONIC_*`` variables a test gives (inherited ``HARMONIC_*`` variables are dropped so that a developer's
shell cannot change a test), a free metrics port, its own state directory and a log file; it waits for
``/readyz`` with a deadline, scrapes ``/metrics`` into a :class:`Scrape`, and stops the process with SIGTERM
or SIGKILL. Every failure message ends with the tail of the sidecar's log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.brokers import CONSUMER_SESSION_TIMEOUT_MS, Broker, free_port
from tests.integration.model_fixtures import ClassifierFiles

#: Bound on the process starting, loading the model and joining its consumer group (Tansu alone waits half the
#: session timeout for a first join, and ~7 s when a second member joins).
READY_TIMEOUT_SECONDS = 60.0
#: Bound on a graceful SIGTERM exit (the sidecar's own watchdog is ``shutdown_timeout_seconds``, 20 s).
STOP_TIMEOUT_SECONDS = 30.0
#: ``MONITOR_TEST_KAFKA_CLIENT=librdkafka`` runs every sidecar with that ``kafka.client`` (in its consumer process
#: or in-process, as the test sets it): the delivery tests against the other client; a test's own
#: ``HARMONIC_KAFKA__CLIENT`` wins. Read when a Sidecar is made (``conftest.broker_for_both_clients`` sets it per test).
CLIENT_OVERRIDE_ENV = "MONITOR_TEST_KAFKA_CLIENT"
_HTTP_TIMEOUT_SECONDS = 5.0
_LOG_TAIL_LINES = 150


class SidecarError(AssertionError):
    """The sidecar did not start, answer or stop as expected; the message carries its log tail."""


class Scrape:
    """One parsed ``/metrics`` page.

    ``samples`` maps a sample name (``harmonic_events_consumed_total``, ``harmonic_gamma_count`` …) to a list of
    (labels, value) pairs.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.samples.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))

    def total(self, name: str, **labels: str) -> float:
        """Sum of the samples called ``name`` whose labels include ``labels`` (0.0 when there are none)."""
        return sum(
            value
            for sample_labels, value in self.samples.get(name, [])
            if all(sample_labels.get(k) == v for k, v in labels.items())
        )

    def by_label(self, name: str, label: str, **labels: str) -> dict[str, float]:
        """Samples called ``name`` (filtered by ``labels``) summed per value of ``label``."""
        out: dict[str, float] = {}
        for sample_labels, value in self.samples.get(name, []):
            if all(sample_labels.get(k) == v for k, v in labels.items()):
                key = sample_labels.get(label, "")
                out[key] = out.get(key, 0.0) + value
        return out

    def counts(self) -> tuple[tuple[str, float], ...]:
        """Every counter and histogram count on the page but the HTTP endpoint's, summed per sample name (to tell a
        settled page)."""
        # the HTTP endpoint's own counters move with every scrape, so they never settle: left out
        names = sorted(
            n for n in self.samples if n.endswith(("_total", "_count")) and not n.startswith("harmonic_http_")
        )
        return tuple((n, self.total(n)) for n in names)

    def value(self, name: str, **labels: str) -> float | None:
        """The single sample called ``name`` with exactly these labels, or None."""
        for sample_labels, value in self.samples.get(name, []):
            if sample_labels == labels:
                return value
        return None


class Sidecar:
    """One ``harmonic-monitor run`` process.

    Parameters
    ----------
    broker
        The broker to consume from; its address and (Kafka 0.9) ``--api-version 0.9`` are passed.
    topic, group_id
        ``--topic`` and ``--group-id``.
    state_dir, log_path
        ``--state-dir``; the file that receives stdout and stderr (appended to, so restarts share it).
    model, model_name, reference, config
        ``--model``, ``--model-name``, ``--reference``, ``--config`` (each only when given).
    dead_letter_topic, scores_topic
        ``--dead-letter-topic`` and ``--scores-topic`` (only when given).
    env
        Extra ``HARMONIC_*`` variables. ``HARMONIC_KAFKA__SESSION_TIMEOUT_MS`` defaults to the test
        consumers' 6000 ms (Kafka 0.9 needs 6000..30000; Tansu's join waits half of it).
    """

    def __init__(
        self,
        broker: Broker,
        *,
        topic: str,
        group_id: str,
        state_dir: Path,
        log_path: Path,
        model: Path | None = None,
        model_name: str | None = None,
        reference: Path | None = None,
        config: Path | None = None,
        dead_letter_topic: str | None = None,
        scores_topic: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.broker = broker
        self.state_dir = state_dir
        self.log_path = log_path
        self.port = 0
        args: list[str] = ["--bootstrap-servers", broker.bootstrap, "--topic", topic, "--group-id", group_id]
        if broker.api_version is not None:
            args += ["--api-version", ".".join(str(p) for p in broker.api_version)]
        for flag, value in (
            ("--model", model),
            ("--model-name", model_name),
            ("--reference", reference),
            ("--config", config),
            ("--dead-letter-topic", dead_letter_topic),
            ("--scores-topic", scores_topic),
        ):
            if value is not None:
                args += [flag, str(value)]
        self._args = args + ["--state-dir", str(state_dir)]
        client: dict[str, str] = {}
        override = os.environ.get(CLIENT_OVERRIDE_ENV, "")
        if override:
            client = {"HARMONIC_KAFKA__CLIENT": override}
        self._env = {
            **client,
            "HARMONIC_KAFKA__SESSION_TIMEOUT_MS": str(CONSUMER_SESSION_TIMEOUT_MS),
            # a fresh page for every scrape: the default serves one render for up to 1 s, longer than
            # wait_for_metrics' settle times, so a page could look settled while the pipeline moves on
            "HARMONIC_METRICS__MIN_RENDER_INTERVAL_SECONDS": "0.01",
            **(env or {}),
        }
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> Self:
        """Start the process on a fresh free port (it is not ready yet: see :meth:`wait_ready`)."""
        if self.running:
            raise SidecarError(f"sidecar already running (pid {self.pid})")
        self.port = free_port()
        argv = [sys.executable, "-m", "monitor", "--log-level", "info", "run", *self._args]
        argv += ["--metrics-port", str(self.port)]
        env = {k: v for k, v in os.environ.items() if not k.upper().startswith("HARMONIC_")}
        env.update(self._env)
        env["HARMONIC_METRICS__HOST"] = "127.0.0.1"
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap()
        self._log.write(f"\n==== starting: {' '.join(argv)}\n".encode())
        self._log.flush()
        # --pdeathsig: the kernel kills the sidecar if pytest dies without cleaning up (see brokers._Service)
        prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        self._process = subprocess.Popen(
            prefix + argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.state_dir.parent,
        )
        return self

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        return -1 if self._process is None else self._process.pid

    def terminate(self, timeout_seconds: float = STOP_TIMEOUT_SECONDS) -> tuple[int, float]:
        """SIGTERM; wait for the exit. Returns (exit status, seconds it took); SIGKILLs and fails past the bound."""
        process = self._require_process()
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
            self._reap()
            raise SidecarError(self._message(f"no exit within {timeout_seconds:.0f} s of SIGTERM")) from None
        self._reap()
        return code, time.monotonic() - started

    def kill(self) -> int:
        """SIGKILL (a crash: no flush, no commit, no state written). Returns the exit status."""
        process = self._require_process()
        process.kill()
        code = process.wait(timeout=10)
        self._reap()
        return code

    def _require_process(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise SidecarError("sidecar was never started")
        return self._process

    def _reap(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.running:
            self.kill()
        self._reap()

    # -- HTTP --------------------------------------------------------------------------------------------
    def get(self, path: str) -> tuple[int, bytes]:
        """(status, body) of ``GET path`` on the metrics port; raises ``OSError`` when nothing answers."""
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=_HTTP_TIMEOUT_SECONDS) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return int(exc.code), bytes(exc.read())

    def readyz(self) -> tuple[int, dict[str, Any]]:
        status, body = self.get("/readyz")
        detail: dict[str, Any] = json.loads(body)
        return status, detail

    def scrape(self) -> Scrape:
        status, body = self.get("/metrics")
        if status != 200:
            raise SidecarError(self._message(f"/metrics answered {status}"))
        return Scrape(body.decode())

    def wait_until(
        self, condition: Callable[[], bool], what: str, timeout_seconds: float = READY_TIMEOUT_SECONDS
    ) -> None:
        """Poll ``condition`` (connection errors mean "not yet") until true; fail with the log tail after the bound.

        Also fails at once when the process has exited.
        """
        deadline = time.monotonic() + timeout_seconds
        last_error: Exception | None = None
        while True:
            process = self._require_process()
            if process.poll() is not None:
                raise SidecarError(self._message(f"exited with status {process.returncode} while waiting for {what}"))
            try:
                if condition():
                    return
            except (OSError, ValueError) as exc:  # not listening yet, or a half-written answer
                last_error = exc
            if time.monotonic() >= deadline:
                detail = f"; last error: {last_error!r}" if last_error is not None else ""
                raise SidecarError(self._message(f"timed out after {timeout_seconds:.0f} s waiting for {what}{detail}"))
            time.sleep(0.1)

    def wait_ready(self, timeout_seconds: float = READY_TIMEOUT_SECONDS) -> dict[str, Any]:
        """Wait for ``/readyz`` to answer 200 (model loaded, partitions assigned); return its detail."""
        detail: dict[str, Any] = {}

        last: list[str] = []

        def ready() -> bool:
            nonlocal detail
            status, detail = self.readyz()
            last[:] = [f"{status} {json.dumps(detail, sort_keys=True)[:2000]}"]
            return status == 200

        try:
            self.wait_until(ready, "/readyz to answer 200", timeout_seconds)
        except SidecarError as exc:
            if self._dump_consumer_stacks():  # where a stuck consumer child waits: its stacks land in the log
                exc = SidecarError(self._message("(consumer child's stacks written above) " + str(exc).split("\n")[0]))
            if last:  # what it answered last says which part was not ready (the log tail follows)
                raise SidecarError(f"last /readyz answer: {last[0]}\n{exc}") from None
            raise exc from None
        return detail

    def wait_for_metrics(
        self,
        condition: Callable[[Scrape], bool],
        what: str,
        timeout_seconds: float = READY_TIMEOUT_SECONDS,
        settle_seconds: float = 0.0,
    ) -> Scrape:
        """Scrape until ``condition(scrape)`` holds; return that scrape.

        With ``settle_seconds`` > 0 the condition must also hold with every counter and histogram count unchanged
        for that long: a scrape can land between two counter updates of one poll (consumed already counted,
        sampled not yet), and a settled page cannot. Fails with the last page's event counters.
        """
        last: list[Scrape] = []
        since: list[tuple[float, tuple[tuple[str, float], ...]]] = []

        def check() -> bool:
            scrape = self.scrape()
            last[:] = [scrape]
            if not condition(scrape):
                since.clear()
                return False
            snapshot = scrape.counts()
            if not since or since[0][1] != snapshot:
                since[:] = [(time.monotonic(), snapshot)]
            return time.monotonic() - since[0][0] >= settle_seconds

        try:
            self.wait_until(check, what, timeout_seconds)
        except SidecarError as exc:
            if last:
                counters = {
                    name: last[0].by_label(name, "model")
                    for name in last[0].samples
                    if name.startswith("harmonic_events_") and name.endswith("_total")
                }
                raise SidecarError(f"{exc}\n--- last counters ---\n{counters}") from None
            raise
        return last[0]

    # -- diagnostics -------------------------------------------------------------------------------------
    def _dump_consumer_stacks(self) -> bool:
        """Have the sidecar's Kafka consumer child (if it runs one) write its threads' stacks to the log (its
        faulthandler answers SIGUSR1); True when one was asked."""
        process = self._require_process()
        try:
            children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        except OSError:
            return False
        asked = False
        for child in children:
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                if b"monitor.source.kafka_process" in cmdline:
                    os.kill(int(child), signal.SIGUSR1)
                    asked = True
            except (OSError, ValueError):
                continue
        if asked:
            time.sleep(1.0)
        return asked

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"({self.log_path} unreadable)"
        return "\n".join(text.splitlines()[-lines:])

    def _message(self, what: str) -> str:
        return f"sidecar pid {self.pid} on port {self.port}: {what}\n--- {self.log_path} ---\n{self.log_tail()}"


def partitions_of(detail: Mapping[str, Any]) -> set[int]:
    """Partition numbers from a ``/readyz`` detail's ``"partitions"`` list (``"topic/3"`` → 3)."""
    parts: Sequence[str] = detail.get("partitions", [])
    return {int(p.rsplit("/", 1)[1]) for p in parts}


def sidecar_in(
    tmp_path: Path, broker: Broker, *, topic: str, group_id: str, state_dir: Path | None = None, **options: Any
) -> Sidecar:
    """A :class:`Sidecar` with its state in ``tmp_path / "state"`` (unless ``state_dir`` is given) and its log at
    ``tmp_path / "sidecar.log"`` (restarts append to it); ``options`` are the rest of :class:`Sidecar`'s keywords."""
    return Sidecar(
        broker,
        topic=topic,
        group_id=group_id,
        state_dir=tmp_path / "state" if state_dir is None else state_dir,
        log_path=tmp_path / "sidecar.log",
        **options,
    )


def classifier_sidecar(
    broker: Broker,
    files: ClassifierFiles,
    tmp_path: Path,
    *,
    topic: str,
    group_id: str,
    model_name: str,
    state_dir: Path | None = None,
    dead_letter_topic: str | None = None,
    scores_topic: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Sidecar:
    """A :func:`sidecar_in` ``tmp_path`` scoring the classifier of ``files`` (``--model`` and its ``--reference``) as
    ``model_name``."""
    return sidecar_in(
        tmp_path,
        broker,
        topic=topic,
        group_id=group_id,
        state_dir=state_dir,
        model=files.onnx_path,
        model_name=model_name,
        reference=files.reference_path,
        dead_letter_topic=dead_letter_topic,
        scores_topic=scores_topic,
        env=env,
    )
