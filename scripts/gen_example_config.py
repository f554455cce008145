"""Generate deploy/monitor.example.yaml from the pydantic settings in monitor/config.py.

Every key of :class:`monitor.config.Settings` appears with its default (or, where the file shows an example value the
deploy files rely on, that value and the default beside it) and its field description as a comment; nested sections
become nested blocks and ``models`` gets one example entry.

    .venv/bin/python scripts/gen_example_config.py           # rewrite deploy/monitor.example.yaml
    .venv/bin/python scripts/gen_example_config.py --check   # exit 1 when it is out of date
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from monitor.config import ModelSettings, Settings  # noqa: E402

OUTPUT = REPO / "deploy" / "monitor.example.yaml"
WIDTH = 120
COMMENT_COLUMN = 38  # comments start here (after "key: value" and its padding)

PREAMBLE = """\
# harmonic-monitor configuration — every key, with its default unless marked "example".
# Generated from monitor/config.py by scripts/gen_example_config.py: edit the settings' descriptions there, not here.
#
# Validate:   harmonic-monitor check-config --config monitor.yaml [--no-load-models]
# Precedence: command-line flags > HARMONIC_* environment > this file > defaults.
#             Nested keys in the environment use "__":  HARMONIC_KAFKA__BOOTSTRAP_SERVERS=kafka:9092,
#             HARMONIC_ALERTS__ALERTMANAGER_URL=http://alertmanager:9093, HARMONIC_SAMPLER__EVENTS_PER_SECOND=500.
# Unknown keys are errors that name the key (a typo never passes silently).
# Paths below match the container image and deploy/kubernetes/, deploy/compose/ (model files under /models).
"""

#: section headings (presentation only); a section missing here is headed by its key
SECTIONS = {
    "models": "Models watched by this process (at least one; names unique)",
    "kafka": "Kafka",
    "sampler": "Sampler: how many events per second are scored",
    "batch": "Micro-batching",
    "segments": "Segments (the `segment` label)",
    "windows": "Rolling windows",
    "drift": "Drift detection (γ CUSUM + KS, flicker CUSUM + rate test, per-feature KS)",
    "alerts": "Alerts: HarmonicHarmfulShift, HarmonicInputDrift, HarmonicShadowDisagreement",
    "probes": "Threshold probes on flagged regions (MRI, sensitivity, ε*)",
    "labels": "Delayed labels (used only when kafka.labels_topic is set)",
    "accuracy": "Label-free accuracy estimates (a reference JSON built with `reference --labels`)",
    "metrics": "HTTP endpoint: /metrics /healthz /readyz /probes",
}
PROCESS_HEADING = "Process"

#: values shown instead of the default (dotted key; "models.x" is a key of the example model entry). The compose and
#: container examples mount this file as their configuration, so these match deploy/compose/ and the image.
EXAMPLES: dict[str, Any] = {
    "models.name": "credit",
    "models.path": "/models/credit.onnx",
    "models.version": "3",
    "models.reference": "/models/credit-reference.csv",
    "kafka.bootstrap_servers": "kafka:9092",
    "kafka.dead_letter_topic": "inference-events-dlq",
    "alerts.alertmanager_url": "http://alertmanager:9093",
    "state_dir": "/var/lib/harmonic/state",
    "log_format": "json",
}


def _scalar(value: Any) -> str:
    """One YAML value on one line (flow style)."""
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple):
        value = [str(v) if isinstance(v, Path) else v for v in value]
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000, sort_keys=False)
    return text.removesuffix("\n...\n").strip()


def _default(info: FieldInfo) -> Any:
    if info.default_factory is not None:
        return info.default_factory()  # type: ignore[call-arg]
    return None if info.default is PydanticUndefined else info.default


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (itself, or the items of a tuple/list of them)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (tuple, list) and args and isinstance(args[0], type):
        return args[0] if issubclass(args[0], BaseModel) else None
    return None


def _choices(annotation: Any) -> list[str]:
    if typing.get_origin(annotation) is Literal:
        return [str(a) for a in typing.get_args(annotation)]
    return []


def _comment(dotted: str, info: FieldInfo) -> str:
    if not info.description:
        raise SystemExit(f"{dotted} has no description: add description=... to its Field in monitor/config*.py")
    text = info.description.strip()
    choices = _choices(info.annotation)
    if choices and not text.startswith(" | ".join(choices)):
        text = f"{' | '.join(choices)}. {text}"
    if info.default is PydanticUndefined and info.default_factory is None:
        text = f"required (example). {text}"
    elif dotted in EXAMPLES:
        text = f"{text} (example; default {_scalar(_default(info))})"
    return text


def _line(indent: str, key: str, value: str, comment: str) -> list[str]:
    head = f"{indent}{key}: {value}" if value else f"{indent}{key}:"
    pad = " " * COMMENT_COLUMN
    wrapped = textwrap.wrap(comment, WIDTH - COMMENT_COLUMN - 2, break_on_hyphens=False)
    if len(head) >= COMMENT_COLUMN:  # too long to share a line with its comment
        return [head] + [f"{pad}# {w}" for w in wrapped]
    first = head.ljust(COMMENT_COLUMN) + f"# {wrapped[0]}"
    return [first] + [f"{pad}# {w}" for w in wrapped[1:]]


def _block(model: type[BaseModel], prefix: str, indent: str, first_indent: str | None = None) -> list[str]:
    """The lines of ``model``'s fields; ``first_indent`` replaces the indent of the first line (a list item's "- ")."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        dotted = f"{prefix}{name}"
        lead = first_indent if (first_indent is not None and not out) else indent
        inner = _model_of(info.annotation)
        if inner is not None and inner is not ModelSettings:
            title = info.description or inner.__doc__ or name
            out.append(f"{lead}{name}:".ljust(COMMENT_COLUMN) + f"# {title.strip().splitlines()[0]}")
            out += _block(inner, f"{dotted}.", indent + "  ")
            continue
        value = EXAMPLES.get(dotted, _default(info))
        out += _line(lead, name, _scalar(value), _comment(dotted, info))
    return out


def render() -> str:
    out = [PREAMBLE.rstrip("\n")]
    process: list[str] = []
    for name, info in Settings.model_fields.items():
        inner = _model_of(info.annotation)
        if inner is None:
            process += _line("", name, _scalar(EXAMPLES.get(name, _default(info))), _comment(name, info))
            continue
        heading = f"# -- {SECTIONS.get(name, name)} "
        out.append("\n" + heading.ljust(WIDTH, "-"))
        if inner is ModelSettings:  # a list: one example entry
            out.append(f"{name}:")
            out += _block(inner, f"{name}.", "    ", first_indent="  - ")
        else:
            out.append(f"{name}:")
            out += _block(inner, f"{name}.", "  ")
    out.append("\n" + f"# -- {PROCESS_HEADING} ".ljust(WIDTH, "-"))
    out += process
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if deploy/monitor.example.yaml is not up to date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(REPO)} is out of date: run .venv/bin/python scripts/gen_example_config.py")
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
