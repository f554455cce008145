"""Stage 2: work-conserving, class-stratified sampling — rare live classes are still seen.

The ONNX copy's class is only known after scoring, so strata are the *live server's* predicted class carried
by the event (``"none"`` when it carries none, which makes a stream without live predictions plain uniform).
Each model's budget is divided between its strata in proportion to ``offered_rate ** exponent``
(1 = uniform, 0 = the same budget per class, default 0.5), by water-filling so that budget a small class cannot
use goes to the others. A stratum's acceptance probability is at most ``max_boost`` times the model's uniform
probability, which bounds how strongly rare classes are over-represented (and keeps the per-event weights
``1/p`` within a factor ``max_boost`` of the uniform weight on that side). The CPU budget, event caps, buckets, forced
keeps and counters are those of :class:`~monitor.sampler.uniform.UniformSampler`.
"""

from __future__ import annotations

from monitor.errors import ConfigError
from monitor.events import InferenceEvent
from monitor.sampler.accounts import MIN_RATE, ModelAccount, StratumAccount
from monitor.sampler.budget import water_fill
from monitor.sampler.uniform import UniformSampler
from monitor.sampler.uniform_config import UniformSamplerConfig


class StratifiedSampler(UniformSampler):
    """Budgeted sampling, uniform within each (model, live class), rare classes boosted (stage 2).

    Parameters
    ----------
    config, seed
        As :class:`~monitor.sampler.uniform.UniformSampler`.
    exponent : float in [0, 1]
        A stratum's share of its model's budget is proportional to ``offered_rate ** exponent``.
    max_boost : float >= 1
        Largest ratio of a stratum's acceptance probability to the model's uniform probability.

    Raises
    ------
    ConfigError
        ``exponent`` outside [0, 1], or ``max_boost < 1``.
    """

    #: keeps rare live classes more often than uniform: the pipeline thins its drift feed back to uniform
    biases_class_mix = True
    _stratum_counts_offers = True  # see UniformSampler.sample_many

    def __init__(
        self,
        config: UniformSamplerConfig | None = None,
        *,
        exponent: float = 0.5,
        max_boost: float = 10.0,
        seed: int = 0,  # not a setting: as UniformSampler's
    ) -> None:
        if not 0.0 <= exponent <= 1.0:
            raise ConfigError(f"exponent must be in [0, 1] (1 = uniform, 0 = equal share per class); got {exponent!r}")
        if not max_boost >= 1.0:
            raise ConfigError(f"max_boost must be >= 1; got {max_boost!r}")
        self.exponent, self.max_boost = float(exponent), float(max_boost)
        super().__init__(config, seed=seed)

    def _stratum(self, model: ModelAccount, event: InferenceEvent, now: float) -> StratumAccount:
        stratum = super()._stratum(model, event, now)
        stratum.offered.update(now)
        return stratum

    def _reallocate_strata(self, model: ModelAccount, now: float) -> None:
        """Set each stratum's boost: its water-filled share of the budget over its uniform share."""
        offered = model.offered.rate(now)
        uniform_p = model.target / max(offered, MIN_RATE)
        if uniform_p >= 1.0 or not model.strata:
            for st in model.strata.values():
                st.boost = 1.0
            return
        rates = {key: st.offered.rate(now) for key, st in model.strata.items()}
        caps = {key: min(r, self.max_boost * uniform_p * r) for key, r in rates.items()}
        weights = {key: r**self.exponent for key, r in rates.items()}
        shares = water_fill(model.target, caps, weights)
        for key, st in model.strata.items():
            r = rates[key]
            st.boost = shares[key] / (r * uniform_p) if r > MIN_RATE else 1.0
