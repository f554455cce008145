"""docs/PYTHON-API.md's notebook path runs as written (its ```python blocks, in order, in a scratch directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "PYTHON-API.md"


def test_the_notebook_path_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "docs/PYTHON-API.md has no python block"
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), scope)  # noqa: S102 - the documentation's own example
    out = capsys.readouterr().out
    assert "reference" in out and "realized" in out and "report.html" in out
    assert (tmp_path / "report.html").is_file() and (tmp_path / "reference.json").is_file()
