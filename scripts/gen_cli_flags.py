"""Snapshot every ``harmonic-monitor`` option's spelling and default into tests/unit/data/cli_flags.json.

The snapshot is read from the argparse parsers monitor/cli builds (their actions, not the help text), so a refactor
that renames a flag, drops one or changes a default fails tests/unit/test_cli_flags.py. Regenerate it only when a
change is meant:

    .venv/bin/python scripts/gen_cli_flags.py           # rewrite the snapshot
    .venv/bin/python scripts/gen_cli_flags.py --check   # exit 1 when the parsers differ from it
"""

from __future__ import annotations

import argparse
import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from monitor.cli import build_parser  # noqa: E402

OUTPUT = REPO / "tests" / "unit" / "data" / "cli_flags.json"


def _plain(value: Any) -> Any:
    """``value`` as JSON data that says what it is (paths and enums as text, tuples as lists)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, list | tuple | set | frozenset):
        items = [_plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if callable(value):
        return getattr(value, "__qualname__", repr(value))
    return repr(value)


def _action(action: argparse.Action) -> dict[str, Any]:
    return {
        "flags": list(action.option_strings) or [action.dest],
        "dest": action.dest,
        "default": _plain(action.default),
        "action": type(action).__name__,
        "nargs": _plain(action.nargs),
        "const": _plain(action.const),
        "type": _plain(action.type),
        "choices": _plain(action.choices),
        "required": action.required,
    }


def _commands(parser: argparse.ArgumentParser, path: str) -> dict[str, list[dict[str, Any]]]:
    """``{"harmonic-monitor score": [option, ...], ...}`` for ``parser`` and every sub-command below it."""
    out = {path: []}  # type: dict[str, list[dict[str, Any]]]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in sorted(action.choices.items()):
                out.update(_commands(sub, f"{path} {name}"))
        elif not isinstance(action, argparse._HelpAction):
            out[path].append(_action(action))
    return out


def snapshot() -> dict[str, list[dict[str, Any]]]:
    return _commands(build_parser(), "harmonic-monitor")


def render() -> str:
    """The snapshot as JSON, one option a line (a changed flag is a one-line diff)."""
    blocks = []
    for command, options in snapshot().items():
        lines = ",\n".join(f"    {json.dumps(o, ensure_ascii=False)}" for o in options)
        blocks.append(f"  {json.dumps(command)}: [\n{lines}\n  ]" if options else f"  {json.dumps(command)}: []")
    return "{\n" + ",\n".join(blocks) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the snapshot differs from the parsers")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(REPO)} differs from the CLI: run .venv/bin/python scripts/gen_cli_flags.py")
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
