"""``harmonic-monitor check-config``: validate a configuration (file + env + flags) without running."""

from __future__ import annotations

import argparse
import json

from monitor.cli.run import add_settings_flags, settings_from_args
from monitor.errors import ConfigError
from monitor.logs import redact, setup_logging


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check-config",
        help="validate the configuration and print the effective settings as JSON",
        description="Load the YAML file, HARMONIC_* variables and flags exactly as `run` would, check every model "
        "file loads, and print the effective settings. Exit 0 when valid, 2 with the reasons otherwise.",
    )
    add_settings_flags(p)
    p.add_argument("--no-load-models", action="store_true", help="check settings only; do not open the ONNX files")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    setup_logging(settings.log_level, settings.log_format)
    if not args.no_load_models:
        from monitor.model.onnx import OnnxModel

        for m in settings.models:
            model = OnnxModel(m.path)
            if m.feature_names is not None and len(m.feature_names) != model.n_features:
                raise ConfigError(
                    f"model '{m.name}': feature_names lists {len(m.feature_names)} names; the ONNX input takes "
                    f"{model.n_features} features"
                )
    # secrets (SASL/SSL passwords, tokens, credentials in URLs) print as "***": the output lands in CI logs and tickets
    print(json.dumps(redact(settings.model_dump(mode="json")), indent=2))
    return 0
