"""Stage 1 (source): the features of an event for a model with a signature (several inputs, string/int inputs,
N-D tensors, ``fixed_features``), as :class:`~monitor.source.validate.ModelSchema` decodes them
(:func:`signature_row`), with the reasons plain events get for the same faults."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from monitor.errors import SignatureError
from monitor.source.validate import FLOAT32_MAX, explain_bad_values, invalid, shown

if TYPE_CHECKING:  # not imported at run time: the signature module pulls in onnx, and a schema's signature is given
    from monitor.model.signature import InputSpec, Signature

#: :class:`~monitor.errors.SignatureError` reasons → :data:`INVALID_REASONS` (``bad_features`` becomes
#: ``unknown_feature`` when the map names something the model does not take, ``non_finite`` ``out_of_range`` when
#: the value is finite but beyond float32's range: the reasons plain events get for the same faults)
_SIGNATURE_REASONS: dict[str, str] = {
    "missing_field": "missing_field",
    "bad_features": "bad_type",
    "non_finite": "not_finite",
    "wrong_feature_count": "wrong_width",
}


def signature_row(raw: object, signature: Signature, where: str) -> tuple[list[float], dict[str, Any] | None]:
    """One event's feature vector x and held values, from its ``features`` as a model with ``signature`` takes them.

    ``raw`` is a JSON list of every float element in graph order (only for a model without non-float inputs), or
    a name→value map whose keys are input names (a scalar for a one-element input, nested lists for ``[n]`` and
    N-D inputs, strings for string inputs, integers for int inputs, booleans for bool inputs) or float element
    names (``age``, ``pixels[0,3,1]``). ``where`` names the event in messages (``model 'm': event 'e1'``).

    Returns
    -------
    (list of float, dict or None)
        x in ``signature.features`` order (D values, finite and within float32's range), and the held values by
        input name (each row without the batch dimension; ``fixed_features`` columns under
        :data:`~monitor.model.signature.HELD_COLUMNS`), or None when the model holds nothing.

    Raises
    ------
    InvalidEventError
        ``bad_type``, ``missing_field``, ``unknown_feature``, ``wrong_width``, ``not_finite`` or ``out_of_range``;
        the message names the input, what was expected and what arrived.
    """
    try:
        if isinstance(raw, list):
            x, held = signature.row_from_list(raw)
            try:  # row_from_list places the values without looking at them (see EventDecoder._features)
                safe = math.hypot(*raw) <= FLOAT32_MAX
            except (TypeError, OverflowError):
                safe = False
            if not safe:
                names = [n for s in signature.float_inputs for n in s.element_names()]
                explain_bad_values(raw, names, None, where)
        elif isinstance(raw, dict):
            x, held = signature.row_from_map(_nested_elements(raw, signature), where=where)
        else:
            as_list = "" if signature.held_inputs else " or a list of its float values in graph order"
            raise invalid(
                "bad_type",
                f"{where}: 'features' must be a name→value map of the model's inputs ({signature.describe()})"
                f"{as_list}; got a JSON {type(raw).__name__}",
            )
    except SignatureError as exc:
        message = str(exc) if isinstance(raw, dict) else f"{where}: {exc}"  # row_from_list does not name the event
        raise invalid(_signature_reason(exc.reason, raw, signature), message, exc.inputs) from None
    except OverflowError:  # an integer beyond float64 for a float input: math.isfinite cannot take it
        bad = _first_bad_number(raw, signature)
        name = f"input '{bad.input}' ({bad.element})" if bad is not None else "a float input"
        raise invalid(
            "out_of_range",
            f"{where}: {name} holds an integer beyond float's range; send values in the model's units (within ±3.4e38)",
            ((bad.element, "out_of_range"),) if bad is not None else (),
        ) from None
    if not signature.has_held:
        return x, None
    check_strings(held, signature.held_inputs, where)
    return x, held


def _nested_elements(raw: dict[str, object], signature: Signature) -> dict[str, object]:
    """``raw`` with the element names of an N-D float input (``img[0,3,1]``…), when it gives them all, replaced by
    the input's nested list: :meth:`Signature.row_from_map` gathers element names into a flat list, which it takes
    for a ``[n]`` input only."""
    for spec in signature.float_inputs:
        if len(spec.dims) < 2 or spec.name in raw:
            continue
        names = spec.element_names()
        if names[0] not in raw or not all(n in raw for n in names):
            continue  # not given by element, or some missing: row_from_map says which
        nested: list[object] = [raw[n] for n in names]
        for size in reversed(spec.dims[1:]):
            nested = [nested[i : i + size] for i in range(0, len(nested), size)]
        given = set(names)
        raw = {k: v for k, v in raw.items() if k not in given}
        raw[spec.name] = nested
    return raw


def check_strings(held: Mapping[str, Any], specs: Sequence[InputSpec], where: str) -> None:
    """Refuse a string for a string input that has no UTF-8 form (a lone surrogate, a valid JSON escape): the model
    runtime encodes strings as UTF-8 and would fail on it at scoring time, not here."""
    for spec in specs:
        if spec.type_name != "string":
            continue
        for value in getattr(held[spec.name], "flat", (held[spec.name],)):
            if isinstance(value, str) and not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise invalid(
                        "bad_type",
                        f"{where}: input {spec.describe()} holds {shown(value)}, which is not valid Unicode (a lone "
                        "surrogate); send UTF-8 text",
                    ) from None


def _signature_reason(reason: str, raw: object, signature: Signature) -> str:
    if reason == "bad_features" and isinstance(raw, dict):
        known = {s.name for s in signature.inputs} | {n for s in signature.float_inputs for n in s.element_names()}
        if any(key not in known for key in raw):
            return "unknown_feature"
    if reason == "non_finite":
        bad = _first_bad_number(raw, signature)
        if bad is not None:
            return bad.problem
    return _SIGNATURE_REASONS.get(reason, "bad_type")


class _BadNumber(NamedTuple):
    """Where :func:`_first_bad_number` found a number that float32 cannot hold."""

    input: str
    element: str  # the element's name, as its drift gauges carry it (``x[2]``; the input's name for one value)
    problem: str  # ``not_finite`` or ``out_of_range``


def _first_bad_number(raw: object, signature: Signature) -> _BadNumber | None:
    """The first number of a float input in ``raw`` (a map) that is not finite or beyond float32's range, in the
    order :meth:`Signature.row_from_map` checks them."""
    if not isinstance(raw, dict):
        return None
    for spec in signature.float_inputs:
        names = spec.element_names()
        stack: list[object] = [raw[spec.name]] if spec.name in raw else [raw.get(n) for n in names]
        stack.reverse()
        leaf = 0  # the element's position in row-major order: its name
        while stack:  # depth first, in order, without recursion (JSON nests up to ~1000 deep)
            v = stack.pop()
            if isinstance(v, list):
                stack.extend(reversed(v))
                continue
            element = names[leaf] if leaf < len(names) else spec.name
            leaf += 1
            if isinstance(v, float) and not math.isfinite(v):
                return _BadNumber(spec.name, element, "not_finite")
            if isinstance(v, int | float) and not isinstance(v, bool) and abs(v) > FLOAT32_MAX:
                return _BadNumber(spec.name, element, "out_of_range")
    return None
