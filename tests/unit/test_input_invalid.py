"""Missing, non-finite and out-of-range values are counted per input: the decoder names the input at fault and the
model it belongs to, ``DeadLetters`` counts ``harmonic_input_invalid_total{model, feature, problem}`` (bounded per model),
and ``replay`` reports the same counts."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor import telemetry as tel
from monitor.errors import INPUT_PROBLEMS, InvalidEventError
from monitor.exporters.prometheus import MetricsState
from monitor.logs import RateLimitedLogger
from monitor.runtime.dead_letters import INPUT_SERIES_MAX, DeadLetters
from monitor.source.decode import EventDecoder
from monitor.source.replay import ReplaySource
from monitor.source.validate import ModelSchema
from tests.unit.test_decode_signatures import decoder as signature_decoder
from tests.unit.test_decode_signatures import event as signature_event
from tests.unit.test_pipeline import MODEL, drain, make_pipeline, make_settings, rows
from tests.unit.test_pipeline import event as pipeline_event
from tests.unit.test_pipeline import events as pipeline_events

TS = 1_790_000_000_000
METRIC = tel.INPUT_INVALID_TOTAL.name


def fault(dec: EventDecoder, doc: dict[str, Any]) -> InvalidEventError:
    with pytest.raises(InvalidEventError) as info:
        dec.decode(json.dumps({"id": "e1", "ts": TS, **doc}).encode())
    return info.value


def named() -> EventDecoder:
    return EventDecoder({"credit": ModelSchema(3, ("age", "income", "debt"))}, default_model="credit")


def test_a_named_models_faulty_values_name_their_input_and_problem() -> None:
    missing = fault(named(), {"features": {"age": 30, "debt": 1.0}})
    assert (missing.reason, missing.model, missing.inputs) == ("missing_field", "credit", (("income", "missing"),))
    null = fault(named(), {"features": {"age": 30, "income": None, "debt": 1.0}})
    assert (null.reason, null.inputs) == ("bad_type", (("income", "missing"),))
    nan = fault(named(), {"features": [30, float("nan"), 1.0]})
    assert (nan.reason, nan.model, nan.inputs) == ("not_finite", "credit", (("income", "not_finite"),))
    huge = fault(named(), {"features": {"age": 30, "income": 1, "debt": 1e39}})
    assert (huge.reason, huge.inputs) == ("out_of_range", (("debt", "out_of_range"),))
    both = fault(named(), {"features": {"debt": 1.0}})
    assert both.inputs == (("age", "missing"), ("income", "missing"))


def test_a_model_without_names_or_signature_numbers_its_inputs() -> None:
    dec = EventDecoder({"m": ModelSchema(3)}, default_model="m")
    assert fault(dec, {"features": [0.0, 1.0, float("inf")]}).inputs == (("f2", "not_finite"),)
    assert fault(dec, {"features": [None, 1.0, 2.0]}).inputs == (("f0", "missing"),)


def test_faults_that_are_not_one_inputs_value_name_no_input() -> None:
    for doc in (
        {"features": [1.0, 2.0]},  # wrong width
        {"features": [1.0, "x", 2.0]},  # a string for a number: a type fault, not a missing value
        {"model": "nobody", "features": [1.0, 2.0, 3.0]},
    ):
        assert fault(named(), doc).inputs == (), doc


def test_signature_models_name_the_input_tensor_or_element_at_fault() -> None:
    def refused(model: str, features: object) -> InvalidEventError:
        with pytest.raises(InvalidEventError) as info:
            signature_decoder().decode(signature_event(model, features))
        return info.value

    lacks_city = refused("mixed", {"a": 0.5, "b": [1, 2]})
    assert (lacks_city.model, lacks_city.inputs) == ("mixed", (("city", "missing"),))
    assert refused("mixed", {"a": 0.5, "b": [1, 2], "city": None}).inputs == (("city", "missing"),)
    # a tensor's element by the name its drift gauges carry (b[1]), not by the tensor's
    assert refused("mixed", {"a": 0.5, "b": [1, float("nan")], "city": "oslo"}).inputs == (("b[1]", "not_finite"),)
    assert refused("mixed", {"a": 0.5, "b": [None, 2], "city": "oslo"}).inputs == (("b[0]", "missing"),)
    assert refused("mixed", {"a": 0.5, "b": [1, 10**400], "city": "oslo"}).inputs == (("b[1]", "out_of_range"),)
    assert refused("mixed", {"a": 1e39, "b": [1, 2], "city": "oslo"}).inputs == (("a", "out_of_range"),)
    assert refused("mixed", {"a": None, "b": [1, 2], "city": "oslo"}).inputs == (("a", "missing"),)
    by_element = refused("mixed", {"a": 0.5, "b[0]": 1, "city": "oslo"})
    assert by_element.inputs == (("b[1]", "missing"),)
    assert refused("side", {"x": [1, 2, 3], "id": 10**30}).inputs == ()  # an int beyond int64: a type fault


def test_ingest_counts_each_input_once_per_event_and_bounds_the_series_per_model() -> None:
    state = MetricsState()
    dead_letters = DeadLetters(
        make_settings_for_ingest(), state, None, RateLimitedLogger(logging.getLogger(__name__)), ["m"]
    )
    for i in range(INPUT_SERIES_MAX + 3):
        dead_letters.count_inputs(InvalidEventError("missing_field", "x", model="m", inputs=((f"in{i}", "missing"),)))
    dead_letters.count_inputs(InvalidEventError("not_finite", "x", model="m", inputs=(("in0", "not_finite"),)))
    dead_letters.count_inputs(InvalidEventError("not_json", "x"))  # no model, no input: nothing per input
    assert state.counter(METRIC, ("m", "in0", "missing")) == 1
    assert state.counter(METRIC, ("m", "in0", "not_finite")) == 1
    assert state.counter(METRIC, ("m", f"in{INPUT_SERIES_MAX - 1}", "missing")) == 1
    assert state.counter(METRIC, ("m", "other", "missing")) == 3
    assert state.counter_sum(METRIC) == INPUT_SERIES_MAX + 3 + 1
    assert set(INPUT_PROBLEMS) == {"missing", "not_finite", "out_of_range"}


def make_settings_for_ingest() -> Any:
    from monitor.config import load_settings

    return load_settings(None, {"models": [{"name": "m", "path": "unused.onnx"}]})


def test_the_pipeline_counts_bad_values_by_input_and_dead_letters_the_events(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    good = pipeline_events(rows(30, seed=4))
    bad = [
        pipeline_event(100, [0.1, float("nan")]),
        pipeline_event(101, [float("inf"), 0.1]),
        pipeline_event(102, [0.1, float("nan")]),
        pipeline_event(103, [0.0, 0.1]).replace(b"[0.0, 0.1]", b"[null, 0.1]"),  # a null feature: a missing value
    ]
    assert b"null" in bad[-1]
    pipeline = make_pipeline(settings, ReplaySource(good[:10] + bad + good[10:]))
    drain(pipeline)
    state = pipeline.state
    first, second = pipeline.runtimes[MODEL].model.feature_names  # the names the drift gauges use (input[0], …)
    assert first != "f0" and first.endswith("[0]")
    assert state.counter(METRIC, (MODEL, second, "not_finite")) == 2
    assert state.counter(METRIC, (MODEL, first, "not_finite")) == 1
    assert state.counter(METRIC, (MODEL, first, "missing")) == 1
    assert state.counter_sum(METRIC) == len(bad)
    assert state.counter_sum(tel.EVENTS_INVALID_TOTAL.name) == len(bad)
    assert state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == len(good)


def test_replay_reports_bad_values_by_input(tmp_path: Path) -> None:
    from monitor.api import replay

    settings = make_settings(tmp_path)
    log = tmp_path / "events.jsonl"
    lines = pipeline_events(rows(40, seed=5))
    lines[7] = pipeline_event(7, [np.nan, 0.0])
    log.write_bytes(b"\n".join(lines) + b"\n")
    timeline = replay(settings.models[0].path, log, reference=settings.models[0].reference, model_name=MODEL)
    assert timeline.invalid == {"not_finite": 1}
    (name, count), *rest = timeline.invalid_inputs.items()
    assert not rest and count == 1 and name.startswith(f"{MODEL}/") and name.endswith("[0]: not_finite"), name


def test_a_reference_csv_header_names_the_inputs_of_a_plain_model(tmp_path: Path) -> None:
    """One name per element, decided at load: a CSV reference's header names a plain model's features, and the
    decoder, the per-input invalid counts and name→value maps all use that name."""
    settings = make_settings(tmp_path)
    ref = tmp_path / "named.csv"
    np.savetxt(ref, rows(300, seed=99), delimiter=",", header="age,income", comments="")
    settings = settings.model_copy(
        update={"models": (settings.models[0].model_copy(update={"reference": ref}),)}, deep=True
    )
    by_map = json.dumps(
        {"id": "map", "model": MODEL, "ts": "2026-11-20T10:00:00Z", "features": {"income": 0.2, "age": 0.1}}
    )
    bad = pipeline_event(100, [0.1, float("nan")])
    pipeline = make_pipeline(settings, ReplaySource([*pipeline_events(rows(20, seed=4)), bad, by_map.encode()]))
    assert pipeline.runtimes[MODEL].model.feature_names == ("age", "income")
    drain(pipeline)
    state = pipeline.state
    assert state.counter(METRIC, (MODEL, "income", "not_finite")) == 1
    assert state.counter_sum(METRIC) == 1
    assert state.counter_sum(tel.EVENTS_SCORED_TOTAL.name) == 21  # the map event decoded by the header's names


def test_replay_and_report_name_an_input_alike_from_a_reference_json(tmp_path: Path) -> None:
    """``replay`` given a model and a reference JSON names inputs by the JSON's feature names, as ``report`` does."""
    from monitor.api import read_events, reference, replay

    settings = make_settings(tmp_path)
    model_path = settings.models[0].path
    ref = reference(model_path, rows(300, seed=99), feature_names=["age", "income"], out=tmp_path / "ref.json")
    assert ref.path is not None
    log = tmp_path / "events.jsonl"
    lines = pipeline_events(rows(40, seed=5))
    lines[7] = pipeline_event(7, [np.nan, 0.0])
    log.write_bytes(b"\n".join(lines) + b"\n")
    timeline = replay(model_path, log, reference=ref.path, model_name=MODEL)
    assert timeline.invalid_inputs == {f"{MODEL}/age: not_finite": 1}
    read = read_events(log, _named(model_path, ("age", "income")), feature_names=("age", "income"), model_name=MODEL)
    assert read.invalid_inputs == {"age: not_finite": 1}


def _named(path: Path, names: tuple[str, ...]) -> Any:
    from monitor.api import load_model

    model = load_model(path)
    model.name_features(names, source="test")
    return model
