"""Property-based fuzzing of every input boundary: the event decoders, the label decoder, the row readers, settings.

Each target feeds generated input (valid shapes, faults in every field, and bytes that are not JSON at all) to one
boundary and checks two properties:

* the input is either accepted or refused with the boundary's documented error: :class:`InvalidEventError` with a
  reason from ``INVALID_REASONS`` (events, labels), :class:`DataError` (``load_rows``), :class:`ConfigError`
  (``load_settings``); its message encodes as UTF-8 (it goes into logs and Kafka headers);
* what is accepted is safe for every later stage: features finite and within float32's range, class labels within
  int64, timestamps a ``datetime`` can hold, strings that encode as UTF-8 and carry no control characters, within
  their caps; the plain decoder's fast path gives exactly the careful path's result.

Targets: ``plain``, ``kserve`` (binary-mode CloudEvents through the joiner), ``cloudevents`` (structured mode),
``labels``, ``rows`` (CSV and NPY files), ``settings`` (YAML file and ``HARMONIC_*`` variables).
tests/unit/test_fuzz.py runs every target, a bounded and derandomized number of examples each, in CI; this script is
the long run::

    .venv/bin/python bench/fuzz.py --examples 20000            # every target, 20,000 examples each
    .venv/bin/python bench/fuzz.py --target plain --seed 7     # one target, another seed

It prints, per target, how many inputs were accepted, refused and failed, and for each distinct failure (exception
type and the line that raised it) one input that shows it. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: make `monitor` importable without installing
    sys.path.insert(0, str(REPO))

from monitor.config import Settings, load_settings  # noqa: E402
from monitor.errors import ConfigError, DataError, InvalidEventError  # noqa: E402
from monitor.events import InferenceEvent, LabelEvent, LivePrediction  # noqa: E402
from monitor.model.io import load_rows  # noqa: E402
from monitor.source.decode import MAX_SEGMENT_CHARS, EventDecoder  # noqa: E402
from monitor.source.kserve_join import KSERVE_DROP_REASONS, KServeJoiner  # noqa: E402
from monitor.source.labels import LabelDecoder  # noqa: E402
from monitor.source.validate import (  # noqa: E402
    FLOAT32_MAX,
    INT64_MAX,
    INT64_MIN,
    INVALID_REASONS,
    MAX_ID_CHARS,
    MAX_VERSION_CHARS,
    ModelSchema,
)

NAMES = ("age", "income", "debt")
#: what no string handed on may contain (validate.clean_text removes these)
UNSAFE_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
#: a KServe request of several instances names its events "<ce_id>/<i>"
MAX_INSTANCE_SUFFIX = 8


class Unsafe(AssertionError):
    """An accepted input produced a value that a later stage cannot take."""


# ---------------------------------------------------------------------- strategies: values inside documents

#: strings that broke later stages before: lone surrogates, control characters, separators, long values
NASTY_TEXT = st.sampled_from(
    ["\ud800", "\udfff", "p\ud800", "a\x00b", "eu\n", "\x1b[31m", "\u2028", "\x85", "é", "ß", "x" * 65, "v" * 300, ""]
)
TEXT = st.one_of(
    st.text(max_size=12),
    st.text(st.characters(exclude_categories=()), max_size=12),  # surrogates and controls included
    NASTY_TEXT,
    st.sampled_from(["eu", "us", "a1", "7", "credit", "wide"]),
)
#: numbers at and around every bound a later stage has
EDGE_NUMBERS = st.sampled_from(
    [
        0,
        -0.0,
        1e300,
        -1e300,
        3.4e38,
        -3.4e38,
        3.5e38,
        1.7e308,
        2**53 + 1,
        2**63 - 1,
        2**63,
        -(2**63),
        -(2**63) - 1,
        10**40,
        10**400,
        math.inf,
        -math.inf,
        math.nan,
        5e-324,
    ]
)
NUMBERS = st.one_of(st.floats(), st.integers(), EDGE_NUMBERS, st.booleans())
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
JUNK: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=8,
)
TIMESTAMPS = st.one_of(
    st.integers(min_value=-(10**16), max_value=10**16),
    st.floats(),
    EDGE_NUMBERS,
    st.sampled_from(
        [
            1795168800000,
            253402214399999,
            253402214400000,
            "2026-11-20T10:00:00Z",
            "9999-12-31T23:59:59-14:00",
            "0001-01-01T00:00:00+14:00",
            "yesterday",
        ]
    ),
    TEXT,
)
#: epoch milliseconds the decoders accept: 1973-03-03 .. 9999-12-30
MIN_MS, MAX_MS = 10**11, 253_402_214_399_999
LABELS = st.one_of(st.integers(), EDGE_NUMBERS, st.sampled_from(["1", "9" * 30, "-3", " 2 ", "1.0"]), JUNK)


def mostly(valid: st.SearchStrategy[Any], faulty: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid`` about four times in five, else ``faulty``: most documents then have one fault or none, so that
    each check past the first one is reached too."""
    return st.integers(0, 4).flatmap(lambda i: faulty if i == 0 else valid)


