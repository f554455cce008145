"""The keep decision on one event: a draw at its acceptance probability, paid for from the buckets.

Forced keeps (e.g. an event whose live prediction disagrees with the ONNX copy) are always kept and paid for from the
buckets, so they crowd ordinary samples out rather than exceed the budget for long. An *absorbed* event (part of a
poll scored whole because it fits the CPU bucket) is kept without a draw and paid for likewise, except that the event
cap's bucket is only taken from, never overdrawn.
"""

from __future__ import annotations

import random

import numpy as np
from numpy.typing import NDArray

from monitor.sampler.accounts import ModelAccount, StratumAccount
from monitor.sampler.allocation import SamplingBudget


class Admission:
    """Draws acceptance for one event at a time from a seeded generator, and charges the buckets.

    Examples
    --------
    >>> from monitor.sampler.accounts import ModelAccounts
    >>> from monitor.sampler.uniform_config import UniformSamplerConfig
    >>> config = UniformSamplerConfig(10.0, model_targets={"m": 10.0})
    >>> accounts, admission = ModelAccounts(config), Admission(SamplingBudget(config), seed=0)
    >>> model = accounts.add("m")
    >>> stratum = accounts.stratum(model, None)
    >>> admission.decide(model, stratum, 0.25, 0.0, force=False, absorb=False)  # the draw (0.84) says drop
    0.0
    >>> admission.decide(model, stratum, 1.0, 0.0, force=False, absorb=False)  # kept: its weight is 1 / p
    1.0
    >>> admission.decide(model, stratum, 0.25, 0.0, force=True, absorb=False)
    1.0
    >>> stratum.seen_total, stratum.kept_total, stratum.forced_total
    (3, 2, 1)
    """

    def __init__(self, budget: SamplingBudget, seed: int) -> None:
        self.budget = budget
        self.seed = seed
        self.rng = random.Random(seed)

    def reset(self) -> None:
        """Reseed the draws."""
        self.rng = random.Random(self.seed)

    def decide(
        self,
        model: ModelAccount,
        stratum: StratumAccount,
        p: float,
        now: float,
        *,
        force: bool,
        absorb: bool,
        drawn: bool = False,
    ) -> float:
        """Decide one event at acceptance probability ``p``, counting it in ``stratum``: its weight (1 / ``p`` when
        drawn, 1.0 when forced or absorbed, 0.0: dropped). ``drawn``: the caller drew it already from :attr:`rng`
        (at ``p``), so only the buckets decide."""
        budget = self.budget
        stratum.probability = p
        stratum.seen_total += 1
        if force:
            model.bucket.force(now)
            budget.events.force(now)
            budget.cpu.force(now, model.cost_seconds)
            stratum.kept_total += 1
            stratum.forced_total += 1
            return 1.0
        if absorb:
            model.bucket.force(now)
            budget.events.take(now)
            budget.cpu.force(now, model.cost_seconds)
            stratum.kept_total += 1
            return 1.0
        if (
            (drawn or p >= 1.0 or self.rng.random() < p)
            and model.bucket.available(now)
            and budget.events.available(now)
            and budget.cpu.available(now)
        ):
            model.bucket.take(now)
            budget.events.take(now)
            budget.cpu.take(now, model.cost_seconds)
            stratum.kept_total += 1
            return 1.0 / p
        return 0.0


def random_floats(rng: random.Random, n: int) -> NDArray[np.float64]:
    """The next ``n`` draws of ``rng.random()``, in one call: the same floats, and ``rng`` left where ``n`` calls
    leave it.

    CPython's ``random()`` takes two 32-bit outputs ``a``, ``b`` of the Mersenne Twister and returns
    ``((a >> 5) * 2**26 + (b >> 6)) / 2**53``; ``getrandbits(64 n)`` is the next ``2 n`` outputs, the first in the lowest
    bits. A subclass with its own ``random`` is called ``n`` times.

    >>> a, b = random.Random(5), random.Random(5)
    >>> random_floats(a, 3).tolist() == [b.random() for _ in range(3)] and a.random() == b.random()
    True
    """
    if type(rng) is not random.Random:
        return np.array([rng.random() for _ in range(n)], dtype=np.float64)
    if n <= 0:
        return np.zeros(0, dtype=np.float64)
    words = np.frombuffer(rng.getrandbits(64 * n).to_bytes(8 * n, "little"), dtype="<u4").reshape(n, 2)
    high = (words[:, 0] >> 5).astype(np.float64)
    low = (words[:, 1] >> 6).astype(np.float64)
    return (high * 67108864.0 + low) * (1.0 / 9007199254740992.0)
