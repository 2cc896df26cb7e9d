"""The package's ``Note [...]`` blocks (CONTRIBUTING.md, "Notes"): every citation names a Note that
exists, every Note is cited where it governs, and a Note states an invariant: no measurements in it
(those are in benchmarks/HISTORY.md) and no path outside the repository. Around them: no docstring
in the package or tools/ runs over 15 lines (essays go to docs/design/, Notes to comment blocks),
and no line of the package, tools/ or the tests names instruction counts or their tools, which
belong to benchmarks/ (the scripts, their tests and HISTORY.md) and the design pages."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "asyncgrad"
# where Notes are cited from: the package, its docs, its tests and benchmarks
CITING = [*PACKAGE.rglob("*.py"), *(ROOT / "docs").rglob("*.md"), *(ROOT / "tests").rglob("*.py"),
          *(ROOT / "benchmarks").rglob("*.py"), ROOT / "CONTRIBUTING.md", ROOT / "RELIABILITY.md"]
CITING = [p for p in CITING if p.name != Path(__file__).name]

# A Note is defined where a comment or docstring line starts with ``Note [Name]`` followed by
# ``:`` or nothing; anywhere else ``Note [Name]`` is a citation.
_DEFINITION = re.compile(r"^[ \t]*(?:#[ \t]*|\"\"\"|[*-][ \t]+)?Note \[([^\]]+)\](?::|[ \t]*$)", re.M)
_ANY = re.compile(r"Note \[([^\]]+)\]")
_CONTINUATION = re.compile(r"\s*\n\s*(?:#\s*)?")  # a citation broken over two comment lines
# A measurement: "24,648 -> 23,624", an instruction count, a time in µs or ns, a percentage, "10x".
_FIGURE = re.compile(r"\d[\d,.]*\s*[kKM]?\s*(?:->|→)\s*\d|(?<![.\w])instructions?\b|cachegrind|callgrind"
                     r"|\d+(?:\.\d+)?\s*(?:µs|us|ns|ms)\b|\d+(?:\.\d+)?\s?%|\b\d+(?:\.\d+)?x\b")
# A line that names instruction counts or the tools that take them.
_INSTRUCTIONS = re.compile(r"(?i)\binstructions?\b|cachegrind|callgrind")
_OUTSIDE = re.compile(r"(?<![\w.])/(?:tmp|work|root|home|Users)/")


def _definitions(path: Path) -> list[tuple[str, int, str]]:
    """(name, line, body) of each Note defined in ``path``: the body runs to the first blank line,
    the end of the comment block or docstring, or the next Note."""
    text = path.read_text()
    lines = text.split("\n")
    found = []
    for m in _DEFINITION.finditer(text):
        start = text.count("\n", 0, m.start(1))
        comment = lines[start].lstrip().startswith("#")
        body = [lines[start]]
        for line in [] if lines[start].rstrip().endswith('"""') else lines[start + 1:]:
            stripped = line.strip()
            if (not stripped or stripped in ('"""', "#") or _DEFINITION.match(line)
                    or (comment and not stripped.startswith("#")) or stripped.startswith('"""')):
                break
            body.append(line)
            if stripped.endswith('"""'):
                break
        found.append((m.group(1), start + 1, "\n".join(body)))
    return found


def _page_definitions(path: Path) -> list[tuple[str, int, str]]:
    """(name, line, body) of each Note a design page defines: in a heading (``## Note [Name]``),
    its body running to the next heading."""
    lines = path.read_text().split("\n")
    found = []
    for i, line in enumerate(lines):
        if line.startswith("#"):
            body = []
            for text in lines[i + 1:]:
                if text.startswith("#"):
                    break
                body.append(text)
            found += [(m.group(1), i + 1, "\n".join([line, *body])) for m in _ANY.finditer(line)]
    return found


def _all_definitions() -> dict[str, list[tuple[Path, int, str]]]:
    """Notes live in the code (the package, the benchmarks) and in the design pages."""
    defs: dict[str, list[tuple[Path, int, str]]] = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]):
        for name, line, body in _definitions(path):
            defs.setdefault(name, []).append((path, line, body))
    for path in sorted((ROOT / "docs" / "design").glob("*.md")):
        for name, line, body in _page_definitions(path):
            defs.setdefault(name, []).append((path, line, body))
    return defs


def _citations() -> list[tuple[Path, str]]:
    """Every ``Note [Name]`` that is not its definition, with the file it is in."""
    cites = []
    for path in CITING:
        text = path.read_text()
        own = {(m.start(1), m.group(1)) for m in _DEFINITION.finditer(text)}
        if path.suffix == ".md":
            own |= {(m.start(1), m.group(1)) for h in re.finditer(r"^#.*$", text, re.M)
                    for m in _ANY.finditer(text, h.start(), h.end())}
        for m in _ANY.finditer(text):
            if (m.start(1), m.group(1)) not in own and m.group(1) != "...":  # "Note [...]": the form
                cites.append((path, _CONTINUATION.sub(" ", m.group(1))))
    return cites


