"""Models with several inputs, a string column and an image tensor, through ``harmonic-monitor run`` on real brokers.

Two models in one sidecar: the scikit-learn ColumnTransformer classifier of the model zoo (three float columns and a
string column, one ONNX input each, converted by skl2onnx; reference from a CSV whose header names the inputs) and
the 8×8 digits CNN (input ``image`` [N, 1, 8, 8]; standardizer from a warm-up window, one scale for all pixels).
Events carry their features as a name→value map with a string value, and as a named nested tensor. Events of the
wrong shape or type are counted by reason and dead-lettered; everything else is scored, and the sidecar never exits.
"""

from __future__ import annotations

import csv
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from sklearn.datasets import load_digits

from monitor import telemetry as tel
from tests import model_zoo
from tests.integration.brokers import Broker
from tests.integration.sidecar import sidecar_in
from tests.integration.test_run_kafka import (
    DRAIN_TIMEOUT_SECONDS,
    MAX_EVENT_BYTES,
    Message,
    committed_offsets,
    group_name,
    merge_ends,
    produce,
    read_topic,
)

pytestmark = pytest.mark.integration

TABULAR, DIGITS = "tabular", "digits"
EVENTS_PER_MODEL = 300
COLOURS = ("red", "green", "blue")


def _tabular_rows(count: int, seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "x1": float(rng.normal()),
            "x2": float(rng.normal(2.0, 0.5)),
            "x3": float(rng.uniform(-1, 1)),
            "colour": COLOURS[int(rng.integers(0, 3))],
        }
        for _ in range(count)
    ]


def _event(model: str, event_id: str, features: object, now_ms: int) -> Message:
    doc = {"id": event_id, "model": model, "ts": now_ms, "segment": "eu", "features": features}
    return (event_id.encode(), json.dumps(doc).encode())


def test_run_scores_mixed_type_and_image_events_and_counts_bad_shapes(
    kafka_broker: Broker, topic: str, tmp_path: Path
) -> None:
    tabular = model_zoo.build_column_transformer_classifier(tmp_path)
    digits = model_zoo.build_cnn_digits(tmp_path)
    reference = tmp_path / "tabular_reference.csv"
    with open(reference, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["x1", "x2", "x3", "colour"])
        writer.writeheader()
        writer.writerows(_tabular_rows(400, seed=1))
    dlq = f"{topic}-dlq"
    kafka_broker.create_topic(dlq, 1)
    config = tmp_path / "monitor.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "models": [
                    {"name": TABULAR, "path": str(tabular.path), "reference": str(reference)},
                    {
                        "name": DIGITS,
                        "path": str(digits.path),
                        "warmup_events": 50,
                        "scoring": {"scale": "global", "radius": 0.3},
                    },
                ],
                "kafka": {"dead_letter_topic": dlq},
                "sampler": {"events_per_second": 0},
                "max_event_bytes": MAX_EVENT_BYTES,
            }
        )
    )
    now_ms = int(time.time() * 1000)
    images = load_digits().images.astype(float)
    good = [_event(TABULAR, f"t{i}", row, now_ms + i) for i, row in enumerate(_tabular_rows(EVENTS_PER_MODEL, 2))]
    good += [
        _event(DIGITS, f"d{i}", {"image": [images[i % len(images)].tolist()]}, now_ms + i)
        for i in range(EVENTS_PER_MODEL)
    ]
    row = _tabular_rows(1, 3)[0]
    image = [images[0].tolist()]
    bad = [
        (_event(TABULAR, "b-colour", {**row, "colour": 5}, now_ms), "bad_type"),
        (_event(TABULAR, "b-missing", {k: v for k, v in row.items() if k != "x3"}, now_ms), "missing_field"),
        (_event(TABULAR, "b-unknown", {**row, "x9": 1.0}, now_ms), "unknown_feature"),
        (_event(TABULAR, "b-text", {**row, "x1": "high"}, now_ms), "bad_type"),
        (_event(TABULAR, "b-list", [1.0, 2.0, 3.0], now_ms), "bad_type"),
        (_event(DIGITS, "b-shape", {"image": [[r[:7] for r in image[0]]]}, now_ms), "bad_type"),
        (_event(DIGITS, "b-depth", {"image": image[0]}, now_ms), "bad_type"),
    ]
    reasons = Counter(reason for _, reason in bad)
    group = group_name()
    with sidecar_in(tmp_path, kafka_broker, topic=topic, group_id=group, config=config) as car:
        models = car.wait_ready()["models"]
        # /readyz says what each model's inputs were read as: the string column held fixed, with the 3 colours the
        # CSV reference counted; the image perturbed whole
        assert models[TABULAR]["inputs"][-1] == "'colour' string [batch, 1]", models[TABULAR]
        assert (models[TABULAR]["held"], models[TABULAR]["held_categories"]) == (["colour"], {"colour": 3})
        assert (len(models[DIGITS]["inputs"]), models[DIGITS]["held"]) == (1, []), models[DIGITS]
        ends = merge_ends(produce(kafka_broker, topic, good), produce(kafka_broker, topic, [m for m, _ in bad]))
        settled = car.wait_for_metrics(
            lambda s: committed_offsets(kafka_broker, topic, group) == ends,
            "every record applied and committed",
            DRAIN_TIMEOUT_SECONDS * 2,
            settle_seconds=1.0,
        )
        assert car.running, car.log_tail()
        assert settled.total(tel.EVENTS_CONSUMED_TOTAL.name) == len(good) + len(bad)
        invalid = {k: v for k, v in settled.by_label(tel.EVENTS_INVALID_TOTAL.name, "reason").items() if v}
        assert invalid == dict(reasons), car.log_tail()
        scored = settled.by_label(tel.EVENTS_SCORED_TOTAL.name, "model")
        # the digits' first 50 events fit the standardizer (the warm-up) and are not scored
        assert scored == {TABULAR: EVENTS_PER_MODEL, DIGITS: EVENTS_PER_MODEL - 50}, scored
        gamma = settled.by_label("harmonic_gamma_count", "model")
        assert gamma.get(TABULAR, 0) > 0 and gamma.get(DIGITS, 0) > 0
        dead = read_topic(kafka_broker, dlq, lambda r: len(r) >= len(bad), "the dead letters", partitions=1)
        assert Counter(r.key.decode() for r in dead if r.key) == reasons
        code, _ = car.terminate()
    assert code == 0, car.log_tail()
