"""The typed surface: ``asyncgrad/tensor.pyi`` is the stub ``python -m tools.gen_tensor_stub`` writes
from ``SURFACE`` (asyncgrad/_surface.py), it matches the runtime ``Tensor``, and mypy follows it.

* declaration: ``SURFACE`` names every member the runtime class has after ``import asyncgrad``,
  each once, and the members it marks ``CLASS`` are the ones tensor.py's class body defines.
* generation: the committed stub is the one the script writes now (a stale stub fails).
* sync (no mypy): every public name and operator of the runtime class is declared in the stub's
  class and the other way round; each is the same kind of thing (property, settable or not; slot
  attribute; method; staticmethod); and each method's parameters match the runtime's
  ``inspect.signature`` (positional names in order, which ones have a default, ``*args``,
  keyword-only names). The module's own public names are compared too, and what the stub imports
  must exist. The generator takes names from the runtime, so these hold by construction except
  where a row's ``types`` spells out a whole signature or overloads.
* mypy: a realistic user script (``tests/docs_and_examples/typing_user_script.py``) type-checks with mypy's default
  flags, and a wrong one reports exactly the errors it marks. One mypy run serves both (a
  module-scoped fixture). It takes about 30 s on a cold cache (the cache lives in a temp dir):
  about 22 s of it is torch's and array_api's own modules, which mypy follows from
  ``asyncgrad/devices/backend.py``'s imports of ``array_api_strict``/``array_api_compat``.

mypy runs in a subprocess, from a temp directory, with the package's source root on
``PYTHONPATH``: mypy then finds asyncgrad as an installed ``py.typed`` package (errors inside it
are not reported, ``tensor.pyi`` is read), as after ``pip install asyncgrad`` or an editable
install in ``editable_mode=compat``. setuptools' default editable install adds an import hook,
which mypy cannot follow ("Cannot find implementation or library stub for module named
'asyncgrad'").
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import runpy
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import asyncgrad  # noqa: F401  (installs the Tensor methods)
from asyncgrad import _surface
from asyncgrad.tensor import Tensor
from tools import gen_tensor_stub

tensor_module = sys.modules["asyncgrad.tensor"]  # ``asyncgrad.tensor`` the attribute is the factory

TESTS = Path(__file__).resolve().parent
STUB = Path(tensor_module.__file__).with_suffix(".pyi")
SOURCE_ROOT = Path(tensor_module.__file__).resolve().parent.parent
USER_SCRIPT = TESTS / "typing_user_script.py"

BOOKKEEPING = {"__module__", "__qualname__", "__doc__", "__slots__", "__weakref__", "__dict__", "__annotations__",
               "__firstlineno__", "__static_attributes__"}
"""Class-dict entries Python makes itself: not part of the surface the stub declares."""


# ---------------------------------------------------------------------------------------- the declaration
DECLARED = [member for group in _surface.SURFACE for member in group.members]


def _class_body_names() -> set[str]:
    """What tensor.py's ``class Tensor:`` defines itself (defs, assignments, slots)."""
    tree = ast.parse(Path(tensor_module.__file__).read_text())
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Tensor")
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == "__slots__":
                    names.update(ast.literal_eval(node.value))
                elif isinstance(target, ast.Name):
                    names.add(target.id)
    return names - BOOKKEEPING


def test_the_declaration_names_every_member_once():
    names = [member.name for member in DECLARED]
    twice = sorted({name for name in names if names.count(name) > 1})
    assert not twice, f"declared more than once in asyncgrad/_surface.py: {twice}"
    runtime = set(vars(Tensor)) - BOOKKEEPING
    assert runtime == set(names), (f"on Tensor but not in SURFACE: {sorted(runtime - set(names))}; "
                                   f"in SURFACE but not on Tensor: {sorted(set(names) - runtime)}")


def test_class_rows_are_the_class_body_and_the_rest_are_installed():
    body = _class_body_names()
    marked = {member.name for member in DECLARED if member.value is _surface.CLASS}
    assert marked == body, (f"defined in tensor.py's class but not marked CLASS: {sorted(body - marked)}; "
                            f"marked CLASS but not in the class body: {sorted(marked - body)}")
    for member in DECLARED:
        if member.value is not _surface.CLASS:
            assert vars(Tensor)[member.name] is member.value, f"Tensor.{member.name} is not the declared value"


