"""A model's inputs as the monitor sees them: one vector of perturbable features, and values held fixed.

A model may take any number of inputs. Each is a tensor ``[batch, d1, d2, …]`` (or ``[batch]``):

- **perturbable**: float, double, float16 and bfloat16 inputs. Their elements, concatenated in the graph's input
  order and row-major within each input, form the feature vector x — what balls, flicker noise, standardization,
  drift and probes act on; x is float32 whatever the input's precision (half-precision inputs get x cast at the
  input, in the graph). An input ``[batch, 1]`` or ``[batch]`` gives one feature named after the input (skl2onnx's
  one input per column); ``[batch, n]`` gives ``name[0]`` … ``name[n-1]``; an N-D input ``[batch, 1, 8, 8]`` gives
  ``name[0,0,0]`` … ``name[0,7,7]`` (an image in NCHW or NHWC order, as the model takes it).
- **held fixed**: int, bool and string inputs (categorical columns, ids), and the float features named in the
  ``fixed_features`` setting (a one-hot column, a count stored as float). Their values are copied unchanged to every
  ball point, noise copy and probe row; they travel beside x as :class:`Held`.

A model of one 2-D float32 or float64 input with a free batch dimension and no fixed features is *plain*: x is its
input as it is. Any other model is rewritten at load (:func:`~monitor.model.canonical.canonical_model`) into one taking ``x`` [batch, D]
float32, the held float features [batch, H] float32 (when ``fixed_features`` names some) and its non-float inputs as
they are; the rewrite gathers, reshapes and casts x back into the model's inputs inside the graph, so the rest of the
monitor sees a model of one 2-D float input plus held values.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from numpy.typing import NDArray
from onnx import TensorProto

from monitor.config import ModelSettings, ScoringSettings, setting_default
from monitor.errors import ModelError, SignatureError, names_listed
from monitor.model.input_values import as_float, as_held, flatten, held_row, nest

#: the ``fixed_features`` setting's default (no float feature held), as a signature takes it
FIXED_FEATURES: tuple[str, ...] = tuple(setting_default(ModelSettings, "fixed_features"))
#: the ``channel_axis`` setting's default
_CHANNEL_AXIS: int = setting_default(ScoringSettings, "channel_axis")

#: the key of :class:`Held` under which the float features held by ``fixed_features`` travel
HELD_COLUMNS = "@fixed_features"

_FLOATS: dict[int, np.dtype[Any]] = {
    TensorProto.FLOAT: np.dtype(np.float32),
    TensorProto.DOUBLE: np.dtype(np.float64),
    # half precision: x stays float32, the rewrite casts it at the input (see the module docstring)
    TensorProto.FLOAT16: np.dtype(np.float16),
    # numpy has no bfloat16, and onnxruntime's Python API takes none: only the rewritten graph feeds this input
    TensorProto.BFLOAT16: np.dtype(np.float32),
}
_HELD_TYPES: dict[int, np.dtype[Any]] = {
    TensorProto.INT8: np.dtype(np.int8),
    TensorProto.INT16: np.dtype(np.int16),
    TensorProto.INT32: np.dtype(np.int32),
    TensorProto.INT64: np.dtype(np.int64),
    TensorProto.UINT8: np.dtype(np.uint8),
    TensorProto.UINT16: np.dtype(np.uint16),
    TensorProto.UINT32: np.dtype(np.uint32),
    TensorProto.UINT64: np.dtype(np.uint64),
    TensorProto.BOOL: np.dtype(np.bool_),
    TensorProto.STRING: np.dtype(object),
}
_TYPE_NAMES: dict[int, str] = {
    TensorProto.FLOAT: "float",
    TensorProto.DOUBLE: "double",
    TensorProto.FLOAT16: "float16",
    TensorProto.BFLOAT16: "bfloat16",
    TensorProto.INT8: "int8",
    TensorProto.INT16: "int16",
    TensorProto.INT32: "int32",
    TensorProto.INT64: "int64",
    TensorProto.UINT8: "uint8",
    TensorProto.UINT16: "uint16",
    TensorProto.UINT32: "uint32",
    TensorProto.UINT64: "uint64",
    TensorProto.BOOL: "bool",
    TensorProto.STRING: "string",
}


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One model input: its name, ONNX element type, the dimensions of one row and the batch dimension.

    ``batch`` is None for a free batch dimension (``N``, ``batch_size``, ``?``) and the fixed size otherwise.
    """

    name: str
    elem_type: int
    dims: tuple[int, ...]
    batch: int | None

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy type the model takes (object for strings)."""
        return _FLOATS.get(self.elem_type) or _HELD_TYPES[self.elem_type]

    @property
    def is_float(self) -> bool:
        return self.elem_type in _FLOATS

    @property
    def size(self) -> int:
        """Elements per row."""
        return math.prod(self.dims)

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES.get(self.elem_type, f"type {self.elem_type}")

    def describe(self) -> str:
        """``'age' float [batch, 1]`` — as messages name an input."""
        batch = "batch" if self.batch is None else str(self.batch)
        return f"'{self.name}' {self.type_name} [{', '.join([batch, *map(str, self.dims)])}]"

    def element_names(self) -> list[str]:
        """The names of its elements (see the module docstring)."""
        if self.size == 1:
            return [self.name]
        if len(self.dims) == 1:
            return [f"{self.name}[{i}]" for i in range(self.dims[0])]
        return [f"{self.name}[{','.join(map(str, idx))}]" for idx in np.ndindex(*self.dims)]


@dataclass(frozen=True, slots=True)
class Held:
    """Values held fixed, for B rows: each non-float input as ``(B, *dims)`` in the model's type, and the float
    features of ``fixed_features`` as ``(B, H)`` float32 under :data:`HELD_COLUMNS`."""

    values: Mapping[str, NDArray[Any]]

    def __len__(self) -> int:
        for v in self.values.values():
            return int(v.shape[0])
        return 0

    def take(self, index: NDArray[np.integer[Any]] | NDArray[np.bool_] | slice) -> Held:
        """The rows at ``index``."""
        return Held({k: v[index] for k, v in self.values.items()})

    def repeat(self, times: int) -> Held:
        """Each row ``times`` times in a row (the layout of an event's ball points or copies)."""
        return Held({k: np.repeat(v, times, axis=0) for k, v in self.values.items()})

    @staticmethod
    def concat(parts: Sequence[Held]) -> Held:
        """The rows of ``parts`` one after the other."""
        keys = list(parts[0].values)
        return Held({k: np.concatenate([p.values[k] for p in parts]) for k in keys})

    @staticmethod
    def stack(rows: Sequence[Mapping[str, NDArray[Any]]]) -> Held:
        """B single rows (each key's value without the batch dimension) as one :class:`Held`."""
        keys = list(rows[0])
        return Held({k: np.stack([np.asarray(r[k]) for r in rows]) for k in keys})


@dataclass(frozen=True, slots=True)
class Signature:
    """What a model takes (see the module docstring).

    Attributes
    ----------
    inputs : the model's inputs in graph order.
    features : the names of x's D elements, in order.
    held_features : the float elements held by ``fixed_features``, in order (H of them).
    """

    inputs: tuple[InputSpec, ...]
    features: tuple[str, ...]
    held_features: tuple[str, ...] = ()
    #: per float input: for each of its elements, the column of [x | held columns] it comes from
    _sources: dict[str, NDArray[np.intp]] = field(default_factory=dict, repr=False)

    def columns_of(self, name: str) -> NDArray[np.intp]:
        """For each element of float input ``name``: the column of [x | held columns] it comes from."""
        return self._sources[name]

    @classmethod
    def from_graph(
        cls, graph: onnx.GraphProto, fixed_features: Sequence[str] = FIXED_FEATURES, *, model: str = ""
    ) -> Signature:
        """Read the graph's inputs (initializers listed as inputs are not inputs).

        Raises
        ------
        ModelError
            No input, an input that is not a tensor, a type the monitor cannot feed (complex …), a non-batch
            dimension that is not a fixed integer, or a ``fixed_features`` name that is no float feature.
        """
        initialized = {i.name for i in graph.initializer}
        specs = [_spec(vi, model) for vi in graph.input if vi.name not in initialized]
        if not specs:
            raise ModelError(f"model '{model}' has no inputs; expected at least one float input [batch, …]")
        return cls.build(specs, fixed_features, model=model)

    @classmethod
    def build(
        cls, specs: Sequence[InputSpec], fixed_features: Sequence[str] = FIXED_FEATURES, *, model: str = ""
    ) -> Signature:
        all_float: list[str] = []
        for spec in specs:
            if spec.is_float:
                all_float.extend(spec.element_names())
        fixed = list(dict.fromkeys(fixed_features))
        unknown = [f for f in fixed if f not in all_float and f not in {s.name for s in specs if s.is_float}]
        if unknown:
            raise ModelError(
                f"fixed_features names {unknown} but model '{model}' has no such float feature; its float features "
                f"are {_listed(all_float)} (an input's name holds all its elements)"
            )
        held_set: set[str] = set()
        for name in fixed:
            whole = next((s for s in specs if s.is_float and s.name == name), None)
            held_set.update(whole.element_names() if whole is not None else [name])
        features = [f for f in all_float if f not in held_set]
        held = [f for f in all_float if f in held_set]
        if not features:
            raise ModelError(
                f"model '{model}' has no float feature to perturb: inputs {', '.join(s.describe() for s in specs)}"
                + (f", fixed_features {fixed}" if fixed else "")
                + "; the monitor perturbs float inputs (it holds int, bool and string inputs fixed)"
            )
        column = {name: i for i, name in enumerate(features)}
        column.update({name: len(features) + i for i, name in enumerate(held)})
        sources = {s.name: np.array([column[e] for e in s.element_names()], dtype=np.intp) for s in specs if s.is_float}
        return cls(tuple(specs), tuple(features), tuple(held), sources)

    # -- what it is -----------------------------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return len(self.features)

    @property
    def held_inputs(self) -> tuple[InputSpec, ...]:
        """The non-float inputs."""
        return tuple(s for s in self.inputs if not s.is_float)

    @property
    def float_inputs(self) -> tuple[InputSpec, ...]:
        return tuple(s for s in self.inputs if s.is_float)

    @property
    def has_held(self) -> bool:
        return bool(self.held_inputs or self.held_features)

    @property
    def held_keys(self) -> tuple[str, ...]:
        """The keys a :class:`Held` for this model carries."""
        keys = tuple(s.name for s in self.held_inputs)
        return (*keys, HELD_COLUMNS) if self.held_features else keys

    @property
    def fixed_batch(self) -> int | None:
        """The batch size when an input fixes it (the largest, should inputs disagree), else None."""
        sizes = [s.batch for s in self.inputs if s.batch is not None]
        return max(sizes) if sizes else None

    @property
    def plain(self) -> bool:
        """One 2-D float input ``[batch, n]`` with a free batch and nothing held: the model is used as it is."""
        if len(self.inputs) != 1 or self.held_features:
            return False
        spec = self.inputs[0]
        wide = spec.elem_type in (TensorProto.FLOAT, TensorProto.DOUBLE)  # half precision is cast in the graph
        return wide and spec.batch is None and len(spec.dims) == 1

    def describe(self) -> str:
        """The inputs as one line: ``'age' float [batch, 1], 'city' string [batch, 1]``."""
        return ", ".join(s.describe() for s in self.inputs)

    def summary(self) -> dict[str, Any]:
        """A JSON-able summary for ``/readyz`` and logs."""
        return {
            "inputs": [s.describe() for s in self.inputs],
            "n_features": self.n_features,
            "held": [s.name for s in self.held_inputs] + list(self.held_features),
        }

    # -- numpy side -------------------------------------------------------------------------------------------
    def feeds(self, x: NDArray[Any], held: Held | None) -> dict[str, NDArray[Any]]:
        """The model's original inputs for B rows of x (B, D) and their held values: the reference the
        rewritten graph must agree with, and the row-by-row path for graphs that cannot be rewritten."""
        b = x.shape[0]
        self.check_held(held, b)
        full = np.asarray(x, dtype=np.float64)
        if self.held_features:
            assert held is not None
            full = np.concatenate([full, held.values[HELD_COLUMNS].astype(np.float64)], axis=1)
        feeds: dict[str, NDArray[Any]] = {}
        for spec in self.inputs:
            if spec.is_float:
                values = full[:, self._sources[spec.name]].astype(np.float32)  # x is float32 in the monitor
                feeds[spec.name] = values.astype(spec.dtype).reshape(b, *spec.dims)
            else:
                assert held is not None
                feeds[spec.name] = held.values[spec.name]
        return feeds

    def check_held(self, held: Held | None, rows: int) -> None:
        """Raise :class:`ModelError` unless ``held`` carries this model's held values for ``rows`` rows."""
        if not self.has_held:
            return
        if held is None:
            raise ModelError(f"the model holds {_listed(self.held_keys)} fixed; their values were not given")
        missing = [k for k in self.held_keys if k not in held.values]
        if missing:
            raise ModelError(f"held values lack {_listed(missing)}; the model holds {_listed(self.held_keys)} fixed")
        for key in self.held_keys:
            v = held.values[key]
            if v.shape[0] != rows:
                raise ModelError(f"held values '{key}' have {v.shape[0]} rows; expected {rows}")

    def split(self, inputs: Mapping[str, NDArray[Any]], *, where: str = "input") -> tuple[NDArray[np.float64], Held]:
        """The x (B, D) float64 and held values of B rows given as the model's inputs by name (an ``.npz``, a CSV
        whose columns name inputs, KServe named tensors).

        Raises
        ------
        ModelError
            A missing or unknown input, or one of the wrong shape or type; the message names the input, what was
            expected and what arrived.
        """
        names = [s.name for s in self.inputs]
        wrong = inputs_mismatch(names, inputs)
        if wrong:
            raise ModelError(f"{where} must give the model's inputs {_listed(names)}{wrong}")
        b = -1
        full_cols: list[NDArray[np.float64]] = []
        held: dict[str, NDArray[Any]] = {}
        for spec in self.inputs:
            arr = np.asarray(inputs[spec.name])
            if arr.ndim == len(spec.dims) and spec.size == 1 and arr.ndim <= 1:  # [B] for a [B, 1] input
                arr = arr.reshape(-1, *spec.dims)
            if arr.ndim != len(spec.dims) + 1 or tuple(arr.shape[1:]) != spec.dims:
                raise ModelError(
                    f"{where}: input {spec.describe()} expects rows of shape {list(spec.dims)}; got an array of "
                    f"shape {list(arr.shape)}"
                )
            if b < 0:
                b = arr.shape[0]
            elif arr.shape[0] != b:
                raise ModelError(f"{where}: input '{spec.name}' has {arr.shape[0]} rows; the others have {b}")
            if spec.is_float:
                full_cols.append(as_float(arr, spec, where).reshape(b, -1))
            else:
                held[spec.name] = as_held(arr, spec, where)
        full = np.concatenate(full_cols, axis=1) if full_cols else np.zeros((b, 0))
        # full is in the graph's element order; x and the held columns take their columns from it
        order = np.concatenate([self._sources[s.name] for s in self.float_inputs])
        by_column = np.empty_like(full)
        by_column[:, order] = full
        d = self.n_features
        if self.held_features:
            held[HELD_COLUMNS] = by_column[:, d:].astype(np.float32)
        return by_column[:, :d], Held(held)

    def row_from_map(self, values: Mapping[str, object], *, where: str = "event") -> tuple[list[float], dict[str, Any]]:
        """One event's x and held values from a name→value map: each input by its name (a scalar for a one-element
        input, a nested list for ``[n]`` or N-D), or each feature by its element name (``age``, ``x[3]``).

        Raises
        ------
        SignatureError
            A missing or unknown name, or a value of the wrong shape or type; ``reason`` is ``missing_field`` or
            ``bad_features``.
        """
        by_input: dict[str, object] = {}
        loose: dict[str, object] = {}
        input_names = {s.name for s in self.inputs}
        for key, value in values.items():
            (by_input if key in input_names else loose)[key] = value
        if loose:  # element names: "x[3]" of a float input given feature by feature
            elements = {s.name: s.element_names() for s in self.float_inputs if s.name not in by_input}
            dims = {s.name: s.dims for s in self.float_inputs}
            for spec_name, names in elements.items():
                if any(n in loose for n in names):
                    missing = [n for n in names if n not in loose]
                    if missing:
                        raise SignatureError(
                            "missing_field",
                            f"{where} gives {spec_name}'s elements one by one but lacks {_listed(missing)}",
                            tuple((n, "missing") for n in missing),
                        )
                    flat = [loose.pop(n) for n in names]
                    # nested as the input's shape: flatten checks the nesting it is given
                    by_input[spec_name] = nest(flat, dims[spec_name])
            if loose:
                raise SignatureError(
                    "bad_features",
                    f"{where} has {_listed(sorted(loose))}, which the model does not take; it takes "
                    f"{_listed(sorted(input_names))}",
                )
        missing = [s.name for s in self.inputs if s.name not in by_input]
        if missing:
            raise SignatureError(
                "missing_field",
                f"{where} lacks {_listed(missing)}; the model takes {self.describe()}",
                tuple((n, "missing") for n in missing),
            )
        full: list[float] = []
        held: dict[str, Any] = {}
        for spec in self.inputs:
            value = by_input[spec.name]
            flat = flatten(value, spec, where)
            if spec.is_float:
                for i, v in enumerate(flat):
                    if type(v) not in (float, int) or isinstance(v, bool):
                        raise SignatureError(
                            "bad_features",
                            f"{where}: input {spec.describe()} takes numbers; got a JSON {type(v).__name__}",
                            ((spec.element_names()[i], "missing"),) if v is None else (),
                        )
                    if not math.isfinite(v) or abs(v) > _FLOAT32_MAX:  # type: ignore[arg-type] # a number
                        problem = "out_of_range" if math.isfinite(v) else "not_finite"  # type: ignore[arg-type]
                        raise SignatureError(
                            "non_finite",
                            f"{where}: input '{spec.name}' holds {v!r}; expected finite float32 values",
                            ((spec.element_names()[i], problem),),
                        )
                full.extend(float(v) for v in flat)  # type: ignore[arg-type] # checked numbers above
            else:
                held[spec.name] = held_row(flat, spec, where)
        order = np.concatenate([self._sources[s.name] for s in self.float_inputs])
        by_column = [0.0] * len(full)
        for position, column in zip(range(len(full)), order, strict=True):
            by_column[int(column)] = full[position]
        d = self.n_features
        if self.held_features:
            held[HELD_COLUMNS] = np.asarray(by_column[d:], dtype=np.float32)
        return by_column[:d], held

    def row_from_list(self, values: Sequence[float]) -> tuple[list[float], dict[str, Any]]:
        """One event's x and held values from a flat list of every float element in graph order (only for models
        without non-float inputs)."""
        if self.held_inputs:
            raise SignatureError(
                "bad_features",
                f"the model also takes {_listed([s.name for s in self.held_inputs])}, which a list cannot carry; "
                "give 'features' as a name→value map",
            )
        order = np.concatenate([self._sources[s.name] for s in self.float_inputs])
        if len(values) != len(order):
            raise SignatureError(
                "wrong_feature_count", f"the model takes {len(order)} float values; the list has {len(values)}"
            )
        by_column = [0.0] * len(order)
        for position, column in enumerate(order):
            by_column[int(column)] = values[position]
        d = self.n_features
        held: dict[str, Any] = {}
        if self.held_features:
            held[HELD_COLUMNS] = np.asarray(by_column[d:], dtype=np.float32)
        return by_column[:d], held


def scale_groups(signature: Signature, scale: str, channel_axis: int = _CHANNEL_AXIS) -> NDArray[np.intp] | None:
    """The standardizer's feature groups (:meth:`monitor.model.standardize.Standardizer.fit`) for a ``scale``
    setting: ``per_feature`` (None: each feature its own), ``global`` (one group), ``per_channel`` (the elements of
    each float input with the same index along ``channel_axis`` of its shape, batch included: 1 for NCHW, -1 for
    NHWC; an input of fewer dimensions is one group).

    Raises
    ------
    ModelError
        An unknown setting, or a channel axis outside an input's shape.
    """
    if scale == "per_feature":
        return None
    d = signature.n_features
    if scale == "global":
        return np.zeros(d, dtype=np.intp)
    if scale != "per_channel":
        raise ModelError(f"scale must be per_feature, global or per_channel; got {scale!r}")
    column = {name: i for i, name in enumerate(signature.features)}
    groups = np.zeros(d, dtype=np.intp)
    next_group = 0
    for spec in signature.float_inputs:
        rank = len(spec.dims) + 1
        names = spec.element_names()
        if rank < 3:  # no channel axis: the whole input is one group
            for name in names:
                if name in column:
                    groups[column[name]] = next_group
            next_group += 1
            continue
        axis = channel_axis if channel_axis >= 0 else rank + channel_axis
        if not 1 <= axis < rank:
            raise ModelError(
                f"channel_axis {channel_axis} is outside input {spec.describe()}: give 1 for NCHW or -1 for NHWC"
            )
        channels = spec.dims[axis - 1]
        for name, index in zip(names, np.ndindex(*spec.dims), strict=True):
            if name in column:
                groups[column[name]] = next_group + index[axis - 1]
        next_group += channels
    return groups


def default_held(signature: Signature, rows: int) -> Held | None:
    """Held values at their defaults — 0, False, the empty string — for ``rows`` rows (None: nothing is held);
    for load-time checks and for a regressor's output scale when no held values were seen."""
    if not signature.has_held:
        return None
    held: dict[str, NDArray[Any]] = {}
    for s in signature.held_inputs:
        if s.elem_type == TensorProto.STRING:
            held[s.name] = np.full((rows, *s.dims), "", dtype=object)
        else:
            held[s.name] = np.zeros((rows, *s.dims), dtype=s.dtype)
    if signature.held_features:
        held[HELD_COLUMNS] = np.zeros((rows, len(signature.held_features)), dtype=np.float32)
    return Held(held)


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _listed(names: Sequence[str]) -> str:
    return names_listed(names, 8)


def inputs_mismatch(expected: Sequence[str], given: Iterable[str]) -> str:
    """ "" where ``given`` names exactly the ``expected`` inputs; else "; missing …" and/or "; unknown …" (to follow
    a message that lists ``expected``)."""
    given = list(given)
    missing = [n for n in expected if n not in given]
    extra = [n for n in given if n not in expected]
    return (f"; missing {_listed(missing)}" if missing else "") + (f"; unknown {_listed(extra)}" if extra else "")


def _spec(vi: onnx.ValueInfoProto, model: str) -> InputSpec:
    if not vi.type.HasField("tensor_type"):
        raise ModelError(
            f"model '{model}' input '{vi.name}' is a {str(vi.type.WhichOneof('value')).removesuffix('_type')}, not a "
            "tensor; the monitor feeds "
            "tensors only (sequences and maps as inputs are not supported)"
        )
    tensor = vi.type.tensor_type
    elem = tensor.elem_type
    if elem not in _FLOATS and elem not in _HELD_TYPES:
        raise ModelError(
            f"model '{model}' input '{vi.name}' is {_TYPE_NAMES.get(elem, f'type {elem}')}; supported input types "
            "are float, double, float16 and bfloat16 (perturbed), int, uint, bool and string (held fixed). Cast it "
            "in the graph or export the model with float32 inputs"
        )
    if not tensor.HasField("shape") or not tensor.shape.dim:
        raise ModelError(
            f"model '{model}' input '{vi.name}' has no shape (or is a scalar); expected [batch, …] with fixed "
            "dimensions after the batch"
        )
    dims = list(tensor.shape.dim)
    batch = dims[0].dim_value if dims[0].HasField("dim_value") and dims[0].dim_value > 0 else None
    rest: list[int] = []
    for i, d in enumerate(dims[1:], start=1):
        if not d.HasField("dim_value") or d.dim_value < 1:
            shown = [str(x.dim_value) if x.HasField("dim_value") else (x.dim_param or "?") for x in dims]
            raise ModelError(
                f"model '{model}' input '{vi.name}' has shape [{', '.join(shown)}]: dimension {i} is not a fixed "
                "integer; the monitor needs every dimension but the batch fixed (export with a fixed sequence length "
                "or image size)"
            )
        rest.append(int(d.dim_value))
    if not rest:
        rest = [1]  # [batch]: one value per row, fed as [batch]
        return InputSpec(vi.name, elem, (), batch)
    return InputSpec(vi.name, elem, tuple(rest), batch)
