"""Stage 4: the per-event robustness scorer — γ, flicker and P_adj for a micro-batch in ONE model call.

For B events with a ball of m directions and K flicker copies the model evaluates B·(1 + m + K) rows — centres,
then ball points x + r·s⊙v_i, then noisy copies x + σ·s⊙ε. With an :class:`OnnxModel` those rows are built inside
onnxruntime: ``OnnxModel.neighbourhood`` wraps the graph so that it takes the B centres and the batch's noise and
adds the offsets itself (:mod:`monitor.model.neighbourhood`), one ``session.run`` per run of whole events
(at most ``max_rows_per_run // (1 + m + K)`` of them, the batch cut into runs of equal size). Any other :class:`Predictor`, or a graph that cannot be wrapped, gets
the rows built here (:meth:`RobustnessScorer.build_rows`) and one ``evaluate``. Either way the model sees the same
rows. Radius and noise are in standardized units: s is the per-feature scale of the :class:`Standardizer` (all ones
for ``space: raw``).

γ's error against the full ball
------------------------------
With a per-event sampled hypercube, each result carries ``gamma_se`` and ``gamma_logit_se``: the standard error of
the sample's mean second difference (:func:`monitor.signals.control.sampled_mean`), 0 for a ball evaluated whole.
Given a :class:`~monitor.signals.control.ControlMap` (fitted on reference rows), γ_logit is the control-variate
estimate of :mod:`monitor.signals.control`, with that estimate's smaller error.

Flicker noise bank
------------------
Why: drawing K·n fresh normals per event (640 float32 values at the defaults, ~5.5 µs) cost more than
onnxruntime's whole evaluation of the event for cheap models (5–7× for a logistic regression), so the draw, not
the model, set the throughput. The scorer therefore keeps a bank of ``bank_rows = clamp(2**22 // n, 4K, 65536)``
pre-drawn, pre-scaled rows σ·s⊙ε (float32, ε ~ N(0, I); the lower bound 4K wins over the upper one; n is the
width of the projected bank below when that is wider) drawn from
the seeded generator at construction. A batch of B events takes B·K *consecutive* bank rows starting at a
uniformly random offset (event e gets rows e·K … e·K + K − 1 of that block), so the wrapped graph reads the bank
itself, without a copy; when B·K exceeds the bank, each event takes K consecutive rows at its own random offset
(gathered). The bank is refreshed in place, round-robin: each batch owes ⌈B·K/64⌉ redrawn rows, paid in blocks of
at least 1,024 rows, so every row is renewed continually (the whole bank every ~64 bank-fulls of copies) while
the draw costs ~1/64 of drawing every copy fresh. For a linear head the graph takes the noise projected,
``noise @ W.T + b`` (see ``monitor.model.neighbourhood.linear_head``), and for a model whose input feeds one affine
layer (an MLP's first MatMul + Add) ``noise @ W + b`` (``affine_input``); the scorer keeps that projected bank
beside the bank and refreshes both rows together.

Statistical properties:

- per event, the K copies are K distinct bank rows, i.e. K independent N(0, σ²·diag(s)²) offsets: the flicker
  estimate of an event is an unbiased binomial proportion over K independent copies, as before;
- events of one batch use disjoint bank rows; events of different batches may share bank rows (until those rows
  are redrawn), so the flicker estimates of *different* events are weakly positively correlated (through shared
  noise, never within one event); averages over many events have slightly more variance than with fully fresh
  draws;
- seeded: two scorers with the same seed give identical results for the same sequence of calls (same batch
  sizes, same valid rows); the draw stream is not the one of a per-copy ``standard_normal`` draw.
- shared: a scorer built with ``noise_from`` (a live candidate's, beside its served model's scorer) takes that
  scorer's bank and draws (:meth:`RobustnessScorer.share_noise`): scoring the same batches, each event gets the
  same K copies on both models.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.config import ScoringSettings, setting_default
from monitor.errors import ConfigError, ModelError
from monitor.model.base import ModelOutput, Predictor
from monitor.model.onnx import NeighbourhoodEvaluator, NeighbourhoodRejected, OnnxModel
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer
from monitor.signals.balls import add_hypercube_offsets, ball_directions, event_keys, hypercube_axes, parse_ball
from monitor.signals.control import ControlMap
from monitor.signals.event_scores import EventScores
from monitor.signals.gamma import OutputKind, check_output, default_output
from monitor.signals.output_scale import OUTPUT_SCALE_ROWS, output_scale

__all__ = [
    "BANK_REFRESH_BLOCK",
    "BANK_REFRESH_DIVISOR",
    "OUTPUT_SCALE_ROWS",
    "RobustnessScorer",
    "ScoreResult",
    "ScoringConfig",
    "noise_bank_rows",
    "output_scale",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    """What the scorer computes. Radius and sigma are in the standardizer's units.

    Every field is the setting of its name in a model's ``scoring`` section (:class:`monitor.config.ScoringSettings`),
    which declares its default and meaning; :meth:`from_settings` builds one from a section.
    """

    radius: float = setting_default(ScoringSettings, "radius")
    ball: str = setting_default(ScoringSettings, "ball")
    output: str = setting_default(ScoringSettings, "output")  # auto = proba for classifiers, value for regressors
    flicker_copies: int = setting_default(ScoringSettings, "flicker_copies")
    sigma: float = setting_default(ScoringSettings, "sigma")
    steps: int = setting_default(ScoringSettings, "steps")  # N in P_adj = P·exp(−N·γ_logit)
    seed: int = setting_default(ScoringSettings, "seed")
    #: flicker for regressors: a copy flips when its output moves by more than this fraction of the output's
    #: reference IQR (:func:`output_scale`; RMS over the outputs, each in units of its own IQR)
    regression_tolerance: float = setting_default(ScoringSettings, "regression_tolerance")

    @classmethod
    def from_settings(cls, s: ScoringSettings, **override: Any) -> ScoringConfig:
        """The configuration a ``scoring`` section gives; ``override`` replaces fields (``run`` passes the radius and
        σ a reference JSON recorded)."""
        fields = {name: getattr(s, name) for name in cls.__dataclass_fields__}
        return cls(**{**fields, **override})

    def __post_init__(self) -> None:
        if not self.radius > 0:
            raise ConfigError(f"radius must be > 0; got {self.radius!r}")
        if self.flicker_copies < 0:
            raise ConfigError(f"flicker_copies must be >= 0; got {self.flicker_copies!r}")
        if not self.sigma > 0:
            raise ConfigError(f"sigma must be > 0; got {self.sigma!r}")
        if self.steps < 0:
            raise ConfigError(f"steps must be >= 0; got {self.steps!r}")
        if not self.regression_tolerance > 0:
            raise ConfigError(f"regression_tolerance must be > 0; got {self.regression_tolerance!r}")
        parse_ball(self.ball)


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """Per-event results, all of shape (B,). Rows that were not finite have ``valid`` False and NaN scores.

    ``predicted_class`` is −1 for regressors and invalid rows; ``probability`` and ``p_adj`` are NaN for
    regressors. ``margin`` is the top-1 minus the top-2 class probability at the event (in [0, 1]; 2p − 1 for a
    binary classifier's max-probability p), from the same probabilities as ``probability`` (the probability
    output, else the softmax of the logits); NaN exactly where ``probability`` is. A valid row at which a
    classifier's class scores (probabilities, else logits) hold a NaN — an overflow inside the model — has no class
    either: −1, and NaN γ, γ_logit, flicker, P_adj, probability and margin.
    """

    gamma: NDArray[np.float64]
    flicker: NDArray[np.float64]
    p_adj: NDArray[np.float64]
    gamma_logit: NDArray[np.float64]
    predicted_class: NDArray[np.int64]
    probability: NDArray[np.float64]
    valid: NDArray[np.bool_]
    margin: NDArray[np.float64]
    #: standard error of ``gamma`` / ``gamma_logit`` against the full ball's (see :mod:`monitor.signals.control`):
    #: the sampling error of a per-event sampled hypercube, 0 for a ball evaluated whole (simplex, rotations, a
    #: fixed hypercube), NaN where γ is; None where a caller assembled the result without them
    gamma_se: NDArray[np.float64] | None = None
    gamma_logit_se: NDArray[np.float64] | None = None
    #: a single-output regressor's output at the event (NaN for invalid rows, classifiers and several outputs);
    #: None where a caller assembled the result without it
    value: NDArray[np.float64] | None = None

    def __len__(self) -> int:
        return int(self.gamma.shape[0])


class RobustnessScorer:
    """Scores micro-batches of events against a model.

    Parameters
    ----------
    model : the ONNX copy (or any :class:`Predictor`).
    standardizer : per-feature scale that makes ``radius``/``sigma`` standardized units.
    config : radius, ball, output, flicker copies, sigma, N, seed.
    held_sample : for a model with values held fixed (:mod:`monitor.model.signature`), held values seen in the
        reference or warm-up; a regressor's output scale is measured with rows of them (:func:`output_scale`).
    control : a control map for γ_logit on a per-event sampled hypercube (:func:`monitor.signals.control.fit_control_map`
        on reference rows at this radius): γ_logit then has the control variate's smaller error.
    noise_from : a scorer whose flicker draws this one takes instead of drawing its own (:meth:`share_noise`).
    """

    def __init__(
        self,
        model: Predictor,
        standardizer: Standardizer,
        config: ScoringConfig | None = None,
        held_sample: Held | None = None,
        control: ControlMap | None = None,
        noise_from: RobustnessScorer | None = None,
    ) -> None:
        self.model = model
        self.config = config or ScoringConfig()
        n = model.n_features
        if standardizer.n_features != n:
            raise ConfigError(
                f"reference data has {standardizer.n_features} features; the model expects {n}. "
                "Was the reference built for another model?"
            )
        self.standardizer = standardizer
        has_logits = bool(getattr(model, "has_logits", False))
        has_proba = bool(getattr(model, "has_proba", model.kind == "classifier"))
        out = default_output(model.kind) if self.config.output == "auto" else self.config.output
        if self.config.output == "auto" and out == "proba" and not has_proba:
            out = "logit" if has_logits else "label"  # a classifier without probabilities: next best f
        self.output: OutputKind = check_output(out, model.kind, has_logits=has_logits, has_proba=has_proba)
        self.ball = parse_ball(self.config.ball).resolve(n)
        scale = standardizer.scale
        #: a hypercube sample drawn per event (m < 2n): the m/2 axes of each event come from the seed and its values
        #: (:func:`~monitor.signals.balls.hypercube_axes`); each point moves one feature by ±r·s_a
        #: (:attr:`feature_step`). A model whose input feeds an affine layer gets the ball in-graph as the m/2 moved
        #: rows of that layer's W per event; any other gets the rows built here. :attr:`offsets` is one such sample
        #: (for callers that want a fixed ball, and the in-graph check at load)
        self.per_event_ball = self.ball.per_event(n)
        self.control = _check_control(control, self, n)
        self.feature_step = (self.config.radius * scale).astype(np.float32)
        directions = ball_directions(self.ball, n, seed=self.config.seed)
        #: (m, n) raw-unit offsets r·s⊙v_i
        self.offsets = (self.config.radius * directions * scale).astype(np.float32)
        self._noise_scale = (self.config.sigma * scale).astype(np.float32)
        self._rng = np.random.default_rng(self.config.seed)
        self._buffer = np.empty((0, n), dtype=np.float32)
        k = self.config.flicker_copies
        #: (D,) regressors with flicker copies: each output's IQR over the reference (:func:`output_scale`), the
        #: scale ``regression_tolerance`` is a fraction of; None otherwise
        self.output_scale: NDArray[np.float64] | None = None
        #: (D,) the same in output units: ``regression_tolerance`` · output_scale (a gauge), None otherwise
        self.flicker_tolerance: NDArray[np.float64] | None = None
        self._flip_weights = np.ones(0, dtype=np.float32)
        if model.kind == "regressor" and k:
            self.output_scale = output_scale(model, standardizer, seed=self.config.seed, held_sample=held_sample)
            self.flicker_tolerance = self.config.regression_tolerance * self.output_scale
            # a copy flips when Σ_d (Δ_d · w_d)² > 1, w_d = 1 / (tolerance_d · √D): the RMS of Δ_d / IQR_d over the
            # D outputs exceeds the fraction (|Δ| > tolerance for one output)
            d = self.flicker_tolerance.shape[0]
            self._flip_weights = (1.0 / (self.flicker_tolerance * math.sqrt(d))).astype(np.float32)
        #: the model's graph wrapped to build ball points and flicker copies itself (None: built here in numpy)
        self._reader = EventScores(
            kind=model.kind,
            output=self.output,
            ball_size=self.ball_size,
            copies=k,
            steps=self.config.steps,
            n_features=n,
            standardizer=standardizer,
            flicker_tolerance=self.flicker_tolerance,
            flip_weights=self._flip_weights,
            control=self.control,
        )
        self._neighbourhood = _neighbourhood_of(model, self.offsets, k, per_event_ball=self.per_event_ball)
        width = None if self._neighbourhood is None else self._neighbourhood.noise_width
        bank_rows = noise_bank_rows(max(n, width or 0), k) if k else 0
        #: (bank_rows, n) pre-scaled flicker offsets σ·s⊙ε; see the module docstring
        self._bank = np.empty((bank_rows, n), dtype=np.float32)
        #: the bank as the wrapped graph takes it: the bank itself, or its projection through a linear head or the
        #: first affine layer (its rows are redrawn with the bank's, in :meth:`_draw_bank_rows`)
        self._bank_fed = self._bank
        if width is not None:
            self._bank_fed = np.empty((bank_rows, width), dtype=np.float32)
        self._bank_cursor = 0  # next bank row to redraw
        self._refresh_owed = 0  # bank rows to redraw at the next refresh
        self._copy_index = np.arange(k, dtype=np.intp)
        #: the generator, bank cursor and owed rows before the latest batch's flicker copies (:meth:`share_noise`)
        self._noise_mark: tuple[Mapping[str, Any], int, int] | None = None
        if k and (noise_from is None or not self.share_noise(noise_from)):
            self._draw_bank_rows(0, bank_rows)

    @property
    def ball_size(self) -> int:
        return int(self.offsets.shape[0])

    def rows_per_event(self) -> int:
        """Model rows evaluated per event: 1 + m + K."""
        return 1 + self.ball_size + self.config.flicker_copies

    @property
    def rows_built_in_graph(self) -> bool:
        """True when the model builds the ball points and flicker copies itself (see ``OnnxModel.neighbourhood``)."""
        return self._neighbourhood is not None

    def share_noise(self, other: RobustnessScorer) -> bool:
        """Draw the flicker copies ``other`` drew for its latest batch, and for every batch after it: its bank, and its
        generator and bank refresh as they stood before that batch (a candidate's scorer, which scores each batch
        right after the served model's). Scoring the same batches as ``other`` from then on, each event gets the
        very copies it got there: the two models' flicker is measured on the same perturbations, as their γ is on
        the same ball points, and a paired flicker difference carries none of two draws' own noise. False, and
        nothing changed, when the two draw different noise (copies, bank rows or scales)."""
        mark = other._noise_mark or other._noise_state()
        k = self.config.flicker_copies
        if (
            k == 0
            or other.config.flicker_copies != k
            or other._bank.shape != self._bank.shape
            or not np.array_equal(other._noise_scale, self._noise_scale)
        ):
            return False
        np.copyto(self._bank, other._bank)
        if self._bank_fed is not self._bank and self._neighbourhood is not None:
            self._bank_fed[...] = self._neighbourhood.project_noise(self._bank)
        state, self._bank_cursor, self._refresh_owed = mark
        self._rng.bit_generator.state = state
        return True

    def shares_noise(self, other: RobustnessScorer) -> bool:
        """Whether this scorer and ``other`` stand at the same point of the same flicker draws (after
        :meth:`share_noise`, each scored the same batches)."""
        return self._noise_state() == other._noise_state() and self._bank.shape == other._bank.shape

    def _noise_state(self) -> tuple[Mapping[str, Any], int, int]:
        return self._rng.bit_generator.state, self._bank_cursor, self._refresh_owed

    def build_rows(self, centres: NDArray[np.float32], axes: NDArray[np.intp] | None = None) -> NDArray[np.float32]:
        """Fill (and return a view of) the buffer: centres, ball points, flicker copies for (B, n) centres.

        Draws the batch's noise and refreshes the bank exactly as :meth:`score` does, so on a scorer in the same
        state it returns the very rows ``score`` evaluates (whether it builds them here or in the model's graph).
        """
        b, n = centres.shape
        m, k = self.ball_size, self.config.flicker_copies
        total = b * (1 + m + k)
        if self._buffer.shape[0] < total:
            self._buffer = np.empty((total, n), dtype=np.float32)
        buf = self._buffer[:total]
        buf[:b] = centres
        ball = buf[b : b * (1 + m)].reshape(b, m, n)
        # offsets first (a broadcast copy with m·n-long rows), then += centres: faster than one np.add with both
        # operands broadcast (inner loops of n values), and the same float32 sums as the graph's centre + offset
        if self.per_event_ball:
            ball[...] = centres[:, None, :]
            add_hypercube_offsets(ball, self.event_axes(centres) if axes is None else axes, self.feature_step)
        else:
            ball.reshape(b, m * n)[...] = self.offsets.reshape(1, m * n)
            ball += centres[:, None, :]
        if k:
            noisy = buf[b * (1 + m) :]
            noisy[...] = _take(self._bank, self._noise_pick(b))
            noisy.reshape(b, k, n)[...] += centres[:, None, :]
            self._after_batch(b)
        return buf

    def event_axes(self, centres: NDArray[np.floating]) -> NDArray[np.intp]:
        """(B, m/2) the axes of each event's sampled hypercube (a per-event ball only): drawn from the seed and the
        event's float32 values, so an event gets the same ball in any batch."""
        keys = event_keys(centres, self.config.seed)
        return hypercube_axes(keys, self.model.n_features, self.ball_size // 2)

    def _noise_pick(self, b: int) -> slice | NDArray[np.intp]:
        """Which bank rows are a batch's B·K flicker offsets: K consecutive rows per event (module docstring).

        One contiguous block of the bank at a uniformly random start when the bank holds B·K rows (a slice: the
        graph reads the bank itself, no copy), otherwise K consecutive rows at a random start per event.
        """
        k = self.config.flicker_copies
        bank_rows = self._bank.shape[0]
        if b * k <= bank_rows:
            start = int(self._rng.integers(0, bank_rows - b * k + 1))
            return slice(start, start + b * k)
        starts = self._rng.integers(0, bank_rows - k + 1, size=b)
        index: NDArray[np.intp] = (starts[:, None] + self._copy_index).reshape(-1)
        return index

    def _after_batch(self, b: int) -> None:
        """Owe ⌈B·K / BANK_REFRESH_DIVISOR⌉ bank rows; redraw them once at least BANK_REFRESH_BLOCK are owed."""
        self._refresh_owed += math.ceil(b * self.config.flicker_copies / BANK_REFRESH_DIVISOR)
        if self._refresh_owed >= min(BANK_REFRESH_BLOCK, self._bank.shape[0]):
            self._refresh_bank(self._refresh_owed)
            self._refresh_owed = 0

    def _draw_bank_rows(self, start: int, stop: int) -> None:
        rows = self._bank[start:stop]
        self._rng.standard_normal(out=rows, dtype=np.float32)
        rows *= self._noise_scale
        if self._bank_fed is not self._bank:
            assert self._neighbourhood is not None
            self._bank_fed[start:stop] = self._neighbourhood.project_noise(rows)

    def _refresh_bank(self, count: int) -> None:
        """Redraw the next ``count`` bank rows (all of them at most), round-robin."""
        bank_rows = self._bank.shape[0]
        count = min(count, bank_rows)
        if count == 0:  # no flicker copies (K = 0): no bank
            return
        start = self._bank_cursor
        stop = start + count
        if stop <= bank_rows:
            self._draw_bank_rows(start, stop)
        else:
            self._draw_bank_rows(start, bank_rows)
            self._draw_bank_rows(0, stop - bank_rows)
        self._bank_cursor = stop % bank_rows

    def score(self, rows: NDArray[np.floating], held: Held | None = None) -> ScoreResult:
        """Score (B, n) rows in raw units; ``held``: their held values when the model has any.

        Returns
        -------
        ScoreResult; rows with NaN/inf are reported as invalid (NaN scores) without failing the batch. A valid row
        at which the model's own outputs are not finite (an overflow at extreme inputs: NaN probabilities, ±inf
        logits) gets NaN or inf scores, without numpy warnings: the caller counts those
        (``harmonic_scores_nonfinite_total``); with NaN class scores at the row itself its class is −1.

        Raises
        ------
        ModelError
            The rows have the wrong width.
        """
        x = np.asarray(rows)
        if x.ndim != 2 or x.shape[1] != self.model.n_features:
            raise ModelError(
                f"model expects rows of {self.model.n_features} features; got an array of shape {tuple(x.shape)}"
            )
        with _quiet():
            return self._score_rows(x, held)

    def _score_rows(self, x: NDArray[np.floating], held: Held | None = None) -> ScoreResult:
        b_all = x.shape[0]
        # validity is judged on the float32 rows the model sees: a value beyond float32 range is as bad as inf
        x32 = np.ascontiguousarray(x, dtype=np.float32)  # contiguous float32 rows as they are, no copy
        # one reduction for the common case: the float64 sum of float32 values is finite exactly when every value
        # is (a NaN or ±inf makes it NaN or ±inf; finite float32 values cannot add up past float64's range)
        if math.isfinite(x32.sum(dtype=np.float64)):
            return ScoreResult(**self._score_valid(x32, held), valid=np.ones(b_all, dtype=np.bool_))  # type: ignore[arg-type]
        valid = np.all(np.isfinite(x32), axis=1)
        result = self._empty(b_all, valid)
        if not valid.any():
            return result
        scored = self._score_valid(np.ascontiguousarray(x32[valid]), None if held is None else held.take(valid))
        for name in ("gamma", "flicker", "p_adj", "gamma_logit", "predicted_class", "probability", "margin"):
            getattr(result, name)[valid] = scored[name]
        for name in ("gamma_se", "gamma_logit_se"):
            getattr(result, name)[valid] = scored[name]
        if "value" in scored:
            value = np.full(b_all, np.nan)
            value[valid] = scored["value"]
            result = dataclasses.replace(result, value=value)
        return result

    def _empty(self, b: int, valid: NDArray[np.bool_]) -> ScoreResult:
        nan = np.full(b, np.nan)
        return ScoreResult(
            gamma=nan.copy(),
            flicker=nan.copy(),
            p_adj=nan.copy(),
            gamma_logit=nan.copy(),
            predicted_class=np.full(b, -1, dtype=np.int64),
            probability=nan,
            valid=valid,
            margin=nan.copy(),
            gamma_se=nan.copy(),
            gamma_logit_se=nan.copy(),
        )

    def _score_valid(self, centres: NDArray[np.float32], held: Held | None = None) -> dict[str, NDArray[np.generic]]:
        b = centres.shape[0]
        k = self.config.flicker_copies
        if k:
            self._noise_mark = self._noise_state()
        axes = self.event_axes(centres) if self.per_event_ball else None
        if self._neighbourhood is not None:
            # the model's graph adds the offsets and the noise to the centres itself: one run per chunk of events
            try:
                ball = None
                if axes is not None:  # each event's sampled axes, projected through the first affine layer
                    ball = self._neighbourhood.project_ball(axes, self.feature_step)
                out = self._neighbourhood.evaluate(
                    centres, _take(self._bank_fed, self._noise_pick(b)) if k else None, held, ball
                )
            except NeighbourhoodRejected as exc:
                log.warning(
                    "neighbourhood graph disagrees with the model on the first batch; ball points are built outside "
                    "onnxruntime",
                    extra={"problem": str(exc)},
                )
                self._neighbourhood = None
            else:
                if k:
                    self._after_batch(b)
                return self._results(out, b, axes, centres)
        stacked = None
        if held is not None:
            parts = [held, held.repeat(self.ball_size)] + ([held.repeat(k)] if k else [])
            stacked = Held.concat(parts)
        rows = self.build_rows(centres, axes)
        out = self.model.evaluate(rows) if stacked is None else self.model.evaluate(rows, stacked)
        return self._results(out, b, axes, centres)

    def _results(
        self,
        out: ModelOutput,
        b: int,
        axes: NDArray[np.intp] | None = None,
        centres: NDArray[np.float32] | None = None,
    ) -> dict[str, NDArray[np.generic]]:
        """The scores of B events from the model's outputs on their rows, laid out as :meth:`build_rows` lays them
        (:class:`~monitor.signals.event_scores.EventScores`)."""
        return self._reader.results(out, b, axes, centres)


def _quiet() -> np.errstate:
    """numpy's floating-point warnings off while scoring. Non-finite values are expected and handled: input values
    beyond float32's range (cast to ±inf) and ±inf/NaN rows (``inf + -inf`` in the validity sum) make rows invalid;
    model outputs that are NaN or ±inf at a valid row (inf − inf in γ, an overflowing softmax) give NaN/inf scores,
    which the caller counts. A warning would only be a raw line on stderr beside the JSON logs. A fresh context each
    call: one ``errstate`` instance is not safe to enter from two threads."""
    return np.errstate(invalid="ignore", over="ignore", divide="ignore")


def _take(bank: NDArray[np.float32], pick: slice | NDArray[np.intp]) -> NDArray[np.float32]:
    """Bank rows by :meth:`RobustnessScorer._noise_pick`: a view for a slice, a gather for indices."""
    if isinstance(pick, slice):
        return bank[pick]
    return np.take(bank, pick, axis=0, mode="clip")  # indices are in range; "clip" avoids a copy


def _neighbourhood_of(
    model: Predictor, offsets: NDArray[np.float32], copies: int, *, per_event_ball: bool = False
) -> NeighbourhoodEvaluator | None:
    """The model's in-graph row builder when it offers one (an :class:`OnnxModel` whose graph can be wrapped; with
    a per-event ball, one whose input feeds an affine layer)."""
    if not isinstance(model, OnnxModel):
        return None
    if per_event_ball:
        return model.neighbourhood(offsets, copies, per_event_ball=True)
    return model.neighbourhood(offsets, copies)


#: each batch owes ⌈B·K / BANK_REFRESH_DIVISOR⌉ redrawn bank rows (see the module docstring) ...
BANK_REFRESH_DIVISOR = 64
#: ... paid in blocks of at least this many rows (a redraw has a fixed per-call cost)
BANK_REFRESH_BLOCK = 1024


def noise_bank_rows(n_features: int, copies: int) -> int:
    """Rows of the flicker noise bank: ``clamp(2**22 // n, 4K, 65536)``, never fewer than 4K."""
    return max(4 * copies, min(2**22 // max(n_features, 1), 65536))


def _check_control(control: ControlMap | None, scorer: RobustnessScorer, n: int) -> ControlMap | None:
    """``control`` when it fits the scorer: its model's features and classes, this radius, a per-event ball."""
    if control is None:
        return None
    if not scorer.per_event_ball:
        raise ConfigError(
            f"a control map corrects a per-event sampled hypercube (hypercube:m with m < 2n, n > 256); this ball is "
            f"{scorer.ball} at {n} features, which γ evaluates whole: drop the control map"
        )
    if control.n_features != n or not math.isclose(control.radius, scorer.config.radius, rel_tol=1e-9):
        raise ConfigError(
            f"the control map was fitted at {control.n_features} features and radius {control.radius:g}; this scorer "
            f"has {n} features and radius {scorer.config.radius:g}: fit it again on the reference at this radius"
        )
    if not control.useful:
        log.info(
            "the control map leaves too much of γ_logit's sampling variance; γ_logit keeps the plain sample",
            extra={"variance_ratio": control.variance_ratio},
        )
        return None
    return control
