"""CONTRIBUTING.md's map of the package names real files and real names: each row's file exists and
defines each name of its row (a function, a class, a method or property of a class in that file).
Its worked examples are checked by test_contributing.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> list[tuple[str, list[str]]]:
    guide = (ROOT / "CONTRIBUTING.md").read_text()
    section = guide[guide.index("## A map of the package"):guide.index("## Notes")]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`asyncgrad/"):
            rows.append((cells[1].strip("`"), re.findall(r"`([\w.]+)`", cells[2])))
    return rows


def _defined(path: Path) -> set[str]:
    """Top-level functions and classes, ``Class.member`` for their methods and properties, and
    module-level assignments (annotated or not)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names.update(f"{node.name}.{item.name}" for item in node.body
                         if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_map_has_both_tables():
    rows = _rows()
    assert len(rows) >= 25 and all(names for _, names in rows)


def test_every_file_and_name_of_the_map_exists():
    missing = []
    for file, names in _rows():
        path = ROOT / file
        if not path.is_file():
            missing.append(file)
            continue
        defined = _defined(path)
        missing += [f"{file}: {name}" for name in names if name not in defined]
    assert not missing, "CONTRIBUTING.md's map names what the code no longer has:\n" + "\n".join(missing)

