"""Differential fuzzer: random autograd programs, run in asyncgrad and in PyTorch (float64), compared.

    python -m benchmarks.fuzz --graphs 10000 --seed 0

Each seed gives one program: a list of Python statements over the public API (leaves, elementwise
ops with broadcasting and Python numbers, reductions, max/min, shape and view ops, indexing,
matmul, softmax, joins, losses, in-place ops on non-leaves and views, ``retain_grad``, hooks that
scale the gradient, ``backward`` with several roots and ``grad_tensors``, ``retain_graph`` and a
second backward, ``grad`` with input subsets and ``allow_unused``, ``create_graph`` gradients used
by later ops). The program is written once, as source text, and executed statement by statement
in two namespaces: one where ``lib`` is asyncgrad (``AWAIT`` becomes ``await``) and one where it
is torch (``AWAIT`` is dropped). So the minimal reproducer printed on a failure is exactly the
code that ran; ``--show SEED`` (``--torch``) writes any program as a script for either library,
each printing its tensors' values and gradients line by line, for a diff of the two outputs.

Note [what is compared]
After every statement: the exception, if either side raised (torch raised => asyncgrad must raise
an instance of the same type; the first line of both messages must agree on a prefix), and the
values the statement bound or read. After every backward-like statement and at the end: every
tensor's value, shape, dtype, ``requires_grad``, ``is_leaf``, ``grad_fn`` name, ``_version``,
``retains_grad`` and ``.grad`` (of leaves and of retained intermediates). The first difference
ends the run; its class is (what differed, the kind of statement where it showed).

Note [what is torch's implementation]
Three things the comparison leaves to torch's implementation, because torch's semantics do not
fix them: (1) a ``grad_fn`` name is compared without its C++ namespace (torch prints
``torch::autograd::CopySlices``), and not at all for the result of ``matmul``/``F.linear`` (torch
builds them from several nodes, unsqueeze/mm/squeeze_ or view/addmm/view, and shows the last;
asyncgrad records one ``MmBackward0``-like node; torch's result may even be a view, so an
in-place op on it later gives ``AsStridedBackward0`` there and the op's node here) nor for
what ``grad(create_graph=True)`` returns (the node of a backward formula, e.g.
``SigmoidBackwardBackward0``, where asyncgrad composes the formula from differentiable ops),
nor for the result of ``F.cross_entropy`` with probabilities (log_softmax, mul, sum, neg, div);
(2) ``_version`` is compared as the number of in-place changes since the statement that bound
the variable, since torch's own kernels bump it inside one op (matmul's ``squeeze_``, the engine
accumulating a returned gradient in place); (3) after a backward-like statement that raised on
both sides, which gradients were already accumulated depends on the order the engine ran its
nodes, which torch leaves open: the generator follows such a statement with one that sets every
``.grad`` back to ``None``.

Note [smooth domains]
Programs are generated while running them in torch, so every choice can look at real values:
``log``/``sqrt``/negative powers only see inputs bounded away from 0, ``relu``/``abs``/``clamp``/
``maximum``/``where`` never see an input within 1e-4 of a kink, ``max``/``min`` never see a near
tie. A difference is then a real difference, not a choice between two valid subgradients.
Statements that raise in torch are kept on purpose (shape mismatches, a second backward through
a freed graph, in-place on a leaf or on a saved tensor ...): they test that asyncgrad raises too.

Note [shrinking]
A failing program is cut after the failing statement, then statements are removed (each with
everything that depends on it) and variables replaced by a same-shaped input of the statement
that made them, as long as the failure keeps its class. What is left is printed as a script.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import inspect
import re
import sys
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SHAPES = [(), (3,), (4,), (2, 3), (3, 4), (1, 4), (4, 1), (2, 3, 4), (2, 1, 4), (3, 1)]
RTOL, ATOL = 1e-6, 1e-8
KINK = 1e-4  # how far every input stays from a kink or a tie (Note [smooth domains])
TIMEOUT_S = 20.0


# --------------------------------------------------------------------------- programs
@dataclass(frozen=True)
class Stmt:
    code: str                  # Python source; "AWAIT " marks an await in asyncgrad
    uses: tuple[str, ...]      # variables read
    defines: tuple[str, ...]   # variables bound
    kind: str                  # what the statement does, for classes ("exp", "backward", ...)


@dataclass
class Program:
    seed: int
    consts: dict[str, np.ndarray]
    stmts: list[Stmt]
    shapes: dict[str, tuple] = field(default_factory=dict)  # variable -> shape, from generation


@dataclass
class Failure:
    index: int      # the statement where the difference showed
    what: str       # "value", "grad", "missing error", ...
    kind: str       # that statement's kind
    detail: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.what, self.kind)


# --------------------------------------------------------------------------- the two namespaces
class _TorchLib:
    """torch under asyncgrad's top-level names (``lib.backward``, ``lib.grad``)."""

    def __init__(self, torch: Any):
        self._torch = torch
        self.backward = torch.autograd.backward
        self.grad = torch.autograd.grad

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)


def namespace(backend: str, consts: dict[str, np.ndarray]) -> dict[str, Any]:
    if backend == "torch":
        import torch

        lib: Any = _TorchLib(torch)
        F = torch.nn.functional
    else:
        import asyncgrad

        lib = asyncgrad
        F = asyncgrad.nn.functional

    def T(k):  # noqa: N802  (one-letter helpers keep the printed programs short)
        return lib.tensor(consts[k])

    def L(k):  # noqa: N802
        return lib.tensor(consts[k], requires_grad=True)

    return {"lib": lib, "F": F, "T": T, "L": L, "I": T, "B": T, "__builtins__": __builtins__}


_CODE_CACHE: dict[tuple[str, str], Any] = {}


def _compiled(code: str, backend: str) -> Any:
    key = (code, backend)
    got = _CODE_CACHE.get(key)
    if got is None:
        if backend == "torch":
            got = compile(code.replace("AWAIT ", ""), "<fuzz>", "exec")
        else:
            got = compile(code.replace("AWAIT ", "await "), "<fuzz>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if len(_CODE_CACHE) > 200_000:
            _CODE_CACHE.clear()
        _CODE_CACHE[key] = got
    return got


def run_torch(stmt: Stmt, ns: dict) -> BaseException | None:
    try:
        exec(_compiled(stmt.code, "torch"), ns)
    except Exception as exc:  # noqa: BLE001  (any exception is a result to compare)
        return exc
    return None


async def run_asyncgrad(stmt: Stmt, ns: dict) -> BaseException | None:
    try:
        result = eval(_compiled(stmt.code, "asyncgrad"), ns)
        if inspect.iscoroutine(result):
            await asyncio.wait_for(result, TIMEOUT_S)
    except asyncio.TimeoutError as exc:
        return exc
    except Exception as exc:  # noqa: BLE001
        return exc
    return None


# --------------------------------------------------------------------------- comparing
def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().split("\n")[0]
    return text.replace("torch.", "").replace("asyncgrad.", "")


def compare_errors(et: BaseException | None, ea: BaseException | None) -> tuple[str, str] | None:
    if et is None and ea is None:
        return None
    if isinstance(ea, asyncio.TimeoutError) and not isinstance(et, asyncio.TimeoutError):
        return ("hang", f"asyncgrad did not finish in {TIMEOUT_S} s")
    if et is None:
        return ("spurious error", f"asyncgrad raised {type(ea).__name__}: {_first_line(ea)}")
    if ea is None:
        return ("missing error", f"torch raised {type(et).__name__}: {_first_line(et)}")
    if not isinstance(ea, type(et)):
        return ("error type", f"torch {type(et).__name__}: {_first_line(et)} | "
                              f"asyncgrad {type(ea).__name__}: {_first_line(ea)}")
    mt, ma = _first_line(et), _first_line(ea)
    n = min(len(mt), len(ma), 40)
    if mt[:n] != ma[:n]:
        return ("error message", f"torch: {mt!r} | asyncgrad: {ma!r}")
    return None


def _np(t: Any) -> np.ndarray:
    d = t.detach()
    if getattr(d, "_is_zerotensor", lambda: False)():  # torch's ZeroTensor (a known-zero gradient)
        return np.asarray(d.numpy(force=True))
    return np.asarray(d.numpy())


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True)


