"""The package's import graph, function-level imports and imports for type checking included, has
no cycle.

The layers import downwards only: devices and dtypes; the graph record (``asyncgrad.graph``);
``tensor``; a tensor's autograd side (``asyncgrad.variable``: saved tensors, ``AccumulateGrad``,
hook calls); ``ops``; the engine; the front door (``asyncgrad.autograd``). Importing a module
imports its package first, so that counts as an edge too. A module that closes a cycle fails
here, named. An import under ``if TYPE_CHECKING:`` counts as any other: a type a lower module
needs from a higher one is a protocol of the lower one (``RunningGraphTask`` in graph/node.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "asyncgrad"

def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str], type_checking: bool = True) -> set[str]:
    """The package modules ``path`` imports anywhere (``from a import b`` counts ``a.b`` when that
    is a module, else ``a``); ``type_checking=False`` leaves out the bodies of ``if TYPE_CHECKING:``."""
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if type_checking else _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                found.add(name if name in modules else node.module)
    return found & modules


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` (never run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def _with_packages(name: str, imported: set[str], modules: set[str]) -> set[str]:
    """``imported`` and the packages Python runs first to import each (``a.b`` for ``a.b.c``): a
    package's ``__init__`` runs before its submodules, so importing ``asyncgrad.autograd.api``
    from outside ``asyncgrad.autograd`` imports that package too. Not the top package (``import
    asyncgrad`` is where everything starts) nor a package ``name`` itself is in (already running)."""
    found = set(imported)
    for module in imported:
        parts = module.split(".")
        for end in range(2, len(parts)):
            package = ".".join(parts[:end])
            if package in modules and not (name == package or name.startswith(package + ".")):
                found.add(package)
    return found


def _graph(type_checking: bool = True) -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: _with_packages(name, _imports(path, modules, type_checking), modules) - {name}
            for name, path in paths.items()}


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle():
    cycles = _cycles(_graph())
    assert not cycles, f"import cycles, TYPE_CHECKING imports counted (import lower layers only): " \
                       f"{sorted(map(sorted, cycles))}"


def test_a_package_is_imported_before_its_modules():
    graph = _graph()
    assert "asyncgrad.autograd" in graph["asyncgrad.checkpoint"]  # it imports asyncgrad.autograd.api
    assert "asyncgrad.autograd" not in graph["asyncgrad.autograd.gradcheck"]  # a module inside it
    assert "asyncgrad" not in graph["asyncgrad.checkpoint"]


def test_only_what_is_above_the_front_door_imports_it():
    """Note [The front door is the top] (autograd/__init__.py): the graph record, tensors, a tensor's
    autograd side, the ops and the engine never import ``asyncgrad.autograd``."""
    below = ("asyncgrad.graph", "asyncgrad.tensor", "asyncgrad.variable", "asyncgrad.ops", "asyncgrad.engine",
             "asyncgrad.devices", "asyncgrad.dtypes", "asyncgrad._validate", "asyncgrad.factories")
    graph = _graph()
    for name, imported in graph.items():
        if name.startswith(below):
            front = {m for m in imported if m == "asyncgrad.autograd" or m.startswith("asyncgrad.autograd.")}
            assert not front, (name, front)


def test_type_checking_imports_are_counted():
    graph = _graph()
    assert "asyncgrad.engine.roles" in graph["asyncgrad.engine.kernels"]  # only under TYPE_CHECKING there
    assert "asyncgrad.engine.roles" not in _graph(type_checking=False)["asyncgrad.engine.kernels"]


def test_the_engine_and_the_graph_record_know_no_op():
    """``engine`` never knows individual ops, and the graph record knows nothing above it."""
    graph = _graph()
    for name, imported in graph.items():
        if name.startswith("asyncgrad.engine"):
            assert not {m for m in imported if m.startswith("asyncgrad.ops")}, (name, imported)
    assert not graph["asyncgrad.graph.switches"], graph["asyncgrad.graph.switches"]  # imports nothing of the package
    below = {"asyncgrad.dtypes", "asyncgrad._validate"}  # the values layer, under the record
    for name, imported in graph.items():
        if name.startswith("asyncgrad.graph"):
            above = {m for m in imported
                     if m not in below and not m.startswith(("asyncgrad.graph", "asyncgrad.devices"))}
            assert not above, (name, above)


def test_the_ops_are_below_the_factories():
    """Data flows tensor -> ops: the factories (``ag.zeros``, ``ag.tensor``, ...) record through the ops, so
    an op makes its constants through its device's backend (``plain``), never through a factory."""
    graph = _graph()
    for name, imported in graph.items():
        if name.startswith("asyncgrad.ops"):
            assert "asyncgrad.factories" not in imported, name


def test_no_module_installs_a_name_into_the_graph_record():
    """``graph.x = ...`` or ``setattr(graph_module, ...)`` from outside: a lower module's names are its own."""
    for path in PACKAGE.rglob("*.py"):
        if _module_name(path).startswith("asyncgrad.graph"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    assert target.value.id not in ("graph", "graph_module", "node_module"), (path, node.lineno)
