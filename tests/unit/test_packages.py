"""Each package another package imports from has an ``__init__`` whose ``__all__`` names what they import, loaded
from its module on first use: importing the package itself imports none of its modules."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

LAZY = ("exporters", "model", "probes", "rolling", "runtime", "sampler", "signals", "source")


@pytest.mark.parametrize("package", LAZY)
def test_packages_all_names_resolve_to_their_modules_objects(package: str) -> None:
    pkg = importlib.import_module(f"monitor.{package}")
    homes: dict[str, str] = pkg._HOMES
    assert sorted(pkg.__all__) == sorted(homes) and pkg.__all__ == sorted(pkg.__all__)
    for name in pkg.__all__:
        module = importlib.import_module(f"monitor.{package}.{homes[name]}")
        assert getattr(pkg, name) is getattr(module, name)
        assert name in dir(pkg)
    with pytest.raises(AttributeError, match=f"module 'monitor.{package}' has no attribute 'nothing_here'"):
        pkg.nothing_here  # noqa: B018 - the attribute access is the test


def test_packages_importing_a_package_imports_none_of_its_modules() -> None:
    code = (
        "import importlib, json, sys\n"
        f"packages = {list(LAZY)!r}\n"
        "for p in packages: importlib.import_module('monitor.' + p)\n"
        "print(json.dumps(sorted(m for m in sys.modules if any(m.startswith(f'monitor.{p}.') for p in packages))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
