"""Whether a fall in the model's confidence is evidence of a loss, measured on the labelled reference.

The confidence and margin CUSUMs (:mod:`monitor.drift.output_detectors`) count a fall in max-probability as harm
evidence. That holds only as far as the model's less confident answers are its wrong ones: a logistic regression
that is 99.9 % right, and about as right on its least confident rows, loses nothing when traffic moves towards
them (measured: ``bench/verdict_quality.py --model logreg``, docs/BENCHMARKS.md). The labelled reference
(``reference --labels``) says which model this is: :class:`ConfidenceErrors` keeps how many of its least confident
tenth of rows were wrong, and :meth:`~ConfidenceErrors.loss_bound` bounds what a fall in confidence can cost: the
accuracy of a window made only of such rows, below the reference's (a 95 % upper bound on their error rate, minus
the reference's). Where that is below the accuracy tolerance (``accuracy.tolerance``) although those rows were
unsure (their mean max-probability below 1 − the tolerance: taken at its word, their confidence announced more
errors than the tolerance), a fall is reported as fragility, not harm (``drift.confidence_harm: auto``), and so is a
fall of the run's accuracy estimate, which is read from the same confidence (it is still shown, with a caveat, and
HarmonicAccuracyDrop still fires on it). A reference whose least confident rows are still sure (a model right and
certain everywhere) cannot tell, and a fall stays harm evidence.

>>> rng = np.random.default_rng(0)
>>> conf = rng.uniform(0.5, 1.0, 5000)
>>> tracks = ConfidenceErrors.measure(conf, rng.uniform(size=5000) < conf)  # wrong as often as it is unsure
>>> tracks.harm_evidence(0.05), round(tracks.loss_bound(), 3)
(True, 0.265)
>>> flat = ConfidenceErrors.measure(conf, rng.uniform(size=5000) < 0.999)  # almost always right, sure or not
>>> flat.harm_evidence(0.05), round(flat.loss_bound(), 3)
(False, 0.005)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from monitor.errors import DataError

#: the least confident share of labelled rows whose errors are counted (the confidence CUSUM's default cutoff, the
#: reference's 90th percentile of 1 − max-probability)
LOW_SHARE = 0.1
#: the one-sided level of the bound on their error rate: a fall is demoted only where the rows show it clearly
LEVEL = 0.95
#: ``drift.confidence_harm``: follow the labelled reference (``auto``), or count a fall as harm or not, whatever it says
Mode = Literal["auto", "always", "never"]


@dataclass(frozen=True, slots=True)
class ConfidenceErrors:
    """The labelled reference's least confident rows: ``rows`` of them (the :data:`LOW_SHARE` of ``n`` valid rows
    with the lowest max-probability), ``errors`` of them wrong, their mean max-probability ``confidence``, against
    the reference's ``accuracy``."""

    rows: int
    errors: int
    n: int
    accuracy: float
    confidence: float

    @classmethod
    def measure(cls, confidence: ArrayLike, correct: ArrayLike) -> ConfidenceErrors:
        """Count the errors among the least confident :data:`LOW_SHARE` of the rows (ties broken by row order)."""
        conf = np.asarray(confidence, dtype=np.float64).reshape(-1)
        ok = np.asarray(correct, dtype=np.bool_).reshape(-1)
        if conf.shape != ok.shape or conf.size == 0:
            raise DataError(f"confidence and correct must be equal, non-empty lengths; got {conf.size} and {ok.size}")
        rows = max(1, math.ceil(LOW_SHARE * conf.size))
        low = np.argsort(conf, kind="stable")[:rows]
        errors = int(np.count_nonzero(~ok[low]))
        return cls(rows, errors, int(conf.size), float(np.mean(ok)), float(np.mean(conf[low])))

    @property
    def low_accuracy(self) -> float:
        """The accuracy of the least confident rows."""
        return 1.0 - self.errors / self.rows

    def loss_bound(self) -> float:
        """What a fall in confidence can cost, at most (95 %): a window of rows like the least confident ones is
        this much less accurate than the reference (the upper Clopper–Pearson bound on their error rate, minus the
        reference's error rate)."""
        from scipy import stats  # on use: the CLI starts without scipy

        e, k = self.errors, self.rows
        upper = 1.0 if e >= k else float(stats.beta.ppf(LEVEL, e + 1, k - e))
        return upper - (1.0 - self.accuracy)

    def unsure(self, tolerance: float) -> bool:
        """Whether the least confident rows were unsure: their confidence, taken at its word, announced an error
        rate above ``tolerance``."""
        return self.confidence < 1.0 - tolerance

    def harm_evidence(self, tolerance: float) -> bool:
        """Whether a fall in confidence can mean a loss of ``tolerance`` or more (the accuracy tolerance): it can
        unless the least confident rows were unsure and still (within the bound) as right as the rest."""
        return self.loss_bound() >= tolerance or not self.unsure(tolerance)

    def estimate_caveat(self, tolerance: float) -> str | None:
        """What an accuracy estimate read from this model's confidence cannot claim, where a fall in confidence is
        no harm evidence (None elsewhere): the estimate's caveat and HarmonicAccuracyDrop's words."""
        if self.harm_evidence(tolerance):
            return None
        return (
            f"this model's least confident answers were right {self.low_accuracy:.1%} of the time on its labelled "
            f"reference ({self.accuracy:.1%} overall): its confidence barely tracks its errors, so an estimate read "
            "from its confidence says little of its accuracy, and is no harm evidence in the verdict"
        )

    def describe(self, tolerance: float) -> str:
        """One sentence: what the rows show and what follows for the verdict."""
        shown = (
            f"the least confident {LOW_SHARE:.0%} of the labelled reference ({self.rows} rows, mean max-probability "
            f"{self.confidence:.3f}) were right {self.low_accuracy:.1%} of the time, {self.accuracy:.1%} overall"
        )
        bound = f"a fall in confidence can cost up to {self.loss_bound() * 100:.1f} points (95 % bound)"
        if not self.harm_evidence(tolerance):
            return (
                f"{shown}: {bound}, under accuracy.tolerance ({tolerance:g}): a fall in confidence or margin is "
                "reported as fragility (input-shift), not harm, and so is a fall of the accuracy estimate read from it"
            )
        if not self.unsure(tolerance):
            return (
                f"{shown}: even those rows were sure, so the reference cannot tell what a fall costs: a fall in "
                "confidence or margin is harm evidence"
            )
        return f"{shown}: {bound}: a fall in confidence or margin is harm evidence"

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "errors": self.errors,
            "n": self.n,
            "accuracy": self.accuracy,
            "confidence": self.confidence,
        }

    @classmethod
    def from_dict(cls, doc: Any) -> ConfidenceErrors | None:
        """:meth:`to_dict`'s document back; None for a fit written before it was kept."""
        if doc is None:
            return None
        got = cls(int(doc["rows"]), int(doc["errors"]), int(doc["n"]), float(doc["accuracy"]), float(doc["confidence"]))
        if not (0 <= got.errors <= got.rows <= got.n and 0.0 <= got.accuracy <= 1.0 and 0.0 <= got.confidence <= 1.0):
            raise ValueError(f"confidence errors out of range: {got}")
        return got


def confidence_harm(mode: Mode, errors: ConfidenceErrors | None, tolerance: float) -> tuple[bool, str]:
    """Whether the confidence and margin detectors count as harm evidence under ``drift.confidence_harm`` =
    ``mode``, and why, in words. ``auto`` follows ``errors`` (the labelled reference's); without them (a reference
    built without labels) a fall counts as harm, as no rows say otherwise.

    >>> confidence_harm("auto", None, 0.05)
    (True, 'no labelled reference measured how often the least confident answers are wrong: a fall in confidence or margin is harm evidence')
    >>> confidence_harm("never", None, 0.05)[0]
    False
    """
    if mode == "always":
        return True, "a fall in confidence or margin is harm evidence (drift.confidence_harm: always)"
    if mode == "never":
        return False, "a fall in confidence or margin is reported as fragility, not harm (drift.confidence_harm: never)"
    if errors is None:
        return True, (
            "no labelled reference measured how often the least confident answers are wrong: a fall in confidence "
            "or margin is harm evidence"
        )
    return errors.harm_evidence(tolerance), errors.describe(tolerance)