def test_the_committed_stub_is_the_generated_one():
    """A changed declaration, a changed op signature or a hand edit of the stub fails here; the
    fix is ``python -m tools.gen_tensor_stub``."""
    generated = gen_tensor_stub.generate()
    committed = STUB.read_text()
    if committed != generated:
        import difflib

        diff = "".join(difflib.unified_diff(committed.splitlines(True), generated.splitlines(True),
                                            "tensor.pyi (committed)", "tensor.pyi (generated)", n=1))
        pytest.fail(f"asyncgrad/tensor.pyi is stale: run python -m tools.gen_tensor_stub\n{diff[:4000]}")


# ---------------------------------------------------------------------------------------- the stub, parsed
class StubMember:
    """One name in the stub's class: its kind and, for methods, each declared signature."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.kinds: set[str] = set()
        self.defs: list[ast.FunctionDef] = []
        self.overloaded = False
        self.static = False

    @property
    def kind(self) -> str:
        return "/".join(sorted(self.kinds))


def _decorator_names(node: ast.FunctionDef) -> set[str]:
    return {ast.unparse(d) for d in node.decorator_list}


def _class_members(cls: ast.ClassDef) -> dict[str, StubMember]:
    members: dict[str, StubMember] = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            member = members.setdefault(node.name, StubMember(node.name))
            decorators = _decorator_names(node)
            if "property" in decorators:
                member.kinds.add("property")
            elif f"{node.name}.setter" in decorators:
                member.kinds.add("setter")
            else:
                member.kinds.add("method")
                member.defs.append(node)
                member.overloaded |= "overload" in decorators
                member.static |= "staticmethod" in decorators
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members.setdefault(node.target.id, StubMember(node.target.id)).kinds.add("attribute")
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    members.setdefault(target.id, StubMember(target.id)).kinds.add("attribute")
    return members


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines itself (functions, classes, assignments), not what it imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


STUB_TREE = ast.parse(STUB.read_text(), filename=str(STUB))
STUB_CLASSES = {node.name: node for node in STUB_TREE.body if isinstance(node, ast.ClassDef)}
STUB_MEMBERS = _class_members(STUB_CLASSES["Tensor"])


# ---------------------------------------------------------------------------------------- the runtime class
def _runtime_surface() -> set[str]:
    """What a user can reach on ``Tensor`` after ``import asyncgrad``: the public names, and the
    dunders the class itself defines (operators, conversions, ``__init__``...)."""
    public = {name for name in dir(Tensor) if not name.startswith("_")}
    dunders = {name for name in vars(Tensor) if name.startswith("__") and name.endswith("__")} - BOOKKEEPING
    return public | dunders


def _stub_surface() -> set[str]:
    return {name for name in STUB_MEMBERS if not name.startswith("_") or name.endswith("__")}


def _runtime_kind(name: str) -> str:
    value = inspect.getattr_static(Tensor, name)
    if isinstance(value, property):
        return "property" if value.fset is None else "property/setter"
    if inspect.ismemberdescriptor(value):
        return "attribute"  # a __slots__ entry
    if isinstance(value, staticmethod):
        return "staticmethod"
    if callable(value):
        return "method"
    return "attribute"  # a class constant (__array_priority__)


def _stub_kind(member: StubMember) -> str:
    return "staticmethod" if member.static else member.kind


def test_stub_declares_every_runtime_name_and_nothing_else():
    runtime, stub = _runtime_surface(), _stub_surface()
    missing_in_stub = sorted(runtime - stub)
    missing_at_runtime = sorted(stub - runtime)
    private_unknown = sorted(name for name in STUB_MEMBERS if name not in stub and not hasattr(Tensor, name))
    problems = []
    if missing_in_stub:
        problems.append(f"on Tensor at runtime but not declared in {STUB.name}: {missing_in_stub} "
                        "(declare them in the stub, in the group where the runtime installs them)")
    if missing_at_runtime:
        problems.append(f"declared in {STUB.name} but not on Tensor at runtime: {missing_at_runtime}")
    if private_unknown:
        problems.append(f"private names declared in {STUB.name} that Tensor no longer has: {private_unknown}")
    assert not problems, "\n".join(problems)


def test_stub_declares_each_name_as_the_same_kind_of_thing():
    mismatched = []
    for name in sorted(STUB_MEMBERS):
        if not hasattr(Tensor, name):
            continue  # the names test reports it
        runtime, stub = _runtime_kind(name), _stub_kind(STUB_MEMBERS[name])
        if runtime != stub:
            mismatched.append(f"{name}: runtime {runtime}, stub {stub}")
    assert not mismatched, "kind differs between the runtime Tensor and the stub:\n" + "\n".join(mismatched)


def test_stub_module_names_match_the_runtime_module():
    """``asyncgrad.tensor``'s own public names (``type_name``, ``creation_lock``...), not its imports."""
    runtime_tree = ast.parse(Path(tensor_module.__file__).read_text())
    runtime = {n for n in _top_level_names(runtime_tree) if not n.startswith("_")}
    stub = {n for n in _top_level_names(STUB_TREE) if not n.startswith("_")}
    assert runtime == stub, (f"in tensor.py but not in the stub: {sorted(runtime - stub)}; "
                             f"in the stub but not in tensor.py: {sorted(stub - runtime)}")
    for name in sorted(runtime):
        assert hasattr(tensor_module, name), name
    for name, node in STUB_CLASSES.items():  # the private ``_Extra`` too: what it declares still exists
        if name in PROTOCOLS:
            continue
        cls = getattr(tensor_module, name, None)
        assert cls is not None, f"{STUB.name} declares class {name}, which tensor.py no longer has"
        gone = sorted(member for member in _class_members(node) if not hasattr(cls, member))
        assert not gone, f"{STUB.name} declares {name}.{gone}, which the runtime class no longer has"