def test_the_rules_read_notes_as_written(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text('"""Note [One]: a rule.\n\nsee Note [Two] in x.py."""\n# Note [Three]\n# it holds.\n')
    assert [(n, line, body.count("\n")) for n, line, body in _definitions(path)] == [("One", 1, 0), ("Three", 4, 1)]
    assert _FIGURE.search("W1 forward: 24,648 -> 23,624 per node")
    assert _FIGURE.search("a read costs 530 instructions more")
    assert not _FIGURE.search("d out_i / d x_k = prod_{j <= i} x_j for i >= k")
    assert _OUTSIDE.search("measured with /work/wt/cntf.sh") and not _OUTSIDE.search("benchmarks/instructions.py")


def _in_code(path: Path) -> bool:
    """A Note in the code, rather than in a design page (which may keep its evidence and a Note
    that only the page's other Notes lead to)."""
    return path.suffix == ".py"


def test_each_note_is_defined_once():
    """A Note's text is in one place. A one-line ``Note [Name]: ...`` beside a longer one is the
    docstring of what the Note governs citing it (``\"\"\"Note [Name]: returns ...\"\"\"``)."""
    twice = {}
    for name, places in _all_definitions().items():
        longer = [(p, line) for p, line, body in places if "\n" in body] if len(places) > 1 else []
        if (len(longer) > 1 or (len(places) > 1 and not longer)):
            twice[name] = [f"{p.relative_to(ROOT)}:{line}" for p, line, _ in places]
    assert not twice, f"Notes defined more than once: {twice}"


def test_every_citation_names_a_note():
    defined = _all_definitions()
    missing = sorted({f"{path.relative_to(ROOT)}: Note [{name}]" for path, name in _citations()
                      if name not in defined})
    assert not missing, "cited Notes that do not exist:\n" + "\n".join(missing)


def test_every_note_is_cited_where_it_governs():
    cited = {name for _, name in _citations()}
    uncited = sorted(f"{places[0][0].relative_to(ROOT)}:{places[0][1]} Note [{name}]"
                     for name, places in _all_definitions().items()
                     if name not in cited and _in_code(places[0][0]))
    assert not uncited, "Notes nothing cites:\n" + "\n".join(uncited)


def test_notes_state_invariants_not_measurements():
    bad = sorted(f"{path.relative_to(ROOT)}:{line} Note [{name}]"
                 for name, places in _all_definitions().items() for path, line, body in places
                 if _in_code(path) and (_FIGURE.search(body) or _OUTSIDE.search(body)))
    assert not bad, ("Notes with measurements or paths outside the repository (move the figures to "
                     "benchmarks/HISTORY.md):\n" + "\n".join(bad))


def test_no_path_outside_the_repository_in_the_package():
    bad = [f"{path.relative_to(ROOT)}:{i}" for path in PACKAGE.rglob("*.py")
           for i, line in enumerate(path.read_text().split("\n"), 1) if _OUTSIDE.search(line)]
    assert not bad, bad


def _docstrings(path: Path):
    """(name, line, number of lines) of each docstring of ``path``: the module's, each class's and function's."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                    and isinstance(node.body[0].value.value, str):
                doc = node.body[0].value
                yield getattr(node, "name", "<module>"), doc.lineno, doc.end_lineno - doc.lineno + 1


def test_no_docstring_runs_over_fifteen_lines():
    """A longer one is an essay (docs/design/) or a Note (a comment block beside the code it governs)."""
    long = [f"{path.relative_to(ROOT)}:{line} {name} ({count} lines)"
            for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "tools").rglob("*.py")])
            for name, line, count in _docstrings(path) if count > 15]
    assert not long, "docstrings over 15 lines:\n" + "\n".join(long)


def test_instruction_counts_stay_in_the_benchmarks():
    """The counts, and the tools that take them, are named in benchmarks/ (the scripts, HISTORY.md),
    their tests (tests/benchmarks/) and the design pages; the code names the workload instead."""
    here = Path(__file__)
    files = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.pyi"), *(ROOT / "tools").rglob("*.py"),
             *(p for p in (ROOT / "tests").rglob("*.py") if "benchmarks" not in p.relative_to(ROOT).parts)]
    bad = [f"{path.relative_to(ROOT)}:{i}" for path in files if path != here
           for i, line in enumerate(path.read_text().split("\n"), 1) if _INSTRUCTIONS.search(line)]
    assert not bad, "lines naming instruction counts outside benchmarks/:\n" + "\n".join(bad)
