"""Stage 3: what a model's outputs mean — the one decision every later stage reads.

:func:`decide_outputs` reads the graph once, at load, and says whether the model is a classifier or a regressor,
which output holds its labels, its probabilities and its logits, and why. ``OnnxModel`` logs that decision in one
INFO line and every later stage (scorer, shadow check, probes, labels) reads it through ``OnnxModel.kind``,
``has_proba`` and ``has_logits``. The decision looks at the outputs and the nodes that produce or read them, never
at the inputs, so models with several inputs or image inputs get the same decision.

Evidence, strongest first (per float output, through ``Identity``/``Reshape``/``Squeeze``/``Unsqueeze``/``Flatten``/
``Cast`` and ``ai.onnx.ml`` ``ArrayFeatureExtractor`` back to the node that computes it):

- decision scores, read as logits: the scores of an ``ai.onnx.ml`` ``LinearClassifier`` with no post-transform —
  margins of any sign and size, not probabilities, though skl2onnx names them ``probabilities`` (``LinearSVC``,
  ``RidgeClassifier``; a binary one computes the positive class's score alone: one logit column, whatever shape it
  declares);
- probabilities: the tensor a ZipMap read (rewritten at load), a ``Softmax``, the scores of any other
  ``ai.onnx.ml`` ``*Classifier`` node, a name containing ``prob``;
- logits (class scores): a ``LogSoftmax`` (log-probabilities: same argmax, same softmax), a ``Softmax`` or an
  ``ArgMax`` (axis 1) that reads the output — the graph itself turns it into classes —, a name containing ``logit``,
  a name containing ``raw`` beside a label or probability output;
- labels: an integer or string output;
- regression values: an ``ai.onnx.ml`` ``*Regressor`` node.

Any label, probability or logits output makes a classifier; otherwise the float outputs are regression values.
Probabilities split into one output per class (skl2onnx ``zipmap='columns'``: a label output beside two or more
unmarked one-column float outputs) are refused with a message saying how to convert instead: read one at a time,
the first would pass for P(class 1).
A float ``[N, C ≥ 2]`` output with no evidence either way stays a regressor — its C columns read as C regression
targets — and the log line says so and how to override (``model_kind: classifier``); docs/SPEC-NOTES.md argues that
choice. When the class scores are logits only, the model's probabilities are their softmax (sigmoid for a single
logit column): ``OnnxModel`` adds that node to the graph at load (:attr:`OutputDecision.softmax_of`), so the class
is the argmax of the logits and γ, flicker and P_adj are the classifier's as docs/SPEC-NOTES.md defines them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from monitor.config import ModelSettings, setting_default
from monitor.errors import ModelError
from monitor.model.base import ModelKind

#: the ``model_kind`` setting: decide from the graph, or take the given kind
ModelKindSetting = Literal["auto", "classifier", "regressor"]
#: what a model's outputs are read as unless told (the setting's default)
MODEL_KIND: ModelKindSetting = setting_default(ModelSettings, "model_kind")

#: nodes that pass a tensor on without changing what its values mean
_PASS_THROUGH = frozenset({"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Cast"})
#: ``ai.onnx.ml`` nodes that pass a tensor on the same way (``ArrayFeatureExtractor`` selects columns)
_ML_PASS_THROUGH = frozenset({"ArrayFeatureExtractor"})
_FLOAT = ("float", "double", "float16")
_LABEL = ("int64", "int32", "string")


@dataclass(frozen=True, slots=True)
class OutputInfo:
    """One graph output: its name, element type (``float``, ``double``, ``int64``, ``string``, ... or ``sequence``
    for a ZipMap that could not be rewritten) and shape (ints, symbolic names or None per axis)."""

    name: str
    elem: str
    shape: tuple[int | str | None, ...]

    @property
    def columns(self) -> int | None:
        """Values per row: 1 for ``[N]``, C for ``[N, C]``; None when not fixed (or another rank)."""
        if len(self.shape) == 1:
            return 1
        if len(self.shape) == 2 and isinstance(self.shape[1], int):
            return self.shape[1]
        return None

    def describe(self) -> str:
        """As onnxruntime describes an output: ``'y' tensor(float) ['N', 2]``."""
        return f"'{self.name}' tensor({self.elem}) {list(self.shape)}"


@dataclass(frozen=True, slots=True)
class OutputDecision:
    """:func:`decide_outputs`'s result.

    Attributes
    ----------
    kind : classifier or regressor.
    label : the model's own label output (class values, int or str), or None.
    proba : the probability output ``[N, C]`` (or ``[N]``/``[N, 1]``: P(class 1)), or None.
    logits : the logits output ``[N, C]`` (or ``[N]``/``[N, 1]``: the logit of class 1), or None.
    values : the regression outputs, concatenated column-wise in this order (regressors only).
    softmax_of : when set, ``proba`` is not an output of the model but the softmax (sigmoid for one column) of this
        logits output, added to the graph at load.
    reason : why, in words, for the load log.
    ignored : outputs the monitor does not read.
    """

    kind: ModelKind
    label: str | None = None
    proba: str | None = None
    logits: str | None = None
    values: tuple[str, ...] = ()
    softmax_of: str | None = None
    reason: str = ""
    ignored: tuple[str, ...] = field(default=())

    def fingerprint(self) -> dict[str, str | list[str] | None]:
        """The decision without its wording, JSON-able: what a saved reference was scored with.

        >>> OutputDecision("regressor", values=("y",), reason="no evidence").fingerprint()["values"]
        ['y']
        """
        return {
            "kind": self.kind,
            "label": self.label,
            "proba": None if self.softmax_of is not None else self.proba,
            "logits": self.logits,
            "softmax_of": self.softmax_of,
            "values": list(self.values),
        }

    def summary(self) -> str:
        """The load log's line: kind, outputs used, why.

        >>> OutputDecision("regressor", values=("y",), reason="no evidence").summary()
        "regressor; values from 'y'; why: no evidence"
        """
        used: list[str] = []
        if self.proba is not None:
            source = f"softmax of '{self.softmax_of}'" if self.softmax_of is not None else f"'{self.proba}'"
            used.append(f"probabilities from {source}")
        if self.logits is not None:
            used.append(f"logits from '{self.logits}'")
        if self.label is not None:
            used.append(f"labels from '{self.label}'")
        if self.values:
            used.append("values from " + ", ".join(f"'{v}'" for v in self.values))
        if self.ignored:
            used.append("ignored " + ", ".join(f"'{v}'" for v in self.ignored))
        return f"{self.kind}; {'; '.join(used)}; why: {self.reason}"


@dataclass(frozen=True, slots=True)
class _Evidence:
    role: Literal["proba", "logits", "regression", "none"]
    why: str


def graph_outputs(graph: Any) -> list[OutputInfo]:
    """The graph's outputs as :class:`OutputInfo` (``graph`` an ``onnx.GraphProto``)."""
    from onnx import TensorProto

    infos = []
    for out in graph.output:
        if not out.type.HasField("tensor_type"):
            infos.append(OutputInfo(out.name, "sequence", ()))
            continue
        tensor = out.type.tensor_type
        elem = TensorProto.DataType.Name(tensor.elem_type).lower() if tensor.elem_type else "undefined"
        shape: tuple[int | str | None, ...] = ()
        if tensor.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim)
        infos.append(OutputInfo(out.name, elem, shape))
    return infos


