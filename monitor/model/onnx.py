"""Stage 3: the ONNX copy of the model. Load once, check the signature, evaluate batches in chunks.

Supported signatures
--------------------
- any number of inputs, as :mod:`monitor.model.signature` reads them: float and double inputs are perturbed, int,
  bool and string inputs are held fixed; shapes ``[batch]``, ``[batch, n]`` and ``[batch, d1, d2, …]``. A model of
  one 2-D float input is used as it is; any other is rewritten at load to take the feature vector x [batch, D] and
  the held values (:func:`~monitor.model.canonical.canonical_model`);
- a fixed batch dimension is made free by that rewrite when the rewritten model agrees with row-by-row runs of the
  original at load; otherwise rows are evaluated in runs of the fixed size, with a warning that states the measured
  cost per row;
- outputs as :func:`monitor.model.outputs.decide_outputs` reads them, once, at load (logged in one INFO line):
  classifiers expose a probability tensor ``[batch, C]``, the ZipMap (sequence of maps) that skl2onnx emits by
  default — the graph is rewritten at load time to expose the tensor feeding the ZipMap, so the hot path never
  converts Python dicts —, logits, or a label output, in any combination; a classifier with logits alone gets their
  softmax added to the graph as its probabilities (the class stays their argmax); regressors expose float outputs
  ``[batch]`` or ``[batch, D]``. ``model_kind`` overrides the decision.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from numpy.typing import NDArray

from monitor.config import ModelSettings
from monitor.cpus import intra_op_threads
from monitor.errors import ModelError
from monitor.model.base import ModelKind, ModelOutput
from monitor.model.batching import canonical_feed, canonical_graph, merge_outputs, run_fixed
from monitor.model.convert import stored_feature_names
from monitor.model.neighbourhood import NeighbourhoodRunner, binary_positive, neighbourhood_graph
from monitor.model.neighbourhood_evaluator import NeighbourhoodEvaluator, NeighbourhoodRejected, check_neighbourhood
from monitor.model.onnx_read import ExternalData, prepare, read_model
from monitor.model.outputs import MODEL_KIND, ModelKindSetting, OutputDecision
from monitor.model.readout import OutputReader, argmax_rows, positive_output
from monitor.model.session import (
    OnnxRuntimeOptions,
    active_providers,
    offline_options,
    resolve_providers,
    session_options,
)
from monitor.model.signature import FIXED_FEATURES, HELD_COLUMNS, Held
from monitor.model.split_runs import SplitSession

__all__ = [
    "ExternalData",
    "NeighbourhoodEvaluator",
    "NeighbourhoodRejected",
    "OnnxModel",
    "OnnxRuntimeOptions",
    "argmax_rows",
    "read_model",
]

log = logging.getLogger(__name__)


def _first(names: Sequence[str], shown: int = 3) -> str:
    """``a, b, c, …`` — the first few of a list of names."""
    return ", ".join(names[:shown]) + (", …" if len(names) > shown else "")


class OnnxModel:
    """An ONNX model loaded with onnxruntime.

    Loading reads the model (:func:`read_model`), rewrites its graph and decides what its outputs are
    (:func:`prepare`), chooses the execution providers (:mod:`monitor.model.session`), makes its batch dimension
    free or keeps it fixed (:mod:`monitor.model.batching`) and opens the session; :meth:`evaluate` runs rows in
    chunks and reads the outputs (:class:`~monitor.model.readout.OutputReader`), :meth:`neighbourhood` wraps the
    graph for the scorer (:mod:`monitor.model.neighbourhood_evaluator`).

    Parameters
    ----------
    path : the ``.onnx`` file.
    options : providers, thread counts and the chunk size (rows per ``session.run``).
    model_kind : ``auto`` decides classifier or regressor from the graph; ``classifier``/``regressor`` override it.
    fixed_features : float features (element names, or input names for all their elements) held fixed like the
        non-float inputs (see :mod:`monitor.model.signature`).

    Raises
    ------
    ModelError
        The file is missing or not ONNX, or the signature is unsupported (the message names the inputs/outputs).
    """

    @classmethod
    def from_settings(cls, ms: ModelSettings, *, offline: bool = False) -> OnnxModel:
        """The model a model's settings describe, with its onnxruntime options (providers, threads, rows per run,
        rows in graph): ``run`` loads its models, and the offline commands theirs (from their flags), here.

        ``offline``: the command has the machine to itself, and every run is cut into slices run by a thread per CPU
        (:func:`~monitor.model.session.offline_options`); otherwise (``run``, which shares its cores with its
        consumer and HTTP processes) one run at a time on ``threads`` intra-op threads, capped by the container's CPU
        quota."""
        given: dict[str, Any] = {
            "providers": tuple(ms.providers),
            "max_rows_per_run": ms.max_rows_per_run,
            "rows_in_graph": ms.rows_in_graph,
        }
        if offline:
            options = offline_options(ms.threads, **given)
        else:
            options = OnnxRuntimeOptions(intra_op_threads=intra_op_threads(ms.threads, str(ms.path)), **given)
        return cls(
            ms.path,
            options,
            model_kind=ms.model_kind,
            fixed_features=tuple(ms.fixed_features),
        )

    def __init__(
        self,
        path: str | os.PathLike[str],
        options: OnnxRuntimeOptions | None = None,
        *,
        model_kind: ModelKindSetting = MODEL_KIND,
        fixed_features: Sequence[str] = FIXED_FEATURES,
    ) -> None:
        self.path = Path(path)
        self.options = options or OnnxRuntimeOptions()
        if self.options.max_rows_per_run < 1:
            raise ModelError(f"max_rows_per_run must be >= 1; got {self.options.max_rows_per_run}")
        if not self.path.is_file():
            raise ModelError(f"model file '{self.path}' does not exist (expected an .onnx file)")
        model_bytes, self.external_data = read_model(self.path)
        raw, self._zipmap, self._decision, self.signature = prepare(
            model_bytes, model_kind, str(self.path), fixed_features
        )
        self.providers = resolve_providers(self.options.providers)
        graph = canonical_graph(raw, self.signature, options=self.options, providers=self.providers, path=self.path)
        #: rows per ``session.run`` when the model's batch dimension stays fixed (None: free)
        self._run_batch: int | None = graph.run_batch
        self._held_columns: str | None = graph.held_columns
        try:
            session = ort.InferenceSession(
                graph.model, sess_options=session_options(self.options), providers=self.providers
            )
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises several unrelated types
            raise ModelError(f"cannot load '{self.path}' with onnxruntime: {exc}") from exc
        #: what the session runs on (later sessions of this model, the wrapped graph's, get the same list)
        self.providers = active_providers(session, self.providers, str(self.path))
        self._session: Any = session if self._run_batch is not None else self._split(session)
        self._inspect_signature()
        self._model_bytes = graph.model  # ZipMap removed, inputs canonical; what :meth:`neighbourhood` wraps
        self._feature_names: tuple[str, ...] = (  # a plain model's names from its metadata (``convert`` writes them)
            stored_feature_names(self._session.get_modelmeta().custom_metadata_map, self._n_features)
            if self.signature.plain
            else None
        ) or self.signature.features

    def _inspect_signature(self) -> None:
        inputs = self._session.get_inputs()
        inp = inputs[0]  # the plain model's one input, or the canonical x (listed first)
        self.input_name: str = inp.name
        self._input_dtype = np.float32 if inp.type == "tensor(float)" else np.float64
        self._n_features = self.signature.n_features

        decision = self._decision
        self._reader = OutputReader(decision, self.path.name)
        self._run_names = self._reader.names
        # the one line that says what the model's outputs were read as, and why
        log.info(
            f"model '{self.path.name}' read as a {decision.summary()}",
            extra={"model": str(self.path), "kind": decision.kind, "outputs": self._run_names},
        )

    # -- public API --------------------------------------------------------------------------------------
    @property
    def n_features(self) -> int:
        return self._n_features

    @property
    def run_batch(self) -> int | None:
        """Rows per ``session.run`` when the model's fixed batch could not be made free, else None."""
        return self._run_batch

    @property
    def kind(self) -> ModelKind:
        return self._decision.kind

    @property
    def feature_names(self) -> tuple[str, ...]:
        """One name per element of x, in row order, decided at load: the signature's element names
        (``input[13]`` for a plain 2-D input, an input's own name for a one-element input) unless
        :meth:`name_features` gave others (a CSV header, the ``feature_names`` setting). Probe reports, ``/probes``
        and drift alerts name features by it."""
        return self._feature_names

    @property
    def given_feature_names(self) -> tuple[str, ...] | None:
        """The names :meth:`name_features` gave, or None when the features keep the signature's element names."""
        names = self._feature_names
        return None if names == self.signature.features else names

    def name_features(self, names: Sequence[str], *, source: str) -> None:
        """Rename x's elements (``source`` says where the names came from, for the error message).

        Raises
        ------
        ModelError
            Not one non-empty name per feature, or a name given twice.
        """
        given = tuple(str(n).strip() for n in names)
        if len(given) != self._n_features:
            raise ModelError(
                f"{source} gives {len(given)} feature names; model '{self.path.name}' perturbs {self._n_features} "
                f"features ({_first(self.signature.features)}): give one name per feature, in order"
            )
        empty = [i for i, n in enumerate(given) if not n]
        if empty:
            raise ModelError(f"{source} has empty feature names at positions {empty[:5]}; name every feature")
        dupes = sorted({n for n in given if given.count(n) > 1})
        if dupes:
            raise ModelError(f"{source} names features more than once: {', '.join(dupes[:5])}; use distinct names")
        self._feature_names = given

    @property
    def has_logits(self) -> bool:
        return self._decision.logits is not None

    @property
    def has_proba(self) -> bool:
        return self._decision.proba is not None

    @property
    def decision(self) -> OutputDecision:
        """What the outputs were read as, and why (see :func:`~monitor.model.outputs.decide_outputs`)."""
        return self._decision

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary for logs and ``/readyz``."""
        return {
            "path": str(self.path),
            "kind": self._decision.kind,
            "kind_reason": self._decision.reason,
            "n_features": self._n_features,
            "input": self.input_name,
            "inputs": self.signature.summary()["inputs"],
            "held": self.signature.summary()["held"],
            "outputs": self._run_names,
            "providers": self.providers,
        }

    def check_rows(self, rows: NDArray[Any]) -> None:
        """Raise :class:`ModelError` unless ``rows`` is (B, n_features)."""
        if rows.ndim != 2 or rows.shape[1] != self._n_features:
            raise ModelError(
                f"model input '{self.input_name}' expects rows of {self._n_features} features; "
                f"got an array of shape {tuple(rows.shape)}"
            )

    def evaluate(self, rows: NDArray[np.float32], held: Held | None = None) -> ModelOutput:
        """Evaluate (B, n_features) rows in raw units, in chunks of ``max_rows_per_run``; ``held``: the B rows'
        held values when the model has any (:class:`~monitor.model.signature.Held`).

        Returns
        -------
        ModelOutput with ``label`` (B,) int64 class indices and ``proba`` (B, C) for classifiers, ``logits`` when
        exposed, ``value`` (B, D) for regressors.
        """
        self.check_rows(rows)
        x = np.ascontiguousarray(rows, dtype=self._input_dtype)
        b = x.shape[0]
        self.signature.check_held(held, b)
        if not self.signature.has_held:
            held = None
        step = self.options.max_rows_per_run
        if b <= step:
            return self._reader.read(self._run(x, held))
        return self._reader.read(
            merge_outputs(
                [
                    self._run(x[i : i + step], None if held is None else held.take(slice(i, i + step)))
                    for i in range(0, b, step)
                ],
                b,
            )
        )

    def neighbourhood(
        self, offsets: NDArray[np.float32], copies: int, *, per_event_ball: bool = False
    ) -> NeighbourhoodEvaluator | None:
        """An evaluator of centres, their ball points ``centre + offsets`` and K noisy copies in one graph.

        ``per_event_ball``: each event has its own m offsets (a sampled hypercube drawn per event), passed to
        ``evaluate`` as ``ball`` (:meth:`NeighbourhoodEvaluator.project_ball`); ``offsets`` is one such sample,
        used for the check at load. Only a model whose input feeds one affine layer is wrapped for that.

        See :mod:`monitor.model.neighbourhood`. Runs whole events per ``session.run``, as many as fit in
        ``max_rows_per_run`` rows (at least one). Returns None when the graph cannot be wrapped (sub-graphs) or
        onnxruntime refuses the wrapped graph; the caller then evaluates rows it built itself.
        """
        if not self.options.rows_in_graph or self._run_batch is not None:
            return None
        m = int(offsets.shape[0])
        # labels come from the probabilities (or logits) when the model has them: the model's own label output is
        # not needed for ball points and copies, and a lowered linear head does not compute it
        decision = self._decision
        names = [
            n for n in self._run_names if n != decision.label or (decision.proba is None and decision.logits is None)
        ]
        # a binary classifier's [1 − p, p] table: the graph exposes p alone (see binary_positive), the scorer reads
        # the class and f at it from p, and no Sub and Concat run on the ball points and copies
        positive = self._binary_positive()
        fetched = [positive if n == decision.proba and positive is not None else n for n in names]
        wrapped = neighbourhood_graph(
            self._model_bytes,
            input_name=self.input_name,
            output_names=fetched,
            offsets=offsets,
            copies=copies,
            input_is_double=self._input_dtype == np.float64,
            held=self._held_specs(),
            per_event_ball=per_event_ball,
        )
        if wrapped is None:
            log.info(
                "model graph cannot be wrapped (sub-graphs, or an opset before 8); ball points are built outside "
                "onnxruntime",
                extra={"model": str(self.path)},
            )
            return None
        try:
            session = ort.InferenceSession(
                wrapped.model, sess_options=session_options(self.options), providers=self.providers
            )
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises several unrelated types
            log.warning(
                "onnxruntime refused the neighbourhood graph; ball points are built outside onnxruntime",
                extra={"model": str(self.path), "error": str(exc)},
            )
            return None
        per_event = 1 + m + copies
        runner = NeighbourhoodRunner(
            self._split(session, rows_per_item=per_event),
            fetched,
            m,
            copies,
            self.options.max_rows_per_run // per_event,
            centre_in_ball=wrapped.centre_in_ball,
            ball_input=wrapped.ball_input,
        )
        convert: Callable[[dict[str, NDArray[Any]]], ModelOutput] = partial(self._reader.read, labels=False)
        if positive is not None:
            convert = partial(positive_output, positive)
        evaluator = NeighbourhoodEvaluator(runner, convert, wrapped.projection, self._held_feed_names())
        if self.signature.has_held:
            # the held values a model accepts are its own (a category it knows): checked on the first real batch
            evaluator.check_first = partial(check_neighbourhood, self, evaluator, offsets, copies)
            return evaluator
        problem = check_neighbourhood(self, evaluator, offsets, copies)
        if problem is not None:
            log.warning(
                "neighbourhood graph disagrees with the model; ball points are built outside onnxruntime",
                extra={"model": str(self.path), "problem": problem},
            )
            return None
        return evaluator

    def _split(self, session: ort.InferenceSession, rows_per_item: int = 1) -> Any:
        """``session``, or its runs cut into slices run by ``split_runs`` threads (:mod:`monitor.model.split_runs`;
        ``rows_per_item``: model rows per item of its batch axis)."""
        if self.options.split_runs < 2:
            return session
        return SplitSession(session, self.options.split_runs, rows_per_item=rows_per_item)

    def _held_specs(self) -> list[tuple[str, int, tuple[int, ...]]]:
        """The wrapped graph's held inputs: (name, ONNX element type, row dims)."""
        from onnx import TensorProto

        specs = [(s.name, s.elem_type, s.dims) for s in self.signature.held_inputs]
        if self._held_columns is not None:
            specs.append((self._held_columns, TensorProto.FLOAT, (len(self.signature.held_features),)))
        return specs

    def _held_feed_names(self) -> dict[str, str]:
        """{key of :class:`Held`: graph input name}."""
        names = {s.name: s.name for s in self.signature.held_inputs}
        if self._held_columns is not None:
            names[HELD_COLUMNS] = self._held_columns
        return names

    def _binary_positive(self) -> str | None:
        """p when the probability output is a binary classifier's float32 ``[1 − p, p]`` (see
        :func:`~monitor.model.neighbourhood.binary_positive`) and there is no logits output, else None."""
        proba = self._decision.proba
        if proba is None or self._decision.logits is not None:
            return None
        if next(o.type for o in self._session.get_outputs() if o.name == proba) != "tensor(float)":
            return None
        import onnx  # as in prepare: only where a graph is rewritten

        return binary_positive(onnx.load_from_string(self._model_bytes).graph, proba)

    def _run(self, chunk: NDArray[Any], held: Held | None = None) -> dict[str, NDArray[Any]]:
        fixed = self._run_batch
        if fixed is not None and chunk.shape[0] != fixed:
            return run_fixed(self._run, chunk, held, fixed)
        feed = canonical_feed(self.input_name, self._held_columns, chunk, held)
        try:
            values = self._session.run(self._run_names, feed)
        except Exception as exc:  # noqa: BLE001 - onnxruntime error types are not public
            raise ModelError(f"onnxruntime failed on a batch of {chunk.shape[0]} rows: {exc}") from exc
        return dict(zip(self._run_names, values, strict=True))