#: numbers as most events carry them
PLAIN_NUMBERS = st.one_of(st.floats(-1e6, 1e6), st.integers(-1000, 1000))
#: mostly ordinary numbers, sometimes one at a bound
SOME_NUMBERS = mostly(PLAIN_NUMBERS, NUMBERS)


def _number_list(*widths: int) -> st.SearchStrategy[list[Any]]:
    # strategies built once, here: hypothesis spends more time on a strategy built per draw than on drawing
    return st.one_of([st.lists(SOME_NUMBERS, min_size=n, max_size=n) for n in widths])


FEATURES = mostly(
    st.one_of(_number_list(3), st.fixed_dictionaries({name: SOME_NUMBERS for name in NAMES})),
    st.one_of(
        _number_list(2, 4),
        st.dictionaries(st.sampled_from([*NAMES, "zip", "\ud800"]), NUMBERS, max_size=4),
        JUNK,
    ),
)
PREDICTIONS = mostly(
    st.fixed_dictionaries(
        {},
        optional={
            "label": mostly(st.integers(0, 3), LABELS),
            "probabilities": mostly(st.lists(st.floats(0, 1), min_size=1, max_size=3), st.lists(NUMBERS)),
            "value": mostly(st.floats(-1e6, 1e6), st.one_of(NUMBERS, st.lists(NUMBERS, max_size=3), JUNK)),
        },
    ),
    JUNK,
)
GOOD_TEXT = st.text(st.characters(codec="ascii", min_codepoint=32, max_codepoint=126), max_size=10)
EVENT_DOCS: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
    {"ts": mostly(st.integers(MIN_MS, MAX_MS), TIMESTAMPS), "features": FEATURES},
    optional={
        "id": mostly(GOOD_TEXT, st.one_of(TEXT, st.integers(), EDGE_NUMBERS, JUNK)),
        "model": mostly(st.sampled_from(["credit", "wide"]), st.one_of(TEXT, JUNK)),
        "model_version": mostly(GOOD_TEXT, st.one_of(TEXT, st.integers(), st.sampled_from([10**200]), JUNK)),
        "segment": mostly(st.sampled_from(["eu", "us", "e" * 80]), st.one_of(TEXT, st.integers(), JUNK)),
        "prediction": PREDICTIONS,
    },
)


MESSAGE_KINDS = st.sampled_from(["json"] * 12 + ["raw_utf8", "truncated", "bytes", "deep", "nested"])
SHORT_BYTES = st.binary(max_size=64)
DEPTHS = st.integers(1, 200_000)
#: a field holding a list nested as deep as JSON parses (about 1000 levels): a repr of it in a message may recurse
NESTED_FIELDS = st.tuples(
    st.sampled_from(
        ["id", "model", "model_version", "segment", "ts", "prediction", "features", "label", "instances", "inputs",
         "predictions", "outputs", "data", "time", "shape"]
    ),
    st.integers(900, 1000),
)  # fmt: skip


