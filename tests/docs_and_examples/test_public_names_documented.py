"""Every public name of asyncgrad has a docstring and an entry in the API reference.

The public surface is what a user reaches from ``import asyncgrad as ag``: each module of ``SURFACE``
gives its ``__all__``, or, without one, what ``dir()`` shows that asyncgrad itself defines (names
imported from elsewhere, such as ``typing.Iterable``, are not asyncgrad's to document). An entry is a
``::: dotted.path`` line (mkdocstrings) on a page under ``docs/reference/``; it covers every public name
bound to the same object, so ``ag.grad`` and ``ag.autograd.grad`` need one entry between them.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"

SURFACE = (
    "asyncgrad",
    "asyncgrad.autograd",
    "asyncgrad.autograd.graph",
    "asyncgrad.autograd.profiler",
    "asyncgrad.autograd.functional",
    "asyncgrad.linalg",
    "asyncgrad.nn",
    "asyncgrad.nn.functional",
    "asyncgrad.nn.init",
    "asyncgrad.nn.utils",
    "asyncgrad.optim",
    "asyncgrad.optim.lr_scheduler",
    "asyncgrad.utils",
    "asyncgrad.utils.checkpoint",
    "asyncgrad.utils.data",
    "asyncgrad.distributed",
    "asyncgrad.distributed.autograd",
    "asyncgrad.profiler",
    "asyncgrad.random",
    "asyncgrad.viz",
)

# Packages that ``import asyncgrad`` leaves as attributes but that hold the implementation: what they
# offer a user is re-exported at the top level (``ag.zeros``, not ``ag.factories.zeros``).
IMPLEMENTATION = {"constructors", "devices", "dtypes", "engine", "factories", "graph", "ops", "serialization",
                  "variable"}


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def _defined_here(module: types.ModuleType, name: str, obj: object) -> bool:
    """Whether ``module.name`` is asyncgrad's own, not an import of the standard library or typing."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__.startswith("asyncgrad.") and obj.__name__.rsplit(".", 1)[-1] not in IMPLEMENTATION
    if inspect.isclass(obj) or inspect.isroutine(obj):  # defined in the module, or in a package's own modules
        home = getattr(obj, "__module__", None) or ""
        return home == module.__name__ or (hasattr(module, "__path__") and home.startswith(module.__name__ + "."))
    if (type(obj).__module__ or "").startswith("asyncgrad"):  # a dtype, a memory format, a generator
        return True
    return _assigned_in_source(module, name)  # a constant or a type alias written in the module itself


def _assigned_in_source(module: types.ModuleType, name: str) -> bool:
    return _attribute_docstring(module, name) is not None or any(
        isinstance(node, (ast.Assign, ast.AnnAssign)) and name in _targets(node) for node in _tree(module).body
    )


def _tree(module: types.ModuleType) -> ast.Module:
    return ast.parse(inspect.getsource(module))


def _targets(node: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _attribute_docstring(module: types.ModuleType, name: str) -> str | None:
    """The string literal written right under ``name = ...`` (what mkdocstrings shows for a constant)."""
    body = _tree(module).body
    for node, after in zip(body, body[1:]):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and name in _targets(node):
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                return after.value.value if isinstance(after.value.value, str) else None
    return None


def public_names(module_name: str) -> list[tuple[str, object]]:
    """(dotted name, object) for each public name of one module of the surface."""
    module = _module(module_name)
    if hasattr(module, "__all__"):
        names = [n for n in module.__all__ if not n.startswith("_")]
        return [(f"{module_name}.{n}", getattr(module, n)) for n in names]
    out = []
    for name in dir(module):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if _defined_here(module, name, obj):
            out.append((f"{module_name}.{name}", obj))
    return out


def _home(obj: object, dotted: str) -> types.ModuleType:
    """The module whose source assigns a constant: where its docstring is written."""
    module_name, _, name = dotted.rpartition(".")
    candidates = [sys.modules[module_name]] + [
        m for n, m in sorted(sys.modules.items()) if n.startswith("asyncgrad") and m is not None
    ]
    for module in candidates:
        if getattr(module, name, None) is obj and _attribute_docstring(module, name):
            return module
    return sys.modules[module_name]


def docstring(dotted: str, obj: object) -> str | None:
    """What mkdocstrings will show as the description of ``dotted``."""
    if isinstance(obj, types.ModuleType) or inspect.isclass(obj) or inspect.isroutine(obj) or callable(obj):
        return inspect.getdoc(obj)
    if (type(obj).__module__ or "").startswith("asyncgrad"):
        return inspect.getdoc(type(obj))
    return _attribute_docstring(_home(obj, dotted), dotted.rpartition(".")[2])


def reference_entries() -> dict[str, str]:
    """Each ``::: dotted.path`` of the reference pages, with the page it is on."""
    entries = {}
    for page in sorted(REFERENCE.glob("**/*.md")):
        for match in re.finditer(r"^::: +([\w.]+)\s*$", page.read_text(), flags=re.M):
            entries[match.group(1)] = page.relative_to(ROOT).as_posix()
    return entries


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)


def _surface() -> list[tuple[str, object]]:
    pytest.importorskip("asyncgrad.distributed")
    return [item for module_name in SURFACE for item in public_names(module_name)]


def test_the_surface_is_what_users_reach():
    """The walk finds the names a user uses, and none of the implementation's imports."""
    names = {dotted for dotted, _ in _surface()}
    for expected in ("asyncgrad.Tensor", "asyncgrad.tensor", "asyncgrad.grad", "asyncgrad.float32",
                     "asyncgrad.nn.Linear", "asyncgrad.optim.SGD", "asyncgrad.autograd.graph.Node",
                     "asyncgrad.distributed.cluster", "asyncgrad.profiler.trace", "asyncgrad.nn"):
        assert expected in names
    for internal in ("asyncgrad.ops", "asyncgrad.engine", "asyncgrad.autograd.graph.Iterable",
                     "asyncgrad.autograd.graph.annotations", "asyncgrad.autograd.graph.contextvars"):
        assert internal not in names
    assert len(names) > 400


def test_every_public_name_has_a_docstring():
    missing = sorted(dotted for dotted, obj in _surface() if not (docstring(dotted, obj) or "").strip())
    assert not missing, f"{len(missing)} public names without a docstring: {', '.join(missing)}"


def test_every_public_name_has_a_reference_entry():
    entries = reference_entries()
    documented = {id(_resolve(dotted)) for dotted in entries}
    missing = sorted(dotted for dotted, obj in _surface() if id(obj) not in documented)
    assert not missing, (
        f"{len(missing)} public names with no '::: name' entry under docs/reference/: {', '.join(missing)}"
    )


def test_every_reference_entry_names_something():
    broken = []
    for dotted, page in reference_entries().items():
        try:
            _resolve(dotted)
        except (ImportError, AttributeError):
            broken.append(f"{dotted} ({page})")
    assert not broken, f"reference entries that name nothing: {', '.join(broken)}"
