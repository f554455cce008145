"""End to end: ``harmonic-monitor run`` scores a candidate beside the served model on a real Kafka 0.9 broker.

The served model is linear; the candidate (``compare_with: credit``) takes the same decisions with curved logits, so
on traffic shifted away from the reference its P_adj is lower: more fragile, and better on nothing. The candidate gets
no events of its own; every event of the served model is scored on both, and ``/metrics`` carries the paired
differences, the disagreement rate and ``harmonic_compare_verdict`` per segment.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from monitor import telemetry as tel
from monitor.runtime.candidate import COMPARE_EVERY
from tests.integration.brokers import Kafka09Broker
from tests.integration.sidecar import Scrape, sidecar_in
from tests.integration.test_run_kafka import DRAIN_TIMEOUT_SECONDS, group_name, new_topic, produce
from tests.unit import onnx_graphs

pytestmark = pytest.mark.integration

SERVED, CANDIDATE = "credit", "credit-v2"
SEGMENTS = ("eu", "us")
EVENTS = 1600
#: the served model's weights and bias (its candidate curves the same logits)
WEIGHTS, BIAS = [[0.0, 1.0], [0.0, -1.0]], [0.0, 0.2]
#: paired events between two comparisons (candidate.COMPARE_EVERY): a backlog's events are placed near the watermark,
#: so a comparison comes from their count, not from their seconds
COMPARED = COMPARE_EVERY


def worse(scrape: Scrape) -> set[str]:
    """Segments whose comparison verdict is candidate-worse."""
    return {
        lab["segment"]
        for lab, v in scrape.samples.get(tel.COMPARE_VERDICT.name, [])
        if lab["model"] == SERVED and lab["candidate"] == CANDIDATE and lab["verdict"] == "candidate-worse" and v == 1
    }


def configured(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, Path]:
    """The settings of SERVED (linear, a reference of 400 rows) and CANDIDATE beside it (the same decisions with
    curved logits: more fragile); the config's path and the candidate's."""
    weights, bias = WEIGHTS, BIAS
    served = onnx_graphs.linear_classifier(tmp_path / "served.onnx", weights, bias)
    candidate = onnx_graphs.linear_classifier(tmp_path / "cand.onnx", weights, bias, curvature=[0.3, 0.3])
    reference = tmp_path / "reference.csv"
    np.savetxt(reference, rng.normal(0.0, 1.0, (400, 2)), delimiter=",")
    config = tmp_path / "monitor.yaml"
    settings = {
        "models": [
            {"name": SERVED, "path": str(served), "reference": str(reference)},
            {"name": CANDIDATE, "path": str(candidate), "compare_with": SERVED},
        ],
        "sampler": {"events_per_second": 0},
        "batch": {"max_events": 100},
        "probes": {"enabled": False},
    }
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return config, candidate


def shifted(
    rng: np.random.Generator, n: int, start_ms: float, first: int, spacing_ms: int = 5
) -> list[tuple[bytes, bytes]]:
    """``n`` events of the served model shifted away from the reference, ``spacing_ms`` apart, alternating segments."""
    rows = rng.normal(2.5, 1.0, (n, 2))
    return [
        (
            SEGMENTS[i % 2].encode(),
            json.dumps(
                {
                    "id": f"e{first + i}",
                    "ts": int(start_ms + i * spacing_ms),
                    "model": SERVED,
                    "features": rows[i].tolist(),
                    "segment": SEGMENTS[i % 2],
                }
            ).encode(),
        )
        for i in range(n)
    ]


def test_run_scores_a_candidate_on_the_served_models_events(kafka09_broker: Kafka09Broker, tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    config, _ = configured(tmp_path, rng)
    topic = new_topic(kafka09_broker, "candidate", partitions=1)
    start = time.time() * 1000 - 25_000
    messages = shifted(rng, EVENTS, start, 0, spacing_ms=10)
    # last, one producer's clock a day ahead: placed at the watermark, it cannot carry the windows past every event
    ahead = {"id": "ahead", "ts": int(start + 86_400_000), "model": SERVED, "features": [2.5, 2.5], "segment": "eu"}
    messages.append((b"eu", json.dumps(ahead).encode()))
    sidecar = sidecar_in(tmp_path, kafka09_broker, topic=topic, group_id=group_name(), config=config)
    with sidecar:
        detail = sidecar.wait_ready()
        assert detail["candidates"] == {CANDIDATE: SERVED} and list(detail["models"]) == [SERVED]
        produce(kafka09_broker, topic, messages)
        settled = sidecar.wait_for_metrics(
            lambda s: s.total(tel.EVENTS_SCORED_TOTAL.name, model=SERVED) > EVENTS and worse(s) == set(SEGMENTS),
            f"{EVENTS + 1} events scored and {CANDIDATE} candidate-worse in every segment",
            DRAIN_TIMEOUT_SECONDS,
            settle_seconds=0.5,
        )
        code, _ = sidecar.terminate()
    assert code == 0, sidecar.log_tail()
    assert settled.total(tel.EVENTS_SCORED_TOTAL.name, model=CANDIDATE) == 0  # not served: no events of its own
    assert settled.total(tel.MODEL_EVALUATIONS_TOTAL.name, model=CANDIDATE, purpose="events") > 0
    for segment in SEGMENTS:
        where = {"model": SERVED, "candidate": CANDIDATE, "segment": segment, "window": "60s"}
        upper = settled.value(tel.COMPARE_DIFFERENCE_UPPER.name, axis="p_adj", **where)
        assert upper is not None and upper < 0, (segment, upper)  # candidate − served: surely lower P_adj
        events = settled.value(tel.COMPARE_EVENTS.name, **where)
        assert events is not None and events >= 400, (segment, events)
        assert settled.value(tel.COMPARE_DISAGREEMENT_RATIO.name, **where) == 0.0  # the same decisions
        others = [
            v
            for lab, v in settled.samples[tel.COMPARE_VERDICT.name]
            if lab["segment"] == segment and lab["verdict"] != "candidate-worse"
        ]
        assert others == [0.0, 0.0, 0.0]
    # the served model's own drift verdict is its own series, untouched by the comparison
    assert all(lab["model"] == SERVED for lab, _ in settled.samples.get(tel.DRIFT_VERDICT.name, []))


def verdicts(scrape: Scrape) -> dict[str, str]:
    """Each segment's current comparison verdict."""
    return {
        lab["segment"]: lab["verdict"]
        for lab, v in scrape.samples.get(tel.COMPARE_VERDICT.name, [])
        if lab["model"] == SERVED and lab["candidate"] == CANDIDATE and v == 1
    }


