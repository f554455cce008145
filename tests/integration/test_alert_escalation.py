"""End to end: a segment that escalates from input-shift to harmful-shift, as a webhook receiver hears it.

The production :class:`~monitor.runtime.service.Service` (decode → score a 2-input ONNX classifier → windows, drift,
verdicts, alerts → delivery) reads a paced replay and posts to a real HTTP webhook receiver. The classifier reads
only its first input. The stream is stable, then its second input moves (the outputs do not: input-shift), then the
first input moves onto a decision boundary too (the confidence and margin fall, evidence of a loss: harmful-shift; γ
rising alone would be fragility on input-shift) while the second stays moved. The receiver must hear
HarmonicInputDrift fire and never resolve while the inputs are off, HarmonicHarmfulShift fire with a ``signal`` label
of what fired, summaries under 200 characters, and each firing alert again no sooner than
``alerts.repeat_interval_seconds`` (10 s here; 4 h by default) after its last POST.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.config import load_settings
from monitor.runtime.alert_conditions import HARM_SIGNALS, HARMFUL_ALERT, INPUT_ALERT
from monitor.runtime.models import load_model_runtime
from monitor.runtime.service import Service
from monitor.source.replay import ReplaySource
from tests.integration.alertmanager_service import NotificationReceiver
from tests.unit import onnx_graphs

pytestmark = pytest.mark.integration

RATE = 500.0  # events per second
#: events of each phase: stable, the second input moved, both moved (harmful); the last outlasts the test
PHASES = (1500, 2500, 30_000)
REPEAT_SECONDS = 10.0
#: bound on each alert reaching the receiver (liveness, not timing)
DEADLINE_SECONDS = 60.0


def _events(rng: np.random.Generator) -> list[bytes]:
    start = time.time()
    lines: list[bytes] = []
    for phase, n in enumerate(PHASES):
        x = rng.normal(0.0, 1.0, (n, 2))
        if phase >= 1:
            x[:, 1] += 3.0  # an input the model does not read: the outputs do not move
        if phase == 2:
            # the input it reads, moved onto a boundary between classes (x[0] = ±0.25: logits 4·x[0] and 1 tie), where
            # max-probability is about 0.47, below the reference's 10th percentile (about 0.52): the confidence falls.
            # (Squeezed onto 0 it would sit in class 1's core, max-probability 0.58, no fall: fragility, not harm.)
            x[:, 0] = rng.choice([-0.25, 0.25], n) + rng.normal(0.0, 0.03, n)
        for row in x:
            i = len(lines)
            doc = {"id": f"e{i}", "model": "credit", "features": row.tolist(), "ts": int((start + i / RATE) * 1000)}
            lines.append(json.dumps(doc).encode())
    return lines


@pytest.fixture
def receiver() -> Iterator[NotificationReceiver]:
    server = NotificationReceiver()
    server.start()
    try:
        yield server
    finally:
        server.close()


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_an_escalation_keeps_the_input_alert_firing_and_repeats_follow_the_interval(
    receiver: NotificationReceiver, tmp_path: Path
) -> None:
    rng = np.random.default_rng(5)
    model = onnx_graphs.linear_classifier(
        tmp_path / "credit.onnx", [[4.0, 0.0, -4.0], [0.0, 0.0, 0.0]], [0.0, 1.0, 0.0]
    )
    np.save(tmp_path / "reference.npy", rng.normal(0.0, 1.0, (2000, 2)))
    settings = load_settings(
        None,
        {
            "models": [{"name": "credit", "path": str(model), "reference": str(tmp_path / "reference.npy")}],
            "sampler": {"events_per_second": 0},
            "batch": {"max_events": 100, "max_wait_ms": 50},
            "drift": {"window": 500, "every": 100},
            "alerts": {
                "webhook_url": receiver.url,
                "for_seconds": 0.5,
                "resolve_after_seconds": 2.0,  # a spurious resolve would come quickly
                "repeat_interval_seconds": REPEAT_SECONDS,
            },
            "probes": {"enabled": False},
            "state_dir": str(tmp_path / "state"),
        },
    )
    service = Service(
        settings,
        ReplaySource(_events(rng), rate=RATE),
        [load_model_runtime(m) for m in settings.models],
        serve_metrics=False,
    )
    stop = threading.Event()
    with service:
        worker = threading.Thread(target=service.run, args=(stop,), name="escalation-sidecar", daemon=True)
        worker.start()
        try:

            def firing(name: str) -> Any:
                return lambda a: a["status"] == "firing" and a["labels"]["alertname"] == name

            receiver.wait_for_alert(firing(INPUT_ALERT), DEADLINE_SECONDS)
            harmful = receiver.wait_for_alert(firing(HARMFUL_ALERT), DEADLINE_SECONDS)
            fired_at = _seconds(harmful["firedAt"])

            def repeated(a: dict[str, Any]) -> bool:  # both alerts posted again, one interval after the harmful fired
                return firing(HARMFUL_ALERT)(a) and _seconds(a["startsAt"]) <= fired_at and a is not harmful

            receiver.wait_for_alert(repeated, DEADLINE_SECONDS)
        finally:
            stop.set()
            worker.join(30)
    assert not worker.is_alive()
    posts: list[tuple[float, dict[str, Any]]] = [
        (_seconds(note["sentAt"]), a) for note in receiver.notifications for a in note["alerts"]
    ]
    by_name: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    for sent, a in posts:
        by_name.setdefault(a["labels"]["alertname"], []).append((sent, a))
    inputs = by_name[INPUT_ALERT]
    # never "resolved" while the inputs are off (they stay off to the end)
    assert [a["status"] for _, a in inputs] == ["firing"] * len(inputs), [a["annotations"] for _, a in inputs]
    assert len(inputs) >= 2  # fired, then re-sent after the repeat interval
    for name, sent in by_name.items():
        times = [t for t, a in sent if a["status"] == "firing"]
        gaps = np.diff(times)
        assert (gaps >= REPEAT_SECONDS - 1e-3).all(), (name, times)  # no re-POST within the repeat interval
    for _, a in posts:
        notes = a["annotations"]
        assert len(notes["summary"]) < 200 and notes["summary"].startswith(f"{a['labels']['alertname']} credit/other: ")
        assert "fired" not in notes and not notes["description"].startswith("fired:")
    (signal,) = {a["labels"]["signal"] for _, a in by_name[HARMFUL_ALERT]}
    assert signal != "gamma_flicker" and set(signal.split("+")) <= set(HARM_SIGNALS), signal
    assert set(signal.split("+")) & {"confidence", "margin"}, signal  # harm evidence, not γ or flicker alone
    fired_on = {e["detector"].split("_", 1)[0] for e in by_name[HARMFUL_ALERT][0][1]["evidence"]}
    assert set(signal.split("+")) <= fired_on, (signal, fired_on)  # the label names what fired, in the evidence
    moved = inputs[0][1]["annotations"]["top_features"].split(",")
    assert moved and moved[0] in {"x[1]", "input[1]"}, inputs[0][1]["annotations"]
    # the harmful summary says the loss in plain words and where, the detectors' numbers are in the description
    summary = by_name[HARMFUL_ALERT][0][1]["annotations"]["summary"]
    assert "CUSUM" not in summary and ("confidence fell: " in summary or "margins narrowed: " in summary), summary
    assert f"inputs moved: {moved[0]}" in summary, summary
