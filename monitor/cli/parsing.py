"""The sub-commands' argument parser: a mistyped flag is refused by the sub-command that got it, with the close flags.

argparse hands what a sub-command does not know back to the top-level parser, which prints the top-level usage and
"unrecognized arguments"; the user learns neither which options ``run`` takes nor which one was meant.
:class:`CommandParser` refuses unknown arguments itself, with its own usage and the flags that look like the mistyped
one (``--port`` → ``--metrics-port``).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import NoReturn

#: at most this many flags suggested
_SUGGESTED = 3


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` for a sub-command (``add_subparsers(parser_class=CommandParser)``): unknown arguments are
    an error naming the close flags, with this sub-command's usage. A mistyped flag is named even when another error
    (a required option missing, often the very one mistyped) stops the parse first."""

    #: long flags of the arguments being parsed that match no option, not even as an abbreviation
    _unknown: tuple[str, ...] = ()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        listed = sys.argv[1:] if args is None else list(args)
        self._unknown = unknown_flags(listed, list(self._option_string_actions))
        parsed, extras = super().parse_known_args(listed, namespace)
        if extras:
            self.error(unrecognized(extras, list(self._option_string_actions)))
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        if self._unknown and not message.startswith("unrecognized arguments"):
            message = f"{unrecognized(self._unknown, list(self._option_string_actions))}; {message}"
        super().error(message)


def unknown_flags(args: Sequence[str], flags: Sequence[str]) -> tuple[str, ...]:
    """The ``--flags`` in ``args`` (before a ``--``) that no option in ``flags`` starts with.

    >>> unknown_flags(["--modle", "m", "--met=1", "--data", "--", "--x"], ["--model", "--metrics-port", "--data"])
    ('--modle',)
    """
    unknown: list[str] = []
    for arg in args:
        if arg == "--":
            break
        flag = arg.split("=", 1)[0]
        if flag.startswith("--") and not any(f.startswith(flag) for f in flags):
            unknown.append(flag)
    return tuple(unknown)


def unrecognized(extras: Sequence[str], flags: Sequence[str]) -> str:
    """The error for arguments no option took: each mistyped flag with the flags close to it.

    >>> unrecognized(["--port", "19109"], ["--metrics-port", "--model", "--config", "-h"])
    'unrecognized arguments: --port 19109 (did you mean --metrics-port?)'
    >>> unrecognized(["--modle=m.onnx"], ["--metrics-port", "--model", "--config"])
    'unrecognized arguments: --modle=m.onnx (did you mean --model?)'
    >>> unrecognized(["extra"], ["--model"])
    'unrecognized arguments: extra'
    """
    hints: list[tuple[str, list[str]]] = []
    for arg in extras:
        flag = arg.split("=", 1)[0]
        close = close_flags(flag, flags) if flag.startswith("-") else []
        if close:
            hints.append((flag, close))
    message = f"unrecognized arguments: {' '.join(extras)}"
    if len(hints) == 1:
        return f"{message} (did you mean {' or '.join(hints[0][1])}?)"
    said = "; ".join(f"{flag}: did you mean {' or '.join(close)}?" for flag, close in hints)
    return f"{message} ({said})" if hints else message


def close_flags(typed: str, flags: Sequence[str]) -> list[str]:
    """The long flags ``typed`` may have meant: those containing it as a whole word part (``--port`` in
    ``--metrics-port``), then difflib's close matches (typos), at most three.

    >>> close_flags("--port", ["--metrics-port", "--model", "--sort"])
    ['--metrics-port', '--sort']
    >>> close_flags("--referense", ["--reference", "--reference-labels", "--model"])
    ['--reference']
    """
    long_flags = [f for f in flags if f.startswith("--")]
    stem = typed.lstrip("-")
    found = [f for f in long_flags if stem and stem in f.lstrip("-").split("-") and f != typed]
    found += difflib.get_close_matches(typed, long_flags, n=_SUGGESTED, cutoff=0.75)
    return list(dict.fromkeys(found))[:_SUGGESTED]
