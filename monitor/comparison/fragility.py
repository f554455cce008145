"""Universal and model-specific fragilities (seed 000 §10.8): the ε* profile of each model over the same points,
split into what every model shares and what is specific to some.

Each model's profile comes from the probe funnel (:func:`monitor.api.probe`) on the same sample of rows, at the same
standardization (the shared reference); a target is one perturbation, or ``shift`` of one input named by its data
column, so the targets of models with different input layouts line up by name. A target is *fragile* for a model
when its threshold search crossed (the output changed at some ε* within the searched range). It is *universal*
when it is fragile for every model at thresholds within ``ratio`` of each other (the floor they share), *specific*
when some model crosses at an ε* below 1/``ratio`` of another's (or the other does not cross at all): then it is
fragile for the models within ``ratio`` of the lowest ε*, and *robust* when no model crosses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

#: a target: (perturbation, input column or None for a perturbation of the whole row)
Target = tuple[str, str | None]
#: thresholds within this factor of each other count as the same fragility
RATIO = 1.5


@dataclass(frozen=True)
class Fragility:
    """One target across the models: ε* per model (None: not crossed within the search, or not searched),
    ``kind`` ``universal``, ``specific`` (``fragile_for`` names the models) or ``robust`` (see the module
    docstring), and ``most_robust``: the model with the largest ε*, the one that did not cross first (None when no
    model crossed or only one model was probed)."""

    perturbation: str
    input: str | None
    eps_star: Mapping[str, float | None]
    kind: str
    fragile_for: tuple[str, ...]
    most_robust: str | None

    @property
    def target(self) -> str:
        return self.perturbation if self.input is None else f"{self.perturbation}[{self.input}]"


def split_fragilities(
    profiles: Mapping[str, Mapping[Target, float | None]], ratio: float = RATIO
) -> tuple[Fragility, ...]:
    """Every target any model was probed on, classified across ``profiles`` (model → target → ε*).

    >>> p = {"a": {("noise", None): 0.5, ("shift", "x"): 0.2}, "b": {("noise", None): 0.6, ("shift", "x"): None}}
    >>> [(f.target, f.kind, f.fragile_for, f.most_robust) for f in split_fragilities(p)]
    [('noise', 'universal', ('a', 'b'), 'b'), ('shift[x]', 'specific', ('a',), 'b')]
    """
    models = list(profiles)
    targets: list[Target] = []
    for prof in profiles.values():
        targets += [t for t in prof if t not in targets]
    out = []
    for pert, inp in targets:
        eps = {m: profiles[m].get((pert, inp)) for m in models}
        crossed = {m: e for m, e in eps.items() if e is not None}
        if not crossed:
            out.append(Fragility(pert, inp, eps, "robust", (), None))
            continue
        low = min(crossed.values())
        fragile = tuple(m for m in models if m in crossed and crossed[m] <= ratio * low)
        kind = "universal" if len(fragile) == len(models) else "specific"
        reach = {m: math.inf if e is None else e for m, e in eps.items()}
        most = max(models, key=lambda m: reach[m]) if len(models) > 1 else None
        out.append(Fragility(pert, inp, eps, kind, fragile, most))
    return tuple(out)
