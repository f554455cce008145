"""Alert delivery: payload shapes, HTTP error handling against a real local server, and the worker's
queue, retry, backoff and resend logic (driven by ``process_once`` with a fake clock)."""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest

from monitor.alerts import Alert, AlertEngine, AlertEvent, AlertRule, AlertState
from monitor.errors import ConfigError
from monitor.exporters.delivery import (
    MAX_ANSWER_BYTES,
    AlertmanagerSender,
    DeliveryError,
    DeliveryWorker,
    WebhookSender,
    rfc3339,
)
from tests.endless_receiver import EndlessReceiver

T0 = 1_795_600_000.0  # 2026-11-25T09:46:40Z


# ----------------------------------------------------------------------------- helpers and fakes


class Receiver:
    """A real HTTP server on 127.0.0.1 that records POSTs and answers with queued status codes."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        self.statuses: list[int] = []  # answers to give, in order; then 200
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.arrived:  # recorded before answering, so the sender never sees it early
                    receiver.requests.append((self.path, dict(self.headers), json.loads(body)))
                    receiver.arrived.notify_all()
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                if status in (301, 302):
                    self.send_response(status)
                    self.send_header("Location", "/elsewhere")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    answer = b"" if status == 200 else b'"bad things"'
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)

    def wait_for_requests(self, count: int, timeout_seconds: float = 5.0) -> bool:
        """Block until ``count`` requests have been answered, or the timeout passes."""
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.requests) >= count, timeout_seconds)

    @property
    def bodies(self) -> list[Any]:
        return [body for _, _, body in self.requests]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    rec.thread.start()
    yield rec
    rec.server.shutdown()
    rec.server.server_close()
    rec.thread.join(5)


class FakeSender:
    """Records batches; raises the queued errors first."""

    def __init__(self, errors: Sequence[Exception | None] = ()) -> None:
        self.errors = list(errors)
        self.calls: list[tuple[list[Alert], float]] = []

    def send(self, alerts: Sequence[Alert], now_seconds: float) -> None:
        self.calls.append((list(alerts), now_seconds))
        if self.errors:
            error = self.errors.pop(0)
            if error is not None:
                raise error


def retryable() -> DeliveryError:
    return DeliveryError("down", url="http://x", status=503, retryable=True)


def fired(segment: str = "eu", now: float = T0) -> AlertEvent:
    engine = AlertEngine([AlertRule("HarmonicGammaDrift", "gamma", for_seconds=0.0, resolve_after_seconds=0.0)])
    event = engine.observe(
        "HarmonicGammaDrift",
        model="credit",
        segment=segment,
        condition=True,
        value=0.082,
        reference=0.011,
        now_seconds=now,
        top_features=("f3", "f7"),
        detail="KS p=1e-09",
    )
    assert event is not None
    return event


def resolved(segment: str = "eu", now: float = T0 + 600) -> AlertEvent:
    event = fired(segment, now=T0)
    engine = AlertEngine([event.alert.rule])
    for t, condition in ((T0, True), (now, False)):
        out = engine.observe(
            "HarmonicGammaDrift",
            model="credit",
            segment=segment,
            condition=condition,
            value=0.01,
            reference=0.011,
            now_seconds=t,
        )
    assert out is not None and out.alert.state is AlertState.RESOLVED
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ----------------------------------------------------------------------------- senders


def test_rfc3339_writes_utc_milliseconds() -> None:
    assert rfc3339(T0 + 0.5) == "2026-11-25T09:46:40.500Z"


def test_alertmanager_sender_payload_for_firing_alert_has_no_ends_at() -> None:
    sender = AlertmanagerSender(
        "http://am:9093/", generator_url="http://monitor:8000/alerts", external_labels={"cluster": "prod"}
    )
    (item,) = sender.payload([fired().alert], T0 + 5)
    assert item == {
        "labels": {
            "cluster": "prod",
            "alertname": "HarmonicGammaDrift",
            "model": "credit",
            "segment": "eu",
            "signal": "gamma",
            "severity": "warning",
            "verdict": "harmful",
        },
        "annotations": fired().alert.annotations,
        "startsAt": "2026-11-25T09:46:40.000Z",
        "generatorURL": "http://monitor:8000/alerts",
    }
    assert sender.endpoint == "http://am:9093/api/v2/alerts"


def test_alertmanager_sender_payload_for_resolved_alert_has_ends_at() -> None:
    (item,) = AlertmanagerSender("http://am:9093").payload([resolved(now=T0 + 600).alert], T0 + 601)
    assert item["endsAt"] == "2026-11-25T09:56:40.000Z"
    assert "generatorURL" not in item  # omitted when not configured


def test_alertmanager_sender_payload_with_firing_ttl_sets_ends_at_ahead() -> None:
    (item,) = AlertmanagerSender("http://am:9093", firing_ttl_seconds=240).payload([fired().alert], T0 + 60)
    assert item["endsAt"] == "2026-11-25T09:51:40.000Z"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"url": "am:9093"}, "Alertmanager URL must be an absolute http"),
        ({"url": "http://am", "timeout_seconds": 0}, "timeout_seconds must be a finite number > 0"),
        ({"url": "http://am", "firing_ttl_seconds": -1}, "firing_ttl_seconds must be None or"),
        ({"url": "http://am", "external_labels": {"bad-name": "x"}}, r"external label names .*\['bad-name'\]"),
        ({"url": "http://am", "generator_url": "monitor/alerts"}, "generator URL must be an absolute"),
    ],
)
def test_alertmanager_sender_rejects_bad_configuration(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        AlertmanagerSender(**kwargs)  # type: ignore[arg-type]


def test_alertmanager_sender_posts_json_list_to_v2_alerts(receiver: Receiver) -> None:
    sender = AlertmanagerSender(receiver.url, headers={"Authorization": "Bearer t0ken"})
    sender.send([fired("eu").alert, fired("us").alert], T0)

    ((path, headers, body),) = receiver.requests
    assert path == "/api/v2/alerts"
    assert headers["Content-Type"] == "application/json"
    assert headers["Authorization"] == "Bearer t0ken"
    assert isinstance(body, list) and [a["labels"]["segment"] for a in body] == ["eu", "us"]


def test_sender_with_no_alerts_posts_nothing(receiver: Receiver) -> None:
    AlertmanagerSender(receiver.url).send([], T0)
    assert receiver.requests == []


@pytest.mark.parametrize(("status", "is_retryable"), [(500, True), (503, True), (429, True), (400, False)])
def test_sender_raises_delivery_error_on_http_error(receiver: Receiver, status: int, is_retryable: bool) -> None:
    receiver.statuses = [status]
    with pytest.raises(DeliveryError, match=f"answered HTTP {status}") as info:
        AlertmanagerSender(receiver.url).send([fired().alert], T0)
    assert (info.value.status, info.value.retryable) == (status, is_retryable)
    assert info.value.url == f"{receiver.url}/api/v2/alerts"


def test_sender_does_not_follow_redirects(receiver: Receiver) -> None:
    receiver.statuses = [301]  # urllib would re-issue a POST as a bodiless GET
    with pytest.raises(DeliveryError, match="answered HTTP 301") as info:
        WebhookSender(f"{receiver.url}/hook").send([fired().alert], T0)
    assert not info.value.retryable
    assert len(receiver.requests) == 1


def test_sender_connection_refused_is_retryable() -> None:
    with pytest.raises(DeliveryError, match="Is the receiver running") as info:
        AlertmanagerSender(f"http://127.0.0.1:{free_port()}", timeout_seconds=2).send([fired().alert], T0)
    assert info.value.retryable and info.value.status is None


def test_webhook_sender_posts_status_labels_annotations(receiver: Receiver) -> None:
    WebhookSender(f"{receiver.url}/hook").send([fired("eu").alert, resolved("us").alert], T0 + 601)

    ((path, _, body),) = receiver.requests
    assert path == "/hook"
    assert isinstance(body, dict)
    assert (body["version"], body["sender"], body["sentAt"]) == ("1", "harmonic-monitor", rfc3339(T0 + 601))
    first, second = body["alerts"]
    assert (first["status"], first["endsAt"], first["firedAt"]) == ("firing", None, rfc3339(T0))
    assert (second["status"], second["endsAt"]) == ("resolved", rfc3339(T0 + 600))
    assert first["labels"]["alertname"] == "HarmonicGammaDrift"
    assert first["annotations"]["top_features"] == "f3,f7"
    assert first["fingerprint"] == fired("eu").fingerprint


def test_webhook_sender_rejects_relative_url() -> None:
    with pytest.raises(ConfigError, match="webhook URL must be an absolute http"):
        WebhookSender("/hook")


# ----------------------------------------------------------------------------- worker logic


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"queue_size": 0}, "queue_size must be >= 1"),
        ({"batch_size": 0}, "batch_size must be >= 1"),
        ({"resend_interval_seconds": 0.0}, "resend_interval_seconds must be a finite number > 0"),
        ({"initial_backoff_seconds": math.inf}, "initial_backoff_seconds must be a finite"),
        ({"initial_backoff_seconds": 10.0, "max_backoff_seconds": 5.0}, "must be >= initial_backoff_seconds"),
    ],
)
def test_delivery_worker_rejects_bad_configuration(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        DeliveryWorker(FakeSender(), **kwargs)  # type: ignore[arg-type]


def test_delivery_worker_delivers_a_submitted_alert() -> None:
    sender = FakeSender()
    worker = DeliveryWorker(sender, clock=lambda: T0)
    worker.submit(fired())

    assert worker.queue_depth == 1
    wait = worker.process_once()

    assert [[a.segment for a in alerts] for alerts, _ in sender.calls] == [["eu"]]
    assert (worker.sent_total, worker.queue_depth, worker.failed_total) == (1, 0, 0)
    assert wait == 60.0  # next: the resend of the firing alert


def test_delivery_worker_with_nothing_to_do_waits_forever() -> None:
    assert DeliveryWorker(FakeSender()).process_once(T0) == math.inf


def test_delivery_worker_sends_in_batches() -> None:
    sender = FakeSender()
    worker = DeliveryWorker(sender, batch_size=2)
    for segment in "abcde":
        worker.submit(fired(segment))

    waits = [worker.process_once(T0) for _ in range(3)]

    assert [len(alerts) for alerts, _ in sender.calls] == [2, 2, 1]
    assert waits == [0.0, 0.0, 60.0]


def test_delivery_worker_full_queue_drops_oldest_and_counts() -> None:
    sender = FakeSender()
    worker = DeliveryWorker(sender, queue_size=3, batch_size=10)
    for segment in "abcde":
        worker.submit(fired(segment))

    worker.process_once(T0)

    assert worker.dropped_total == 2
    assert [a.segment for a in sender.calls[0][0]] == ["c", "d", "e"]


def test_delivery_worker_coalesces_updates_of_the_same_alert() -> None:
    sender = FakeSender()
    worker = DeliveryWorker(sender)
    worker.submit(fired("eu"))
    worker.submit(fired("eu"))
    worker.submit(resolved("eu"))

    worker.process_once(T0 + 700)

    ((alerts, _),) = sender.calls
    assert [a.state for a in alerts] == [AlertState.RESOLVED]
    assert worker.dropped_total == 0 and worker.firing_count == 0


def test_delivery_worker_retries_with_capped_exponential_backoff() -> None:
    sender = FakeSender([retryable()] * 5)
    worker = DeliveryWorker(sender, initial_backoff_seconds=1.0, max_backoff_seconds=4.0)
    worker.submit(fired())

    now, waits = T0, []
    for _ in range(6):
        wait = worker.process_once(now)
        waits.append(wait)
        assert worker.process_once(now + wait - 0.01) == pytest.approx(0.01)  # not before its time
        now += wait

    assert waits == [1.0, 2.0, 4.0, 4.0, 4.0, 60.0]
    assert [t - T0 for _, t in sender.calls] == [0.0, 1.0, 3.0, 7.0, 11.0, 15.0]
    assert (worker.failed_total, worker.sent_total) == (5, 1)
    assert worker.last_error == "down"


def test_delivery_worker_backoff_restarts_after_a_success() -> None:
    sender = FakeSender([retryable(), None, retryable()])
    worker = DeliveryWorker(sender, initial_backoff_seconds=1.0, max_backoff_seconds=8.0)
    worker.submit(fired("a"))
    assert worker.process_once(T0) == 1.0
    worker.process_once(T0 + 1)
    worker.submit(fired("b"))
    assert worker.process_once(T0 + 2) == 1.0  # not 2.0: the failure streak was broken


def test_delivery_worker_drops_rejected_batch_without_retrying() -> None:
    rejected = DeliveryError("HTTP 400", url="http://x", status=400, retryable=False)
    sender = FakeSender([rejected])
    worker = DeliveryWorker(sender)
    worker.submit(resolved())

    assert worker.process_once(T0) == math.inf

    assert (worker.rejected_total, worker.failed_total, worker.queue_depth) == (1, 1, 0)
    assert len(sender.calls) == 1


def test_delivery_worker_survives_an_unexpected_sender_exception() -> None:
    sender = FakeSender([ValueError("boom"), None])
    worker = DeliveryWorker(sender, initial_backoff_seconds=0.5)
    worker.submit(fired())

    assert worker.process_once(T0) == 0.5
    worker.process_once(T0 + 0.5)

    assert worker.last_error == "ValueError: boom"
    assert (worker.failed_total, worker.sent_total) == (1, 1)


def test_delivery_worker_resends_firing_alerts_every_interval() -> None:
    sender = FakeSender()
    worker = DeliveryWorker(sender, resend_interval_seconds=30.0)
    worker.submit(fired())
    worker.process_once(T0)

    assert worker.process_once(T0 + 29.9) == pytest.approx(0.1)
    worker.process_once(T0 + 30.0)
    worker.process_once(T0 + 60.0)

    assert [t - T0 for _, t in sender.calls] == [0.0, 30.0, 60.0]
    assert worker.resent_total == 2


def test_delivery_worker_stops_resending_once_resolved_is_delivered() -> None:
    sender = FakeSender()
    worker = DeliveryWorker(sender, resend_interval_seconds=30.0)
    worker.submit(fired())
    worker.process_once(T0)
    worker.submit(resolved())
    worker.process_once(T0 + 10)

    assert worker.process_once(T0 + 1000) == math.inf
    assert [a.state for alerts, _ in sender.calls for a in alerts] == [AlertState.FIRING, AlertState.RESOLVED]


def test_delivery_worker_resend_never_evicts_queued_transitions() -> None:
    sender = FakeSender()
    worker = DeliveryWorker(sender, queue_size=1, resend_interval_seconds=30.0)
    worker.submit(fired("a"))
    worker.process_once(T0)
    worker.submit(resolved("b"))

    worker.process_once(T0 + 31)  # "a" is due for resend, but the outbox is full with "b"

    assert worker.dropped_total == 0
    assert [a.segment for a in sender.calls[-1][0]] == ["b"]


def test_delivery_worker_reset_clears_outbox_and_counters() -> None:
    worker = DeliveryWorker(FakeSender())
    worker.submit(fired())
    worker.process_once(T0)
    worker.reset()
    assert (worker.queue_depth, worker.firing_count, worker.sent_total) == (0, 0, 0)


# ----------------------------------------------------------------------------- worker thread


def test_delivery_worker_thread_delivers_to_a_real_webhook(receiver: Receiver) -> None:
    worker = DeliveryWorker(WebhookSender(f"{receiver.url}/hook", timeout_seconds=2))
    with worker:
        assert worker.running
        worker.submit(fired())
        assert receiver.wait_for_requests(1), "webhook got nothing within 5 s"
    assert not worker.running
    assert worker.sent_total == 1


def test_delivery_worker_thread_retries_until_the_receiver_answers(receiver: Receiver) -> None:
    receiver.statuses = [503, 503]
    worker = DeliveryWorker(AlertmanagerSender(receiver.url), initial_backoff_seconds=0.01, max_backoff_seconds=0.02)
    with worker:
        worker.submit(fired())
        assert receiver.wait_for_requests(3), f"only {len(receiver.requests)} POSTs within 5 s"
    assert (worker.failed_total, worker.sent_total, len(receiver.requests)) == (2, 1, 3)


def test_delivery_worker_stop_flushes_the_queue(receiver: Receiver) -> None:
    worker = DeliveryWorker(AlertmanagerSender(receiver.url))
    worker.start()
    for segment in "abc":
        worker.submit(fired(segment))
    assert worker.stop(timeout_seconds=5)
    assert worker.queue_depth == 0
    assert sorted(a["labels"]["segment"] for body in receiver.bodies for a in body) == ["a", "b", "c"]


def test_delivery_worker_stop_returns_when_the_last_flush_fails() -> None:
    worker = DeliveryWorker(AlertmanagerSender(f"http://127.0.0.1:{free_port()}", timeout_seconds=1))
    worker.start()
    worker.submit(fired())
    assert worker.stop(timeout_seconds=3)
    assert worker.queue_depth == 1 and worker.sent_total == 0


# ----------------------------------------------------------------------------- degraded, secrets


def test_delivery_worker_is_degraded_from_a_failure_until_the_next_success() -> None:
    worker = DeliveryWorker(FakeSender([retryable(), None]), name="alertmanager")
    assert worker.degraded is None
    worker.submit(fired())
    worker.process_once(T0)
    degraded = worker.degraded
    assert degraded is not None
    assert "alert delivery to alertmanager failing (1 failed POSTs since the last success; 1 alerts waiting" in degraded
    worker.process_once(T0 + 60)
    assert worker.degraded is None and worker.sent_total == 1


def test_delivery_worker_logs_a_failure_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    worker = DeliveryWorker(FakeSender([retryable(), retryable()]), name="webhook", initial_backoff_seconds=1.0)
    worker.submit(fired())
    with caplog.at_level("WARNING", logger="monitor.exporters.delivery"):
        worker.process_once(T0)
        worker.process_once(T0 + 1)
    assert [r.getMessage() for r in caplog.records] == ["alert delivery failed; will retry"]


def test_sender_sends_url_credentials_as_basic_auth_and_never_shows_them(receiver: Receiver) -> None:
    host = receiver.url.removeprefix("http://")
    sender = AlertmanagerSender(f"http://am:s3cr%40t@{host}/")
    sender.send([fired().alert], T0)
    ((path, headers, _),) = receiver.requests
    assert path == "/api/v2/alerts"
    assert headers["Authorization"] == "Basic YW06czNjckB0"  # am:s3cr@t
    receiver.statuses = [503]
    with pytest.raises(DeliveryError) as info:
        sender.send([fired().alert], T0)
    assert "s3cr" not in str(info.value) and "s3cr" not in info.value.url
    assert info.value.url == f"http://***@{host}/api/v2/alerts"


def test_sender_error_never_shows_a_token_in_the_query() -> None:
    url = f"http://127.0.0.1:{free_port()}/hook?token=s3cret"
    with pytest.raises(DeliveryError, match=r"/hook\?token=\*\*\* failed") as info:
        WebhookSender(url, timeout_seconds=2).send([fired().alert], T0)
    assert "s3cret" not in str(info.value)


def test_sender_config_error_never_shows_the_password() -> None:
    with pytest.raises(ConfigError, match="absolute http") as info:
        WebhookSender("ftp://user:s3cret@host/hook")
    assert "s3cret" not in str(info.value)


# ----------------------------------------------------------------------------- a receiver that trickles bytes


class Trickler:
    """A real HTTP receiver on 127.0.0.1 that, while ``trickling``, answers one byte every ``pause`` seconds (each
    within any socket timeout), and otherwise answers 200 at once."""

    def __init__(self, pause: float = 0.2) -> None:
        self.trickling = True
        self.pause = pause
        self.stop = threading.Event()
        self.answered = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        self.listener.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
            while len(body) < length:
                body += conn.recv(65536)
            answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            if not self.trickling:
                self.answered += 1  # counted before answering, so the sender never sees it early
                conn.sendall(answer)
                return
            for i in range(len(answer)):  # the status line too: the client waits inside getresponse()
                if self.stop.wait(self.pause):
                    return
                if i == len(answer) - 1:
                    self.answered += 1
                try:
                    conn.sendall(answer[i : i + 1])
                except OSError:  # the client gave up
                    return

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(5)
        self.listener.close()


@pytest.fixture
def trickler() -> Iterator[Trickler]:
    server = Trickler()
    yield server
    server.close()


def test_a_trickling_receiver_is_a_counted_failure_within_the_deadline_and_delivery_resumes(
    trickler: Trickler,
) -> None:
    """Each byte comes within the 5 s socket timeout, the whole answer would take ~14 s: the 1 s deadline ends the
    POST, the failure is counted and degraded; once the receiver answers promptly the alert is delivered."""
    sender = WebhookSender(trickler.url, timeout_seconds=5.0, deadline_seconds=1.0)
    worker = DeliveryWorker(sender, name="webhook", initial_backoff_seconds=1.0)
    worker.submit(fired())
    worker.process_once(T0)
    assert (worker.failed_total, worker.sent_total, trickler.answered) == (1, 0, 0)
    degraded = worker.degraded
    assert degraded is not None and "did not complete within its deadline of 1 s" in degraded
    trickler.trickling = False  # healed
    worker.process_once(T0 + 10.0)
    assert (worker.failed_total, worker.sent_total, trickler.answered) == (1, 1, 1)
    assert worker.degraded is None


def test_the_deadline_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="deadline_seconds must be a finite number > 0; got 0.0"):
        WebhookSender("http://127.0.0.1:9/hook", deadline_seconds=0.0)


def test_a_stalled_tls_handshake_ends_at_the_deadline() -> None:
    """A listener that accepts and never answers the TLS hello: the socket timeout (5 s) is not what ends it."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        sender = WebhookSender(
            f"https://127.0.0.1:{listener.getsockname()[1]}/hook", timeout_seconds=5.0, deadline_seconds=0.5
        )
        with pytest.raises(DeliveryError, match="did not complete within its deadline of 0.5 s") as caught:
            sender.send([fired().alert], T0)
    assert caught.value.retryable is True