def decide_outputs(
    graph: Any, zipmap: Mapping[str, str] | None = None, model_kind: ModelKindSetting = MODEL_KIND, *, model: str = ""
) -> OutputDecision:
    """Decide, from the graph, what the model's outputs are (see the module docstring).

    Parameters
    ----------
    graph : the ``onnx.GraphProto`` as the sessions load it (ZipMap outputs already rewritten to tensors).
    zipmap : {original ZipMap output: the tensor output that replaced it}.
    model_kind : ``auto`` decides from the graph; ``classifier``/``regressor`` override it.
    model : the model's name, for error messages.

    Raises
    ------
    ModelError
        No output fits the kind (the message lists the outputs).
    """
    outputs = graph_outputs(graph)
    described = ", ".join(o.describe() for o in outputs)
    _refuse_sequences(outputs)
    floats = [o for o in outputs if o.elem in _FLOAT]
    labels = [o for o in outputs if o.elem in _LABEL]
    evidence = {o.name: _evidence(graph, o, set((zipmap or {}).values())) for o in floats}
    if model_kind == "regressor":
        return _set_regressor(floats, labels, described, model)
    label = labels[0].name if labels else None
    proba = next((o for o in floats if evidence[o.name].role == "proba"), None)
    logits = next((o for o in floats if evidence[o.name].role == "logits"), None)
    raw = next((o for o in floats if "raw" in o.name.lower() and o is not proba), None)
    if logits is None and raw is not None and (label is not None or proba is not None):
        logits = raw
        evidence[raw.name] = _Evidence("logits", f"'{raw.name}' is named raw beside a classifier's outputs")
    unmarked = [o for o in floats if o is not proba and o is not logits and evidence[o.name].role == "none"]
    columns = [o for o in unmarked if o.columns == 1]
    if proba is None and logits is None and label is not None and len(columns) >= 2:
        names = ", ".join(f"'{o.name}'" for o in columns)
        raise ModelError(
            f"model '{model}' has a label output '{label}' and one probability output per class ({names}); "
            "export the probabilities as one [batch, classes] tensor: skl2onnx options={'zipmap': False} "
            "(or the default ZipMap) rather than zipmap='columns'; set model_kind: regressor if they are "
            f"regression targets (outputs: {described})"
        )
    if proba is None and logits is None and label is not None and unmarked:
        proba = unmarked[0]  # e.g. a converter's [N, C] scores next to its label, with no telling name
        evidence[proba.name] = _Evidence("proba", f"'{proba.name}' is the float output beside label output '{label}'")
    forced = model_kind == "classifier"
    if forced and proba is None and logits is None and label is None:
        if not floats:
            raise ModelError(
                f"model '{model}' is set to model_kind: classifier but has no float or label outputs ({described})"
            )
        logits = floats[0]
        evidence[logits.name] = _Evidence("logits", f"'{logits.name}' read as logits (model_kind: classifier)")
    if proba is None and logits is None and label is None:
        return _regressor(floats, evidence, described, model)
    return _classifier(outputs, label, proba, logits, evidence, forced=forced)