@st.composite
def _messages(draw: st.DrawFn, docs: st.SearchStrategy[Any]) -> bytes:
    """One Kafka message value: a document as JSON (as Python and most producers write it, Infinity and NaN
    included; sometimes as raw UTF-8 with surrogates left in), a truncated one, or bytes that are not JSON."""
    kind = draw(MESSAGE_KINDS)
    if kind == "bytes":
        return draw(SHORT_BYTES)
    if kind == "deep":
        return b"[" * draw(DEPTHS) + b"1"
    text = json.dumps(draw(docs), ensure_ascii=kind != "raw_utf8")
    if kind == "nested" and text.startswith("{") and len(text) > 2:
        field, depth = draw(NESTED_FIELDS)
        text = f'{text[:-1]}, "{field}": {"[" * depth}1{"]" * depth}}}'
    raw = text.encode("utf-8", "surrogatepass")
    if kind == "truncated":
        raw = raw[: draw(st.integers(0, len(raw)))]
    return raw


# ---------------------------------------------------------------------- checks on what comes out


def _text(value: object, what: str, limit: int) -> None:
    if not isinstance(value, str):
        raise Unsafe(f"{what} is a {type(value).__name__}, not a str: {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise Unsafe(f"{what} {value!r} does not encode as UTF-8") from None
    if UNSAFE_CHARS.search(value):
        raise Unsafe(f"{what} {value!r} carries a control character")
    if len(value) > limit:
        raise Unsafe(f"{what} has {len(value)} characters; the cap is {limit}")


def _class(value: object, what: str) -> None:
    if value is not None and (type(value) is not int or not INT64_MIN <= value <= INT64_MAX):
        raise Unsafe(f"{what} {value!r} is not an integer within int64")


def _timestamp(value: float, what: str) -> None:
    if not math.isfinite(value):
        raise Unsafe(f"{what} {value!r} is not finite")
    try:
        datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, ValueError, OSError):
        raise Unsafe(f"{what} {value!r} is beyond what a datetime holds") from None


def _prediction(prediction: LivePrediction | None) -> None:
    if prediction is None:
        return
    _class(prediction.label, "prediction label")
    for name, values in (("probabilities", prediction.probabilities), ("value", prediction.value)):
        if values is not None and not all(type(v) is float and math.isfinite(v) for v in values):
            raise Unsafe(f"prediction {name} {values!r} is not all finite floats")
    if prediction.probabilities is not None and not all(0.0 <= p <= 1.0 for p in prediction.probabilities):
        raise Unsafe(f"prediction probabilities {prediction.probabilities!r} leave [0, 1]")


def check_event(ev: InferenceEvent, decoder: EventDecoder) -> None:
    """Raise :class:`Unsafe` unless every field of ``ev`` is safe for every later stage."""
    _text(ev.event_id, "event id", MAX_ID_CHARS + MAX_INSTANCE_SUFFIX)
    _text(ev.model_version, "model_version", MAX_VERSION_CHARS)
    _text(ev.segment, "segment", max([MAX_SEGMENT_CHARS, *(len(s) for s in decoder.segments or ())]))
    schema = decoder.models.get(ev.model)
    if schema is None:
        raise Unsafe(f"model {ev.model!r} is not configured")
    features = ev.features
    if features.dtype != np.float64 or features.shape != (schema.n_features,):
        raise Unsafe(f"features have dtype {features.dtype} and shape {features.shape}")
    if not bool(np.all(np.abs(features) <= FLOAT32_MAX)):
        raise Unsafe(f"features {features.tolist()!r} are not all finite and within float32's range")
    _timestamp(ev.timestamp_seconds, "timestamp")
    _prediction(ev.prediction)


def _refused(exc: InvalidEventError) -> str:
    if exc.reason not in INVALID_REASONS:
        raise Unsafe(f"reason {exc.reason!r} is not in INVALID_REASONS")
    str(exc).encode("utf-8")  # a message that does not encode breaks the log line and the dead-letter header
    return "refused"


# ---------------------------------------------------------------------- targets: plain events


class CarefulDecoder(EventDecoder):
    """The decoder with its fast path switched off: every event takes the field-by-field path."""

    def _plain_common(self, doc: Any, origin: Any, now: float | None) -> InferenceEvent | None:
        return None


def _decoder(cls: type[EventDecoder], allow_list: bool) -> EventDecoder:
    models = {"credit": ModelSchema(3, NAMES, default_version="7"), "wide": ModelSchema(2)}
    return cls(models, default_model="credit", max_bytes=1 << 16, segments=("eu", "e" * 80) if allow_list else None)


