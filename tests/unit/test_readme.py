"""What the README tells a new user to type works from a clone: the extras it names exist and install from the
clone (the package is not on PyPI), its quick start is two commands, and the test command says what it needs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return set(project["optional-dependencies"])


def _texts() -> dict[str, str]:
    """The README, the docs and the package's sources: everywhere an install hint is written."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "monitor").rglob("*.py"))]
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}


def test_every_extra_named_is_installed_from_the_clone_and_exists() -> None:
    extras = _extras()
    by_name = {path: re.findall(r"harmonic-monitor\[", text) for path, text in _texts().items()}
    assert {path: found for path, found in by_name.items() if found} == {}, "the package is not on PyPI"
    named = {m for text in _texts().values() for m in re.findall(r"pip install -e '\.\[([a-z,]+)\]'", text)}
    assert named and {e for group in named for e in group.split(",")} <= extras


def test_the_quick_start_is_two_commands_and_the_test_command_says_what_it_needs() -> None:
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"```bash\n(.*?)```", quick, flags=re.S) == [
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[convert]' && .venv/bin/harmonic-monitor demo\n",
        "bash scripts/test.sh\n",
    ]
    said = " ".join(quick.split("bash scripts/test.sh")[0].rsplit("Run the tests", 1)[1].split())
    for need in ("needs root", "apt-get", "package registries (PyPI, npm, the Debian archive)", "about 20 minutes"):
        assert need in said


def _commands(text: str) -> list[list[str]]:
    """Every ``harmonic-monitor …`` command in the ```bash blocks of ``text`` (continuation lines joined, comments cut)."""
    import shlex

    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = " ".join(blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(line.split("#", 1)[0])[1:] for line in lines if line.strip().startswith("harmonic-monitor ")]


def test_every_command_of_the_quickstart_parses_with_the_flags_the_cli_has() -> None:
    from monitor.cli import build_parser

    commands = _commands((ROOT / "docs" / "QUICKSTART.md").read_text(encoding="utf-8"))
    assert {c[0] for c in commands} >= {"reference", "check-config", "score", "estimate", "compare", "replay", "run"}
    for argv in commands:
        build_parser().parse_args(argv)  # an unknown flag or a missing required one exits 2
