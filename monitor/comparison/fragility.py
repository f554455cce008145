"""Universal and model-specific fragilities (seed 000 §10.8): the ε* profile of each model over the same points,
split into what every model shares and what is specific to some.

Each model's profile comes from the probe funnel (:func:`monitor.api.probe`) on the same sample of rows, at the same
standardization (the shared reference); a target is one perturbation, or ``shift`` of one input named by its data
column, so the targets of models with different input layouts line up by name. A target is *fragile* for a model
when its threshold search crossed (the output changed at some ε* within the searched range).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: a target: (perturbation, input column or None for a perturbation of the whole row)
Target = tuple[str, str | None]


@dataclass(frozen=True)
class Fragility:
    """One target across the models: ε* per model (None: not crossed within the search, or not searched),
    ``kind`` ``universal`` (fragile for every model), ``specific`` (for some: ``fragile_for`` names them) or
    ``robust`` (for none), and ``most_robust``: the model with the largest ε* among those that crossed
    (None unless the target is universal)."""

    perturbation: str
    input: str | None
    eps_star: Mapping[str, float | None]
    kind: str
    fragile_for: tuple[str, ...]
    most_robust: str | None

    @property
    def target(self) -> str:
        return self.perturbation if self.input is None else f"{self.perturbation}[{self.input}]"


def split_fragilities(profiles: Mapping[str, Mapping[Target, float | None]]) -> tuple[Fragility, ...]:
    """Every target any model was probed on, classified across ``profiles`` (model → target → ε*).

    >>> p = {"a": {("noise", None): 0.5, ("shift", "x"): 0.2}, "b": {("noise", None): 0.9, ("shift", "x"): None}}
    >>> [(f.target, f.kind, f.most_robust) for f in split_fragilities(p)]
    [('noise', 'universal', 'b'), ('shift[x]', 'specific', None)]
    """
    models = list(profiles)
    targets: list[Target] = []
    for prof in profiles.values():
        targets += [t for t in prof if t not in targets]
    out = []
    for pert, inp in targets:
        eps = {m: profiles[m].get((pert, inp)) for m in models}
        fragile = tuple(m for m in models if eps[m] is not None)
        if fragile and len(fragile) == len(models):
            kind = "universal"
            most = max(fragile, key=lambda m: eps[m] or 0.0) if len(models) > 1 else None
        else:
            kind, most = ("specific" if fragile else "robust"), None
        out.append(Fragility(pert, inp, eps, kind, fragile, most))
    return tuple(out)


def describe(fragilities: Sequence[Fragility]) -> list[str]:
    """One line for the universal targets and one per model for its specific ones."""
    universal = [f.target for f in fragilities if f.kind == "universal"]
    lines = [f"universal fragilities (every model): {', '.join(universal) or 'none'}"]
    models = list(fragilities[0].eps_star) if fragilities else []
    for m in models:
        own = [f.target for f in fragilities if f.kind == "specific" and m in f.fragile_for]
        lines.append(f"specific to '{m}' (among others fragile there: see the table): {', '.join(own) or 'none'}")
    return lines
