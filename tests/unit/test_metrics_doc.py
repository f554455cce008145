"""docs/METRICS.md is generated from METRICS by scripts/gen_metrics_doc.py and must match it.

A metric added to ``monitor.telemetry.METRICS`` without its usage note in its declaration (``group=``, ``unit=``,
``use=``: how to use it), or without regenerating the page, fails here.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from monitor import telemetry as tel
from monitor.telemetry import METRICS, MetricSpec
from tests.unit.repo_scripts import REPO, load_script

DOC = REPO / "docs" / "METRICS.md"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    """scripts/gen_metrics_doc.py imported as a module (scripts/ is not a package)."""
    return load_script("gen_metrics_doc")


def test_metrics_doc_is_up_to_date(gen: ModuleType) -> None:
    assert DOC.read_text(encoding="utf-8") == gen.render(), (
        "docs/METRICS.md is out of date with METRICS: run .venv/bin/python scripts/gen_metrics_doc.py"
    )


def test_metrics_doc_documents_every_metric_once(gen: ModuleType) -> None:
    text = DOC.read_text(encoding="utf-8")
    for spec in METRICS:
        assert text.count(f"\n### {spec.name}\n") == 1, spec.name
        assert spec.use.strip(), f"{spec.name}: empty 'how to use it'"


def test_metrics_doc_rejects_an_undocumented_metric(gen: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = MetricSpec("harmonic_new_thing_total", "counter", "A metric nobody documented.", ("model",))
    monkeypatch.setattr(gen, "METRICS", (*tel.METRICS, extra))
    with pytest.raises(KeyError, match=r"undocumented \['harmonic_new_thing_total'\]"):
        gen.render()


def test_metrics_doc_check_mode_passes_on_the_committed_page(gen: ModuleType) -> None:
    assert gen.main(["--check"]) == 0


def test_metrics_doc_takes_each_note_from_its_declaration(gen: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    noted = MetricSpec(
        "harmonic_noted_total",
        "counter",
        "A metric with its note.",
        ("model",),
        group="Process",
        unit="things",
        use="Read it so.",
    )
    monkeypatch.setattr(gen, "METRICS", (*tel.METRICS, noted))
    text = gen.render()
    assert "\n### harmonic_noted_total\n" in text and "- **Unit:** things\n" in text and "\nRead it so.\n" in text


def test_every_series_carries_its_note_in_its_declaration(gen: ModuleType) -> None:
    """The note lives beside the series (group, unit, how to use it); the script keeps none of its own."""
    assert [m.name for m in METRICS if not (m.group and m.unit and m.use)] == []
    assert not hasattr(gen, "USAGE")
