"""The ``harmonic-monitor`` command line: one module per sub-command in this package, each with ``register`` (its
arguments) and ``run`` (parse, call the runtime or a library stage, print). Nothing below ``cli`` imports it."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# numpy's OpenBLAS gets one thread unless the user chose: set before numpy is first imported. The products numpy
# computes here are small (a batch of rows by a few dozen inputs); with a pool, OpenBLAS's idle workers spin between
# calls, on a core the consumer and onnxruntime need (a third more CPU for the drift tests; docs/BENCHMARKS.md).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from monitor.allocator import tune_gc, tune_malloc
from monitor.cli.flags import add_setting_flag
from monitor.cli.parsing import CommandParser
from monitor.config import Settings
from monitor.errors import MonitorError
from monitor.logs import redact_text, setup_logging

#: modules exposing ``register(subparsers)``; a missing optional module is skipped
_COMMANDS = (
    "monitor.cli.score",
    "monitor.cli.convert",
    "monitor.cli.reference",
    "monitor.cli.run",
    "monitor.cli.replay",
    "monitor.cli.check_config",
    "monitor.cli.demo",
    "monitor.cli.probe",
    "monitor.cli.estimate",
    "monitor.cli.report",
    "monitor.cli.compare",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harmonic-monitor",
        description="Label-free robustness monitoring for ML models: anharmonicity γ, flicker, drift, probes.",
    )
    # default None: `run` and `check-config` then take log_level/log_format from the settings (HARMONIC_* > YAML)
    add_setting_flag(
        parser, Settings, "log_level", "--log-level", override=True, after=" Wins over HARMONIC_LOG_LEVEL and the file."
    )
    add_setting_flag(parser, Settings, "log_format", "--log-format", override=True, after=" On stderr.")
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="run `harmonic-monitor COMMAND --help` for its options",
        parser_class=CommandParser,
    )
    for name in _COMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_level or "info", args.log_format or "plain")  # `run` re-applies the settings' choice
    tune_malloc()
    tune_gc()
    try:
        code: int = args.func(args)
    except MonitorError as exc:
        print(f"error: {redact_text(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