def test_run_reloads_a_replaced_candidate_file_and_refuses_one_that_does_not_fit(
    kafka09_broker: Kafka09Broker, tmp_path: Path
) -> None:
    rng = np.random.default_rng(11)
    config, candidate = configured(tmp_path, rng)
    topic = new_topic(kafka09_broker, "candidate-file", partitions=1)
    start = time.time() * 1000 - 12_000
    sidecar = sidecar_in(tmp_path, kafka09_broker, topic=topic, group_id=group_name(), config=config)
    with sidecar:
        sidecar.wait_ready()
        produce(kafka09_broker, topic, shifted(rng, COMPARED, start, 0))
        sidecar.wait_for_metrics(
            lambda s: set(verdicts(s).values()) == {"candidate-worse"} and len(verdicts(s)) == 2,
            f"{CANDIDATE} candidate-worse in every segment",
            DRAIN_TIMEOUT_SECONDS,
        )
        # replaced (as `mv` replaces it) by the served model's twin: loaded again, compared afresh
        onnx_graphs.linear_classifier(tmp_path / "twin.onnx", WEIGHTS, BIAS).replace(candidate)
        sidecar.wait_until(
            lambda: sidecar.readyz()[1]["candidate_files"][CANDIDATE]["reloads"] == 1, "the candidate reloaded", 30
        )
        produce(
            kafka09_broker, topic, shifted(rng, COMPARED, max(start + 10_000, time.time() * 1000 - 10_000), COMPARED)
        )
        sidecar.wait_for_metrics(
            lambda s: set(verdicts(s).values()) == {"no-difference"} and len(verdicts(s)) == 2,
            f"{CANDIDATE} no-difference in every segment after its file was replaced",
            DRAIN_TIMEOUT_SECONDS,
        )
        # replaced by a model of another width: refused, its verdicts gone; the served model goes on
        onnx_graphs.linear_classifier(tmp_path / "wide.onnx", np.ones((3, 2)), [0.0, 0.0]).replace(candidate)
        refused = sidecar.wait_for_metrics(
            lambda s: s.value(tel.COMPARE_CANDIDATE_UP.name, model=SERVED, candidate=CANDIDATE) == 0.0,
            f"{CANDIDATE} refused",
            30,
        )
        _, detail = sidecar.readyz()
        code, _ = sidecar.terminate()
    assert code == 0, sidecar.log_tail()
    assert verdicts(refused) == {}
    assert "'credit' takes 2 inputs" in detail["candidate_files"][CANDIDATE]["refused"]
    log = sidecar.log_tail(400)
    assert "candidate 'credit-v2' reloaded" in log and "candidate 'credit-v2' refused" in log
