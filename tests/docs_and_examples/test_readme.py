"""The README's contract with a new user, and with CI.

The README starts with its title, which says what asyncgrad is, and then exactly two copy-paste
commands for a fresh machine: one installs and runs the demo, one installs the test extras and runs the
whole suite. ``.ci/run`` runs both verbatim, so README and CI cannot drift apart; its benchmark summary
is the one ``benchmarks.report`` makes from the site's whole report.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"


def readme_commands() -> list[str]:
    """The two commands at the top of the README, each the single line of a ```bash block."""
    text = README.read_text()
    title, _, rest = text.partition("\n")
    assert title.startswith("# asyncgrad: "), f"the README's first line is its title, not {title!r}"
    blocks = re.match(r"\s*```bash\n([^\n]+)\n```\s*```bash\n([^\n]+)\n```\n", rest)
    assert blocks, "the title is followed at once by the two command blocks, one line each"
    return [blocks.group(1), blocks.group(2)]


def test_the_readme_starts_with_the_two_fresh_machine_commands():
    demo, tests = readme_commands()
    assert demo.startswith("pip install ") and demo.endswith("&& python -m asyncgrad demo")
    assert "[demo]" in demo
    assert tests.startswith("pip install ") and "[test]" in tests and tests.endswith("&& python -m pytest")


def test_ci_runs_the_readme_commands_verbatim():
    lines = [line.strip() for line in CI.read_text().splitlines()]
    for command in readme_commands():
        assert command in lines, f".ci/run does not run the README's command as written: {command}"


def test_ci_runs_the_test_command_before_torch_is_installed():
    text = CI.read_text()
    _, tests = readme_commands()
    assert text.index(tests) < text.index("pip install --quiet torch==")


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) < 200


def test_the_readme_benchmark_summary_is_the_generated_one():
    from benchmarks import report

    page = ROOT / "docs" / "benchmarks.md"
    assert report.section(README) == report.summary(report.section(page), "docs/benchmarks.md")


def test_the_summary_has_a_row_per_size_with_torch():
    from benchmarks import report

    rows = [line for line in report.summary(report.section(ROOT / "docs" / "benchmarks.md")).splitlines()
            if line.startswith("| W")]
    assert rows and all(line.count("|") == 7 for line in rows)
    assert any(line.startswith("| W1 chain | 10,000 |") for line in rows)
