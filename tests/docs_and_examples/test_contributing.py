"""CONTRIBUTING.md's worked examples are the code as it is: each python block of "Adding an op"
(the ``log1p`` row, the ``mul`` and ``hypot`` rows of the binary table, ``hypot`` whole) appears in
``asyncgrad/ops/elementwise.py``, comments aside."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _code(text: str) -> list[str]:
    """The lines without comments and trailing blanks, empty ones dropped."""
    lines = (re.sub(r"\s+#(?![^\"']*[\"']\s*[,)]).*$", "", line).rstrip() for line in text.splitlines())
    return [line for line in lines if line.strip()]


def test_the_worked_examples_are_the_code():
    guide = (ROOT / "CONTRIBUTING.md").read_text()
    section = guide[guide.index("## Adding an op"):guide.index("### Arrays")]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 4
    source = "\n".join(_code((ROOT / "asyncgrad" / "ops" / "elementwise.py").read_text()))
    for block in blocks:
        assert "\n".join(_code(block)) in source, f"CONTRIBUTING's example is not in ops/elementwise.py:\n{block}"