def _grad_fn_name(t: Any) -> str | None:
    fn = t.grad_fn
    return None if fn is None else fn.name().removeprefix("torch::autograd::")


# Statement kinds whose result's grad_fn name is torch's implementation (Note [what is torch's implementation]).
UNNAMED_KINDS = frozenset({"matmul", "linear", "cross_entropy_probs", "grad_create_graph"})


def compare_value(name: str, vt: Any, va: Any, full: bool, born: tuple[int, int] = (0, 0),
                  named: bool = True) -> tuple[str, str] | None:
    """One variable; ``full`` adds the autograd state (.grad, grad_fn, version ...). ``born``: both
    sides' ``_version`` when the variable was bound; ``named``: whether grad_fn names are compared
    (both as Note [what is torch's implementation] says)."""
    import torch

    import asyncgrad

    if vt is None or va is None:
        if (vt is None) != (va is None):
            return ("grad None-ness" if name.startswith("v") else "value",
                    f"{name}: torch {type(vt).__name__}, asyncgrad {type(va).__name__}")
        return None
    if not isinstance(vt, torch.Tensor):
        return None
    if not isinstance(va, asyncgrad.Tensor):
        return ("value", f"{name}: asyncgrad gave {type(va).__name__}, torch a tensor")
    if tuple(vt.shape) != tuple(va.shape):
        return ("shape", f"{name}: torch {tuple(vt.shape)}, asyncgrad {tuple(va.shape)}")
    at, aa = _np(vt), _np(va)
    if at.dtype != aa.dtype:
        return ("dtype", f"{name}: torch {at.dtype}, asyncgrad {aa.dtype}")
    if not _close(at, aa):
        return ("value", f"{name}: max abs diff {np.nanmax(np.abs(at - aa)) if at.size else 0:.3g}")
    if vt.requires_grad != va.requires_grad:
        return ("requires_grad", f"{name}: torch {vt.requires_grad}, asyncgrad {va.requires_grad}")
    if not full:
        return None
    if vt.is_leaf != va.is_leaf:
        return ("is_leaf", f"{name}: torch {vt.is_leaf}, asyncgrad {va.is_leaf}")
    changes_t, changes_a = vt._version - born[0], va._version - born[1]
    nt, na = _grad_fn_name(vt), _grad_fn_name(va)
    if (nt is None) != (na is None) or (nt != na and named):
        return ("grad_fn", f"{name}: torch {nt}, asyncgrad {na}")
    if changes_t != changes_a:
        return ("version", f"{name}: changed in place {changes_t} times in torch, {changes_a} in asyncgrad")
    if not vt.is_leaf and vt.retains_grad != va.retains_grad:
        return ("retains_grad", f"{name}: torch {vt.retains_grad}, asyncgrad {va.retains_grad}")
    if vt.is_leaf or vt.retains_grad:
        what = "grad" if vt.is_leaf else "retained grad"
        gt, ga = vt.grad, va.grad
        if (gt is None) != (ga is None):
            return (what + " None-ness", f"{name}.grad: torch {'None' if gt is None else 'a tensor'}, "
                                         f"asyncgrad {'None' if ga is None else 'a tensor'}")
        if gt is not None and not _close(_np(gt), _np(ga)):
            diff = np.abs(_np(gt) - _np(ga)).max() if _np(gt).shape == _np(ga).shape else "shape"
            return (what, f"{name}.grad differs (max abs diff {diff})")
    return None


# --------------------------------------------------------------------------- known differences
# Note [known differences]
# Open asyncgrad differences the fuzzer finds whose fix lies outside the op modules (the engine,
# autograd/api.py) or is not done yet: (label, what differed, a regex on the failing statement,
# a regex on the detail). A campaign counts them apart; tests/torch_parity/test_fuzz.py fails on any other.
# Remove an entry when its cause is fixed.
KNOWN: list[tuple[str, str, str, str]] = [
    # torch's own limitation: its engine writes in place into a ZeroTensor it made (a known-zero
    # gradient) in a higher-order backward
    ("torch fails: ZeroTensors are immutable", "missing error", r"", r"ZeroTensors are immutable"),
    # the layout of a gradient torch returns is its kernels' choice (mm's backward may return a
    # transposed tensor), and it decides whether a later reshape views or copies
    ("a reshape of a gradient views here and copies in torch (or the reverse): layouts differ", "grad_fn", r"",
     r"torch (Unsafe)?ViewBackward0, asyncgrad (Unsafe)?ViewBackward0"),
    # numpy and torch choose different layouts for an elementwise result of operands with different
    # layouts, so contiguous() copies on one side only
    ("contiguous() copies on one side only: layouts of a mixed-layout elementwise result differ", "grad_fn", r"",
     r"torch CloneBackward0, asyncgrad \w+|torch \w+, asyncgrad CloneBackward0"),
    # torch numbers the dimension in this message differently after a leading Ellipsis (x[..., 1] on
    # a 3-d tensor: "dimension 1"); asyncgrad names the dimension indexed
    ("index error after an Ellipsis names another dimension in torch", "error message", r"",
     r"is out of bounds for dimension"),
    # torch's matmul of a 1-d or >2-d operand records MmBackward0 under a view node (SqueezeBackward4,
    # UnsafeViewBackward0) that saves nothing; asyncgrad records one BmmBackward0 (ops/linalg.py). So
    # backward(inputs=[that result]) runs a root that saved nothing in torch, and in asyncgrad a root
    # whose saved tensors may be freed or modified in place since (the engine runs the root's node in
    # both: torch's init_to_execute marks an ``inputs=`` node needed, and its node runs)
    ("matmul of a 1-d or >2-d operand: torch's root node is a view that saved nothing",
     "spurious error", r"inputs=", r"modified by an inplace operation|backward through the graph a second time"),
    # torch moves a view's retain_grad hook to its regenerated grad_fn only when the grad_fn is next
    # read (lazily, after the base changed in place through another view); asyncgrad moves it at the
    # in-place op (ops/inplace.py), so a backward through the view's old node retains in torch only
    ("retain_grad of a view regenerated after an in-place through another view", "retained grad None-ness",
     r"", r"torch a tensor, asyncgrad None"),
    # not analysed yet
    ("create_graph gradient missing", "grad None-ness", r"create_graph=True", r""),
    ("view of a cat of expanded tensors refused", "spurious error", r"\.view\(", r"view size is not compatible"),
]


