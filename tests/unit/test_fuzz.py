"""Property-based fuzzing of every input boundary, the bounded CI run of bench/fuzz.py (which holds the strategies
and the checks; the long run is ``.venv/bin/python bench/fuzz.py --examples N``).

Each target: any input decodes to values safe for every later stage, or is refused with the boundary's documented
error and a message that encodes as UTF-8. Derandomized, so that CI is reproducible; about 40 s of CPU in all,
hence ``slow`` (CI runs it; ``pytest -m "not slow"`` leaves it out).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from fuzz import SLOW_CHECKS, TARGETS, Target, main  # noqa: E402  (bench/ is not a package)

#: examples per target: a few thousand messages each (a KServe example feeds up to three), within CI's budget
EXAMPLES = {"plain": 2000, "labels": 2000, "kserve": 600, "cloudevents": 600, "rows": 1200, "settings": 800}


def test_fuzz_every_target_has_a_bounded_run() -> None:
    assert set(EXAMPLES) == {t.name for t in TARGETS}


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_fuzz_input_decodes_safely_or_is_refused_with_the_documented_error(
    target: Target, tmp_path_factory: pytest.TempPathFactory
) -> None:
    check = target.check(tmp_path_factory.mktemp(target.name))
    outcomes: set[str] = set()

    @settings(
        max_examples=EXAMPLES[target.name],
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=SLOW_CHECKS,
    )
    @given(target.strategy)
    def run(value: object) -> None:
        outcomes.add(check(value))

    run()
    assert outcomes == {"accepted", "refused"}  # the generated inputs reach both sides of every boundary


def test_fuzz_script_prints_counts_per_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--examples", "20", "--target", "labels", "--target", "rows"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["labels", "rows"] and all("refused" in line for line in lines)
