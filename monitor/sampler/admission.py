"""The keep decision on one event: a draw at its acceptance probability, paid for from the buckets.

Forced keeps (e.g. an event whose live prediction disagrees with the ONNX copy) are always kept and paid for from the
buckets, so they crowd ordinary samples out rather than exceed the budget for long. An *absorbed* event (part of a
poll scored whole because it fits the CPU bucket) is kept without a draw and paid for likewise, except that the event
cap's bucket is only taken from, never overdrawn.
"""

from __future__ import annotations

import random

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
