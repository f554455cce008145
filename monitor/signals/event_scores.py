"""Stage 4: the scores of B events read from the model's outputs on their rows — γ, γ_logit, flicker, P_adj, the
class with its probability and margin, and γ's standard errors — for
:class:`~monitor.signals.scorer.RobustnessScorer`, whose rows are laid out as its ``build_rows`` lays them: B centres,
then B·m ball points, then B·K flicker copies.

A classifier's f is read at the class predicted at the centre, at the centre and at every ball point; P_adj is
P·e^(−N·γ_logit) with the log-probabilities (or logits) as f; a copy flickers when its class differs from the
centre's (a regressor's: when its output moves by more than the tolerance). A binary classifier's graph may expose
p = P(class 1) alone (:meth:`EventScores._binary_results`: the same numbers, bit for bit).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.model.base import ModelKind, ModelOutput
from monitor.model.onnx import argmax_rows
from monitor.model.standardize import Standardizer
from monitor.signals.control import ControlMap, sampled_mean
from monitor.signals.gamma import LOG_FLOOR, OutputKind, gamma_from_values


@dataclass(frozen=True, slots=True)
class EventScores:
    """Reads the scores of a batch from the model's outputs on its rows (see the module docstring).

    ``flicker_tolerance`` and ``flip_weights``: a regressor's flicker gauge (see
    :class:`~monitor.signals.scorer.RobustnessScorer`); ``control``: the control map of γ_logit on a per-event sampled
    hypercube, with the ``standardizer`` it reads the centres in.
    """

    kind: ModelKind
    output: OutputKind
    ball_size: int
    copies: int
    steps: int
    n_features: int
    standardizer: Standardizer
    flicker_tolerance: NDArray[np.float64] | None = None
    flip_weights: NDArray[np.float32] = field(default_factory=lambda: np.ones(0, dtype=np.float32))
    control: ControlMap | None = None

    def results(
        self,
        out: ModelOutput,
        b: int,
        axes: NDArray[np.intp] | None = None,
        centres: NDArray[np.float32] | None = None,
    ) -> dict[str, NDArray[np.generic]]:
        """The scores of B events from the model's outputs on their rows (laid out as
        :meth:`~monitor.signals.scorer.RobustnessScorer.build_rows`), with γ's standard errors: 0 for a ball evaluated
        whole, NaN where γ is (``axes``: each event's sampled hypercube axes, None for a ball evaluated whole)."""
        res = self._scores(out, b, axes, centres)
        for name, of in (("gamma_se", "gamma"), ("gamma_logit_se", "gamma_logit")):
            se = res.setdefault(name, np.zeros(b) if axes is None else np.full(b, np.nan))
            se[np.isnan(res[of].astype(np.float64))] = np.nan
        return res

    def _sample_error(self, f_centre: NDArray[np.floating], f_ball: NDArray[np.floating]) -> NDArray[np.float64]:
        """(B,) standard error of a per-event sampled hypercube's γ against the full ball's: of the mean of the m/2
        second differences h_a = f(x) − (f(x + r·e_a) + f(x − r·e_a)) / 2 (:func:`~monitor.signals.control.sampled_mean`)."""
        half = f_ball.shape[1] // 2
        h = f_centre.astype(np.float64)[:, None] - (f_ball[:, :half].astype(np.float64) + f_ball[:, half:]) / 2
        return sampled_mean(h, self.n_features)[1]

    def _logit_estimate(
        self,
        log_pair: tuple[NDArray[np.float32], NDArray[np.float32]],
        klass: NDArray[np.int64],
        axes: NDArray[np.intp],
        centres: NDArray[np.float32] | None,
        plain: NDArray[np.float64],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """γ_logit and its standard error on a per-event sampled hypercube: the plain sample's (``plain``), or with
        :attr:`control` the difference estimator of :mod:`monitor.signals.control`."""
        centre, ball = log_pair
        half = ball.shape[1] // 2
        h = centre.astype(np.float64)[:, None] - (ball[:, :half].astype(np.float64) + ball[:, half:]) / 2
        n = self.n_features
        if self.control is None or centres is None:
            return plain, sampled_mean(h, n)[1]
        fitted = self.control.predict(klass, self.standardizer.to_standardized(centres))
        mean, se = sampled_mean(h, n, fitted.mean(axis=1), np.take_along_axis(fitted, axes, axis=1))
        return np.abs(mean), se

    def _scores(
        self,
        out: ModelOutput,
        b: int,
        axes: NDArray[np.intp] | None,
        centres: NDArray[np.float32] | None,
    ) -> dict[str, NDArray[np.generic]]:
        if out.positive is not None:  # a binary classifier's P(class 1) alone (ModelOutput.positive)
            if self.output == "proba":
                return self._binary_results(out.positive, b, axes is not None)
            out = out.with_table()
        if self.kind == "classifier":
            return self._classifier_scores(out, b, axes, centres)
        return self._regressor_scores(out, b, axes)

    def _classifier_scores(
        self,
        out: ModelOutput,
        b: int,
        axes: NDArray[np.intp] | None,
        centres: NDArray[np.float32] | None,
    ) -> dict[str, NDArray[np.generic]]:
        m, k = self.ball_size, self.copies
        res: dict[str, NDArray[np.generic]] = {}
        klass, undefined = _centre_classes(out, b)
        # f (and the log-probability for P_adj) is read at the class predicted at the centre, at the centre and
        # at every ball point: (B,) and (B, m) gathered straight from the output tables, no per-row class array.
        # Few numpy calls, no temporaries beyond the gathered arrays (their logs are taken in place): right
        # after onnxruntime's run each call here pays for cold caches, so the call count is what costs.
        f_centre, f_ball = _target_pair(out, self.output, klass, b, m)
        gamma = gamma_from_values(f_centre, f_ball)
        if axes is not None:
            res["gamma_se"] = self._sample_error(f_centre, f_ball)
        gamma_logit, prob, margin, p_adj = self._adjusted(out, klass, (f_centre, f_ball), b, axes, centres, res)
        # the share of copies whose class differs: count / K is flips.mean(axis=1), bit for bit
        flicker = np.count_nonzero(_flips(out, klass, b * (1 + m), b, k), axis=1) / k if k else np.full(b, np.nan)
        if undefined is not None:
            # argmax would name the first NaN's column: no class, so nothing read at that class either
            klass = np.where(undefined, -1, klass)
            for scores in (gamma, gamma_logit, p_adj, flicker, prob, margin):
                scores[undefined] = np.nan
        res["predicted_class"] = klass
        res["value"] = np.full(b, np.nan)
        res["probability"] = prob
        res["margin"] = margin
        res.update(gamma=gamma, gamma_logit=gamma_logit, p_adj=p_adj, flicker=flicker)
        return res

    def _adjusted(
        self,
        out: ModelOutput,
        klass: NDArray[np.int64],
        f_pair: tuple[NDArray[np.float32], NDArray[np.float32]],
        b: int,
        axes: NDArray[np.intp] | None,
        centres: NDArray[np.float32] | None,
        res: dict[str, NDArray[np.generic]],
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """A classifier's γ_logit, the probability P of the centre's class, its margin and P_adj = P·e^(−Nγ_logit)
        (NaN where the model gives neither probabilities nor logits); γ_logit's standard error goes into ``res``.
        ``f_pair``: f at the centres and ball points, fresh gathers (logged in place when f is the probability)."""
        m = self.ball_size
        f_centre, f_ball = f_pair
        prob: NDArray[np.float64] | None = None
        margin: NDArray[np.float64] | None = None
        if out.proba is not None:
            # P at the predicted class: f itself when f is the probability (gathered once for γ and γ_logit)
            p_centre = f_centre if self.output == "proba" else out.proba[np.arange(b), klass]
            prob = p_centre.astype(np.float64)
            margin = _top_two_margin(out.proba[:b])
        log_pair: tuple[NDArray[np.float32], NDArray[np.float32]] | None = None
        if out.logits is not None:
            log_pair = _pick(out.logits, klass, b, m)
        elif out.proba is not None:
            # f_centre/f_ball are fresh gathers, no longer needed as probabilities: floored and logged in place
            p_pair = (f_centre, f_ball) if self.output == "proba" else _pick(out.proba, klass, b, m)
            log_pair = _log_floor(p_pair[0]), _log_floor(p_pair[1])
        if log_pair is None:
            nan = np.full(b, np.nan)
            return nan, nan.copy(), nan.copy() if margin is None else margin, nan.copy()
        gamma_logit = gamma_from_values(*log_pair)
        if axes is not None:
            gamma_logit, res["gamma_logit_se"] = self._logit_estimate(log_pair, klass, axes, centres, gamma_logit)
        if prob is None:  # logits only: P_C = softmax(logits)[C]
            assert out.logits is not None
            z = out.logits[:b].astype(np.float64)
            z -= z.max(axis=1, keepdims=True)
            np.exp(z, out=z)
            z /= z.sum(axis=1, keepdims=True)
            prob = z[np.arange(b), klass]
            margin = _top_two_margin(z)
        p_adj = np.multiply(gamma_logit, -self.steps)
        np.exp(p_adj, out=p_adj)
        p_adj *= prob  # P·e^(−Nγ_logit)
        return gamma_logit, prob, np.full(b, np.nan) if margin is None else margin, p_adj

    def _regressor_scores(
        self, out: ModelOutput, b: int, axes: NDArray[np.intp] | None
    ) -> dict[str, NDArray[np.generic]]:
        m, k = self.ball_size, self.copies
        assert out.value is not None
        v = out.value
        res: dict[str, NDArray[np.generic]] = {}
        res["value"] = v[:b, 0].astype(np.float64) if v.shape[1] == 1 else np.full(b, np.nan)
        if axes is not None and v.shape[1] == 1:
            res["gamma_se"] = self._sample_error(v[:b, 0], v[b : b * (1 + m), 0].reshape(b, m))
        if k:
            assert self.flicker_tolerance is not None
            moved = v[b * (1 + m) :].reshape(b, k, -1) - v[:b, None, :]
            if moved.shape[2] == 1:
                flips = np.abs(moved[:, :, 0]) > self.flicker_tolerance[0]
            else:
                moved *= self.flip_weights
                flips = np.einsum("bkd,bkd->bk", moved, moved) > 1.0
            flicker = flips.mean(axis=1, dtype=np.float64)
        else:
            flicker = np.full(b, np.nan)
        res["predicted_class"] = np.full(b, -1, dtype=np.int64)
        res["probability"] = np.full(b, np.nan)
        res["margin"] = np.full(b, np.nan)
        res["gamma"] = gamma_from_values(v[:b], v[b : b * (1 + m)].reshape(b, m, -1))
        res["gamma_logit"] = np.full(b, np.nan)
        res["p_adj"] = np.full(b, np.nan)
        res["flicker"] = flicker
        return res

    def _binary_results(self, p: NDArray[np.float32], b: int, sampled: bool = False) -> dict[str, NDArray[np.generic]]:
        """:meth:`results` with ``output: proba`` for a binary classifier from p = P(class 1) of every row alone.

        The same numbers as from the table ``[1 − p, p]``, bit for bit: its row-wise argmax is class 1 exactly where
        ``p > 1 − p`` (a tie or a NaN is class 0, argmax's first column); f at class 0 is ``1 − p`` rounded to float32
        as the model's ``Sub`` rounds it. Fewer passes over the outputs than gathering from the table, which the
        wrapped graph then need not build (see ``monitor.model.neighbourhood.binary_positive``).
        """
        m, k = self.ball_size, self.copies
        one = np.float32(1)
        centre = p[:b]
        negative = one - centre
        is_one = centre > negative
        klass = is_one.astype(np.int64)
        undefined = np.isnan(centre) if b and np.isnan(centre.max()) else None
        f_centre = np.where(is_one, centre, negative)
        f_ball = p[b : b * (1 + m)].reshape(b, m).copy()
        np.subtract(one, f_ball, out=f_ball, where=~is_one[:, None])
        gamma = gamma_from_values(f_centre, f_ball)
        gamma_se = self._sample_error(f_centre, f_ball) if sampled else np.zeros(b)
        prob = f_centre.astype(np.float64)
        # top-1 − top-2 of the table [1 − p, p] (its float32 values, subtracted in float64 as from the table)
        margin = np.abs(centre.astype(np.float64) - negative)
        log_centre, log_ball = _log_floor(f_centre), _log_floor(f_ball)
        gamma_logit = gamma_from_values(log_centre, log_ball)
        gamma_logit_se = self._sample_error(log_centre, log_ball) if sampled else np.zeros(b)
        p_adj = np.multiply(gamma_logit, -self.steps)
        np.exp(p_adj, out=p_adj)
        p_adj *= prob  # P·e^(−Nγ_logit)
        if k:
            copies = p[b * (1 + m) : b * (1 + m + k)]
            flips = (copies > one - copies).reshape(b, k) != is_one[:, None]
            flicker = np.count_nonzero(flips, axis=1) / k
        else:
            flicker = np.full(b, np.nan)
        if undefined is not None:
            klass[undefined] = -1
            for scores in (gamma, gamma_logit, p_adj, flicker, prob, margin):
                scores[undefined] = np.nan
        return {
            "predicted_class": klass,
            "value": np.full(b, np.nan),
            "probability": prob,
            "margin": margin,
            "gamma": gamma,
            "gamma_logit": gamma_logit,
            "p_adj": p_adj,
            "flicker": flicker,
            "gamma_se": gamma_se,
            "gamma_logit_se": gamma_logit_se,
        }


def _pick(
    table: NDArray[np.float32], klass: NDArray[np.int64], b: int, m: int
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Column ``klass[e]`` of a (rows, C) output table at each event's centre and ball points: (B,), (B, m).

    f as γ defines it (the centre's class read at every ball point), with the centre class repeated per row, without
    materialising that per-row class array. Both results are fresh arrays (gathers), never views of ``table``.
    """
    c = table.shape[1]
    flat = table[: b * (1 + m)].reshape(-1)  # a view for the contiguous tables onnxruntime returns
    centre_base, ball_base = _pick_bases(b, m, c)
    centre = flat.take(centre_base + klass)
    ball = flat.take(ball_base + klass[:, None])
    return centre, ball


@functools.lru_cache(maxsize=16)
def _pick_bases(b: int, m: int, c: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Flat offsets of column 0 at the B centres and the B·m ball points of a (rows, C) table (read-only)."""
    centre = np.arange(0, b * c, c)
    ball = np.arange(b * c, b * (1 + m) * c, c).reshape(b, m)
    centre.flags.writeable = False
    ball.flags.writeable = False
    return centre, ball


def _labels(out: ModelOutput, start: int, stop: int) -> NDArray[np.int64]:
    """Class indices of rows [start, stop): the output's labels, or the argmax of its probabilities/logits."""
    if out.label is not None:
        return out.label[start:stop]
    return argmax_rows(_class_table(out)[start:stop])


def _flips(out: ModelOutput, klass: NDArray[np.int64], start: int, b: int, k: int) -> NDArray[np.bool_]:
    """(B, K): whether each flicker copy (rows [start, start + B·K)) is predicted another class than its centre."""
    stop = start + b * k
    if out.label is not None:
        labels: NDArray[np.integer[Any] | np.bool_] = out.label[start:stop]
    else:  # compared only: the column comparison's own bool/uint8 indices, not converted to int64 first
        labels = argmax_rows(_class_table(out)[start:stop], narrow=True)
    flips: NDArray[np.bool_] = labels.reshape(b, k) != klass[:, None]
    return flips


def _centre_classes(out: ModelOutput, b: int) -> tuple[NDArray[np.int64], NDArray[np.bool_] | None]:
    """The class of each centre (rows [0, B)), and which centres have none — their class scores hold a NaN (an
    overflow inside the model), where argmax would name the first NaN's column — or None when none is so. One NaN
    screen of the centre rows serves both. A model's own label output is its class whatever its probabilities say."""
    if out.label is not None:
        return out.label[:b], None
    centre = _class_table(out)[:b]
    has_nan = bool(b and np.isnan(centre.max()))
    klass = argmax_rows(centre, has_nan=has_nan)
    if not has_nan:
        return klass, None
    undefined: NDArray[np.bool_] = np.isnan(centre).any(axis=1).reshape(-1)  # reshape: a (B,) array to mypy
    return klass, undefined


def _top_two_margin(p: NDArray[np.floating]) -> NDArray[np.float64]:
    """(B,) top-1 minus top-2 value of each row of a (B, C) probability table, in float64; a table of one column
    (no second class) gives its value. A row holding a NaN gives NaN (``np.partition`` sorts NaN last)."""
    if p.shape[1] < 2:
        return p[:, 0].astype(np.float64)
    top = np.partition(p, p.shape[1] - 2, axis=1)[:, -2:].astype(np.float64)
    margin: NDArray[np.float64] = top[:, 1] - top[:, 0]
    return margin


def _class_table(out: ModelOutput) -> NDArray[np.float32]:
    """The table a classifier's class is the argmax of: probabilities, else logits."""
    table = out.proba if out.proba is not None else out.logits
    assert table is not None, "a classifier output carries labels, probabilities or logits"
    return table


def _target_pair(
    out: ModelOutput, output: OutputKind, klass: NDArray[np.int64], b: int, m: int
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """f at the centres (B,) and at the ball points (B, m) for a classifier (proba, logit or label); fresh arrays."""
    if output == "label":
        ball = _labels(out, b, b * (1 + m))
        return klass.astype(np.float32), ball.astype(np.float32).reshape(b, m)
    table = out.proba if output == "proba" else out.logits
    assert table is not None
    return _pick(table, klass, b, m)


def _log_floor(p: NDArray[np.float32]) -> NDArray[np.float32]:
    """log(max(p, LOG_FLOOR)) in float32, **in place** (``p`` is overwritten and returned): the log-probability
    that stands in for a logit in P_adj."""
    np.maximum(p, np.float32(LOG_FLOOR), out=p)
    return np.log(p, out=p)
