"""Each setting's default and description is declared once, in the pydantic settings (monitor/config.py).

Two checks:

* every ``harmonic-monitor`` flag that stands for a setting (its destination is the setting's name, or one of the
  renamed flags in :data:`RENAMED`) was made by :func:`monitor.cli.flags.add_setting_flag`, which reads its type,
  choices, default and help from the field: a flag re-declared with an argparse literal fails here;
* no dataclass field or keyword parameter under monitor/ repeats a setting's default as a literal under the
  setting's name (``radius: float = 0.05``): where it stands for the setting it takes the default from the settings
  (``monitor.config.setting_default(Model, name)``) or has none. A name can be shared by something no setting
  governs (the seed of a reservoir sample that ``run`` never seeds from ``scoring.seed``): its line then says so
  with a marker, ``seed: int = 0,  # not a setting: <why>`` (a marker without a why, or one on a line that repeats no
  default, fails). No literal is excused otherwise.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

import monitor.config as config
from monitor.cli import build_parser
from monitor.cli.flags import MADE, add_setting_flag
from tests.unit.repo_scripts import REPO

#: flags that stand for a setting under another name: flag destination -> setting name
RENAMED = {"max_rows": "max_rows_per_run", "metrics_port": "port", "model_name": "name", "draws": "sensitivity_draws"}

#: (command, destination) of flags named like a setting that stand for something else, and what
NOT_THE_SETTING = {
    ("score", "reference"): "rows or a reference JSON standardizing --data (default: the data), not models[].reference",
    ("reference", "reference"): "as score's --reference",
    ("estimate", "reference"): "as score's --reference, or a JSON holding a fitted estimator",
    ("probe", "reference"): "as score's --reference, and dropout means",
    ("report", "reference"): "a required reference JSON for the report",
    ("reference", "labels"): "a file of true classes, not the labels section",
    ("probe", "labels"): "a file of true classes, not the labels section",
    ("report", "labels"): "a file of true classes, not the labels section",
    ("replay", "labels"): "a file of true classes or values, not the labels section",
    ("report", "max_events"): "reads only the first N events of the log, not batch.max_events",
    ("reference", "feature_names"): "names stored in the reference JSON (comma-separated), default the model's",
    ("report", "feature_names"): "the page's names of the inputs (comma-separated), default the model's",
    ("replay", "state_dir"): "default: a temporary directory removed at exit, not the service's state_dir",
    ("compare", "reference"): "rows standardizing every compared model alike, not models[].reference",
    ("compare", "labels"): "a column or file of true classes, not the labels section",
    ("compare", "feature_names"): "NAME=a,b,… per compared model, not one model's feature_names setting",
}


def _settings_models() -> list[type[BaseModel]]:
    """The settings classes monitor.config exports (declared in it or in the monitor/config_*.py beside it)."""
    return [m for name in config.__all__ if isinstance(m := getattr(config, name), type) and issubclass(m, BaseModel)]


def _setting_names() -> set[str]:
    return {name for model in _settings_models() for name in model.model_fields}


def _commands(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{path} {name}".strip())
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def flags_not_generated(parser: argparse.ArgumentParser) -> list[str]:
    """``command --flag`` of every flag that stands for a setting but was not made by ``add_setting_flag``."""
    names = _setting_names()
    out = []
    for command, action in _commands(parser):
        setting = RENAMED.get(action.dest, action.dest)
        if setting in names and action not in MADE and (command, action.dest) not in NOT_THE_SETTING:
            out.append(f"{command or 'harmonic-monitor'} {'/'.join(action.option_strings)} (setting {setting})")
    return out


def test_every_flag_of_a_setting_is_generated_from_it() -> None:
    missing = flags_not_generated(build_parser())
    assert not missing, (
        "these flags declare a setting's default or help a second time; make them with "
        "monitor.cli.flags.add_setting_flag (or list in NOT_THE_SETTING what else they stand for):\n  "
        + "\n  ".join(missing)
    )


def test_a_flag_declared_with_literals_is_caught() -> None:
    parser = argparse.ArgumentParser()
    add_setting_flag(parser, config.ScoringSettings, "radius", "--radius")
    parser.add_argument("--sigma", type=float, default=0.05, help="flicker noise scale σ (default 0.05)")
    assert flags_not_generated(parser) == ["harmonic-monitor --sigma (setting sigma)"]


def test_generated_flags_take_the_fields_default_and_help() -> None:
    for _, action in _commands(build_parser()):
        made = MADE.get(action)
        if made is None or made.override or made.why is not None:
            continue
        default = config.setting_default(made.model, made.name)
        text = ",".join(map(str, default)) if isinstance(default, list | tuple) else default
        assert action.default == text, action.option_strings
        assert action.help and "(default" in action.help


def test_a_default_of_its_own_says_why() -> None:
    with pytest.raises(ValueError, match="reason"):
        add_setting_flag(argparse.ArgumentParser(), config.ScoringSettings, "steps", "--steps", default=10)
    reasons = {tuple(a.option_strings): m.why for _, a in _commands(build_parser()) if (m := MADE.get(a)) and m.why}
    assert set(reasons) == {("--scales",)}  # reference --scales fixed against scoring.scales: from_reference


# ---------------------------------------------------------------------------------------------------- literals


def _defaults() -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for model in _settings_models():
        for name in model.model_fields:
            value = config.setting_default(model, name)
            if value is not None and value is not PydanticUndefined:
                out.setdefault(name, []).append(value)
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return list(a) == list(b)
    return type(a) is type(b) and a == b


#: the marker of a line whose literal shares a setting's name and default but stands for something else
NOT_A_SETTING = re.compile(r"#\s*not a setting:\s*\S")


def _marked_lines(source: str) -> set[int]:
    return {i for i, line in enumerate(source.splitlines(), 1) if NOT_A_SETTING.search(line)}


def literal_duplicates(source: str, path: str, excused: set[int] | None = None) -> list[str]:
    """``path::scope::name`` of every dataclass/class field and keyword parameter in ``source`` whose literal
    default equals the default of a setting of that name, unless a line of it (name to default) carries the
    :data:`NOT_A_SETTING` marker; the numbers of the marked lines that excused one are added to ``excused``."""
    defaults = _defaults()
    marked = _marked_lines(source)
    found = []

    def check(scope: str, name: str, node: ast.expr, first: int) -> None:
        try:
            value = ast.literal_eval(node)
        except ValueError:
            return
        if any(_same(value, d) for d in defaults.get(name, ())):
            lines = marked.intersection(range(first, (node.end_lineno or node.lineno) + 1))
            if not lines:
                found.append(f"{path}::{scope}::{name}")
            elif excused is not None:
                excused.update(lines)

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                inner = f"{scope}.{child.name}".lstrip(".")
                for st in child.body:
                    if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                        check(inner, st.target.id, st.value, st.lineno)
                visit(child, inner)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = f"{scope}.{child.name}".lstrip(".")
                a = child.args
                positional = a.posonlyargs + a.args
                for arg, d in zip(positional[len(positional) - len(a.defaults) :], a.defaults, strict=True):
                    check(inner, arg.arg, d, arg.lineno)
                for arg, kd in zip(a.kwonlyargs, a.kw_defaults, strict=True):
                    if kd is not None:
                        check(inner, arg.arg, kd, arg.lineno)
                visit(child, inner)
            else:
                visit(child, scope)

    visit(ast.parse(source), "")
    return found


#: the files that declare the settings (and so their defaults)
SETTINGS_FILES = {Path(sys.modules[m.__module__].__file__ or "") for m in _settings_models()} | {
    REPO / "monitor" / "config.py"
}


def _scan() -> tuple[list[str], list[str]]:
    """The literal duplicates under monitor/, and ``path:line`` of every marker that excuses none."""
    out = []
    idle = []
    for path in sorted((REPO / "monitor").rglob("*.py")):
        if path in SETTINGS_FILES:
            continue
        source = path.read_text(encoding="utf-8")
        name = str(path.relative_to(REPO))
        excused: set[int] = set()
        out += literal_duplicates(source, name, excused)
        idle += [f"{name}:{line}" for line in sorted(_marked_lines(source) - excused)]
    return sorted(set(out)), idle


def all_literal_duplicates() -> list[str]:
    return _scan()[0]


def test_no_setting_default_is_written_again_as_a_literal() -> None:
    found = all_literal_duplicates()
    assert not found, (
        "these fields or keywords repeat a setting's default as a literal; take it from the settings "
        "(monitor.config.setting_default(Model, name), or the settings object), or mark a name no setting governs "
        "'# not a setting: <why>':\n  " + "\n  ".join(found)
    )


def test_every_not_a_setting_marker_excuses_a_literal() -> None:
    idle = _scan()[1]
    assert not idle, "these '# not a setting:' markers excuse no literal; remove them:\n  " + "\n  ".join(idle)


def test_a_marked_literal_is_excused_only_with_a_reason() -> None:
    source = (
        "def f(\n"
        "    seed: int = 0,  # not a setting: a reservoir's seed\n"
        "    radius: float = 0.05,\n"
        "    sigma: float = 0.05,  # not a setting:\n"
        "): ...\n"
        "class C:\n"
        "    steps: int = 25  # not a setting: another N\n"
    )
    excused: set[int] = set()
    assert literal_duplicates(source, "x.py", excused) == ["x.py::f::radius", "x.py::f::sigma"]
    assert excused == {2, 7}


def test_the_literal_scan_finds_a_repeated_default() -> None:
    source = "class C:\n    radius: float = 0.05\n    other: int = 3\n\ndef f(*, steps: int = 25, seed: int = 1): ...\n"
    assert literal_duplicates(source, "x.py") == ["x.py::C::radius", "x.py::f::steps"]