def known(prog: Program, failure: Failure) -> str | None:
    """The label of the known difference ``failure`` is (Note [known differences]), or None."""
    code = prog.stmts[failure.index].code if failure.index < len(prog.stmts) else ""
    for label, what, stmt, detail in KNOWN:
        if re.fullmatch(what, failure.what) and re.search(stmt, code) and re.search(detail, failure.detail):
            return label
    return None


# --------------------------------------------------------------------------- running
async def run_program(prog: Program) -> Failure | None:
    """Both sides, statement by statement; the first difference (Note [what is compared])."""
    nt, na = namespace("torch", prog.consts), namespace("asyncgrad", prog.consts)
    names: list[str] = []
    born: dict[str, tuple[int, int]] = {}
    unnamed: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, stmt in enumerate(prog.stmts):
            et = run_torch(stmt, nt)
            ea = await run_asyncgrad(stmt, na)
            diff = compare_errors(et, ea)
            if diff is not None:
                return Failure(i, diff[0], stmt.kind, diff[1])
            if et is not None:
                continue
            names.extend(n for n in stmt.defines if n not in names)
            for n in stmt.defines:
                vt, va = nt.get(n), na.get(n)
                born[n] = (getattr(vt, "_version", 0), getattr(va, "_version", 0))
                same = any(vt is nt.get(u) for u in unnamed)  # e.g. a flatten that returned its input
                (unnamed.add if stmt.kind in UNNAMED_KINDS or same else unnamed.discard)(n)
            backwardish = "backward" in stmt.kind or "grad" in stmt.kind or i == len(prog.stmts) - 1
            check = names if backwardish else [n for n in names if n in stmt.defines or n in stmt.uses]
            for n in check:
                if n.startswith("h"):
                    continue
                diff = compare_value(n, nt.get(n), na.get(n), backwardish, born.get(n, (0, 0)), n not in unnamed)
                if diff is not None:
                    return Failure(i, diff[0], stmt.kind, diff[1])
    return None