PROTOCOLS = {"_Generator": "asyncgrad.random.Generator"}
"""Protocols the stub declares for a class above ``Tensor`` (it imports only what is below it)."""


def test_stub_protocols_match_their_class():
    for name, target in PROTOCOLS.items():
        module, _, qualname = target.rpartition(".")
        cls = getattr(importlib.import_module(module), qualname)
        node = STUB_CLASSES[name]
        assert "Protocol" in {ast.unparse(base) for base in node.bases}, name
        gone = sorted(member for member in _class_members(node) if not hasattr(cls, member))
        assert not gone, f"{STUB.name}'s {name} declares {gone}, which {target} does not have"


def test_stub_imports_exist():
    """What the stub names from the package (``ReductionResult``, ``EngineCall``...) is still there:
    a moved class would otherwise turn the stub's types into Any without a word."""
    for node in STUB_TREE.body:
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{STUB.name} imports {alias.name} from {node.module}: gone"


# ---------------------------------------------------------------------------------------- signatures
def _stub_params(node: ast.FunctionDef, static: bool) -> dict:
    args = node.args
    positional = args.posonlyargs + args.args
    if not static:
        positional = positional[1:]  # self
    with_default = {a.arg for a in positional[len(positional) - len(args.defaults):]} if args.defaults else set()
    return {
        "positional": [(a.arg, a.arg in with_default) for a in positional],
        "varargs": args.vararg is not None,
        "keyword_only": sorted(a.arg for a in args.kwonlyargs),
        "varkw": args.kwarg is not None,
    }


def _runtime_params(signature: inspect.Signature, static: bool) -> dict:
    params = list(signature.parameters.values())
    if not static:
        params = params[1:]  # self, whatever the function names it (x, a, input)
    P = inspect.Parameter
    return {
        "positional": [(p.name, p.default is not P.empty) for p in params
                       if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)],
        "varargs": any(p.kind is P.VAR_POSITIONAL for p in params),
        "keyword_only": sorted(p.name for p in params if p.kind is P.KEYWORD_ONLY),
        "varkw": any(p.kind is P.VAR_KEYWORD for p in params),
    }


METHODS = sorted(name for name, member in STUB_MEMBERS.items() if member.defs and hasattr(Tensor, name))


