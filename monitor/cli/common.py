"""Options and builders shared by the offline commands (score, reference, probe)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.cli.flags import add_setting_flag
from monitor.config import ModelSettings, ScoringSettings
from monitor.errors import ConfigError, DataError, ModelError
from monitor.model.io import HEADER_MODES, HeaderMode, read_model_rows, read_rows
from monitor.model.onnx import OnnxModel
from monitor.model.row_files import width_refusal
from monitor.model.signature import Held, scale_groups
from monitor.model.standardize import Standardizer
from monitor.signals.scorer import RobustnessScorer, ScoringConfig


def count_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``low``, refused with what arrived (``--sample-rows 0``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {low}; got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}; got {value}")
        return value

    return parse


def flag_values(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The parsed values of the flags whose destinations are ``names``, by name: the keywords of a call or settings
    object whose parameters are named as the flags are."""
    return {name: getattr(args, name) for name in names}


def add_model_options(p: argparse.ArgumentParser) -> None:
    """``--model`` and the model's settings (:class:`~monitor.config.ModelSettings`) an offline command takes."""
    p.add_argument("--model", required=True, help="the ONNX model file")
    add_setting_flag(p, ModelSettings, "providers", "--providers", before="comma-separated: ")
    add_setting_flag(p, ModelSettings, "threads", "--threads", type=count_at_least(0))
    add_setting_flag(p, ModelSettings, "max_rows_per_run", "--max-rows")
    add_setting_flag(p, ModelSettings, "model_kind", "--model-kind")
    add_setting_flag(p, ModelSettings, "fixed_features", "--fixed-features", metavar="NAME[,NAME…]")


def add_header_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--header",
        choices=HEADER_MODES,
        default="auto",
        help="is the first row of each CSV file read (data, reference, labels) a header? auto (default): when it is "
        "not the same kind as the rows below it (names above numbers, or column numbers 0..n-1 / 1..n above "
        "fractional rows); yes: always skipped; no: always data. What was decided is printed",
    )


def add_space_options(p: argparse.ArgumentParser, units: str) -> None:
    """``--space``, ``--scale`` and ``--channel-axis``: the units ``units`` (the flags a command measures in that
    space) are in, and how the reference standardizes them."""
    add_setting_flag(p, ScoringSettings, "space", "--space", after=f" Here: the units of {units}.")
    add_setting_flag(p, ScoringSettings, "scale", "--scale")
    add_setting_flag(p, ScoringSettings, "channel_axis", "--channel-axis")


def add_scoring_options(p: argparse.ArgumentParser) -> None:
    """``--reference`` and the scoring settings (:class:`~monitor.config.ScoringSettings`) as flags."""
    p.add_argument(
        "--reference",
        help="reference for standardization: a reference JSON (`harmonic-monitor reference`) or reference rows "
        "(.csv/.npy/.npz/.parquet/.jsonl); default: the data itself",
    )
    add_setting_flag(p, ScoringSettings, "radius", "--radius")
    add_space_options(p, "--radius/--sigma")
    for name in SCORING_FLAGS[1:]:
        add_setting_flag(p, ScoringSettings, name, "--" + name.replace("_", "-"))


#: the scoring settings :func:`add_scoring_options` adds as flags of the same names (their parsed values are
#: :class:`~monitor.signals.scorer.ScoringConfig`'s fields)
SCORING_FLAGS = ("radius", "ball", "output", "flicker_copies", "sigma", "steps", "seed", "regression_tolerance")


def model_settings(args: argparse.Namespace) -> ModelSettings:
    """The model settings the flags of :func:`add_model_options` give (the flags parsed them; the model checks what
    they do not): what ``run`` reads from its file for each model."""
    providers = tuple(p.strip() for p in str(args.providers).split(",") if p.strip())
    return ModelSettings.model_construct(
        name=Path(args.model).stem or str(args.model),
        path=Path(args.model),
        providers=providers,
        threads=args.threads,
        max_rows_per_run=args.max_rows,
        model_kind=args.model_kind,
        fixed_features=list(fixed_features(args)),
    )


def load_model(args: argparse.Namespace) -> OnnxModel:
    """The model of ``--model`` and its flags, built as ``run`` builds its models (:meth:`OnnxModel.from_settings`),
    on every core: the command has the machine to itself."""
    return OnnxModel.from_settings(model_settings(args), offline=True)


