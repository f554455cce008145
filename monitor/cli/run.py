"""``harmonic-monitor run``: the streaming sidecar (Kafka → score → Prometheus/alerts)."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

from monitor import __version__
from monitor.allocator import freeze_startup_objects
from monitor.cli.flags import add_setting_flag
from monitor.config import KafkaSettings, MetricsSettings, ModelSettings, Settings, load_settings
from monitor.logs import redact, setup_logging

log = logging.getLogger("monitor.run")


def add_settings_flags(p: argparse.ArgumentParser) -> None:
    """The single model's flags, and the Kafka, metrics and state settings a flag overrides (none given: the
    environment, the file and the defaults decide)."""
    add_model_flags(p)
    for name in ("bootstrap_servers", "topic", "group_id", "api_version"):
        add_setting_flag(p, KafkaSettings, name, "--" + name.replace("_", "-"), override=True)
    add_setting_flag(p, MetricsSettings, "port", "--metrics-port", override=True)
    add_setting_flag(p, Settings, "state_dir", "--state-dir", override=True)
    for name in ("dead_letter_topic", "scores_topic"):
        add_setting_flag(p, KafkaSettings, name, "--" + name.replace("_", "-"), override=True)


def add_model_flags(p: argparse.ArgumentParser) -> None:
    """--config and the single watched model's flags (``run``; ``replay`` takes these without the Kafka ones)."""
    p.add_argument("--config", help="YAML configuration file (flags > HARMONIC_* env > file > defaults)")
    p.add_argument("--model", help="ONNX model file (defines the single watched model; overrides the file's list)")
    add_setting_flag(
        p,
        ModelSettings,
        "name",
        "--model-name",
        override=True,
        after=" Default: the ONNX file's stem; for `replay`, the model its log's events name.",
    )
    add_setting_flag(p, ModelSettings, "reference", "--reference", override=True)
    add_setting_flag(p, ModelSettings, "reference_header", "--reference-header", override=True)


def settings_from_args(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> Settings:
    """Settings from the flags of :func:`add_settings_flags` (a flag a command lacks counts as not given) over the
    environment and ``--config``; ``overrides``: a command's own values (top-level sections), over the flags."""
    return load_settings(args.config, {**settings_flags(args), **(overrides or {})})


def settings_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The values the flags of :func:`add_settings_flags` give (None where not given), as
    :func:`monitor.config.load_settings` takes them."""

    def flag(name: str) -> Any:
        return getattr(args, name, None)

    flags: dict[str, Any] = {
        "kafka": {
            "bootstrap_servers": flag("bootstrap_servers"),
            "topic": flag("topic"),
            "group_id": flag("group_id"),
            "api_version": flag("api_version"),
            "dead_letter_topic": flag("dead_letter_topic"),
            "scores_topic": flag("scores_topic"),
        },
        "metrics": {"port": flag("metrics_port")},
        "state_dir": flag("state_dir"),
        # the top-level --log-level/--log-format (None when not given): one choice for this process and its
        # consumer child, with the usual precedence over HARMONIC_LOG_LEVEL/_FORMAT and the file
        "log_level": getattr(args, "log_level", None),
        "log_format": getattr(args, "log_format", None),
    }
    if args.model:
        model: dict[str, Any] = {"name": args.model_name or Path(args.model).stem, "path": args.model}
        if args.reference:
            model["reference"] = args.reference
        if args.reference_header:
            model["reference_header"] = args.reference_header
        flags["models"] = [model]
    elif args.model_name or args.reference or args.reference_header:
        from monitor.errors import ConfigError

        raise ConfigError(
            "--model-name, --reference and --reference-header need --model (or put them in the config file's `models:`)"
        )
    return flags


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run the sidecar: consume inference events from Kafka, score, export metrics, alert",
        description=(
            "Consume inference events from Kafka (consumer group, at-least-once), sample within budget, score "
            "each sampled event against the ONNX copy (gamma, flicker, P_adj, shadow agreement), keep rolling "
            "windows and drift detectors, export Prometheus metrics and deliver alerts. SIGTERM finishes the "
            "batch in hand, commits offsets, persists state and exits 0."
        ),
    )
    add_settings_flags(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from monitor.runtime.service import Service

    settings = settings_from_args(args)
    log_start(settings)
    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        log.info("signal received; finishing the batch in hand", extra={"signal": signal.Signals(signum).name})
        stop.set()
        # bound the whole shutdown: a hung broker must not keep the pod from terminating
        timer = threading.Timer(settings.shutdown_timeout_seconds, _force_exit)
        timer.daemon = True
        timer.start()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    with Service.from_settings(settings) as service:
        freeze_startup_objects()  # models loaded, consumer connected (monitor/allocator.py)
        service.run(stop)
    return 0


def log_start(settings: Settings) -> None:
    """Apply the settings' logging (the consumer child gets the same) and log the effective settings, redacted."""
    setup_logging(settings.log_level, settings.log_format)
    log.info(
        "harmonic-monitor run starting",
        extra={"version": __version__, "settings": redact(settings.model_dump(mode="json"))},
    )


def _force_exit() -> None:
    from monitor.source.kafka_process import dump_consumer_stacks

    log.error(
        "graceful shutdown exceeded its bound; exiting without a final commit (events will be re-delivered); "
        "the threads' stacks follow on stderr"
    )
    faulthandler.dump_traceback(all_threads=True)  # where this process's shutdown hung
    dump_consumer_stacks()  # and the consumer child's, when it runs in one
    os._exit(3)
