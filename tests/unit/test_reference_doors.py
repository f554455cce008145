"""One reference from every door: ``harmonic-monitor reference`` and ``monitor.reference`` build the same reference
for the same rows (the count tables of the string inputs over every row, the scored sample, the per-segment
baselines, the standardizer), a segment column that is also a model input stays an input, and the categorical drift
of a reference built in a notebook fires in a replay.

The model: a 2-class classifier of ``a``, ``b`` (floats), ``channel`` and ``city`` (strings).
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd
import pytest
from onnx import TensorProto, helper

import monitor
from monitor.cli import main
from monitor.config import ModelSettings
from monitor.drift.categories import OTHER_KEY
from monitor.errors import DataError
from monitor.model.onnx import OnnxModel
from monitor.runtime.models import read_segmented_reference_rows

CHANNELS = ("web", "app", "branch")
CHANNEL_SHARES = (0.5, 0.45, 0.05)
CITIES = ("paris", "oslo", "rome")
REGIONS = ("north", "south")
N_ROWS = 900
#: fewer than each region's rows: every segment is sampled, the count tables still cover every row
SAMPLE_ROWS = 300


def channel_city_classifier(path: Path) -> Path:
    """logit = a − b + value(channel) + value(city); logits [−logit, logit] → Softmax → probabilities [N, 2]."""

    def encoder(name: str, keys: tuple[str, ...], values: list[float]) -> onnx.NodeProto:
        return helper.make_node(
            "LabelEncoder",
            [name],
            [f"{name}_value"],
            domain="ai.onnx.ml",
            keys_strings=list(keys),
            values_floats=values,
            default_float=0.0,
        )

    nodes = [
        encoder("channel", CHANNELS, [0.0, 0.5, -1.0]),
        encoder("city", CITIES, [0.5, -0.5, 0.2]),
        helper.make_node("Sub", ["a", "b"], ["ab"]),
        helper.make_node("Add", ["ab", "channel_value"], ["abc"]),
        helper.make_node("Add", ["abc", "city_value"], ["logit"]),
        helper.make_node("Neg", ["logit"], ["minus"]),
        helper.make_node("Concat", ["minus", "logit"], ["logits"], axis=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 1]) for n in ("a", "b")]
    inputs += [helper.make_tensor_value_info(n, TensorProto.STRING, ["N", 1]) for n in ("channel", "city")]
    outputs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 2]),
        helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 2]),
    ]
    graph = helper.make_graph(nodes, "channel_city", inputs, outputs, initializer=[])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 2)], ir_version=8
    )
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def rows(n: int, seed: int, *, channel: str | None = None) -> list[dict[str, Any]]:
    """n rows of the model's inputs and a region (the segment), ``channel`` fixed when given."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(
            {
                "a": float(rng.normal()),
                "b": float(rng.normal()),
                "channel": channel or str(rng.choice(CHANNELS, p=CHANNEL_SHARES)),
                "city": str(rng.choice(CITIES)),
                "region": REGIONS[i % 2],
            }
        )
    return out


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return channel_city_classifier(tmp_path_factory.mktemp("doors") / "channel_city.onnx")


@pytest.fixture(scope="module")
def reference_csv(model: Path) -> Path:
    path = model.parent / "train.csv"  # floats written as repr: read back exactly
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=["a", "b", "channel", "city", "region"])
        writer.writeheader()
        writer.writerows(rows(N_ROWS, seed=1))
    return path


def cli_reference(model: Path, data: Path, out: Path, *extra: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["reference", "--model", str(model), "--data", str(data), "--out", str(out), *extra])
    return code, err.getvalue()


def document(path: Path) -> dict[str, Any]:
    """The reference JSON without the model's path (the one field the doors may write differently)."""
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    doc.pop("model")
    return doc