# ----------------------------------------------------------------------------- a receiver whose answer never ends


@pytest.mark.parametrize("framing", ["close", "chunked"])
def test_an_endless_answer_body_is_read_to_its_bound_and_the_post_counts_as_delivered(
    framing: Literal["close", "chunked"], caplog: pytest.LogCaptureFixture
) -> None:
    """The receiver takes the alert, answers 200 and streams a body forever: the sender reads 64 KiB of it, closes
    the connection, and the POST is delivered (not a deadline failure), counted and logged once."""
    with EndlessReceiver(framing) as receiver:
        sender = WebhookSender(receiver.url, timeout_seconds=5.0, deadline_seconds=10.0)
        worker = DeliveryWorker(sender, name="webhook")
        worker.submit(fired())
        worker.process_once(T0)
        worker.submit(fired())  # a resend of the same alert: a second oversized answer
        worker.process_once(T0 + 1.0)
    assert (worker.sent_total, worker.failed_total, worker.degraded) == (2, 0, None)
    assert [body["alerts"][0]["status"] for body in receiver.bodies] == ["firing", "firing"]
    assert sender.oversized_answers_total == 2
    # the receiver stops once the client closes; the socket buffers hold a few MiB at most
    assert receiver.sent_bytes < 64 * 1024 * 1024
    warnings = [r.getMessage() for r in caplog.records if "body over 64 KiB" in r.getMessage()]
    assert len(warnings) == 1 and "delivered" in warnings[0], warnings  # rate-limited: one line per minute


def test_an_answer_body_within_the_bound_is_read_whole(receiver: Receiver) -> None:
    assert MAX_ANSWER_BYTES == 64 * 1024
    sender = WebhookSender(receiver.url + "/hook")
    sender.send([fired().alert], T0)
    assert sender.oversized_answers_total == 0