def _outcome(decoder: EventDecoder, value: bytes, now: float | None) -> tuple[Any, ...]:
    try:
        ev = decoder.decode(value, origin=("events", 0, 7), now=now)
    except InvalidEventError as exc:
        return ("refused", _refused(exc) and exc.reason, str(exc))
    check_event(ev, decoder)
    return ("accepted", ev.event_id, ev.model, ev.model_version, ev.features.tolist(), ev.timestamp_seconds,
            ev.segment, ev.prediction)  # fmt: skip


PLAIN = st.tuples(_messages(EVENT_DOCS), st.booleans(), st.sampled_from([None, 1795168800.0]))


def check_plain(case: tuple[bytes, bool, float | None]) -> str:
    value, allow_list, now = case
    fast = _outcome(_decoder(EventDecoder, allow_list), value, now)
    careful = _outcome(_decoder(CarefulDecoder, allow_list), value, now)
    if repr(fast) != repr(careful):  # repr: NaN never equals itself
        raise Unsafe(f"the fast path gives {fast!r}; the careful path {careful!r}")
    return str(fast[0])


# ---------------------------------------------------------------------- targets: KServe CloudEvents

SHAPES = st.one_of(st.lists(st.integers(0, 4), max_size=3), st.lists(st.integers(), max_size=2), JUNK)
DATATYPES = st.sampled_from(["FP32", "FP64", "INT64", "BOOL", "BYTES", "fp32", "junk"])
TENSORS = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from([*NAMES, "input-0", "probabilities", "predict"]), TEXT),
        "shape": SHAPES,
        "datatype": DATATYPES,
        "data": st.one_of(st.lists(NUMBERS, max_size=9), st.lists(st.lists(NUMBERS, max_size=3), max_size=3), JUNK),
    },
)
ROWS = mostly(
    st.one_of(
        st.lists(_number_list(3), min_size=1, max_size=3),
        st.lists(st.fixed_dictionaries({name: SOME_NUMBERS for name in NAMES}), min_size=1, max_size=2),
    ),
    st.one_of(st.lists(_number_list(2, 4), min_size=1, max_size=2), JUNK),
)
V2_INPUT = st.fixed_dictionaries(
    {
        "name": st.just("input-0"),
        "shape": st.just([1, 3]),
        "datatype": st.sampled_from(["FP32", "FP64"]),
        "data": _number_list(3),
    }
)
V2_OUTPUT = st.fixed_dictionaries(
    {
        "name": st.just("predict"),
        "shape": st.just([1]),
        "datatype": st.sampled_from(["INT64", "FP32"]),
        "data": st.lists(SOME_NUMBERS, min_size=1, max_size=1),
    }
)
KSERVE_BODIES = st.one_of(
    st.fixed_dictionaries({"instances": ROWS}),
    st.fixed_dictionaries(
        {"inputs": mostly(st.lists(V2_INPUT, min_size=1, max_size=1), st.lists(TENSORS, max_size=3))}
    ),
    st.fixed_dictionaries(
        {
            "predictions": mostly(
                st.lists(SOME_NUMBERS, min_size=1, max_size=3), st.lists(st.one_of(LABELS, PREDICTIONS))
            )
        }
    ),
    st.fixed_dictionaries({"outputs": mostly(st.lists(V2_OUTPUT, min_size=1, max_size=1), st.lists(TENSORS))}),
    st.dictionaries(TEXT, JUNK, max_size=3),
)
CE_TYPES = mostly(
    st.sampled_from(["org.kubeflow.serving.inference.request", "org.kubeflow.serving.inference.response"]),
    TEXT,
)
CE_IDS = st.one_of(st.sampled_from(["r1", "r1", "r2"]), TEXT)


SOMETIMES_ABSENT = st.integers(0, 5)  # 0: leave the header or attribute out