def _refuse_sequences(outputs: Sequence[OutputInfo]) -> None:
    """A ZipMap output left as a sequence of maps cannot be read: say how to convert the model without it."""
    for out in outputs:
        if out.elem == "sequence":
            raise ModelError(
                f"model output '{out.name}' is a sequence of maps (ZipMap); convert with zipmap disabled "
                "(skl2onnx options={'zipmap': False}) or use `harmonic-monitor convert`"
            )


def _set_regressor(
    floats: Sequence[OutputInfo], labels: Sequence[OutputInfo], described: str, model: str
) -> OutputDecision:
    """``model_kind: regressor``: every float output is a value; label outputs are ignored."""
    if not floats:
        raise ModelError(
            f"model '{model}' is set to model_kind: regressor but has no float outputs ({described}); "
            "expected float tensors [batch] or [batch, D]"
        )
    return OutputDecision(
        "regressor",
        values=tuple(o.name for o in floats),
        reason="model_kind: regressor (set in the configuration)",
        ignored=tuple(o.name for o in labels),
    )


def _classifier(
    outputs: Sequence[OutputInfo],
    label: str | None,
    proba: OutputInfo | None,
    logits: OutputInfo | None,
    evidence: Mapping[str, _Evidence],
    *,
    forced: bool,
) -> OutputDecision:
    """The classifier decision once its outputs are chosen, with why each was and what is ignored."""
    whys: list[str] = []
    for chosen in (proba, logits):
        if chosen is not None:
            whys.append(evidence[chosen.name].why)
    if label is not None and not whys:
        whys.append(f"'{label}' is an integer or string label output")
    if forced:
        whys.append("model_kind: classifier (set in the configuration)")
    used = {o.name for o in (proba, logits) if o is not None} | ({label} if label is not None else set())
    softmax_of = logits.name if proba is None and logits is not None else None
    return OutputDecision(
        "classifier",
        label=label,
        proba=proba.name if proba is not None else None,
        logits=logits.name if logits is not None else None,
        softmax_of=softmax_of,
        reason="; ".join(whys),
        ignored=tuple(o.name for o in outputs if o.name not in used),
    )


def _regressor(
    floats: Sequence[OutputInfo], evidence: Mapping[str, _Evidence], described: str, model: str
) -> OutputDecision:
    if not floats:
        raise ModelError(
            f"model '{model}' has outputs {described}; expected a probability tensor or ZipMap (classifier) or "
            "float tensors (regressor)"
        )
    marked = [evidence[o.name].why for o in floats if evidence[o.name].role == "regression"]
    if marked:
        reason = "; ".join(marked)
    else:
        reason = "no Softmax, ArgMax, label output, ZipMap or classifier node in the graph"
        wide = [o for o in floats if (o.columns or 2) >= 2]
        if wide:
            reason += (
                f"; the {wide[0].columns or 'C'} columns of '{wide[0].name}' are read as regression targets "
                "(set model_kind: classifier if they are class scores)"
            )
    return OutputDecision("regressor", values=tuple(o.name for o in floats), reason=reason)


def add_probabilities(graph: Any, logits: str) -> str:
    """Add the softmax of the logits output (a sigmoid when it has one column) as a new graph output, in place.

    ``graph`` is an ``onnx.GraphProto``; returns the new output's name. The class stays the argmax of the logits
    (softmax and sigmoid are monotone) and the confidence becomes the probability γ reads f at.
    """
    from onnx import helper

    from monitor.model.broadcast import fresh_namer

    info = next(o for o in graph.output if o.name == logits)
    columns = 1 if _single_column(graph, logits) else next(o for o in graph_outputs(graph) if o.name == logits).columns
    taken = {t for node in graph.node for t in (*node.input, *node.output)} | {o.name for o in graph.output}
    fresh = fresh_namer(taken | {i.name for i in graph.input} | {i.name for i in graph.initializer})
    name = fresh(f"{logits}_probabilities")
    if columns == 1:
        node = helper.make_node("Sigmoid", [logits], [name], name=fresh("monitor_sigmoid"))
    else:
        node = helper.make_node("Softmax", [logits], [name], name=fresh("monitor_softmax"), axis=1)
    graph.node.append(node)
    out = graph.output.add()
    out.CopyFrom(info)
    out.name = name
    return name


