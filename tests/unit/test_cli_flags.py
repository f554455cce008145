"""Every ``harmonic-monitor`` option keeps its spelling and default: the argparse parsers are compared, option by
option, with the committed snapshot tests/unit/data/cli_flags.json.

README, docs and users' scripts call these flags. A change that is meant is recorded by regenerating the snapshot
(``.venv/bin/python scripts/gen_cli_flags.py``), so it shows in the diff.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.unit.repo_scripts import REPO, load_script

SNAPSHOT = REPO / "tests" / "unit" / "data" / "cli_flags.json"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    """scripts/gen_cli_flags.py imported as a module (scripts/ is not a package)."""
    return load_script("gen_cli_flags")


def test_every_command_keeps_its_flags_and_defaults(gen: ModuleType) -> None:
    recorded = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    current = gen.snapshot()
    assert sorted(current) == sorted(recorded), "sub-commands added or removed: run scripts/gen_cli_flags.py if meant"
    changed = []
    for command, options in current.items():
        was = {" ".join(o["flags"]): o for o in recorded[command]}
        now = {" ".join(o["flags"]): o for o in options}
        for flag in sorted(was.keys() | now.keys()):
            if was.get(flag) != now.get(flag):
                changed.append(f"{command} {flag}: snapshot {was.get(flag)} -> now {now.get(flag)}")
    assert not changed, "flags changed (if meant, run .venv/bin/python scripts/gen_cli_flags.py):\n" + "\n".join(
        changed
    )
    assert SNAPSHOT.read_text(encoding="utf-8") == gen.render()  # the file is the script's output, option order too


def test_snapshot_walks_every_subcommand(gen: ModuleType) -> None:
    recorded = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    parser = gen.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert {f"harmonic-monitor {name}" for name in sub.choices} <= set(recorded)
    score = {o["dest"]: o for o in recorded["harmonic-monitor score"]}
    assert score  # options of a sub-command, not only the top level's
    assert all("default" in o and o["flags"] for opts in recorded.values() for o in opts)


def test_a_changed_default_is_caught(gen: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = gen.build_parser

    def altered() -> argparse.ArgumentParser:
        parser = real()
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        probe = sub.choices["probe"]
        action = next(a for a in probe._actions if a.dest == "steps")
        action.default = "changed"
        return parser

    snapshot = tmp_path / "cli_flags.json"
    monkeypatch.setattr(gen, "OUTPUT", snapshot)
    monkeypatch.setattr(gen, "REPO", tmp_path)
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
    monkeypatch.setattr(gen, "build_parser", altered)
    assert gen.main(["--check"]) == 1