@st.composite
def _binary_message(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, bytes | None]]]:
    def header(text: str) -> bytes:  # producers may send any bytes: surrogates become invalid UTF-8
        return text.encode("utf-8", "surrogatepass")

    headers: list[tuple[str, bytes | None]] = [("ce_type", header(draw(CE_TYPES))), ("ce_specversion", b"1.0")]
    for key, values in (
        ("ce_id", CE_IDS),
        ("ce_inferenceservicename", mostly(st.just("credit"), TEXT)),
        ("ce_endpoint", TEXT),
        ("ce_time", mostly(st.just("2026-11-20T10:00:00Z"), TIMESTAMPS.map(str))),
        ("content-type", mostly(st.just("application/json"), st.just("text/plain"))),
    ):
        if draw(SOMETIMES_ABSENT):
            headers.append((key, header(draw(values))))
    return draw(_messages(KSERVE_BODIES)), headers


DATA_KINDS = st.sampled_from(["data", "data_str", "data_base64", "junk_base64", "none"])


@st.composite
def _structured_message(draw: st.DrawFn) -> tuple[bytes, list[tuple[str, bytes | None]]]:
    doc: dict[str, Any] = {"specversion": "1.0", "type": draw(CE_TYPES)}
    for key, values in (
        ("id", CE_IDS),
        ("inferenceservicename", mostly(st.just("credit"), TEXT)),
        ("endpoint", TEXT),
        ("time", mostly(st.just("2026-11-20T10:00:00Z"), TIMESTAMPS)),
    ):
        if draw(SOMETIMES_ABSENT):
            doc[key] = draw(values)
    body = draw(KSERVE_BODIES)
    data = draw(DATA_KINDS)
    if data == "data":
        doc["data"] = body
    elif data == "data_str":
        doc["data"] = json.dumps(body)
    elif data == "data_base64":
        doc["data_base64"] = base64.b64encode(json.dumps(body).encode()).decode()
    elif data == "junk_base64":
        doc["data_base64"] = draw(TEXT)
    return draw(_messages(st.just(doc))), []


def _check_joiner(messages: list[tuple[bytes, list[tuple[str, bytes | None]]]]) -> str:
    decoder = _decoder(EventDecoder, allow_list=False)
    joiner = KServeJoiner(decoder, ttl_seconds=5.0, max_pending=2)
    outcome = "refused"
    for i, (value, headers) in enumerate(messages):
        try:
            events = joiner.update(value, headers, ("log", 0, i), now=float(i))
        except InvalidEventError as exc:
            _refused(exc)
            continue
        outcome = "accepted"
        for ev in events:
            check_event(ev, decoder)
        many = decoder.decode_many  # the same messages through the one-shot entry point
        with contextlib.suppress(InvalidEventError):
            for ev in many(value, headers, ("log", 0, i), now=float(i)):
                check_event(ev, decoder)
    for ev in joiner.flush():
        check_event(ev, decoder)
    unknown = {reason for _, reason in joiner.dropped} - set(KSERVE_DROP_REASONS)
    if unknown:
        raise Unsafe(f"drop reasons {sorted(unknown)} are not in KSERVE_DROP_REASONS")
    return outcome


KSERVE = st.lists(_binary_message(), min_size=1, max_size=3)
CLOUDEVENTS = st.lists(_structured_message(), min_size=1, max_size=3)


# ---------------------------------------------------------------------- targets: delayed labels

LABEL_DOCS = st.fixed_dictionaries(
    {},
    optional={
        "id": mostly(GOOD_TEXT, st.one_of(TEXT, st.integers(), JUNK)),
        "label": mostly(st.integers(0, 3), LABELS),
        "ts": mostly(st.integers(MIN_MS, MAX_MS), TIMESTAMPS),
    },
)


def check_label(case: tuple[bytes, float | None]) -> str:
    value, now = case
    try:
        label: LabelEvent = LabelDecoder().decode(value, now=now)
    except InvalidEventError as exc:
        return _refused(exc)
    _text(label.event_id, "label id", MAX_ID_CHARS)
    _class(label.label, "label")
    _timestamp(label.timestamp_seconds, "label timestamp")
    return "accepted"


LABEL_MESSAGES = st.tuples(_messages(LABEL_DOCS), st.sampled_from([None, 1795168800.0]))


# ---------------------------------------------------------------------- targets: row files