def test_the_cli_and_the_api_write_the_same_reference_for_the_same_rows(
    model: Path, reference_csv: Path, tmp_path: Path
) -> None:
    code, err = cli_reference(
        model,
        reference_csv,
        tmp_path / "cli.json",
        "--segment-column",
        "region",
        "--sample-rows",
        str(SAMPLE_ROWS),
    )
    assert code == 0, err
    frame = pd.DataFrame(rows(N_ROWS, seed=1))
    monitor.reference(model, frame, segment_column="region", sample_rows=SAMPLE_ROWS, out=tmp_path / "api.json")
    cli, api = document(tmp_path / "cli.json"), document(tmp_path / "api.json")
    assert api["reference"]["held_tables"] == cli["reference"]["held_tables"]
    assert api["segments"] == cli["segments"]
    assert api["standardizer"] == cli["standardizer"]
    assert api == cli  # and everything else: samples, held sample, space
    # the count tables cover every row, not the scored sample; each region's its own rows
    channel = cli["reference"]["held_tables"]["channel"]
    assert sum(channel.values()) == N_ROWS and set(channel) == {*CHANNELS, OTHER_KEY}
    assert cli["reference"]["n_events"] == 2 * SAMPLE_ROWS
    baselines = cli["segments"]["baselines"]
    assert sorted(baselines) == list(REGIONS) and cli["segments"]["column"] == "region"
    assert all(sum(b["held_tables"]["channel"].values()) == N_ROWS // 2 for b in baselines.values())


def test_a_segment_column_that_is_also_an_input_stays_an_input(
    model: Path, reference_csv: Path, tmp_path: Path
) -> None:
    plain = tmp_path / "cities.csv"
    frame = pd.DataFrame(rows(N_ROWS, seed=1)).drop(columns="region")
    frame.to_csv(plain, index=False)
    code, err = cli_reference(model, plain, tmp_path / "cli.json", "--segment-column", "city")
    assert code == 0, err
    cli = document(tmp_path / "cli.json")
    assert sorted(cli["segments"]["baselines"]) == sorted(CITIES) and cli["segments"]["column"] == "city"
    assert set(cli["reference"]["held_tables"]) == {"channel", "city"}  # city was read as the model's input
    city = cli["reference"]["held_tables"]["city"]
    for name, baseline in cli["segments"]["baselines"].items():
        assert baseline["held_tables"]["city"] == {name: city[name], OTHER_KEY: 0}
    monitor.reference(model, plain, segment_column="city", out=tmp_path / "api.json")
    assert document(tmp_path / "api.json") == cli


def test_an_error_in_a_segmented_csv_names_the_users_file(model: Path, tmp_path: Path) -> None:
    bad = tmp_path / "train.csv"
    lines = ["a,channel,city,region"] + [f"{i * 0.1},web,paris,north" for i in range(20)]
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, err = cli_reference(model, bad, tmp_path / "ref.json", "--segment-column", "region")
    assert code == 2
    assert f"'{bad}' lacks columns 'b'" in err and "harmonic-segments" not in err, err


def test_categorical_drift_fires_in_a_replay_with_a_reference_built_from_a_frame(
    model: Path, reference_csv: Path, tmp_path: Path
) -> None:
    """From event 1,500 every event comes from the rare channel ``branch``: the verdict of each region leaves
    stable on ``held_inputs`` and names ``channel``."""
    frame = pd.DataFrame(rows(N_ROWS, seed=1))
    ref = monitor.reference(model, frame, segment_column="region", out=tmp_path / "ref.json")
    assert ref.reference.held_tables["channel"]["branch"] > 0
    events = rows(1500, seed=2) + rows(1000, seed=3, channel="branch")
    lines = [
        json.dumps(
            {
                "id": f"e{i}",
                "model": "cc",
                "ts": 1_795_000_000_000 + 10 * i,
                "segment": r.pop("region"),
                "features": r,
            }
        )
        for i, r in enumerate(events)
    ]
    (tmp_path / "events.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "cfg.yaml").write_text("alerts:\n  for_seconds: 1\nbatch:\n  max_events: 100\n", encoding="utf-8")
    timeline = monitor.replay(model, tmp_path / "events.jsonl", ref, config=tmp_path / "cfg.yaml", model_name="cc")
    changes = list(timeline.changes)
    assert changes, "no verdict changed"
    assert {c["segment"] for c in changes} == set(REGIONS), changes
    for c in changes:
        assert c["index"] >= 1500 and c["verdict"] != "stable", changes
    first = {c["segment"]: c for c in reversed(changes)}
    assert all("held_inputs" in c["detectors"] and "channel" in c["features"] for c in first.values()), changes


def test_run_reads_a_csv_reference_whose_segment_column_is_an_input(
    model: Path, reference_csv: Path, tmp_path: Path
) -> None:
    """``segments.reference_column: city`` for ``run`` and ``replay``: the CSV's city is each row's segment and the
    model's input."""
    plain = tmp_path / "cities.csv"
    pd.DataFrame(rows(N_ROWS, seed=1)).drop(columns="region").to_csv(plain, index=False)
    settings = ModelSettings(name="cc", path=model, reference=plain)
    x, held, segments = read_segmented_reference_rows(settings, OnnxModel(str(model)), "city")
    assert x.shape == (N_ROWS, 2) and held is not None
    np.testing.assert_array_equal(held.values["city"].reshape(-1), segments)
    assert sorted(set(segments.tolist())) == sorted(CITIES)


def test_the_api_names_a_segment_column_it_cannot_read(model: Path) -> None:
    frame = pd.DataFrame(rows(20, seed=4))
    with pytest.raises(DataError, match=r"segment_column 'zone': the DataFrame has no such column \(it has 'a'"):
        monitor.reference(model, frame, segment_column="zone")
    inputs = {k: frame[[k]].to_numpy() for k in ("a", "b", "channel", "city")}
    with pytest.raises(DataError, match="pass a DataFrame or a CSV path"):
        monitor.reference(model, inputs, segment_column="region")