@pytest.mark.parametrize("name", METHODS)
def test_stub_signature_matches_runtime(name):
    member = STUB_MEMBERS[name]
    value = inspect.getattr_static(Tensor, name)
    static = isinstance(value, staticmethod)
    function = value.__func__ if static else value
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        pytest.skip(f"the runtime {name} has no introspectable signature ({exc})")
    runtime = _runtime_params(signature, static)
    if runtime["varargs"] and runtime["varkw"] and not runtime["positional"] and not runtime["keyword_only"]:
        pytest.skip(f"the runtime {name} takes only (*args, **kwargs) ({function.__qualname__}): no parameter "
                    "names to compare; the stub spells out what it accepts")
    declared = [_stub_params(node, member.static) for node in member.defs]
    where = f"{name}: runtime {signature}, stub line(s) {[node.lineno for node in member.defs]}"
    if not member.overloaded:
        assert declared[0] == runtime, f"{where}\n stub    {declared[0]}\n runtime {runtime}"
        return
    runtime_names = [n for n, _ in runtime["positional"]]
    for overload in declared:  # each overload uses a prefix of the runtime's parameters
        names = [n for n, _ in overload["positional"]]
        assert names == runtime_names[:len(names)], f"{where}: overload positional names {names}"
        assert not overload["varargs"] or runtime["varargs"], f"{where}: *args"
        assert set(overload["keyword_only"]) <= set(runtime["keyword_only"]) or runtime["varkw"], where


# ---------------------------------------------------------------------------------------- mypy
WRONG_SCRIPT = '''\
"""Mistakes mypy must catch: each marked line gets exactly the error code it names, no other line any."""
import asyncgrad as ag
from asyncgrad import Tensor

x = ag.randn(2, 3)
x.reshap(2)  # E: attr-defined
y = ag.tensor(1.0) + "s"  # E: operator
g: Tensor = x.grad  # E: assignment
n: int = x.shape  # E: assignment
x.sum(dim="rows")  # E: arg-type
'''

_ERROR = re.compile(r"^(?P<file>[^:]+\.py):(?P<line>\d+): error: .*?(?:\[(?P<code>[a-z-]+)\])?$")


class MypyRun:
    def __init__(self, output: str, returncode: int, seconds: float) -> None:
        self.output = output
        self.returncode = returncode
        self.seconds = seconds

    def errors(self, filename: str) -> list[tuple[int, str | None]]:
        found = []
        for line in self.output.splitlines():
            match = _ERROR.match(line.strip())
            if match and Path(match["file"]).name == filename:
                found.append((int(match["line"]), match["code"]))
        return found


@pytest.fixture(scope="module")
def mypy_run(tmp_path_factory) -> MypyRun:
    pytest.importorskip("mypy", reason="mypy is in the test extra (pip install -e '.[test]')")
    work = tmp_path_factory.mktemp("typing")
    shutil.copy(USER_SCRIPT, work / USER_SCRIPT.name)
    (work / "wrong_script.py").write_text(WRONG_SCRIPT)
    (work / "mypy.ini").write_text("[mypy]\n")  # mypy's defaults, whatever config sits above the temp dir
    path = [str(SOURCE_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    command = [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(work / "cache"),
               "--no-color-output", "--no-error-summary", USER_SCRIPT.name, "wrong_script.py"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=600)
    return MypyRun(done.stdout + done.stderr, done.returncode, time.perf_counter() - start)


def _check_mypy_ran(run: MypyRun) -> None:
    assert "Cannot find implementation or library stub for module named \"asyncgrad" not in run.output, run.output
    assert run.returncode in (0, 1), f"mypy itself failed (exit {run.returncode}):\n{run.output}"


def test_mypy_accepts_a_users_training_script(mypy_run):
    _check_mypy_ran(mypy_run)
    errors = mypy_run.errors(USER_SCRIPT.name)
    assert not errors, f"mypy rejects {USER_SCRIPT.name} ({mypy_run.seconds:.0f} s):\n{mypy_run.output}"


def test_mypy_rejects_the_mistakes_in_a_wrong_script(mypy_run):
    _check_mypy_ran(mypy_run)
    expected = [(number, line.split("# E: ")[1].strip())
                for number, line in enumerate(WRONG_SCRIPT.splitlines(), 1) if "# E: " in line]
    assert mypy_run.errors("wrong_script.py") == expected, mypy_run.output


def test_the_user_script_runs():
    """The script mypy checks is correct code too: run it (a few training steps, well under a second)."""
    runpy.run_path(str(USER_SCRIPT), run_name="__main__")