CSV_CELLS = mostly(
    mostly(PLAIN_NUMBERS.map(str), NUMBERS.map(str)), st.one_of(TEXT, st.sampled_from(['"1"', '"', "1e999", "x,y"]))
)
CSV_ROWS = [st.lists(CSV_CELLS, min_size=w, max_size=w) for w in range(1, 5)]
CSV_SHAPES = st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 5))  # width - 1, rows, ragged row
CSV_SUFFIXES = st.sampled_from([".csv", ".txt", ".CSV"])
CSV_NEWLINES = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def _csv_file(draw: st.DrawFn) -> tuple[str, bytes]:
    width, n_rows, ragged = draw(CSV_SHAPES)
    rows = [draw(CSV_ROWS[width]) for _ in range(n_rows)]
    if ragged < n_rows:
        rows[ragged] = draw(CSV_ROWS[(width + 1) % 4])
    text = draw(CSV_NEWLINES).join(",".join(row) for row in rows)
    return draw(CSV_SUFFIXES), text.encode("utf-8", "surrogatepass")


NPY_KINDS = st.sampled_from(["array", "array", "header", "bytes"])
NPY_DESCRS = st.sampled_from(["<f8", "<f4", "<i8", "|b1", "<c16", "<U3", "<M8[s]", "|O", "<f16", "junk"])
NPY_CLAIMED_SHAPES = st.lists(st.integers(0, 10**15), max_size=3).map(tuple)
NPY_DTYPES = st.sampled_from(["f8", "f4", "f2", "i8", "u8", "i1", "?", "c16", "U3", "M8[s]", "g"])
NPY_SHAPES = st.lists(st.integers(0, 4), max_size=3).map(tuple)
NPY_VALUES = st.lists(NUMBERS.filter(lambda v: not isinstance(v, int) or abs(v) < 2**62), min_size=1, max_size=20)
NPY_CUTS = st.one_of(st.none(), st.tuples(st.floats(0, 1), st.binary(max_size=8)))  # truncate at a fraction, add junk