# --------------------------------------------------------------------------- generating
class _Gen:
    """Builds a program while running it in torch, so every choice can look at real values."""

    def __init__(self, seed: int, size: int):
        import torch

        self.torch = torch
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.size = size
        self.consts: dict[str, np.ndarray] = {}
        self.stmts: list[Stmt] = []
        self.ns = namespace("torch", self.consts)
        self.vars: list[str] = []          # usable float tensors, oldest first
        self.shapes: dict[str, tuple] = {}
        self.uses: Counter = Counter()
        self.count = 0
        self.hooks: list[str] = []
        self.aliased: set[int] = set()  # storages of torch gradients that alias others (Note [in-place operands])

    # ---- helpers
    def const(self, array: np.ndarray) -> str:
        name = f"c{len(self.consts)}"
        self.consts[name] = array
        return name

    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def t(self, name: str) -> Any:
        return self.ns[name]

    def emit(self, code: str, uses: tuple, defines: tuple, kind: str) -> bool:
        stmt = Stmt(code, tuple(uses), tuple(defines), kind)
        self.stmts.append(stmt)
        for u in uses:
            self.uses[u] += 1
        if run_torch(stmt, self.ns) is not None:
            if "backward" in kind or kind.startswith("grad"):
                self.reset_grads()
            return False
        for d in defines:
            value = self.ns.get(d)
            if isinstance(value, self.torch.Tensor):
                self.shapes[d] = tuple(value.shape)
                if value.dtype == self.torch.float64 and d.startswith("v"):
                    data = value.detach()
                    if data.numel() and bool(data.isfinite().all()) and float(data.abs().max()) < 1e4:
                        if d in self.vars:
                            self.vars.remove(d)
                        self.vars.append(d)
        if kind.startswith("grad"):
            self.note_aliases(defines)
        return True

    def note_aliases(self, outputs: tuple) -> None:
        """torch's grad() may return one tensor for a repeated input, a grad_output itself, or a view
        made in no-grad mode; asyncgrad returns a new tensor each. In-place ops on those would test
        torch's aliasing, so their memory is never written (Note [in-place operands])."""
        seen: set[int] = set()
        others = {_storage(self.ns[n]) for n in self.ns
                  if n.startswith("v") and n not in outputs and isinstance(self.ns[n], self.torch.Tensor)}
        for d in outputs:
            t = self.ns.get(d)
            if not isinstance(t, self.torch.Tensor):
                continue
            ptr = _storage(t)
            if t._base is not None or ptr in seen or ptr in others:
                self.aliased.add(ptr)
            seen.add(ptr)

    def writable(self, name: str) -> bool:
        """Whether an in-place op may write ``name`` (not torch's ZeroTensor, nor an aliased gradient)."""
        t = self.t(name)
        return not bool(t._is_zerotensor()) and _storage(t) not in self.aliased

    def reset_grads(self) -> None:
        """Every ``.grad`` back to None after a failed backward (Note [what is torch's implementation])."""
        held = [n for n, t in self.ns.items() if n.startswith("v") and isinstance(t, self.torch.Tensor)
                and (t.is_leaf and t.requires_grad or not t.is_leaf and t.retains_grad)]
        if held:
            self.emit("\n".join(f"{n}.grad = None" for n in held), tuple(held), (), "reset_grads")

    def operand(self, target: Any, b: str) -> str:
        """``b`` as the operand of an in-place op writing ``target``, cloned where torch's result would
        be its implementation's (Note [in-place operands])."""
        other = self.t(b)
        if _storage(target) != _storage(other):
            return b
        if not (_dense(target) and _dense(other)):
            return f"{b}.clone()"
        same_range = target.data_ptr() == other.data_ptr() and target.numel() == other.numel()
        if same_range and target.shape == other.shape and target.stride() != other.stride():
            return f"{b}.clone()"
        return b

    def pick(self, pred=lambda name: True, recent: float = 2.0) -> str | None:
        names = [n for n in self.vars if n in self.ns and pred(n)]
        if not names:
            return None
        w = np.arange(1, len(names) + 1, dtype=float) ** recent
        return names[int(self.rng.choice(len(names), p=w / w.sum()))]

    def grad_var(self, name: str) -> bool:
        return bool(self.t(name).requires_grad)

    def values(self, name: str) -> np.ndarray:
        return self.t(name).detach().numpy()

    def away(self, name: str, point: float, eps: float = KINK) -> bool:
        return bool(np.all(np.abs(self.values(name) - point) > eps))

    def random_values(self, shape: tuple, low: float = -2.0, high: float = 2.0) -> np.ndarray:
        return np.asarray(self.rng.uniform(low, high, size=shape), dtype=np.float64)

    def shape_choice(self) -> tuple:
        return SHAPES[int(self.rng.integers(len(SHAPES)))]

    # ---- statements
    def leaf(self, shape: tuple | None = None, requires_grad: bool | None = None, positive: bool = False) -> str:
        shape = self.shape_choice() if shape is None else shape
        rg = self.rng.random() < 0.85 if requires_grad is None else requires_grad
        c = self.const(self.random_values(shape, 0.3, 2.0) if positive else self.random_values(shape))
        name = self.fresh()
        self.emit(f"{name} = {'L' if rg else 'T'}('{c}')", (), (name,), "leaf")
        return name

    def op1(self) -> None:
        a = self.pick() or self.leaf()
        v = self.values(a)
        n = self.fresh()
        choices = ["neg", "sin", "cos", "tanh", "sigmoid", "scalar", "rscalar", "square", "cube"]
        if v.size and v.max() < 3:
            choices.append("exp")
        if v.size and v.min() > 0.05:
            choices += ["log", "sqrt", "pow_half", "rdiv"]
        if self.away(a, 0.0):
            choices += ["relu", "F.relu", "abs", "pow_neg"]
        if self.away(a, 0.0, 0.2):
            choices += ["rdiv"]
        op = choices[int(self.rng.integers(len(choices)))]
        s = round(float(self.rng.uniform(0.3, 2.0)) * (1 if self.rng.random() < 0.7 else -1), 3)
        code = {
            "neg": f"-{a}", "sin": f"lib.sin({a})", "cos": f"{a}.cos()", "tanh": f"{a}.tanh()",
            "sigmoid": f"lib.sigmoid({a})", "exp": f"{a}.exp()", "log": f"lib.log({a})", "sqrt": f"{a}.sqrt()",
            "relu": f"{a}.relu()", "F.relu": f"F.relu({a})", "abs": f"{a}.abs()",
            "square": f"{a} ** 2", "cube": f"{a}.pow(3)", "pow_half": f"{a} ** 0.5", "pow_neg": f"lib.pow({a}, -1)",
            "rdiv": f"{abs(s)} / {a}",
            "scalar": [f"{a} * {s}", f"{a} + {s}", f"{a} - {s}", f"{a} / {s}", f"lib.mul({a}, {s})"][
                int(self.rng.integers(5))],
            "rscalar": [f"{s} * {a}", f"{s} + {a}", f"{s} - {a}", f"lib.add({a}, {a}, alpha={s})"][
                int(self.rng.integers(4))],
        }[op]
        self.emit(f"{n} = {code}", (a,), (n,), op)

    def clamp(self) -> None:
        a = self.pick() or self.leaf()
        v = self.values(a)
        if not v.size:
            return
        lo, hi = np.quantile(v, [0.2, 0.8]) if v.size > 1 else (v.item() - 1, v.item() + 1)
        lo, hi = round(float(lo) - 0.013, 3), round(float(hi) + 0.017, 3)
        if not (self.away(a, lo) and self.away(a, hi)):
            return
        n = self.fresh()
        form = int(self.rng.integers(3))
        code = [f"{a}.clamp({lo}, {hi})", f"lib.clamp({a}, min={lo})", f"{a}.clamp(max={hi})"][form]
        self.emit(f"{n} = {code}", (a,), (n,), "clamp")

    def partner(self, shape: tuple, same: bool = False) -> str:
        """A variable whose shape broadcasts with ``shape`` (an existing one, or a new leaf)."""
        def fits(name):
            other = self.shapes.get(name)
            if other is None:
                return False
            if same:
                return other == shape
            try:
                return np.broadcast_shapes(other, shape) == shape or self.rng.random() < 0.3
            except ValueError:
                return False
        b = self.pick(fits) if self.rng.random() < 0.6 else None
        if b is None:
            sub = shape[int(self.rng.integers(len(shape) + 1)):] if not same else shape
            if not same and sub and self.rng.random() < 0.3:
                sub = (1,) + sub[1:]
            b = self.leaf(sub)
        return b

    def op2(self) -> None:
        a = self.pick() or self.leaf()
        shape = self.shapes[a]
        b = self.partner(shape)
        n = self.fresh()
        ops = ["add", "sub", "mul", "div", "maximum", "minimum", "pow_t"]
        op = ops[int(self.rng.integers(len(ops)))]
        if self.rng.random() < 0.5:
            a, b = b, a
        va, vb = self.values(a), self.values(b)
        try:
            diff = va - vb
        except ValueError:
            diff = None
        if op == "div" and not self.away(b, 0.0, 0.2):
            op = "mul"
        if op in ("maximum", "minimum") and (diff is None or not np.all(np.abs(diff) > KINK)):
            op = "add"
        if op == "pow_t" and not (va.size and va.min() > 0.2 and np.abs(vb).max() < 3):
            op = "sub"
        code = {
            "add": f"{a} + {b}", "sub": f"lib.sub({a}, {b})", "mul": f"{a} * {b}", "div": f"{a} / {b}",
            "maximum": f"lib.maximum({a}, {b})", "minimum": f"lib.minimum({a}, {b})", "pow_t": f"{a} ** {b}",
        }[op]
        self.emit(f"{n} = {code}", (a, b), (n,), op)

    def where(self) -> None:
        a = self.pick() or self.leaf()
        b = self.partner(self.shapes[a])
        n = self.fresh()
        if self.rng.random() < 0.5:
            c = self.const(self.rng.random(self.shapes[a]) < 0.5)
            self.emit(f"{n} = lib.where(B('{c}'), {a}, {b})", (a, b), (n,), "where")
        elif self.away(a, 0.1):
            self.emit(f"{n} = lib.where({a} > 0.1, {a}, {b})", (a, b), (n,), "where_cmp")

    def reduce(self) -> None:
        a = self.pick() or self.leaf()
        nd = len(self.shapes[a])
        n = self.fresh()
        fn = ["sum", "mean"][int(self.rng.integers(2))]
        r = self.rng.random()
        if nd == 0 or r < 0.3:
            code = f"{a}.{fn}()" if self.rng.random() < 0.5 else f"lib.{fn}({a})"
        elif r < 0.8:
            d = int(self.rng.integers(-nd, nd))
            code = f"{a}.{fn}(dim={d}, keepdim={bool(self.rng.random() < 0.4)})"
        else:
            dims = tuple(int(x) for x in self.rng.choice(nd, size=min(nd, 2), replace=False))
            code = f"{a}.{fn}({dims}, {bool(self.rng.random() < 0.4)})"
        self.emit(f"{n} = {code}", (a,), (n,), fn)

    def extreme(self) -> None:
        a = self.pick() or self.leaf()
        v = self.values(a)
        fn = "max" if self.rng.random() < 0.5 else "min"
        if v.size == 0:
            return
        n = self.fresh()
        if v.ndim == 0 or self.rng.random() < 0.3:
            s = np.sort(v.reshape(-1))
            if s.size > 1 and not np.all(np.diff(s) > KINK):
                return
            code = f"{a}.{fn}()" if self.rng.random() < 0.5 else f"lib.{fn}({a})"
            self.emit(f"{n} = {code}", (a,), (n,), fn)
            return
        d = int(self.rng.integers(-v.ndim, v.ndim))
        s = np.sort(v, axis=d)
        if s.shape[d] > 1 and not np.all(np.diff(s, axis=d) > KINK):
            return
        keep = bool(self.rng.random() < 0.4)
        form = int(self.rng.integers(3))
        if form == 0:
            self.emit(f"{n} = {a}.{fn}(dim={d}, keepdim={keep}).values", (a,), (n,), fn + "_dim")
        elif form == 1:
            self.emit(f"{n} = {a}.{fn}({d}, {keep})[0]", (a,), (n,), fn + "_dim")
        else:
            i = self.fresh("i")
            self.emit(f"{n}, {i} = lib.{fn}({a}, {d}, keepdim={keep})", (a,), (n, i), fn + "_dim_indices")

    def softmax(self) -> None:
        a = self.pick(lambda x: len(self.shapes[x]) >= 1) or self.leaf((3, 4))
        nd = len(self.shapes[a])
        d = int(self.rng.integers(-nd, nd))
        n = self.fresh()
        code = [f"{a}.softmax({d})", f"{a}.log_softmax(dim={d})", f"F.softmax({a}, dim={d})",
                f"F.log_softmax({a}, {d})", f"lib.softmax({a}, {d})"][int(self.rng.integers(5))]
        self.emit(f"{n} = {code}", (a,), (n,), "log_softmax" if "log" in code else "softmax")

    def shape_op(self) -> None:
        a = self.pick() or self.leaf()
        shape = self.shapes[a]
        nd = len(shape)
        n = self.fresh()
        numel = int(np.prod(shape))
        ops = ["reshape", "view", "unsqueeze", "flatten", "clone", "contiguous", "expand"]
        if nd >= 1:
            ops += ["squeeze", "squeeze_dim", "flatten_dims"]
        if nd >= 2:
            ops += ["transpose", "permute", "mT"]
        if nd == 2:
            ops += ["T", "t"]
        op = ops[int(self.rng.integers(len(ops)))]
        if op in ("reshape", "view"):
            target = self._factor(numel)
            if self.rng.random() < 0.3 and target:
                target = tuple(-1 if i == 0 else s for i, s in enumerate(target))
            code = f"{a}.{op}{target}" if len(target) != 1 else f"{a}.{op}({target[0]})"
            if op == "reshape" and self.rng.random() < 0.3:
                code = f"lib.reshape({a}, {target})"
            if not target:
                code = f"{a}.{op}(())"
        elif op == "unsqueeze":
            code = f"{a}.unsqueeze({int(self.rng.integers(-nd - 1, nd + 1))})"
        elif op == "flatten":
            code = f"{a}.flatten()" if self.rng.random() < 0.6 else f"lib.flatten({a})"
        elif op == "flatten_dims":
            s = int(self.rng.integers(-nd, nd))
            e = int(self.rng.integers(-nd, nd))
            if (s % nd) > (e % nd) and self.rng.random() < 0.8:
                s, e = e, s
            code = f"{a}.flatten({s}, {e})"
        elif op == "clone":
            code = f"{a}.clone()"
        elif op == "contiguous":
            code = f"{a}.contiguous()"
        elif op == "expand":
            lead = (2,) if self.rng.random() < 0.5 else ()
            target = lead + tuple(3 if s == 1 and self.rng.random() < 0.7 else (-1 if self.rng.random() < 0.3 else s)
                                  for s in shape)
            code = f"{a}.expand{target}" if len(target) != 1 else f"{a}.expand({target[0]})"
            if not target:
                code = f"{a}.expand(())"
        elif op == "squeeze":
            code = f"{a}.squeeze()"
        elif op == "squeeze_dim":
            code = f"lib.squeeze({a}, {int(self.rng.integers(-nd, nd))})"
        elif op == "transpose":
            d0, d1 = (int(x) for x in self.rng.integers(-nd, nd, size=2))
            code = f"{a}.transpose({d0}, {d1})" if self.rng.random() < 0.7 else f"lib.transpose({a}, {d0}, {d1})"
        elif op == "permute":
            perm = tuple(int(x) for x in self.rng.permutation(nd))
            code = f"{a}.permute{perm}" if self.rng.random() < 0.5 else f"lib.permute({a}, {perm})"
        elif op == "mT":
            code = f"{a}.mT"
        elif op == "T":
            code = f"{a}.T"
        else:
            code = f"{a}.t()"
        self.emit(f"{n} = {code}", (a,), (n,), op)

    def _factor(self, numel: int) -> tuple:
        parts: list[int] = []
        rest = numel
        for p in (2, 3, 2, 2):
            if rest % p == 0 and self.rng.random() < 0.5:
                parts.append(p)
                rest //= p
        parts.append(rest)
        if self.rng.random() < 0.2:
            parts.insert(int(self.rng.integers(len(parts) + 1)), 1)
        if numel == 1 and self.rng.random() < 0.3:
            return ()
        return tuple(int(x) for x in self.rng.permutation(parts))

    def index(self) -> None:
        a = self.pick(lambda x: len(self.shapes[x]) >= 1) or self.leaf((3, 4))
        shape = self.shapes[a]
        n = self.fresh()
        r = self.rng.random()
        if r < 0.5:
            parts = []
            for size in shape[: int(self.rng.integers(1, len(shape) + 1))]:
                c = self.rng.random()
                if c < 0.35:
                    parts.append(str(int(self.rng.integers(-size, size))))
                elif c < 0.75:
                    start = int(self.rng.integers(0, size))
                    stop = int(self.rng.integers(start + 1, size + 1))
                    step = 1 if self.rng.random() < 0.7 else 2
                    parts.append(f"{start}:{stop}" + (f":{step}" if step != 1 else ""))
                else:
                    parts.append(":")
            if self.rng.random() < 0.15:
                parts.insert(int(self.rng.integers(len(parts) + 1)), "None")
            if self.rng.random() < 0.15:
                parts = ["..."] + parts[1:]
            self.emit(f"{n} = {a}[{', '.join(parts)}]", (a,), (n,), "index_basic")
        elif r < 0.85:
            k = int(self.rng.integers(1, 5))
            c = self.const(self.rng.integers(-shape[0], shape[0], size=(k,)).astype(np.int64))
            if len(shape) >= 2 and self.rng.random() < 0.4:
                c2 = self.const(self.rng.integers(0, shape[1], size=(k,)).astype(np.int64))
                code = f"{a}[I('{c}'), I('{c2}')]" if self.rng.random() < 0.5 else f"{a}[:, I('{c2}')]"
            else:
                code = f"{a}[I('{c}')]"
            self.emit(f"{n} = {code}", (a,), (n,), "index_array")
        else:
            c = self.const(self.rng.random(shape) < 0.6)
            self.emit(f"{n} = {a}[B('{c}')]", (a,), (n,), "index_mask")

    def matmul(self) -> None:
        a = self.pick(lambda x: 1 <= len(self.shapes[x]) <= 3) or self.leaf((2, 3))
        shape = self.shapes[a]
        n = self.fresh()
        k = shape[-1]
        r = self.rng.random()
        if r < 0.3:
            w = self.leaf((int(self.rng.integers(1, 4)), k))
            if self.rng.random() < 0.5:
                b = self.leaf((self.shapes[w][0],))
                self.emit(f"{n} = F.linear({a}, {w}, {b})", (a, w, b), (n,), "linear")
            else:
                self.emit(f"{n} = F.linear({a}, {w})", (a, w), (n,), "linear")
            self.unview(n)
            return
        other = (k,) if self.rng.random() < 0.3 else (k, int(self.rng.integers(1, 4)))
        if len(other) == 2 and len(shape) == 1 and self.rng.random() < 0.3:
            other = (2,) + other
        b = self.pick(lambda x: self.shapes[x] == other, recent=1.0) or self.leaf(other)
        if self.rng.random() < 0.2 and len(shape) >= 2:
            a, b = self.leaf((shape[-2],)), a  # vector @ matrix
        code = f"{a} @ {b}" if self.rng.random() < 0.6 else f"lib.matmul({a}, {b})"
        self.emit(f"{n} = {code}", (a, b), (n,), "matmul")
        self.unview(n)

    def unview(self, n: str) -> None:
        """torch makes some matmul/linear results as views of a tensor of its own (mm of an unsqueezed
        vector, then squeeze_); which is its implementation, so later ops use a clone of such a result."""
        t = self.ns.get(n)
        if t is not None and t._base is not None:
            self.emit(f"{n} = {n}.clone()", (n,), (n,), "clone")

    def join(self) -> None:
        a = self.pick(lambda x: len(self.shapes[x]) >= 1) or self.leaf((3,))
        shape = self.shapes[a]
        n = self.fresh()
        if self.rng.random() < 0.5:
            nd = len(shape)
            d = int(self.rng.integers(-nd, nd))
            b = self.pick(lambda x: len(self.shapes[x]) == nd and all(
                s == t for i, (s, t) in enumerate(zip(self.shapes[x], shape)) if i != d % nd))
            b = b or a
            parts = [a, b] if self.rng.random() < 0.7 else [a, b, a]
            self.emit(f"{n} = lib.cat([{', '.join(parts)}], dim={d})", tuple(parts), (n,), "cat")
        else:
            b = self.partner(shape, same=True)
            d = int(self.rng.integers(-len(shape) - 1, len(shape) + 1))
            self.emit(f"{n} = lib.stack([{a}, {b}], {d})", (a, b), (n,), "stack")

    def loss(self) -> None:
        n = self.fresh()
        r = self.rng.random()
        red = ["mean", "sum", "none"][int(self.rng.integers(3))]
        if r < 0.35:
            a = self.pick() or self.leaf()
            b = self.partner(self.shapes[a], same=True)
            if self.rng.random() < 0.3:
                b = f"T('{self.const(self.random_values(self.shapes[a]))}')"
                self.emit(f"{n} = F.mse_loss({a}, {b}, reduction='{red}')", (a,), (n,), "mse_loss")
            else:
                self.emit(f"{n} = F.mse_loss({a}, {b}, reduction='{red}')", (a, b), (n,), "mse_loss")
            return
        a = self.pick(lambda x: len(self.shapes[x]) in (1, 2) and 0 not in self.shapes[x]) or self.leaf((3, 4))
        shape = self.shapes[a]
        classes = shape[-1]
        tshape = (shape[0],) if len(shape) == 2 else ()
        target = self.const(self.rng.integers(0, classes, size=tshape).astype(np.int64))
        extra = ""
        if self.rng.random() < 0.3:
            extra = f", weight=T('{self.const(self.random_values((classes,), 0.2, 2.0))}')"
        if r < 0.75:
            if self.rng.random() < 0.2:
                probs = self.rng.random(shape) + 0.1
                probs = probs / probs.sum(-1, keepdims=True)
                self.emit(f"{n} = F.cross_entropy({a}, T('{self.const(probs)}'){extra}, reduction='{red}')", (a,), (n,),
                          "cross_entropy_probs")
            else:
                self.emit(f"{n} = F.cross_entropy({a}, I('{target}'){extra}, reduction='{red}')", (a,), (n,),
                          "cross_entropy")
        else:
            d = len(shape) - 1
            self.emit(f"{n} = F.nll_loss({a}.log_softmax({d}), I('{target}'){extra}, reduction='{red}')", (a,), (n,),
                      "nll_loss")

    def inplace(self) -> None:
        fresh_only = self.rng.random() < 0.75

        def target(x):
            t = self.t(x)
            if t.is_leaf and t.requires_grad and self.rng.random() < 0.9 or not self.writable(x):
                return False
            return not fresh_only or self.uses[x] == 0 or t._base is not None
        a = self.pick(target)
        if a is None:
            return
        shape = self.shapes[a]
        n = self.fresh()
        ops = ["add_", "sub_", "mul_s", "mul_t", "div_", "iadd", "imul", "setitem", "zero_", "fill_", "copy_"]
        if self.away(a, 0.0):
            ops.append("relu_")
        op = ops[int(self.rng.integers(len(ops)))]
        s = round(float(self.rng.uniform(0.3, 2.0)), 3)
        if op in ("add_", "sub_", "mul_t", "iadd", "imul", "copy_"):
            b = self.pick(lambda x: x != a and len(self.shapes[x]) <= len(shape)
                          and _broadcasts_to(self.shapes[x], shape))
            b = b or self.leaf(shape[int(self.rng.integers(len(shape) + 1)):])
            b = self.operand(self.t(a), b)
            code = {"add_": f"{n} = {a}.add_({b})", "sub_": f"{n} = {a}.sub_({b})", "mul_t": f"{n} = {a}.mul_({b})",
                    "iadd": f"{a} += {b}\n{n} = {a}", "imul": f"{a} *= {b}\n{n} = {a}",
                    "copy_": f"{n} = {a}.copy_({b})"}[op]
            self.emit(code, (a, b.removesuffix(".clone()")), (n,), op)
            return
        if op == "setitem":
            if not shape:
                return
            i = int(self.rng.integers(-shape[0], shape[0]))
            if self.rng.random() < 0.5:
                b = self.pick(lambda x: _broadcasts_to(self.shapes[x], shape[1:])) or self.leaf(shape[1:])
                ob = self.operand(self.t(a)[i], b)
                self.emit(f"{a}[{i}] = {ob}\n{n} = {a}", (a, b), (n,), "setitem")
            else:
                self.emit(f"{a}[{i}] = {s}\n{n} = {a}", (a,), (n,), "setitem")
            return
        code = {"mul_s": f"{a}.mul_({s})", "div_": f"{a}.div_({s})", "zero_": f"{a}.zero_()",
                "fill_": f"{a}.fill_({s})", "relu_": f"{a}.relu_()"}[op]
        self.emit(f"{n} = {code}", (a,), (n,), op)

    def view_then_inplace(self) -> None:
        a = self.pick(lambda x: len(self.shapes[x]) >= 1 and not self.t(x).is_leaf and self.writable(x))
        if a is None:
            return
        shape = self.shapes[a]
        v = self.fresh()
        form = int(self.rng.integers(3))
        if form == 0:
            self.emit(f"{v} = {a}[{int(self.rng.integers(shape[0]))}]", (a,), (v,), "index_basic")
        elif form == 1 and len(shape) >= 2:
            self.emit(f"{v} = {a}.transpose(0, 1)", (a,), (v,), "transpose")
        else:
            self.emit(f"{v} = {a}.unsqueeze(0)", (a,), (v,), "unsqueeze")
        if v not in self.ns:
            return
        n = self.fresh()
        s = round(float(self.rng.uniform(0.3, 2.0)), 3)
        code = [f"{v}.mul_({s})", f"{v}.add_({s})", f"{v}.clamp_(min=-100.0)"][int(self.rng.integers(3))]
        if self.rng.random() < 0.4:
            b = self.pick(lambda x: _broadcasts_to(self.shapes[x], self.shapes[v]) and x != v)
            if b is not None:
                self.emit(f"{n} = {v}.mul_({self.operand(self.t(v), b)})", (v, b), (n,), "view_inplace")
                return
        self.emit(f"{n} = {code}", (v,), (n,), "view_inplace")

    def misc(self) -> None:
        a = self.pick() or self.leaf()
        r = self.rng.random()
        if r < 0.35:
            self.emit(f"{a}.retain_grad()", (a,), (), "retain_grad")
        elif r < 0.7:
            # torch 2.13 segfaults in register_hook on a view whose base changed in place after the view
            # was made (x = leaf * 1; v = x.unsqueeze(0); v[0].mul_(3); v.register_hook(f)): not there.
            t = self.t(a)
            if t._base is not None and t._version > 0:
                return
            h = self.fresh("h")
            body = f"g * {round(float(self.rng.uniform(0.3, 2.0)), 3)}" if self.rng.random() < 0.8 else "None"
            if self.emit(f"{h} = {a}.register_hook(lambda g: {body})", (a,), (h,), "hook"):
                self.hooks.append(h)
        elif r < 0.78 and self.hooks:
            h = self.hooks.pop(int(self.rng.integers(len(self.hooks))))
            self.emit(f"{h}.remove()", (h,), (), "hook_remove")
        elif r < 0.86:
            n = self.fresh()
            self.emit(f"{n} = {a}.detach()", (a,), (n,), "detach")
        elif r < 0.93:
            n = self.fresh()
            self.emit(f"with lib.no_grad():\n    {n} = {a} * 2.0", (a,), (n,), "no_grad")
        else:
            n = self.fresh()
            self.emit(f"{n} = {a}.detach().requires_grad_()", (a,), (n,), "requires_grad_")

    def backward(self) -> None:
        roots = []
        for _ in range(int(self.rng.integers(1, 4))):
            r = self.pick(lambda x: self.grad_var(x) and x not in roots, recent=3.0)
            if r is not None:
                roots.append(r)
        if not roots:
            return
        grads = []
        for r in roots:
            if self.shapes[r] == () and self.rng.random() < 0.6:
                grads.append("None")
            else:
                grads.append(f"T('{self.const(self.random_values(self.shapes[r]))}')")
        rg = ", retain_graph=True" if self.rng.random() < 0.6 else ""
        form = self.rng.random()
        uses = tuple(roots)
        if form < 0.3:
            self.emit(f"AWAIT lib.backward([{', '.join(roots)}], [{', '.join(grads)}]{rg})", uses, (), "backward")
        elif form < 0.45:
            g = "" if grads[0] == "None" else grads[0]
            self.emit(f"AWAIT {roots[0]}.backward({g}{rg})", roots[:1], (), "backward")
        elif form < 0.6:
            inputs = self._inputs()
            if not inputs:
                return
            self.emit(f"AWAIT lib.backward([{', '.join(roots)}], [{', '.join(grads)}], "
                      f"inputs=[{', '.join(inputs)}]{rg})", uses + tuple(inputs), (), "backward_inputs")
        else:
            inputs = self._inputs()
            if not inputs:
                return
            create = self.rng.random() < 0.5
            unused = ["", ", allow_unused=True", ", allow_unused=False", ", allow_unused=True, materialize_grads=True"][
                int(self.rng.choice(4, p=[0.3, 0.4, 0.1, 0.2]))]
            outs = [self.fresh() for _ in inputs]
            self.emit(f"{', '.join(outs)}, = AWAIT lib.grad([{', '.join(roots)}], [{', '.join(inputs)}], "
                      f"[{', '.join(grads)}]{rg}{', create_graph=True' if create else ''}{unused})",
                      uses + tuple(inputs), tuple(outs), "grad_create_graph" if create else "grad")

    def _inputs(self) -> list[str]:
        cands = [x for x in self.vars if x in self.ns and self.grad_var(x)]
        if not cands:
            return []
        k = int(self.rng.integers(1, min(3, len(cands)) + 1))
        return [str(x) for x in self.rng.choice(cands, size=k, replace=False)]

    def build(self) -> Program:
        for _ in range(int(self.rng.integers(1, 4))):
            self.leaf()
        steps = [(self.op1, 14), (self.op2, 12), (self.clamp, 2), (self.where, 2), (self.reduce, 5),
                 (self.extreme, 3), (self.softmax, 2), (self.shape_op, 10), (self.index, 5), (self.matmul, 3),
                 (self.join, 3), (self.loss, 2), (self.inplace, 4), (self.view_then_inplace, 2), (self.misc, 6),
                 (self.backward, 5)]
        fns = [f for f, _ in steps]
        w = np.array([w for _, w in steps], dtype=float)
        for _ in range(self.size):
            fns[int(self.rng.choice(len(fns), p=w / w.sum()))]()
        for _ in range(int(self.rng.integers(1, 3))):
            self.backward()
        return Program(self.seed, self.consts, self.stmts, self.shapes)