def _evidence(graph: Any, out: OutputInfo, zipmap_tensors: set[str]) -> _Evidence:
    """What the graph says one float output is."""
    producers = {t: node for node in graph.node for t in node.output}
    chain = [out.name]
    node = producers.get(out.name)
    while node is not None and node.input and _passes_through(node):
        chain.append(node.input[0])
        node = producers.get(node.input[0])
    name = out.name.lower()
    if node is not None and node.domain == "ai.onnx.ml" and chain[-1] in node.output[1:] and _margins(node):
        return _Evidence(
            "logits", f"'{out.name}' holds the decision scores of {node.op_type} (margins, not probabilities)"
        )
    if out.name in zipmap_tensors:
        return _Evidence("proba", f"'{out.name}' fed a ZipMap (probabilities per class)")
    if node is not None and node.domain in ("", "ai.onnx"):
        if node.op_type == "Softmax":
            return _Evidence("proba", f"'{out.name}' is computed by Softmax")
        if node.op_type == "LogSoftmax":
            return _Evidence("logits", f"'{out.name}' is computed by LogSoftmax (log-probabilities)")
    if node is not None and node.domain == "ai.onnx.ml":
        if node.op_type.endswith("Classifier") and chain[-1] in node.output[1:]:
            return _Evidence("proba", f"'{out.name}' holds the class scores of {node.op_type}")
        if node.op_type.endswith("Regressor"):
            return _Evidence("regression", f"'{out.name}' is computed by {node.op_type}")
    if "prob" in name:
        return _Evidence("proba", f"'{out.name}' is named like probabilities")
    if "logit" in name:
        return _Evidence("logits", f"'{out.name}' is named like logits")
    readers: list[str] = []
    for reader in graph.node:
        if reader.domain not in ("", "ai.onnx") or not any(t in chain for t in reader.input):
            continue
        if (reader.op_type == "ArgMax" and _axis(reader, default=0) in (1, -1)) or reader.op_type == "Softmax":
            readers += [reader.op_type] if reader.op_type not in readers else []
    if readers:
        return _Evidence("logits", f"'{out.name}' is read by {' and '.join(sorted(readers))} (class scores)")
    return _Evidence("none", "")


def _passes_through(node: Any) -> bool:
    """Whether the node hands its first input on with the same meaning (same values, or a selection of columns)."""
    if node.domain in ("", "ai.onnx"):
        return node.op_type in _PASS_THROUGH
    return node.domain == "ai.onnx.ml" and node.op_type in _ML_PASS_THROUGH


def _margins(node: Any) -> bool:
    """Whether an ``ai.onnx.ml`` classifier's scores are decision scores: a ``LinearClassifier`` with no
    post-transform (skl2onnx's ``LinearSVC``, ``RidgeClassifier``). A ``LOGISTIC``/``SOFTMAX`` one is a logistic
    regression's probabilities; tree ensembles with no post-transform average leaf probabilities (random forests).
    ``SVMClassifier`` is not included: onnxruntime's binary scores without Platt scaling are not in class order, so
    their softmax would name the wrong class."""
    if node.op_type != "LinearClassifier":
        return False
    post = next((a.s.decode() for a in node.attribute if a.name == "post_transform"), "NONE")
    return post == "NONE"


def _single_column(graph: Any, name: str) -> bool:
    """Whether ``name`` is computed (through pass-through nodes) by an ``ArrayFeatureExtractor`` that selects one
    column: skl2onnx declares a binary ``LinearSVC``'s score [N, 2] but computes [N, 1] (the positive class)."""
    producers = {t: node for node in graph.node for t in node.output}
    constants = {t.name: t for t in graph.initializer}
    node = producers.get(name)
    while node is not None and node.input and _passes_through(node):
        if node.domain == "ai.onnx.ml" and node.op_type == "ArrayFeatureExtractor" and len(node.input) > 1:
            index = constants.get(node.input[1])
            if index is not None:
                from onnx import numpy_helper

                return bool(numpy_helper.to_array(index).size == 1)
        node = producers.get(node.input[0])
    return False


def _axis(node: Any, *, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == "axis"), default)