@st.composite
def _npy_file(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(NPY_KINDS)
    if kind == "bytes":
        return ".npy", draw(SHORT_BYTES)
    if kind == "header":  # a well-formed header that claims any shape and dtype, followed by too little data
        header = repr(
            {"descr": draw(NPY_DESCRS), "fortran_order": draw(st.booleans()), "shape": draw(NPY_CLAIMED_SHAPES)}
        )
        raw = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1")
        return ".npy", raw + draw(SHORT_BYTES)
    arr = np.zeros(draw(NPY_SHAPES), dtype=draw(NPY_DTYPES))
    if arr.dtype.kind in "fiub" and arr.size:
        values = draw(NPY_VALUES)
        with np.errstate(all="ignore"), contextlib.suppress(OverflowError, ValueError, TypeError):
            arr.flat[: len(values)] = np.asarray(values[: arr.size], dtype=np.float64).astype(arr.dtype)
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    raw = buf.getvalue()
    cut = draw(NPY_CUTS)
    if cut is not None:
        raw = raw[: int(cut[0] * len(raw))] + cut[1]
    return ".npy", raw


ROW_FILES = st.one_of(_csv_file(), _npy_file())


def check_rows_in(folder: Path) -> Callable[[tuple[str, bytes]], str]:
    def check(case: tuple[str, bytes]) -> str:
        suffix, raw = case
        path = folder / f"rows{suffix}"
        path.write_bytes(raw)
        try:
            rows = load_rows(path)
        except DataError as exc:
            str(exc).encode("utf-8")
            return "refused"
        if rows.dtype != np.float64 or rows.ndim != 2 or rows.shape[0] < 1 or rows.shape[1] < 1:
            raise Unsafe(f"rows of dtype {rows.dtype} and shape {rows.shape}")
        finite = rows[np.isfinite(rows)]  # NaN and inf are kept on purpose: callers drop those rows
        if not bool(np.all(np.abs(finite) <= FLOAT32_MAX)):
            raise Unsafe("a finite value beyond float32's range was accepted")
        return "accepted"

    return check


# ---------------------------------------------------------------------- targets: settings

SETTING_TEXT = mostly(st.sampled_from(["m.onnx", "credit", "inference-events", "broker:9092", "eu"]), TEXT)
SETTING_VALUES = mostly(
    st.one_of(SETTING_TEXT, st.integers(1, 100), st.floats(0.5, 100)),
    st.one_of(NUMBERS, st.booleans(), st.none(), st.lists(SETTING_TEXT, max_size=2)),
)
SETTING_COUNTS = mostly(st.integers(100, 5000), SETTING_VALUES)
SETTING_SECONDS = mostly(st.floats(1.0, 1e5), SETTING_VALUES)
MODEL_ENTRIES = st.fixed_dictionaries(
    {"name": SETTING_TEXT, "path": SETTING_TEXT},
    optional={
        "version": mostly(GOOD_TEXT, SETTING_VALUES),
        "feature_names": mostly(st.lists(SETTING_TEXT, max_size=3), SETTING_VALUES),
        "warmup_events": SETTING_COUNTS,
        "threads": SETTING_COUNTS,
        "scoring": st.dictionaries(st.sampled_from(["radius", "sigma", "steps"]), SETTING_SECONDS),
    },
)
SETTINGS_DOCS = st.fixed_dictionaries(
    {"models": mostly(st.lists(MODEL_ENTRIES, min_size=1, max_size=2), SETTING_VALUES)},
    optional={
        "kafka": st.fixed_dictionaries(
            {},
            optional={
                "topic": SETTING_TEXT,
                "bootstrap_servers": SETTING_TEXT,
                "api_version": mostly(st.just("2.8"), SETTING_VALUES),
                "max_poll_records": SETTING_COUNTS,
                "security": mostly(st.dictionaries(SETTING_TEXT, SETTING_TEXT, max_size=2), SETTING_VALUES),
            },
        ),
        "segments": st.fixed_dictionaries(
            {},
            optional={
                "max_segments": SETTING_COUNTS,
                "max_versions": SETTING_COUNTS,
                "allowed": mostly(st.lists(SETTING_TEXT, max_size=3), SETTING_VALUES),
            },
        ),
        "labels": st.dictionaries(st.sampled_from(["ttl_seconds", "max_predictions", "noise_sigma"]), SETTING_SECONDS),
        "alerts": st.dictionaries(st.sampled_from(["for_seconds", "alertmanager_url", "forr"]), SETTING_VALUES),
        "state_dir": SETTING_TEXT,
        "max_event_bytes": SETTING_COUNTS,
        "shutdown_timeout_seconds": SETTING_SECONDS,
        "log_level": mostly(st.sampled_from(["info", "debug"]), SETTING_VALUES),
    },
)
ENV_KEYS = st.sampled_from(
    [
        "HARMONIC_MODELS",
        "HARMONIC_KAFKA__TOPIC",
        "HARMONIC_KAFKA__SECURITY",
        "HARMONIC_KAFKA__MAX_POLL_RECORDS",
        "HARMONIC_SEGMENTS__MAX_VERSIONS",
        "HARMONIC_SEGMENTS__ALLOWED",
        "HARMONIC_LABELS__TTL_SECONDS",
        "HARMONIC_STATE_DIR",
        "HARMONIC_STATE_DIR__X",
        "HARMONIC_KAFKA_TOPIC",
        "HARMONIC_LOG_LEVEL",
        "HARMONIC_MAX_EVENT_BYTES",
    ]
)
#: what an environment variable can hold: no NUL; undecodable bytes arrive as surrogates U+DC80..U+DCFF
ENV_VALUES = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
    st.sampled_from(['[{"name": "m", "path": "m.onnx"}]', '["eu"]', "inf", "nan", "1e400", "\udcff", "{", "8"]),
)


SETTINGS_AS_TEXT = st.integers(0, 9)  # 0: the file is arbitrary text
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
ENVIRONMENTS = mostly(st.just({}), st.dictionaries(ENV_KEYS, ENV_VALUES, max_size=3))


@st.composite
def _settings_case(draw: st.DrawFn) -> tuple[bytes, dict[str, str]]:
    if draw(SETTINGS_AS_TEXT) == 0:
        raw = draw(ANY_TEXT).encode("utf-8", "surrogatepass")
    else:
        raw = json.dumps(draw(SETTINGS_DOCS)).encode("utf-8", "surrogatepass")  # JSON is YAML
    return raw, draw(ENVIRONMENTS)


SETTINGS_CASES = _settings_case()