# Note [in-place operands]
# An in-place op whose operand shares memory with what it writes: torch refuses a partial overlap
# of dense tensors (tested: the operand is kept), but where either is not dense it does not check
# and the result depends on the order its kernel reads and writes, and where both cover the same
# bytes in the same shape it compares strides, including those of size-1 dimensions, which are its
# own choice (numpy gives a new axis stride 0). There the generator passes ``b.clone()``. Nor does
# it write a gradient that torch returned as an alias (``note_aliases``) or as an immutable
# ZeroTensor (its optimization for known zeros): asyncgrad returns a new tensor for each.
def _storage(t: Any) -> int:
    """torch's storage address of ``t`` (-1 for a ZeroTensor, which has none)."""
    try:
        return t.untyped_storage().data_ptr()
    except RuntimeError:
        return -1


def _dense(t: Any) -> bool:
    expected = 1
    for size, stride in sorted(((n, s) for n, s in zip(t.shape, t.stride()) if n != 1), key=lambda p: p[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _broadcasts_to(src: tuple, dst: tuple) -> bool:
    try:
        return np.broadcast_shapes(src, dst) == dst
    except ValueError:
        return False


def generate(seed: int, size: int | None = None) -> Program:
    """The program of ``seed``: ``size`` random steps (8 to 30 when not given)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if size is None:
            size = int(np.random.default_rng([seed, 7]).integers(8, 31))
        return _Gen(seed, size).build()


# --------------------------------------------------------------------------- shrinking
def _rename(stmt: Stmt, old: str, new: str) -> Stmt:
    pattern = re.compile(rf"\b{re.escape(old)}\b")
    return Stmt(pattern.sub(new, stmt.code), tuple(new if u == old else u for u in stmt.uses), stmt.defines,
                stmt.kind)


def _without(stmts: list[Stmt], i: int) -> list[Stmt]:
    """``stmts`` minus statement ``i`` and everything that reads what it bound."""
    gone = set(stmts[i].defines)
    out = stmts[:i]
    for s in stmts[i + 1:]:
        if gone & set(s.uses):
            gone |= set(s.defines)
        else:
            out.append(s)
    return out


async def shrink(prog: Program, failure: Failure, budget: int = 400) -> tuple[Program, Failure]:
    """The smallest program found that fails with the same class (Note [shrinking])."""
    def variant(stmts: list[Stmt]) -> Program:
        return Program(prog.seed, prog.consts, stmts, prog.shapes)

    best, best_failure = variant(prog.stmts[: failure.index + 1]), failure
    tries = 0

    async def attempt(stmts: list[Stmt]) -> bool:
        nonlocal best, best_failure, tries
        tries += 1
        if not stmts:
            return False
        got = await run_program(variant(stmts))
        if got is not None and got.key == failure.key:
            best, best_failure = variant(stmts[: got.index + 1]), got
            return True
        return False

    progress = True
    while progress and tries < budget:
        progress = False
        i = len(best.stmts) - 1
        while i >= 0 and tries < budget:
            stmts = best.stmts
            if i < len(stmts) and await attempt(_without(stmts, i)):
                progress = True
            i -= 1
        for i in range(len(best.stmts) - 1, -1, -1):
            if tries >= budget or i >= len(best.stmts):
                continue
            s = best.stmts[i]
            if len(s.defines) != 1:
                continue
            for u in dict.fromkeys(s.uses):
                if prog.shapes.get(u) is not None and prog.shapes.get(u) == prog.shapes.get(s.defines[0]):
                    stmts = best.stmts[:i] + [_rename(t, s.defines[0], u) for t in best.stmts[i + 1:]]
                    if await attempt(stmts):
                        progress = True
                        break
        for i in range(len(best.stmts) - 1, -1, -1):
            for j in range(8):
                if tries >= budget or i >= len(best.stmts):
                    break
                fewer = _drop_root(best.stmts[i], j)
                if fewer is None:
                    break
                if await attempt(best.stmts[:i] + [fewer] + best.stmts[i + 1:]):
                    progress = True
                    break
    return best, best_failure


_ROOTS = re.compile(r"lib\.(?:backward\(\[(?P<r1>[^\]]*)\], |grad\(\[(?P<r2>[^\]]*)\], \[[^\]]*\], )"
                    r"\[(?P<g>[^\]]*)\]")


def _drop_root(stmt: Stmt, j: int) -> Stmt | None:
    """``stmt`` with the ``j``-th root (and its gradient) of its backward/grad call left out; None
    when it has no such root or would have none left."""
    m = _ROOTS.search(stmt.code)
    if m is None:
        return None
    key = "r1" if m.group("r1") is not None else "r2"
    roots, grads = m.group(key).split(", "), m.group("g").split(", ")
    if len(roots) < 2 or j >= len(roots) or len(grads) != len(roots):
        return None
    code = stmt.code
    start_r, end_r = m.span(key)
    start_g, end_g = m.span("g")
    keep_r = ", ".join(r for k, r in enumerate(roots) if k != j)
    keep_g = ", ".join(g for k, g in enumerate(grads) if k != j)
    code = code[:start_r] + keep_r + code[end_r:start_g] + keep_g + code[end_g:]
    uses = tuple(u for u in stmt.uses if re.search(rf"\b{re.escape(u)}\b", code))
    return Stmt(code, uses, stmt.defines, stmt.kind)


_TORCH_HEADER = """import torch


class _Lib:  # torch under asyncgrad's top-level names
    backward, grad = staticmethod(torch.autograd.backward), staticmethod(torch.autograd.grad)

    def __getattr__(self, name):
        return getattr(torch, name)


lib = _Lib()"""


def as_script(prog: Program, backend: str = "asyncgrad") -> str:
    """The program as a runnable script for ``backend`` ("asyncgrad" or "torch"): the statements
    that ran, then one line per tensor (value, and ``.grad`` of leaves and retained tensors), so
    the two scripts' outputs can be compared line by line."""
    used = sorted({c for s in prog.stmts for c in re.findall(r"'(c\d+)'", s.code)}, key=lambda c: int(c[1:]))
    lines = ["import asyncio", "import numpy as np"]
    lines += [_TORCH_HEADER] if backend == "torch" else ["import asyncgrad as lib"]
    lines += ["F = lib.nn.functional", "C = {"]
    for c in used:
        a = prog.consts[c]
        lines.append(f"    '{c}': np.array({a.tolist()!r}, dtype=np.{a.dtype}),")
    lines += ["}", "T = I = B = lambda k: lib.tensor(C[k])", "L = lambda k: lib.tensor(C[k], requires_grad=True)",
              "", "", "def show(scope):",
              "    for name, t in sorted(scope.items(), key=lambda kv: (len(kv[0]), kv[0])):",
              "        if hasattr(t, 'grad_fn') and name[0] == 'v':",
              "            grad = t.grad if t.is_leaf or t.retains_grad else None",
              "            print(name, np.round(t.detach().numpy(), 6).tolist(),",
              "                  None if grad is None else np.round(grad.detach().numpy(), 6).tolist())",
              "", "", "async def main():"]
    for s in prog.stmts:
        await_ = "await " if backend == "asyncgrad" else ""
        for line in s.code.replace("AWAIT ", await_).split("\n"):
            lines.append("    " + line)
    lines += ["    show(locals())", "", "", "asyncio.run(main())"]
    return "\n".join(lines)


# --------------------------------------------------------------------------- campaigns
@dataclass
class Report:
    graphs: int = 0
    statements: int = 0
    torch_errors: int = 0
    failures: dict[tuple[str, str], list[tuple[int, Failure]]] = field(default_factory=lambda: defaultdict(list))
    kinds: Counter = field(default_factory=Counter)
    known: Counter = field(default_factory=Counter)  # label -> count (Note [known differences])

    @property
    def failed(self) -> int:
        return sum(len(v) for v in self.failures.values())


async def check_seed(seed: int, size: int | None = None) -> tuple[Program, Failure | None]:
    prog = generate(seed, size)
    return prog, await run_program(prog)


async def campaign(graphs: int, seed: int = 0, size: int | None = None, shrink_per_class: int = 1,
                   out=sys.stdout, progress: bool = False) -> Report:
    report = Report()
    start = time.perf_counter()
    for s in range(seed, seed + graphs):
        prog, failure = await check_seed(s, size)
        report.graphs += 1
        report.statements += len(prog.stmts)
        report.kinds.update(st.kind for st in prog.stmts)
        if failure is not None:
            label = known(prog, failure)
            if label is not None:
                report.known[label] += 1
            else:
                report.failures[failure.key].append((s, failure))
        if progress and report.graphs % 500 == 0:
            print(f"  {report.graphs} graphs, {report.failed} differ (+{sum(report.known.values())} known), "
                  f"{time.perf_counter() - start:.0f} s",
                  file=out, flush=True)
    elapsed = time.perf_counter() - start
    print(f"{report.graphs} graphs (seeds {seed}..{seed + graphs - 1}), {report.statements} statements, "
          f"{elapsed:.1f} s; {report.failed} differ from torch, {sum(report.known.values())} more in known classes",
          file=out)
    for label, count in report.known.most_common():
        print(f"   known: {count} x {label}", file=out)
    for key, items in sorted(report.failures.items(), key=lambda kv: -len(kv[1])):
        seeds = [s for s, _ in items]
        print(f"\n== {len(items)} x {key[0]} at '{key[1]}' (seeds {seeds[:8]}{' ...' if len(seeds) > 8 else ''})",
              file=out)
        for s, failure in items[:shrink_per_class]:
            prog = generate(s, size)
            small, f = await shrink(prog, failure)
            print(f"-- seed {s}: {f.detail}\n   minimal program ({len(small.stmts)} of {len(prog.stmts)} statements):",
                  file=out)
            print("\n".join("   | " + line for line in as_script(small).split("\n")), file=out)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz", description=__doc__.split("\n")[0])
    parser.add_argument("--graphs", type=int, default=1000, help="how many programs (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="the first seed; seeds are consecutive")
    parser.add_argument("--size", type=int, default=None, help="random steps per program (default 8 to 30)")
    parser.add_argument("--shrink", type=int, default=1, help="failures shrunk and printed per class (default 1)")
    parser.add_argument("--show", type=int, default=None, help="print the program of this seed and exit")
    parser.add_argument("--torch", action="store_true", help="with --show: the program as a torch script")
    parser.add_argument("--stats", action="store_true", help="also print how often each statement kind occurred")
    args = parser.parse_args(argv)
    if args.show is not None:
        print(as_script(generate(args.show, args.size), "torch" if args.torch else "asyncgrad"))
        return 0
    report = asyncio.run(campaign(args.graphs, args.seed, args.size, args.shrink, progress=True))
    if args.stats:
        print("\nstatement kinds:", ", ".join(f"{k} {v}" for k, v in report.kinds.most_common()))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