def fixed_features(args: argparse.Namespace) -> tuple[str, ...]:
    """The names given with ``--fixed-features`` (none when the command has no such option)."""
    text = str(getattr(args, "fixed_features", "") or "")
    return tuple(n.strip() for n in text.split(",") if n.strip())


def load_inputs(
    path: str,
    model: OnnxModel,
    *,
    what: str,
    header: HeaderMode = "auto",
    announce: bool = True,
    notes: list[str] | None = None,
) -> tuple[NDArray[np.float64], Held | None]:
    """The rows of ``path`` for ``model``: x (N, D) and the held values (None when the model holds nothing).

    A plain model (one 2-D float input) reads plain rows of its feature count (``what`` names the flag in
    messages); any other reads a CSV whose header names its inputs or features, an ``.npy`` or an ``.npz``
    (:func:`~monitor.model.io.read_model_rows`). What was read (rows, columns, the header decision) is printed on
    stderr when ``announce``, or appended to ``notes`` when given, for a command that prints it with its result
    (``probe``: an error is one line).
    """

    def tell(line: str) -> None:
        if notes is not None:
            notes.append(line)
        elif announce:
            print(line, file=sys.stderr)

    if path.lower().endswith((".jsonl", ".parquet")):
        from monitor.api import read_rows as api_rows

        rows = api_rows(path, model, what=what)
        invalid = ", ".join(f"{k}: {v}" for k, v in sorted(rows.invalid.items()))
        tell(f"{what}: {rows.source}" + (f" (invalid lines by reason: {invalid})" if rows.invalid else ""))
        return rows.x, rows.held
    if model.signature.plain and not path.lower().endswith(".npz"):
        table = read_rows(path, header)
        tell(f"{what}: {table.describe()}")
        if table.rows.shape[1] != model.n_features:
            raise DataError(width_refusal(what, path, table.rows.shape[1], model.n_features, table.header), path=path)
        return table.rows, None
    model_table = read_model_rows(path, model.signature, header)
    tell(f"{what}: {model_table.describe()}")
    return model_table.rows, model_table.held


def build_standardizer(
    args: argparse.Namespace, model: OnnxModel, data_path: str, notes: list[str] | None = None
) -> Standardizer:
    """The standardizer of ``--reference`` (or of ``data_path``), the file read for ``model``'s signature
    (:func:`load_inputs`)."""
    if args.space == "raw":
        return Standardizer.identity(model.n_features)
    ref_path = args.reference or data_path
    what = "--reference" if args.reference else "--data"
    if str(ref_path).lower().endswith(".json"):  # a reference JSON: its standardizer, as `run` reads it
        from monitor.rolling.reference_file import read_reference

        standardizer, _ = read_reference(ref_path, model.n_features)
        if notes is not None:
            notes.append(f"{what}: the standardizer of reference JSON '{ref_path}'")
        return standardizer
    # --data is announced where the command reads it for scoring, not twice
    ref, _ = load_inputs(
        ref_path,
        model,
        what=what,
        header=args.header,
        announce=bool(args.reference),
        notes=notes if args.reference else None,
    )
    finite = ref[np.all(np.isfinite(ref), axis=1)]
    if finite.shape[0] == 0:
        raise DataError(f"'{ref_path}' has no finite rows to standardize with", path=ref_path)
    groups = None
    if getattr(args, "scale", "per_feature") != "per_feature":
        try:
            groups = scale_groups(model.signature, args.scale, args.channel_axis)
        except ModelError as exc:
            raise ConfigError(str(exc)) from None
    return Standardizer.fit(finite, groups=groups)


def build_scorer(args: argparse.Namespace) -> tuple[OnnxModel, Standardizer, RobustnessScorer]:
    model = load_model(args)
    standardizer = build_standardizer(args, model, args.data)
    config = ScoringConfig(**flag_values(args, *SCORING_FLAGS))
    held_sample = None
    if model.signature.has_held and model.kind == "regressor" and args.flicker_copies > 0:
        # a regressor's output scale is measured with held values the reference (or the data) holds
        source = args.reference or args.data
        if str(source).lower().endswith(".json"):
            from monitor.rolling.reference_file import read_held_sample

            held_sample = read_held_sample(source, model.signature)
        else:
            _, held_sample = load_inputs(source, model, what="--reference", header=args.header, announce=False)
    return model, standardizer, RobustnessScorer(model, standardizer, config, held_sample=held_sample)
