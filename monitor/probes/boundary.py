"""Probes: a cheap black-box search for the nearest class boundary in L2 (beyond one feature at a time).

The single-feature ε* moves one feature; the nearest boundary usually lies in a direction that moves several. Per
point, :func:`minimal_l2` runs DeepFool's linearized step (Moosavi-Dezfooli, Fawzi and Frossard, "DeepFool: a
simple and accurate method to fool deep neural networks", 2016) on the model's log-odds margin
m(z) = log p_c(z) − max_{k≠c} log p_k(z) of the clean class c, with the gradient estimated by forward differences
(n + 1 model rows per step; black box: probabilities only), in standardized units:

    z ← z − (1 + overshoot) · m(z) · ∇m / ‖∇m‖²

until the class changes (or ``max_steps``), then bisects the segment from the point to that adversarial point on
the model's labels (where the steps fall short — float32 probabilities quantize the margin far from the boundary —
their direction is followed on labels alone, doubling the distance up to the cap), so the reported distance is where
the class changes along that segment. ``refine`` times, the boundary point's own normal (estimated where the
probabilities are near 1/2, so float32 does not blur them) projects the start onto the boundary's tangent plane, kept
when the class changes there nearer. The distance is an upper bound on the
true minimal L2 distance, equal to it for a linear-logit model (logistic regression: ‖z* − z‖ = |logit|/‖w·s‖).

Where the margin is flat (trees: piecewise constant) the forward differences use a wider step, and where they
still see nothing the point is reported ``not_found`` with that reason; a label-only classifier or a regressor has
no margin to follow (``not_applicable``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from monitor.errors import ProbeError
from monitor.model.base import Predictor
from monitor.model.signature import Held
from monitor.model.standardize import Standardizer

#: forward-difference steps tried in turn (standardized units): the first that sees the margin move is used
STEPS: tuple[float, ...] = (0.05, 0.5)


@dataclass(frozen=True, slots=True)
class BoundaryResult:
    """Per point: the L2 distance to the boundary found (standardized units; NaN when none), the boundary point
    (raw units), model rows used, and a status (``found``, ``not_found``) with the reason when not found."""

    distance: NDArray[np.float64]
    boundary: NDArray[np.float64]
    rows: NDArray[np.int64]
    status: tuple[str, ...]
    reason: tuple[str | None, ...]


def _margin(proba: NDArray[np.floating], cls: NDArray[np.intp]) -> NDArray[np.float64]:
    logp = np.log(np.clip(proba.astype(np.float64), 1e-300, None))
    own = logp[np.arange(logp.shape[0]), cls]
    other = logp.copy()
    other[np.arange(logp.shape[0]), cls] = -np.inf
    out: NDArray[np.float64] = own - other.max(axis=1)
    return out


def minimal_l2(
    model: Predictor,
    standardizer: Standardizer,
    points: NDArray[np.floating],
    *,
    held: Held | None = None,
    max_steps: int = 6,
    overshoot: float = 0.02,
    cap: float = 8.0,
    bisection_steps: int = 12,
    refine: int = 2,
    anchors: NDArray[np.floating] | None = None,
) -> BoundaryResult:
    """The nearest class boundary in L2 from each (B, n) raw point (see the module docstring).

    ``anchors``: (M, n) raw rows (e.g. a sample of the reference) with values held like the points' own — each
    point also bisects the segment to its nearest anchor of another class (found for every point that has one, flat
    margin or not), and the nearer boundary is kept. Their M classes cost M rows, shared (not in ``rows``).

    Raises
    ------
    ProbeError
        A regressor or a classifier without probabilities (no margin to follow), or points of the wrong shape.
    """
    if model.kind != "classifier":
        raise ProbeError("the L2 boundary search follows class probabilities: it needs a classifier, not a regressor")
    x = np.asarray(points, dtype=np.float64)
    b, n = x.shape
    if n != model.n_features:
        raise ProbeError(f"points have {n} features; the model expects {model.n_features}")
    search = _Search(model, standardizer, x, held, bisection_steps)
    z0 = search.z0
    z = z0.copy()
    flipped = np.zeros(b, dtype=bool)
    reason: list[str | None] = [None] * b
    active = search.step(z, flipped, reason, max_steps=max_steps, overshoot=overshoot, cap=cap)
    # where the steps did not change the class (a margin quantized by float32 probabilities falls short), follow
    # their direction on labels alone: 2×, 4×, … the distance reached, up to the cap
    for i in active:
        search.follow_labels(int(i), z, flipped, cap)
        if not flipped[i]:
            reason[i] = f"the class did not change within {max_steps} steps and {cap:g} standardized units"
    found = np.flatnonzero(flipped)
    end = z.copy()
    end[found] = search.bisect(found, z[found])
    if anchors is not None and len(anchors):
        found = search.toward_anchors(anchors, end, flipped, found)
    for _ in range(refine):
        if found.size == 0 or not search.refine(end, found, overshoot):
            break
    distance = np.where(flipped, np.linalg.norm(end - z0, axis=1), np.nan)
    status = tuple("found" if f else "not_found" for f in flipped)
    return BoundaryResult(
        distance=distance,
        boundary=np.where(flipped[:, None], standardizer.to_raw(end), np.nan),
        rows=search.rows,
        status=status,
        reason=tuple(None if f else reason[i] for i, f in enumerate(flipped)),
    )


class _Search:
    """One :func:`minimal_l2` run's shared state: the model and the start points (``z0``, standardized) with their
    clean classes, and the model rows spent per point."""

    def __init__(
        self,
        model: Predictor,
        standardizer: Standardizer,
        x: NDArray[np.float64],
        held: Held | None,
        bisection_steps: int,
    ) -> None:
        self.model, self.standardizer, self.held = model, standardizer, held
        self.bisection_steps = bisection_steps
        self.z0 = standardizer.to_standardized(x)
        b, self.n = x.shape
        self.rows = np.zeros(b, dtype=np.int64)
        clean, _ = self.run(self.z0, np.arange(b, dtype=np.intp))
        self.cls = clean.astype(np.intp)

    def run(self, z: NDArray[np.float64], owners: NDArray[np.intp]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Labels and probabilities at the standardized rows ``z``, each evaluated with its owner point's held values
        and counted to it."""
        held = self.held
        out = self.model.evaluate(
            self.standardizer.to_raw(z).astype(np.float32), None if held is None else held.take(owners)
        )
        if out.label is None or out.proba is None:
            raise ProbeError("the L2 boundary search follows class probabilities; this classifier gives labels only")
        np.add.at(self.rows, owners, 1)
        return out.label.astype(np.int64), out.proba.astype(np.float64)

    def step(
        self,
        z: NDArray[np.float64],
        flipped: NDArray[np.bool_],
        reason: list[str | None],
        *,
        max_steps: int,
        overshoot: float,
        cap: float,
    ) -> NDArray[np.intp]:
        """DeepFool's linearized steps from every point (``z`` moved in place) until its class changes (``flipped``),
        its margin is flat or it passes the cap (``reason``); returns the points whose class the steps did not
        change."""
        z0, cls, n = self.z0, self.cls, self.n
        active = np.arange(z0.shape[0], dtype=np.intp)
        for _ in range(max_steps):
            if active.size == 0:
                break
            k = active.size
            grad = np.zeros((k, n))
            m0 = np.zeros(k)
            seen = np.zeros(k, dtype=bool)
            for h in STEPS:
                todo = np.flatnonzero(~seen)
                if todo.size == 0:
                    break
                idx = active[todo]
                probe = np.repeat(z[idx], n + 1, axis=0)
                probe[np.arange(todo.size * (n + 1)) % (n + 1) != 0] += np.tile(np.eye(n) * h, (todo.size, 1))
                owners = np.repeat(idx, n + 1)
                _, proba = self.run(probe, owners)
                m = _margin(proba, np.repeat(cls[idx], n + 1)).reshape(todo.size, n + 1)
                m0[todo] = m[:, 0]
                grad[todo] = (m[:, 1:] - m[:, :1]) / h
                seen[todo] = np.linalg.norm(grad[todo], axis=1) > 0
            still: list[int] = []
            for r, i in enumerate(active):
                if m0[r] < 0:
                    flipped[i] = True
                    continue
                g2 = float(grad[r] @ grad[r])
                if g2 == 0.0:
                    reason[i] = "the model's probabilities do not move near this point (flat margin)"
                    continue
                z[i] = z[i] - (1.0 + overshoot) * max(m0[r], 1e-12) * grad[r] / g2
                if np.linalg.norm(z[i] - z0[i]) > cap:
                    reason[i] = f"no boundary within the cap ({cap:g} standardized units)"
                    continue
                still.append(int(i))
            active = np.asarray(still, dtype=np.intp)
            if active.size:
                label, _ = self.run(z[active], active)
                done = label != cls[active]
                flipped[active[done]] = True
                active = active[~done]
        return active

    def follow_labels(self, i: int, z: NDArray[np.float64], flipped: NDArray[np.bool_], cap: float) -> None:
        """Point ``i``'s step direction followed on labels alone, doubling the distance up to the cap; where the
        class changes, ``z[i]`` moves there and ``flipped[i]`` is set."""
        z0, cls = self.z0, self.cls
        direction = z[i] - z0[i]
        reach = float(np.linalg.norm(direction))
        while reach > 0 and not flipped[i]:
            reach = min(2.0 * reach, cap) if reach < cap else np.inf
            if not np.isfinite(reach):
                break
            candidate = z0[i] + direction / np.linalg.norm(direction) * reach
            label, _ = self.run(candidate[None, :], np.array([i], dtype=np.intp))
            if label[0] != cls[i]:
                z[i] = candidate
                flipped[i] = True
            elif reach >= cap:
                break

    def bisect(self, found: NDArray[np.intp], target: NDArray[np.float64]) -> NDArray[np.float64]:
        """The first class change on each segment [z0[i], target[i]] (the target's class differs)."""
        z0, cls = self.z0, self.cls
        lo = np.zeros(found.size)
        hi = np.ones(found.size)
        for _ in range(self.bisection_steps if found.size else 0):
            mid = 0.5 * (lo + hi)
            label, _ = self.run(z0[found] + mid[:, None] * (target - z0[found]), found)
            changed = label != cls[found]
            hi = np.where(changed, mid, hi)
            lo = np.where(changed, lo, mid)
        out: NDArray[np.float64] = z0[found] + hi[:, None] * (target - z0[found])
        return out

    def toward_anchors(
        self,
        anchors: NDArray[np.floating],
        end: NDArray[np.float64],
        flipped: NDArray[np.bool_],
        found: NDArray[np.intp],
    ) -> NDArray[np.intp]:
        """Each point's boundary toward its nearest anchor of another class, kept in ``end`` where it is nearer (or
        the only one); returns the points with a boundary now."""
        z0, cls, held = self.z0, self.cls, self.held
        b = z0.shape[0]
        za = self.standardizer.to_standardized(np.asarray(anchors, dtype=np.float64))
        out = self.model.evaluate(
            np.asarray(anchors, dtype=np.float32), None if held is None else held.take(np.zeros(len(za), dtype=np.intp))
        )
        if out.label is None:
            raise ProbeError("the L2 boundary search follows class probabilities; this classifier gives labels only")
        a_label = out.label.astype(np.int64)
        pick = np.full(b, -1, dtype=np.intp)
        for q in range(b):
            other = np.flatnonzero(a_label != cls[q])
            if other.size:
                pick[q] = other[np.argmin(np.linalg.norm(za[other] - z0[q], axis=1))]
        cand = np.flatnonzero(pick >= 0)
        if cand.size:
            label, _ = self.run(za[pick[cand]], cand)  # with each point's own held values the class may differ
            cand = cand[label != cls[cand]]
        if cand.size:
            alt = self.bisect(cand, za[pick[cand]])
            nearer = ~flipped[cand] | (
                np.linalg.norm(alt - z0[cand], axis=1) < np.linalg.norm(end[cand] - z0[cand], axis=1)
            )
            end[cand[nearer]] = alt[nearer]
            flipped[cand] = True
            found = np.flatnonzero(flipped)
        return found

    def refine(self, end: NDArray[np.float64], found: NDArray[np.intp], overshoot: float) -> bool:
        """One refinement: at the boundary point the probabilities are near 1/2 (no float32 saturation), so its
        normal is accurate; project the start onto that tangent plane and keep the projection when it is nearer
        (``end`` changed in place). False when nothing got nearer (no further refinement helps)."""
        z0, cls, n = self.z0, self.cls, self.n
        probe = np.repeat(end[found], n + 1, axis=0)
        probe[np.arange(found.size * (n + 1)) % (n + 1) != 0] += np.tile(np.eye(n) * STEPS[0], (found.size, 1))
        _, proba = self.run(probe, np.repeat(found, n + 1))
        m = _margin(proba, np.repeat(cls[found], n + 1)).reshape(found.size, n + 1)
        g = (m[:, 1:] - m[:, :1]) / STEPS[0]
        g2 = np.einsum("ij,ij->i", g, g)
        ok = g2 > 0
        if not ok.any():
            return False
        idx, gk = found[ok], g[ok]
        along = np.einsum("ij,ij->i", gk, z0[idx] - end[idx]) / g2[ok]
        target = z0[idx] - (1.0 + overshoot) * along[:, None] * gk
        label, _ = self.run(target, idx)
        better = (label != cls[idx]) & (
            np.linalg.norm(target - z0[idx], axis=1) < np.linalg.norm(end[idx] - z0[idx], axis=1)
        )
        if not better.any():
            return False
        end[idx[better]] = self.bisect(idx[better], target[better])
        return True