@contextlib.contextmanager
def environment(extra: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``extra`` set, restored afterwards (HARMONIC_* variables outside ``extra`` removed)."""
    saved = dict(os.environ)
    try:
        for key in [k for k in os.environ if k.upper().startswith("HARMONIC_")]:
            del os.environ[key]
        os.environ.update(extra)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _walk_settings(value: object, where: str) -> None:
    if isinstance(value, str | Path):
        _text(str(value), f"setting {where}", 10**6)
    elif isinstance(value, float) and not math.isfinite(value):
        raise Unsafe(f"setting {where} is {value!r}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk_settings(key, f"{where} key")
            _walk_settings(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _walk_settings(item, f"{where}[{i}]")


def check_settings_in(folder: Path) -> Callable[[tuple[bytes, dict[str, str]]], str]:
    def check(case: tuple[bytes, dict[str, str]]) -> str:
        raw, env = case
        path = folder / "config.yaml"
        path.write_bytes(raw)
        with environment(env):
            try:
                loaded: Settings = load_settings(path)
            except ConfigError as exc:
                str(exc).encode("utf-8")
                return "refused"
        _walk_settings(loaded.model_dump(), "")
        return "accepted"

    return check


# ---------------------------------------------------------------------- the targets and their runner


@dataclass(frozen=True)
class Target:
    name: str
    strategy: st.SearchStrategy[Any]
    check: Callable[[Path], Callable[[Any], str]]  # folder for files → check(input) -> "accepted" | "refused"


def _no_files(check: Callable[[Any], str]) -> Callable[[Path], Callable[[Any], str]]:
    return lambda _folder: check


TARGETS: tuple[Target, ...] = (
    Target("plain", PLAIN, _no_files(check_plain)),
    Target("kserve", KSERVE, _no_files(_check_joiner)),
    Target("cloudevents", CLOUDEVENTS, _no_files(_check_joiner)),
    Target("labels", LABEL_MESSAGES, _no_files(check_label)),
    Target("rows", ROW_FILES, check_rows_in),
    Target("settings", SETTINGS_CASES, check_settings_in),
)

#: health checks that flag slow or filtered generation, which is what fuzzing rich documents costs
SLOW_CHECKS = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def _where(exc: BaseException) -> str:
    """The last line of monitor/ code that the exception passed through (else the innermost line)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/monitor/" in f.filename] or frames
    frame = ours[-1]
    return f"{Path(frame.filename).relative_to(REPO) if REPO in Path(frame.filename).parents else frame.filename}:{frame.lineno}"


@dataclass
class Report:
    counts: Counter[str]
    failures: dict[tuple[str, str], tuple[str, object]]  # (exception type, where) → (message, one input)
    seconds: float


def run(target: Target, examples: int, seed_value: int, folder: Path) -> Report:
    """Feed ``examples`` generated inputs to ``target``; count outcomes and keep one input per distinct failure."""
    counts: Counter[str] = Counter()
    failures: dict[tuple[str, str], tuple[str, object]] = {}
    check = target.check(folder)

    @seed(seed_value)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=SLOW_CHECKS,
    )
    @given(target.strategy)
    def each(value: Any) -> None:
        try:
            counts[check(value)] += 1
        except Exception as exc:  # noqa: BLE001  (every failure is the finding)
            counts["failed"] += 1
            failures.setdefault((type(exc).__name__, _where(exc)), (str(exc)[:300], value))

    started = time.perf_counter()
    each()
    return Report(counts, failures, time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--examples", type=int, default=10_000, help="generated inputs per target (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    parser.add_argument("--target", choices=[t.name for t in TARGETS], action="append", help="repeatable; default all")
    args = parser.parse_args(argv)
    chosen = [t for t in TARGETS if args.target is None or t.name in args.target]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="harmonic-fuzz-") as tmp:
        for target in chosen:
            report = run(target, args.examples, args.seed, Path(tmp))
            counts = ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items()))
            print(f"{target.name:12s} {sum(report.counts.values()):7d} inputs in {report.seconds:6.1f} s: {counts}")
            for (kind, where), (message, value) in sorted(report.failures.items()):
                print(f"    FAIL {kind} at {where}: {message}\n         input: {value!r:.300}")
            failed += report.counts["failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
