"""Stage 1 (source): the validation and parsing that every input format shares.

:mod:`monitor.source.decode` (plain JSON events) and :mod:`monitor.source.kserve` (KServe payload-logging
CloudEvents) both build on what is here: :data:`INVALID_REASONS` and the message helpers, :class:`ModelSchema`
(what a model's events are checked against), JSON parsing (:func:`loads`), :func:`parse_timestamp`, and the
``prediction`` object (:func:`parse_prediction`) that plain events and KServe v1 responses both carry. The features
of a model with a signature are :mod:`monitor.source.validate_signature`'s.

Every problem raises :class:`~monitor.errors.InvalidEventError` whose ``reason`` is one of
:data:`INVALID_REASONS` (a bounded metric label) and whose message says what was expected and what arrived.
The caller counts it and moves on; nothing here does I/O or stops the loop.

What a decoder hands on is safe for every later stage, so that no later stage has to check again: features are
finite and within float32's range (the ONNX copy computes in float32); class labels fit in int64; timestamps lie
between 1973 and the year 9999; and every string taken from event data (event id, ``model_version``, segment)
went through :func:`clean_text` once, at the edge: valid UTF-8, no control characters, bounded length. Such a
string can go into a metric label, a log line, a Kafka header or a JSON document without failing there.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from monitor.errors import ConfigError, InvalidEventError
from monitor.errors import names_listed as names_listed  # also named here: decode and kserve import it from this module
from monitor.events import LivePrediction

if TYPE_CHECKING:  # not imported at run time: the signature module pulls in onnx, and a schema's signature is given
    from monitor.model.signature import Signature

_orjson_loads: Callable[[bytes], object] | None
try:  # orjson is a declared dependency; the stdlib path keeps a broken install working
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover
    _orjson_loads = None
#: orjson's ``loads`` (None without it): the pipeline's fast path parses with it and leaves every document it
#: refuses to :func:`loads`, through the full decode
fast_loads = _orjson_loads

#: every ``reason`` an :class:`InvalidEventError` raised by the event decoders can carry (pre-register the counter with these)
INVALID_REASONS: tuple[str, ...] = (
    "too_large",
    "not_json",
    "not_object",
    "missing_field",
    "bad_type",
    "wrong_width",
    "not_finite",
    "unknown_model",
    "unknown_feature",
    "bad_timestamp",
    "bad_prediction",
    "unsupported_format",
    # a feature is finite but beyond float32's range (±3.4e38): the ONNX copy computes in float32, where it is inf
    "out_of_range",
)
#: the reasons the runtime gives an event it could decode but not process (monitor/runtime): counted and
#: dead-lettered like the decoders' reasons, under the same metric
PROCESSING_REASONS: tuple[str, ...] = (
    # scoring or applying the event raised; the event is dead-lettered
    "unscorable",
    # the decoder raised something other than InvalidEventError (a bug); the record is dead-lettered
    "decode_failed",
    # the process died twice with this record in flight; it is dead-lettered without processing
    "crashed_processing",
    # a fetched record batch could not be decoded (a codec without its library, corrupt compressed bytes, a failed
    # CRC): the batch's bytes as fetched are dead-lettered and the partition goes on after it
    "undecodable_batch",
)

#: the largest float32; a feature beyond ±this would be inf in the model's float32 input
FLOAT32_MAX = 3.4028234663852886e38
#: class labels (a prediction's ``label``, a delayed label) must fit in int64: later stages hold them in numpy arrays
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
#: ``model_version`` values longer than this keep a prefix and a digest of the whole (:func:`clean_text`)
MAX_VERSION_CHARS = 128
#: event ids (and KServe ``ce_id``) longer than this keep a prefix and a digest of the whole (:func:`clean_text`)
MAX_ID_CHARS = 128

#: Kafka message headers, (key, value) pairs
Headers = Sequence[tuple[str, bytes | None]]
#: where a message came from: (topic, partition, offset)
Origin = tuple[str, int, int]

#: epoch-millisecond values below this (before 1973-03-03) are almost certainly epoch seconds
MIN_EPOCH_MS = 1e11
#: timestamps from this on (9999-12-31T00:00:00Z, in ms) are refused: a day short of the end of year 9999, so that
#: any later datetime conversion (alert times, reports) stays within ``datetime``'s range
MAX_EPOCH_MS = 253_402_214_400_000.0

#: what :func:`clean_text` takes out: control characters (C0, DEL, C1) and the line/paragraph separators U+2028/9
#: are removed; lone surrogates (valid JSON escapes such as "\ud800" that no UTF-8 encoding exists for) become U+FFFD
_UNSAFE_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
#: a capped string keeps this many characters less than its cap: "~" and a 16-hex digest of the whole
_DIGEST_CHARS = 17


def _unsafe_char(match: re.Match[str]) -> str:
    return "\ufffd" if match.group() >= "\ud800" else ""


def clean_text(raw: str, max_chars: int) -> str:
    """A string from event data made safe for every later stage: metric labels, logs, Kafka headers, JSON.

    Lone surrogates become U+FFFD, control characters and U+2028/U+2029 are removed, and a string longer than
    ``max_chars`` keeps its first ``max_chars - 17`` characters followed by ``~`` and a 16-hex BLAKE2b digest of the
    whole, so that distinct long values stay distinct (and the same value always gives the same result: a label's
    id still joins its event). Plain printable ASCII within the cap is returned as is, at the cost of two checks.

    Parameters
    ----------
    raw : str
        The value as decoded from JSON or a header.
    max_chars : int
        The cap, > 17 (:data:`MAX_ID_CHARS`, :data:`MAX_VERSION_CHARS`, ``MAX_SEGMENT_CHARS``).

    Returns
    -------
    str
        At most ``max_chars`` characters; ``.encode("utf-8")`` always succeeds.

    Examples
    --------
    >>> clean_text("v1.2", 128), clean_text("eu\\x00\\n", 128), clean_text("bad\\ud800", 128) == "bad\\ufffd"
    ('v1.2', 'eu', True)
    >>> len(clean_text("x" * 500, 64)), clean_text("x" * 500, 64)[-17:-16]
    (64, '~')
    """
    if len(raw) <= max_chars and raw.isascii() and raw.isprintable():
        return raw
    text = raw if len(raw) <= max_chars else raw[: max_chars - _DIGEST_CHARS]
    if not text.isprintable():  # also False for harmless characters (Unicode spaces, format characters): cheap enough
        text = _UNSAFE_CHARS.sub(_unsafe_char, text)
    if len(raw) > max_chars:
        text += "~" + hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return text


#: longest message an :class:`InvalidEventError` carries (it goes into a log line and a dead-letter header)
_MAX_MESSAGE_CHARS = 2000


def invalid(reason: str, message: str, inputs: tuple[tuple[str, str], ...] = ()) -> InvalidEventError:
    """The error for an invalid event. Its message is cleaned like event data (it quotes event data: feature
    names, ids), so that logging it or putting it in a Kafka header cannot fail. ``inputs``: the inputs whose
    values were at fault, with their problem (see :class:`~monitor.errors.InvalidEventError`)."""
    return InvalidEventError(reason, clean_text(message, _MAX_MESSAGE_CHARS), inputs=inputs)


def who(event_id: str | None) -> str:
    return f"event '{event_id}'" if event_id is not None else "event"


def shown(value: object, limit: int = 60) -> str:
    """A short repr of an offending value (messages never carry whole payloads).

    >>> deep = []
    >>> for _ in range(100_000):
    ...     deep = [deep]
    >>> shown("x" * 100, 10), shown(deep)
    ("'xxxxxx...", 'a JSON list nested too deep to show')
    """
    try:
        text = repr(value)
    except RecursionError:  # JSON parses ~1000 levels; repr, called deeper in the stack, may not reach them
        return f"a JSON {type(value).__name__} nested too deep to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class ModelSchema:
    """What the decoder checks a model's events against.

    Parameters
    ----------
    n_features : int
        Width of the ONNX copy's input; every event must carry exactly this many features.
    feature_names : tuple of str, optional
        The feature order; needed to accept features as a name→value map (and KServe v2 column inputs).
    default_version : str
        ``model_version`` given to events that carry none.
    signature : Signature, optional
        The model's inputs (:class:`~monitor.model.signature.Signature`). None, or a *plain* signature (one 2-D
        float input), decodes events as a plain list or map of ``n_features`` numbers. Any other signature (several
        inputs, string/int inputs, N-D tensors, ``fixed_features``) decodes ``features`` by it
        (:func:`~monitor.source.validate_signature.signature_row`): a list of every float element in graph order
        (only when the model has no non-float input), or a map by input name or float element name; events then
        carry ``held`` values.
        ``n_features`` must then be the signature's D.

    Raises
    ------
    ConfigError
        ``n_features < 1``, ``feature_names`` of the wrong length or with duplicates, a ``default_version``
        that :func:`clean_text` would change (it becomes a metric label as it is), or ``n_features`` other than a
        non-plain ``signature``'s.

    Examples
    --------
    >>> ModelSchema(2, ("age", "income")).n_features
    2
    """

    n_features: int
    feature_names: tuple[str, ...] | None = None
    default_version: str = "unknown"
    # not compared: a Signature holds numpy arrays, which do not compare to one bool
    signature: Signature | None = field(default=None, compare=False)
    #: the signature events are decoded by: ``signature`` unless it is None or plain (set in __post_init__)
    shaped: Signature | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.n_features < 1:
            raise ConfigError(f"n_features must be >= 1; got {self.n_features}")
        if self.signature is not None and not self.signature.plain:
            if self.n_features != self.signature.n_features:
                raise ConfigError(
                    f"n_features is {self.n_features} but the model's inputs ({self.signature.describe()}) give "
                    f"{self.signature.n_features} perturbable features"
                )
            object.__setattr__(self, "shaped", self.signature)
        if clean_text(self.default_version, MAX_VERSION_CHARS) != self.default_version:
            raise ConfigError(
                f"default_version {self.default_version!r} has control characters, lone surrogates or more than "
                f"{MAX_VERSION_CHARS} characters; give a printable version label"
            )
        if self.feature_names is not None:
            if len(self.feature_names) != self.n_features:
                raise ConfigError(
                    f"feature_names lists {len(self.feature_names)} names but n_features is {self.n_features}; "
                    "give one name per model input column"
                )
            dupes = sorted({n for n in self.feature_names if self.feature_names.count(n) > 1})
            if dupes:
                raise ConfigError(f"feature_names has duplicates: {names_listed(dupes)}")


def loads(raw: bytes) -> object:
    """Parse JSON with orjson (≈6× faster on events; json.loads was the largest per-event cost), falling back to
    the standard library for what orjson refuses but Python's json accepts (NaN/Infinity literals, integers beyond
    64 bits), so such events still get their precise reason (e.g. ``not_finite``) rather than ``not_json``."""
    if _orjson_loads is not None:
        try:
            return _orjson_loads(raw)
        except ValueError:
            pass
    return json.loads(raw)


def parse_timestamp(raw: object, now: float | None, event_id: str | None = None) -> float:
    """Epoch seconds from an ISO-8601 string or epoch milliseconds; ``now`` when ``raw`` is None.

    Raises
    ------
    InvalidEventError
        ``missing_field`` (absent and no ``now``) or ``bad_timestamp``.

    Examples
    --------
    >>> parse_timestamp("2026-11-20T10:00:00Z", None), parse_timestamp(1795168800000, None), parse_timestamp(None, 5.0)
    (1795168800.0, 1795168800.0, 5.0)
    """
    if raw is None:
        if now is None:
            raise invalid(
                "missing_field",
                f"{who(event_id)} has no 'ts' and no receive time was given; expected ISO-8601 or epoch ms",
            )
        return float(now)
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError:
            raise invalid(
                "bad_timestamp",
                f"{who(event_id)}: 'ts' {shown(raw)} is not ISO-8601; expected e.g. '2026-11-20T10:00:00Z' or epoch ms",
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        seconds = parsed.timestamp()
        if not MIN_EPOCH_MS <= seconds * 1000.0 < MAX_EPOCH_MS:
            raise invalid(
                "bad_timestamp",
                f"{who(event_id)}: 'ts' {shown(raw)} is not between 1973-03-03 and 9999-12-31; expected the time the "
                "event happened",
            )
        return seconds
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        # compared before any conversion: an integer of 400 digits is valid JSON but overflows float()
        if not MIN_EPOCH_MS <= raw < MAX_EPOCH_MS:
            too_late = raw >= MAX_EPOCH_MS
            raise invalid(
                "bad_timestamp",
                f"{who(event_id)}: 'ts' {shown(raw)} is not epoch milliseconds "
                + ("before 9999-12-31" if too_late else "(epoch seconds? multiply by 1000)"),
            )
        return raw / 1000.0
    raise invalid(
        "bad_timestamp", f"{who(event_id)}: 'ts' must be an ISO-8601 string or epoch milliseconds; got {shown(raw)}"
    )


def finite_float(raw: object) -> float | None:
    """``float(raw)`` for a JSON number (not a bool) whose value is finite as a float64; None for anything else.

    >>> finite_float(3), finite_float(1.5), finite_float(True), finite_float(float("inf")), finite_float(10**400)
    (3.0, 1.5, None, None, None)
    """
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    try:
        value = float(raw)  # an integer beyond float64 (valid JSON: up to 4300 digits) raises OverflowError
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def number_tuple(raw: object) -> tuple[float, ...] | None:
    """A tuple of finite floats, or None when ``raw`` is not a flat list of numbers."""
    if not isinstance(raw, list) or not raw:
        return None
    # fast path, the common case: JSON numbers with a fraction part are floats; hypot is finite only when every
    # element is (NaN, inf and -inf together give NaN or inf, never an error; values near 1.8e308 can overflow it
    # to inf: the careful loop decides those)
    if all(type(v) is float for v in raw) and math.isfinite(math.hypot(*raw)):
        return tuple(raw)
    out: list[float] = []
    for v in raw:
        value = finite_float(v)
        if value is None:
            return None
        out.append(value)
    return tuple(out)


def as_label(raw: object) -> int | None:
    """An integer class within int64 from an int, a bool, an integral float or a digit string; None otherwise.

    >>> as_label(2), as_label(True), as_label(3.0), as_label("4"), as_label(2.5), as_label(2**63), as_label(1e300)
    (2, 1, 3, 4, None, None, None)
    """
    label: int | None = None
    if isinstance(raw, bool):
        return int(raw)
    if isinstance(raw, int):
        label = raw
    elif isinstance(raw, float) and raw.is_integer():
        label = int(raw)
    elif isinstance(raw, str):
        try:
            label = int(raw)
        except ValueError:  # not digits, or more than 4300 of them
            return None
    return label if label is not None and INT64_MIN <= label <= INT64_MAX else None


def argmax(values: Sequence[float]) -> int:
    return max(range(len(values)), key=values.__getitem__)


#: tolerance on Σp = 1 when telling a bare probability row from a regressor's vector
PROBA_SUM_TOLERANCE = 1e-3


def bare_prediction(raw: object, subject: str, what: str = "'prediction'") -> LivePrediction:
    """A prediction given without an object, as a server writes its answer (and KServe v1 each element of
    ``predictions``): a JSON integer or boolean is a class, a finite number a regressor's value, a list of numbers
    summing to 1 (within 1e-3, every element in [0, 1], at least two) a probability row — its label the most probable
    class — and any other list of numbers a regressor's vector. ``subject`` names the event in messages.

    >>> bare_prediction(2, "event 'a'"), bare_prediction(3.5, "event 'a'")
    (LivePrediction(label=2, probabilities=None, value=None), LivePrediction(label=None, probabilities=None, value=(3.5,)))
    >>> bare_prediction([0.2, 0.8], "event 'a'").label, bare_prediction([0.2, 1.8], "event 'a'").value
    (1, (0.2, 1.8))
    """
    if isinstance(raw, bool | int):
        if not INT64_MIN <= raw <= INT64_MAX:
            raise invalid("bad_prediction", f"{subject}: class {shown(raw)} does not fit in int64")
        return LivePrediction(label=int(raw))
    if isinstance(raw, float) and math.isfinite(raw):
        return LivePrediction(value=(raw,))
    values = number_tuple(raw)
    if values is None:
        raise invalid(
            "bad_prediction",
            f"{subject}: {what} must be a class, a number, a list of numbers or an object like "
            f'{{"label": 1, "probabilities": [...]}} or {{"value": 3.2}}; got {shown(raw)}',
        )
    if len(values) > 1 and min(values) >= 0.0 and max(values) <= 1.0 and abs(sum(values) - 1.0) <= PROBA_SUM_TOLERANCE:
        return LivePrediction(label=argmax(values), probabilities=values)
    return LivePrediction(value=values)


def parse_prediction(raw: object, event_id: str | None) -> LivePrediction:
    """The plain event's ``prediction``: ``{label, probabilities}`` (classifier), ``{value}`` (regressor), or a bare
    class, number or list (:func:`bare_prediction`)."""
    if not isinstance(raw, dict):
        return bare_prediction(raw, who(event_id))
    label: int | None = None
    probabilities: tuple[float, ...] | None = None
    value: tuple[float, ...] | None = None
    raw_label, raw_probabilities, v = raw.get("label"), raw.get("probabilities"), raw.get("value")
    if raw_label is not None:
        label = as_label(raw_label)
        if label is None:
            raise invalid(
                "bad_prediction",
                f"{who(event_id)}: prediction 'label' must be an integer class; got {shown(raw_label)} (classes fit in int64)",
            )
    if raw_probabilities is not None:
        probabilities = number_tuple(raw_probabilities)
        if probabilities is None or not (min(probabilities) >= 0.0 and max(probabilities) <= 1.0):
            raise invalid(
                "bad_prediction",
                f"{who(event_id)}: prediction 'probabilities' must be a list of numbers in [0, 1]; got {shown(raw_probabilities)}",
            )
        if label is None:
            label = argmax(probabilities)
    if v is not None:
        number = finite_float(v)
        if number is not None:
            value = (number,)
        else:
            value = number_tuple(v)
            if value is None:
                raise invalid(
                    "bad_prediction",
                    f"{who(event_id)}: prediction 'value' must be a finite number or list; got {shown(v)}",
                )
    if label is None and value is None:
        raise invalid(
            "bad_prediction",
            f"{who(event_id)}: 'prediction' has none of 'label', 'probabilities', 'value'; got {shown(raw)}",
        )
    return LivePrediction(label=label, probabilities=probabilities, value=value)


def explain_bad_values(
    values: Sequence[object],
    names: Sequence[str] | None,
    event_id: str | None,
    where: str | None = None,
    elements: Sequence[str] | None = None,
) -> None:
    """Slow path: name the first offending feature, or return when every feature is valid after all (many values
    near ±3.4e38 whose hypot exceeds the bound although each is within it). ``where`` names the event in messages
    (default: by ``event_id``); ``elements`` are the model's element names (``input[3]``), which name an unnamed
    feature in the error's ``inputs`` as the drift gauges name it."""
    subject = where if where is not None else who(event_id)
    for i, v in enumerate(values):
        label = f"'{names[i]}'" if names is not None else f"[{i}]"
        name = str(names[i]) if names is not None else (elements[i] if elements is not None else f"f{i}")
        if not isinstance(v, int | float):  # bools pass as 0/1, as they do on the fast path
            raise invalid(
                "bad_type",
                f"{subject}: feature {label} must be a number; got {shown(v)}",
                ((name, "missing"),) if v is None else (),
            )
        try:
            number = float(v)
        except OverflowError:  # an integer beyond float64
            number = math.inf
        if math.isnan(number) or (math.isinf(number) and isinstance(v, float)):
            raise invalid(
                "not_finite",
                f"{subject}: feature {label} is {v!r}; every feature must be finite",
                ((name, "not_finite"),),
            )
        if abs(number) > FLOAT32_MAX:
            raise invalid(
                "out_of_range",
                f"{subject}: feature {label} is {shown(v, 30)}, beyond float32's range (±3.4e38) in which the "
                "model computes; send values in the model's units (a sentinel such as 1e300 for 'missing' does not work)",
                ((name, "out_of_range"),),
            )
