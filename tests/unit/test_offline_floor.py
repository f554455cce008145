"""The offline floor's shape: one scoring keyword set (ScoringConfig's fields), ``report`` is ``build_report``, and
no import cycle runs among ``monitor``'s modules."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import monitor
from monitor.offline.keywords import ScoringKeywords, keyword_names
from monitor.signals.scorer import ScoringConfig

PACKAGE = Path(__file__).resolve().parents[2] / "monitor"


def test_the_scoring_keywords_are_the_scoring_configs_fields() -> None:
    assert keyword_names(ScoringKeywords) == {f.name for f in dataclasses.fields(ScoringConfig)}


@pytest.mark.parametrize("name", ["score", "reference", "estimate"])
def test_an_unknown_keyword_is_refused_as_python_refuses_it(name: str) -> None:
    function = getattr(monitor, name)
    args = (None, np.zeros((2, 3))) if name != "estimate" else (None, np.zeros((2, 3)), None)
    with pytest.raises(TypeError, match=rf"{name}\(\) got an unexpected keyword argument 'radus'"):
        function(*args, radus=0.1)


def test_report_is_build_report() -> None:
    from monitor.offline.report import build_report

    assert monitor.report is build_report


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.Module, modules: set[str]) -> set[str]:
    """The project modules a module imports when it runs (anywhere, functions included; not under TYPE_CHECKING)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for stmt in child.orelse:
                    visit(stmt)
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                for alias in child.names:  # a submodule by name, else a name of the module
                    sub = f"{child.module}.{alias.name}"
                    found.add(sub if sub in modules else child.module)
            visit(child)

    visit(tree)
    resolved = set()
    for name in found:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name:
            resolved.add(name)
    return resolved


def test_no_import_cycle_runs() -> None:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: _runtime_imports(ast.parse(p.read_text(encoding="utf-8")), set(files)) - {m} for m, p in files.items()}
    cycles = []
    state: dict[str, int] = {}

    def walk(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                walk(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module, [module])
    assert cycles == []
