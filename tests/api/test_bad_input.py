"""Bad input at every public entry point: each wrong call is a clear error in torch's words, or torch's result.

The table ``CASES`` holds (description, call) pairs written once against what asyncgrad and torch
share, through a ``lib`` namespace (``lib.tensor``, ``lib.zeros``, ``lib.F``, ``lib.nn``, ``lib.optim``,
``lib.grad``, ``lib.backward``, ``lib.functional``, ``lib.gradcheck``, ``lib.Function``...). Each call
runs in both libraries in the same test:

* torch raises: asyncgrad raises the same exception type with the same first line (``torch.``/
  ``asyncgrad.`` prefixes and the device name aside), or, where a case says so, both messages match
  the part of it that matters; where torch's first line is its generic "f() received an invalid
  combination of arguments - got (float, dtype=int)", asyncgrad's TypeError from ``f`` must name the
  wrong argument's type (it also names the argument); where torch fails inside its own code (an
  ``AttributeError`` or ``AssertionError``), asyncgrad must raise a clear error matching the case;
* torch returns: asyncgrad returns the same values, shapes and dtypes (never a silent cast).

Entry points torch does not have (``set_num_workers``, the ``sim:N`` device, ``await``-based
checkpoint) are checked against an expected exception type and a message that names the argument;
an ``AttributeError``, ``KeyError``, ``IndexError`` or ``AssertionError`` from the library's internals
never counts as a clear error. Complex numbers have their own module, ``test_complex_refused.py``.
"""

from __future__ import annotations

import asyncio
import re
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
from helpers import wait

import asyncgrad as ag

torch = pytest.importorskip("torch", reason="the bad-input table compares every call with torch")

INTERNAL = (AttributeError, KeyError, IndexError, AssertionError, UnboundLocalError, NameError)
TORCH_INTERNAL = (AttributeError, KeyError, AssertionError, UnboundLocalError, NameError)


# --------------------------------------------------------------------------- the two libraries


class Lib:
    """The names a case may use besides Tensor methods, for one library."""

    def __init__(self, name: str, module: Any, **extra: Any) -> None:
        self.name = name
        self.module = module
        self.__dict__.update(extra)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def __repr__(self) -> str:
        return f"Lib({self.name})"


def _torch_checkpoint(fn: Callable, *args: Any) -> Any:
    import torch.utils.checkpoint

    return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=True)


AG = Lib("asyncgrad", ag, F=ag.nn.functional, nn=ag.nn, optim=ag.optim, grad=ag.grad, backward=ag.backward,
         functional=ag.functional, gradcheck=ag.gradcheck, gradgradcheck=ag.gradgradcheck,
         checkpoint=ag.checkpoint, Function=ag.Function, Tensor=ag.Tensor, wait=wait, dev="sim:0")
TORCH = Lib("torch", torch, F=torch.nn.functional, nn=torch.nn, optim=torch.optim, grad=torch.autograd.grad,
            backward=torch.autograd.backward, functional=torch.autograd.functional,
            gradcheck=torch.autograd.gradcheck, gradgradcheck=torch.autograd.gradgradcheck,
            checkpoint=_torch_checkpoint, Function=torch.autograd.Function, Tensor=torch.Tensor,
            wait=lambda v: v, dev="meta")


# --------------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One wrong call. ``fn(lib)`` runs in both libraries unless ``torch=False``.

    ``match``: a regex both messages must contain, where torch's first line holds details that
    asyncgrad cannot share (its list of device types, its complex dtypes). For an asyncgrad-only
    case, ``raises`` and ``match`` say what asyncgrad must raise. ``values=False``: compare shapes
    and dtypes only (random or uninitialised results).
    """

    desc: str
    fn: Callable[[Lib], Any]
    torch: bool = True
    raises: type[BaseException] | tuple | None = None
    match: str | None = None
    values: bool = True
    section: str = ""


CASES: list[Case] = []
SECTION = ""


def case(desc: str, fn: Callable[[Lib], Any], **kw: Any) -> None:
    CASES.append(Case(desc, fn, section=SECTION, **kw))


def ag_only(desc: str, fn: Callable[[Lib], Any], raises: Any, match: str) -> None:
    CASES.append(Case(desc, fn, torch=False, raises=raises, match=match, section=SECTION))


def X(lib: Lib, requires_grad: bool = False) -> Any:
    """A float tensor of shape (2, 3) with distinct values."""
    return lib.tensor([[0.5, -1.0, 2.0], [1.5, 3.0, -0.25]], requires_grad=requires_grad)


def V(lib: Lib, requires_grad: bool = False) -> Any:
    """A float vector of shape (3,)."""
    return lib.tensor([1.0, -2.0, 0.5], requires_grad=requires_grad)


def I(lib: Lib) -> Any:  # noqa: E743 - an integer tensor, named as the others
    return lib.tensor([[1, 2, 3], [4, 5, 6]])


class Opaque:
    """An object no library knows how to read."""

    def __repr__(self) -> str:
        return "Opaque()"


OPAQUE = Opaque()


# --------------------------------------------------------------------------- factories
SECTION = "factories"
BAD_SIZES = {
    "float": (2.5,), "str": ("3",), "None": (None,), "list with None": ([2, None],),
    "tuple with float": ((2, 2.5),), "list with str": ([2, "3"],), "object": (OPAQUE,), "dict": ({},),
    "numpy float": (np.float64(2.0),), "negative in tuple": ((2, -1),), "negative": (-3,),
    "nested list": ([[2, 3]],), "bool": (True,), "tuple with bool": ((2, True),),
    "varargs float": (2, 2.5), "varargs None": (2, None), "varargs str": (2, "a"),
    "varargs negative": (3, -2), "float tensor": ("FT",),
}


def _size_args(lib: Lib, args: tuple) -> tuple:
    return tuple(lib.tensor(2.0) if a == "FT" else a for a in args)


for _fn in ("zeros", "ones", "empty", "randn", "rand"):
    for _label, _args in BAD_SIZES.items():
        case(f"{_fn} size {_label}",
             lambda lib, f=_fn, a=_args: getattr(lib, f)(*_size_args(lib, a)), values=_fn in ("zeros", "ones"))

# valid sizes given in every accepted spelling: the same tensors as torch
GOOD_SIZES = {"empty tuple": ((),), "zero": (0,), "numpy int": (np.int64(2),), "int tensor": ("IT",),
              "list": ([2, 3],), "varargs": (2, 3)}
for _fn in ("zeros", "ones"):
    for _label, _args in GOOD_SIZES.items():
        case(f"{_fn} size {_label} (valid)",
             lambda lib, f=_fn, a=_args: getattr(lib, f)(*(lib.tensor(2) if x == "IT" else x for x in a)))

BAD_DTYPES = {"int": 5, "bool": True, "list": [], "object": OPAQUE, "float": 1.5}
FACTORY_CALLS = {
    "zeros": lambda lib, **kw: lib.zeros(2, **kw),
    "ones": lambda lib, **kw: lib.ones(2, 2, **kw),
    "empty": lambda lib, **kw: lib.empty(2, **kw),
    "full": lambda lib, **kw: lib.full((2,), 1.5, **kw),
    "eye": lambda lib, **kw: lib.eye(2, **kw),
    "arange": lambda lib, **kw: lib.arange(0.0, 3.0, **kw),
    "linspace": lambda lib, **kw: lib.linspace(0, 1, 5, **kw),
    "randn": lambda lib, **kw: lib.randn(2, **kw),
    "rand": lambda lib, **kw: lib.rand(2, **kw),
    "tensor": lambda lib, **kw: lib.tensor([1.0, 2.0], **kw),
    "zeros_like": lambda lib, **kw: lib.zeros_like(X(lib), **kw),
    "ones_like": lambda lib, **kw: lib.ones_like(X(lib), **kw),
    "full_like": lambda lib, **kw: lib.full_like(X(lib), 2.0, **kw),
    "randn_like": lambda lib, **kw: lib.randn_like(X(lib), **kw),
}
for _fn, _call in FACTORY_CALLS.items():
    for _label, _dtype in BAD_DTYPES.items():
        case(f"{_fn} dtype {_label}", lambda lib, c=_call, d=_dtype: c(lib, dtype=d))
    for _label, _rg in {"str": "yes", "int": 1, "float": 2.0, "None": None, "list": []}.items():
        case(f"{_fn} requires_grad {_label}", lambda lib, c=_call, r=_rg: c(lib, requires_grad=r), values=False)
    for _label, _dev in {"unknown type": "tpu", "int": 5, "object": OPAQUE, "bad index": "sim:x",
                         "empty": ""}.items():
        ag_only(f"{_fn} device {_label}", lambda lib, c=_call, d=_dev: c(lib, device=d), (RuntimeError, TypeError),
                re.escape(str(_dev)) if _label not in ("object", "int") else "device")

INT_REQUIRES_GRAD = {
    "zeros int64": lambda lib: lib.zeros(2, dtype=lib.int64, requires_grad=True),
    "ones int32": lambda lib: lib.ones(2, dtype=lib.int32, requires_grad=True),
    "full int": lambda lib: lib.full((2,), 3, requires_grad=True),
    "full bool": lambda lib: lib.full((2,), True, requires_grad=True),
    "eye int64": lambda lib: lib.eye(2, dtype=lib.int64, requires_grad=True),
    "arange int": lambda lib: lib.arange(3, requires_grad=True),
    "tensor int list": lambda lib: lib.tensor([1, 2], requires_grad=True),
    "tensor bool list": lambda lib: lib.tensor([True, False], requires_grad=True),
    "tensor int array": lambda lib: lib.tensor(np.arange(3), requires_grad=True),
    "zeros_like int": lambda lib: lib.zeros_like(I(lib), requires_grad=True),
    "ones_like int": lambda lib: lib.ones_like(I(lib), requires_grad=True),
    "requires_grad_ int": lambda lib: I(lib).requires_grad_(),
    "requires_grad_ bool": lambda lib: lib.tensor([True]).requires_grad_(),
}
for _label, _fn in INT_REQUIRES_GRAD.items():
    case(f"requires_grad on {_label}", _fn, match="(?i)only Tensors of floating point")

BAD_DATA = {
    "None": None, "str": "abc", "bytes": b"ab", "list with None": [1.0, None], "nested None": [[1.0], [None]],
    "ragged": [[1.0, 2.0], [3.0]], "list with str": [1, "a"], "object": OPAQUE, "dict": {"a": 1},
    "set": {1, 2}, "scalar then list": [1.0, [2.0]], "list then scalar": [[1.0], 2.0], "list of dicts": [{}],
    "ragged deep": [[[1.0]], [[1.0, 2.0]]], "nested object": [[OPAQUE]],
    "object array": np.array([1, None], dtype=object), "object array of ints": np.array([1, 2], dtype=object),
    "str array": np.array(["a", "b"]), "bytes array": np.array([b"a"]), "datetime array":
        np.array(["2020-01-01"], dtype="datetime64[D]"),
}
for _label, _data in BAD_DATA.items():
    _match = "can't convert np.ndarray of type numpy.[a-z0-9_]+. The only supported types are" \
        if isinstance(_data, np.ndarray) else None
    case(f"tensor data {_label}", lambda lib, d=_data: lib.tensor(d), match=_match)

GOOD_DATA = {
    "bools": [True, False], "ints": [1, 2], "mixed int float": [1, 2.5], "nested": [[1, 2], [3, 4]],
    "float scalar": 2.5, "int scalar": 3, "bool scalar": True, "empty": [], "numpy float32": np.float32(1.5),
    "numpy int array": np.array([1, 2], dtype=np.int32), "numpy float array": np.array([1.5]),
    "list of numpy scalars": [np.float64(1.0), np.float64(2.0)], "tuple": (1.0, 2.0),
    "list of 0-d tensors": "T0",
}
for _label, _data in GOOD_DATA.items():
    case(f"tensor data {_label} (valid)",
         lambda lib, d=_data: lib.tensor([lib.tensor(1.0), lib.tensor(2.0)] if isinstance(d, str) else d))

for _label, _fill in {"None": None, "str": "a", "list": [1], "tuple": (1,), "object": OPAQUE,
                      "2-element tensor": "T2"}.items():
    case(f"full fill_value {_label}",
         lambda lib, f=_fill: lib.full((2,), lib.ones(2) if isinstance(f, str) and f == "T2" else f))
    case(f"full_like fill_value {_label}",
         lambda lib, f=_fill: lib.full_like(X(lib), lib.ones(2) if isinstance(f, str) and f == "T2" else f))
for _label, _size in {"float": 2.5, "str": "3", "None": None, "tuple with None": (2, None),
                      "negative": (-1,), "tuple with float": (2.5,)}.items():
    case(f"full size {_label}", lambda lib, s=_size: lib.full(s, 1.0))
case("full int fill (valid)", lambda lib: lib.full((2,), 3))
case("full bool fill (valid)", lambda lib: lib.full((2,), True))
case("full float fill int dtype (valid)", lambda lib: lib.full((2,), 2.7, dtype=lib.int64))

ARANGE = {
    "step zero": (0, 5, 0), "wrong sign": (0, 5, -1), "end None": (None,), "end str": ("a",),
    "start None": (None, 3), "step None": (0, 3, None), "inf": (float("inf"),), "nan": (float("nan"),),
    "end list": ([3],), "end object": (OPAQUE,), "descending without step": (5, 0),
}
for _label, _args in ARANGE.items():
    case(f"arange {_label}", lambda lib, a=_args: lib.arange(*a))
for _label, _args in {"ints": (5,), "floats": (0.0, 1.0, 0.25), "negative step": (5, 0, -2),
                      "mixed": (1, 2.5)}.items():
    case(f"arange {_label} (valid)", lambda lib, a=_args: lib.arange(*a))

for _label, _args in {"negative n": (-1,), "float n": (2.5,), "str n": ("3",), "None n": (None,),
                      "negative m": (2, -1), "float m": (2, 2.5), "bool n": (True,), "list n": ([2],)}.items():
    case(f"eye {_label}", lambda lib, a=_args: lib.eye(*a))
case("eye rectangular (valid)", lambda lib: lib.eye(2, 3))
for _label, _args in {"negative steps": (0, 1, -1), "float steps": (0, 1, 2.5), "None start": (None, 1, 3),
                      "str end": (0, "a", 3), "None steps": (0, 1, None), "list start": ([0], 1, 3)}.items():
    case(f"linspace {_label}", lambda lib, a=_args: lib.linspace(*a))
case("linspace one step (valid)", lambda lib: lib.linspace(0, 1, 1))
for _label, _args in {"low >= high": (3, 3, (2,)), "float high": (2.5, (2,)), "None high": (None, (2,)),
                      "size float": (0, 3, (2.5,)), "size None": (0, 3, None), "negative size": (0, 3, (-1,)),
                      "str low": ("a", 3, (2,))}.items():
    case(f"randint {_label}", lambda lib, a=_args: lib.randint(*a))

for _fn in ("zeros_like", "ones_like", "empty_like", "randn_like", "rand_like", "full_like"):
    for _label, _value in {"list": [1, 2], "None": None, "ndarray": np.ones(2), "float": 3.0, "str": "a"}.items():
        case(f"{_fn} input {_label}",
             lambda lib, f=_fn, v=_value: getattr(lib, f)(v, 1.0) if f == "full_like" else getattr(lib, f)(v))

for _label, _value in {"list": [1.0, 2.0], "None": None, "int": 3, "tensor": "T",
                       "object array": np.array([1, None], dtype=object), "str array": np.array(["a"])}.items():
    case(f"from_numpy {_label}", lambda lib, v=_value: lib.from_numpy(X(lib) if isinstance(v, str) else v),
         match="can't convert np.ndarray of type numpy.[a-z_]+. The only supported types are"
         if isinstance(_value, np.ndarray) else None)


# --------------------------------------------------------------------------- dims
SECTION = "dims"
DIM_METHODS = {
    "unsqueeze": lambda t, d: t.unsqueeze(d),
    "softmax": lambda t, d: t.softmax(d),
    "log_softmax": lambda t, d: t.log_softmax(d),
    "argmax": lambda t, d: t.argmax(d),
    "argmin": lambda t, d: t.argmin(d),
    "flatten start": lambda t, d: t.flatten(d),
    "flatten end": lambda t, d: t.flatten(0, d),
    "size": lambda t, d: t.size(d),
    "transpose dim0": lambda t, d: t.transpose(d, 0),
    "transpose dim1": lambda t, d: t.transpose(0, d),
    "sum": lambda t, d: t.sum(d),
    "sum keepdim": lambda t, d: t.sum(d, keepdim=True),
    "mean": lambda t, d: t.mean(d),
    "max": lambda t, d: t.max(d),
    "min": lambda t, d: t.min(d),
    "squeeze": lambda t, d: t.squeeze(d),
    "cat": lambda t, d: AG_OR_TORCH(t).cat([t, t], d),
    "stack": lambda t, d: AG_OR_TORCH(t).stack([t, t], d),
    "F.softmax": lambda t, d: (AG.F if isinstance(t, ag.Tensor) else TORCH.F).softmax(t, d),
}


def AG_OR_TORCH(t: Any) -> Any:
    return ag if isinstance(t, ag.Tensor) else torch


BAD_DIMS = {"float": 2.5, "too large": 5, "too small": -5, "object": OPAQUE, "list with float": [0.5],
            "numpy float": np.float32(1.0), "float tensor": "FT", "bool": True, "None": None}
# dim=None: asyncgrad's max/min reduce everything and squeeze drops every 1 (numpy's and sum's meaning; torch
# takes no None there), and F.softmax refuses torch's deprecated implicit dim
NONE_MEANS_ALL = {"max", "min", "squeeze", "F.softmax"}
for _name, _method in DIM_METHODS.items():
    for _label, _dim in BAD_DIMS.items():
        if _label == "None" and _name in NONE_MEANS_ALL:
            continue
        case(f"{_name} dim {_label}",
             lambda lib, m=_method, d=_dim: m(X(lib), lib.tensor(1.0) if isinstance(d, str) else d))
    case(f"{_name} dim numpy int (valid)", lambda lib, m=_method: m(X(lib), np.int64(1)))
    case(f"{_name} dim negative (valid)", lambda lib, m=_method: m(X(lib), -1))
    case(f"{_name} dim on 0-d", lambda lib, m=_method: m(lib.tensor(1.5), 1))

for _name in ("sum", "mean"):
    for _label, _dims in {"repeated": (0, 0), "repeated negative": (1, -1), "tuple with float": (0, 1.5),
                          "tuple with None": (0, None), "tuple out of range": (0, 2)}.items():
        case(f"{_name} dims {_label}", lambda lib, n=_name, d=_dims: getattr(X(lib), n)(d))
    case(f"{_name} keepdim str", lambda lib, n=_name: getattr(X(lib), n)(0, keepdim="yes"))
    case(f"{_name} keepdim None", lambda lib, n=_name: getattr(X(lib), n)(0, keepdim=None))
    case(f"{_name} dims empty tuple (valid)", lambda lib, n=_name: getattr(X(lib), n)(()))
case("mean of int tensor", lambda lib: I(lib).mean())
case("softmax of int tensor", lambda lib: I(lib).softmax(0))
case("max over empty", lambda lib: lib.ones(0).max())
case("max dim over empty", lambda lib: lib.ones(0, 2).max(0))
case("argmax over empty", lambda lib: lib.ones(0).argmax())
case("max of ints (valid)", lambda lib: I(lib).max())
case("sum of bools (valid)", lambda lib: lib.tensor([True, True, False]).sum())
case("sum of ints (valid)", lambda lib: I(lib).sum(0))

# --------------------------------------------------------------------------- shapes
SECTION = "shapes"
SHAPE_METHODS = {
    "reshape": lambda t, *s: t.reshape(*s),
    "view": lambda t, *s: t.view(*s),
    "expand": lambda t, *s: t.expand(*s),
    "permute": lambda t, *s: t.permute(*s),
}
BAD_SHAPES = {"float": (2.5,), "str": ("3",), "None": (None,), "tuple with None": ((3, None),),
              "tuple with float": ((3, 2.5),), "varargs with None": (3, None), "object": (OPAQUE,),
              "bool": (True,)}
for _name, _method in SHAPE_METHODS.items():
    for _label, _shape in BAD_SHAPES.items():
        case(f"{_name} shape {_label}", lambda lib, m=_method, s=_shape: m(X(lib), *s))
for _label, _args in {"negative": (-2, 3), "two -1": (-1, -1), "wrong numel": (4,), "zero": (0, 6)}.items():
    case(f"reshape {_label}", lambda lib, a=_args: X(lib).reshape(*a))
    case(f"view {_label}", lambda lib, a=_args: X(lib).view(*a))
for _label, _args in {"repeated": (0, 0), "too few": (0,), "too many": (0, 1, 2), "out of range": (0, 5),
                      "negative repeated": (1, -1)}.items():
    case(f"permute {_label}", lambda lib, a=_args: X(lib).permute(*a))
for _label, _args in {"shrink": (2, 2), "new leading -1": (-1, 2, 3), "fewer dims": (3,),
                      "negative": (2, -2)}.items():
    case(f"expand {_label}", lambda lib, a=_args: X(lib).expand(*a))
case("expand_as non-tensor", lambda lib: X(lib).expand_as([1, 2]))
case("expand_as wrong shape", lambda lib: X(lib).expand_as(lib.ones(4)))
case("reshape tuple (valid)", lambda lib: X(lib).reshape((3, -1)))
case("view numpy ints (valid)", lambda lib: X(lib).view(np.int64(3), np.int32(2)))
case("view list (valid)", lambda lib: X(lib).view([6]))
case("t of 3-d", lambda lib: lib.ones(2, 2, 2).t())
case("T of 1-d (valid)", lambda lib: V(lib).t())
case("mT of 1-d", lambda lib: V(lib).mT)
case("squeeze tuple (valid)", lambda lib: lib.ones(1, 3, 1).squeeze((0, 2)))
case("flatten start > end", lambda lib: lib.ones(2, 3, 4).flatten(2, 1))

# --------------------------------------------------------------------------- binary ops
SECTION = "binary ops"
FUNCTIONS = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"]
BAD_OPERANDS = {"None": None, "str": "a", "object": OPAQUE, "dict": {}, "list with None": [None, 1.0, 2.0],
                "ragged list": [[1.0], [1.0, 2.0]]}
for _fn in FUNCTIONS:
    for _label, _other in BAD_OPERANDS.items():
        case(f"{_fn}(x, {_label})", lambda lib, f=_fn, o=_other: getattr(lib, f)(X(lib), o))
    case(f"{_fn}(None, x)", lambda lib, f=_fn: getattr(lib, f)(None, X(lib)))
    case(f"{_fn}(x, ndarray) (valid)",
         lambda lib, f=_fn: getattr(lib, f)(X(lib), lib.tensor(np.array([1.0, 2.0, 4.0]))))
    case(f"{_fn} shape mismatch", lambda lib, f=_fn: getattr(lib, f)(X(lib), lib.ones(4)))
    case(f"{_fn} int with float tensor (valid)", lambda lib, f=_fn: getattr(lib, f)(I(lib), X(lib)))
    case(f"{_fn} float32 with float64 (valid)",
         lambda lib, f=_fn: getattr(lib, f)(X(lib), lib.ones(3, dtype=lib.float64) * 2))
    ag_only(f"{_fn} mixed devices", lambda lib, f=_fn: getattr(lib, f)(X(lib), X(lib).to("sim:0")),
            RuntimeError, "Expected all tensors to be on the same device, but found at least two devices, cpu and "
                          "sim:0!")

OPERATORS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
             "**": lambda a, b: a ** b, "@": lambda a, b: a @ b, "<": lambda a, b: a < b,
             "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}
for _op, _apply in OPERATORS.items():
    for _label, _other in {"None": None, "str": "a", "object": OPAQUE}.items():
        case(f"x {_op} {_label}", lambda lib, f=_apply, o=_other: f(X(lib), o))
        case(f"{_label} {_op} x", lambda lib, f=_apply, o=_other: f(o, X(lib)))
    ag_only(f"x {_op} x on another device", lambda lib, f=_apply: f(X(lib).to("sim:0"), X(lib).t() if f is
                                                                     OPERATORS["@"] else X(lib)),
            RuntimeError, "Expected all tensors to be on the same device")
for _op in ("==", "!="):
    case(f"x {_op} None (valid)", lambda lib, op=_op: (X(lib) == None) if op == "==" else (X(lib) != None))  # noqa: E711
case("x += None", lambda lib: X(lib).__iadd__(None))
case("x += str", lambda lib: X(lib).__iadd__("a"))
case("x @ 0-d", lambda lib: V(lib) @ lib.tensor(2.0))
case("matmul shape mismatch", lambda lib: lib.matmul(X(lib), X(lib)))
case("matmul None", lambda lib: lib.matmul(X(lib), None))
case("matmul list", lambda lib: lib.matmul(X(lib), [1.0, 2.0, 3.0]))
case("matmul int and float", lambda lib: lib.matmul(I(lib), V(lib)))
case("matmul float32 and float64", lambda lib: lib.matmul(X(lib), V(lib).double()))
case("int tensor ** negative int", lambda lib: I(lib) ** -1)
case("int tensor / int tensor (valid)", lambda lib: I(lib) / I(lib))
case("bool tensor - bool tensor", lambda lib: lib.tensor([True]) - lib.tensor([False]))
case("bool tensor + bool tensor (valid)", lambda lib: lib.tensor([True]) + lib.tensor([True]))
case("int tensor * float (valid)", lambda lib: I(lib) * 1.5)
case("int tensor + float list (valid)", lambda lib: I(lib) + lib.tensor([0.5, 1.5, 2.5]))
case("bool * int (valid)", lambda lib: lib.tensor([True, False]) * 3)
case("neg of bool", lambda lib: -lib.tensor([True]))

for _label, _args in {"no bounds": {}, "min str": {"min": "a"}, "max list": {"max": [1.0]},
                      "min object": {"min": OPAQUE}, "both None": {"min": None, "max": None},
                      "min tensor of wrong shape": {"min": "T4"}}.items():
    case(f"clamp {_label}",
         lambda lib, a=_args: X(lib).clamp(**{k: lib.ones(4) if v == "T4" else v for k, v in a.items()}))
case("clamp min > max (valid)", lambda lib: X(lib).clamp(min=2.0, max=1.0))
case("clamp int with float bound (valid)", lambda lib: I(lib).clamp(min=2.5))

for _label, _args in {"float condition": ("X", "X", "X"), "int condition": ("I", "X", "X"),
                      "None x": ("B", None, "X"), "str y": ("B", "X", "a"), "None condition": (None, "X", "X"),
                      "shape mismatch": ("B", "X", "V4"), "list condition": ([True, False, True], "X", "X")}.items():
    def _where(lib, a=_args):
        def pick(v):
            table = {"X": X(lib), "I": I(lib), "B": X(lib) > 0, "V4": lib.ones(4)}
            return table[v] if isinstance(v, str) and v in table else v
        return lib.where(*(pick(v) for v in a))
    case(f"where {_label}", _where)
case("where scalars (valid)", lambda lib: lib.where(X(lib) > 0, 1.0, 0.0))
case("where int and float (valid)", lambda lib: lib.where(X(lib) > 0, I(lib), X(lib)))

# --------------------------------------------------------------------------- cat, stack
SECTION = "cat, stack"
LISTS = {"None in list": lambda lib: [X(lib), None], "tensor not list": lambda lib: X(lib),
         "empty": lambda lib: [], "float in list": lambda lib: [X(lib), 1.0],
         "list in list": lambda lib: [X(lib), [1.0]],
         "str": lambda lib: "ab", "None": lambda lib: None, "ndarray in list": lambda lib: [X(lib), np.ones((2, 3))],
         "shape mismatch": lambda lib: [X(lib), lib.ones(2, 4, 1)], "generator": lambda lib: (t for t in [X(lib)])}
for _fn in ("cat", "stack"):
    for _label, _make in LISTS.items():
        case(f"{_fn} {_label}", lambda lib, f=_fn, m=_make: getattr(lib, f)(m(lib)))
    case(f"{_fn} mixed dtypes (valid)", lambda lib, f=_fn: getattr(lib, f)([X(lib), I(lib)]))
    case(f"{_fn} tuple (valid)", lambda lib, f=_fn: getattr(lib, f)((X(lib), X(lib))))
    ag_only(f"{_fn} mixed devices", lambda lib, f=_fn: getattr(lib, f)([X(lib), X(lib).to("sim:0")]),
            RuntimeError, "Expected all tensors to be on the same device")
case("cat 0-d", lambda lib: lib.cat([lib.tensor(1.0), lib.tensor(2.0)]))
case("stack different shapes", lambda lib: lib.stack([V(lib), lib.ones(4)]))

# --------------------------------------------------------------------------- indexing
SECTION = "indexing"
INDICES = {"float": 2.5, "str": "a", "dict": {}, "object": OPAQUE,
           "too many": (0, 0, 0), "out of range": 5, "negative out of range": -3, "float tensor": "FT",
           "out of range list": [0, 9], "bool mask wrong shape": "BM", "int tensor out of range": "IT",
           "tuple with float": (0, 1.5), "nested list with None": [[0, None]], "list with str": [0, "a"]}


def _index(lib: Lib, i: Any) -> Any:
    if isinstance(i, str) and i in ("FT", "BM", "IT"):
        return {"FT": lib.tensor([0.0]), "BM": lib.tensor([True, False, True]), "IT": lib.tensor([7])}[i]
    return i


for _label, _i in INDICES.items():
    case(f"getitem {_label}", lambda lib, i=_i: X(lib)[_index(lib, i)])
    case(f"setitem index {_label}", lambda lib, i=_i: X(lib).__setitem__(_index(lib, i), 1.0))
for _label, _v in {"None": None, "str": "a", "object": OPAQUE, "wrong shape": "T4",
                   "list with None": [1.0, None]}.items():
    case(f"setitem value {_label}", lambda lib, v=_v: X(lib).__setitem__(0, lib.ones(4) if v == "T4" else v))
case("getitem None (valid)", lambda lib: X(lib)[None, 1])
case("getitem ellipsis (valid)", lambda lib: X(lib)[..., 0])
case("getitem bool mask (valid)", lambda lib: X(lib)[X(lib) > 0])
case("getitem numpy int (valid)", lambda lib: X(lib)[np.int64(1)])
case("getitem 0-d", lambda lib: lib.tensor(1.0)[0])
case("getitem step zero", lambda lib: V(lib)[::0])
# (a negative step is asyncgrad's documented extension, numpy's semantics: tests/ops/test_ops.py)
case("setitem float into int (valid)", lambda lib: I(lib).__setitem__(0, 2.7))

# --------------------------------------------------------------------------- in place
SECTION = "in place"
INPLACE = {
    "add_ None": lambda lib: X(lib).add_(None), "add_ str": lambda lib: X(lib).add_("a"),
    "sub_ object": lambda lib: X(lib).sub_(OPAQUE), "mul_ list with None": lambda lib: X(lib).mul_([None, 1, 2]),
    "div_ dict": lambda lib: X(lib).div_({}), "add_ broadcast grows": lambda lib: V(lib).add_(X(lib)),
    "fill_ None": lambda lib: X(lib).fill_(None), "fill_ str": lambda lib: X(lib).fill_("a"),
    "fill_ 2-element tensor": lambda lib: X(lib).fill_(lib.ones(2)), "fill_ list": lambda lib: X(lib).fill_([1.0]),
    "clamp_ str": lambda lib: X(lib).clamp_(min="a"), "clamp_ no bounds": lambda lib: X(lib).clamp_(),
    "copy_ None": lambda lib: X(lib).copy_(None), "copy_ shape": lambda lib: X(lib).copy_(lib.ones(4)),
    "copy_ list": lambda lib: X(lib).copy_([1.0, 2.0, 3.0]),
    "add_ on leaf requiring grad": lambda lib: X(lib, True).add_(1.0),
    "zero_ on leaf requiring grad": lambda lib: X(lib, True).zero_(),
    "relu_ on leaf requiring grad": lambda lib: X(lib, True).relu_(),
    "setitem on leaf requiring grad": lambda lib: X(lib, True).__setitem__(0, 1.0),
    "int add_ float": lambda lib: I(lib).add_(1.5), "int mul_ float tensor": lambda lib: I(lib).mul_(X(lib)),
    "int div_ int": lambda lib: I(lib).div_(2), "bool add_ int": lambda lib: lib.tensor([True]).add_(1),
    "float add_ int (valid)": lambda lib: X(lib).add_(2), "int add_ int (valid)": lambda lib: I(lib).add_(3),
    "fill_ float into int (valid)": lambda lib: I(lib).fill_(2.7),
    "fill_ 0-d tensor (valid)": lambda lib: X(lib).fill_(lib.tensor(4.0)),
    "copy_ int into float (valid)": lambda lib: X(lib).copy_(I(lib)),
    "copy_ broadcast (valid)": lambda lib: X(lib).copy_(V(lib)),
    "iadd int with float": lambda lib: I(lib).__iadd__(X(lib)),
}
for _label, _fn in INPLACE.items():
    case(_label, _fn)

# --------------------------------------------------------------------------- tensor state, conversions
SECTION = "tensor state, conversions"
STATE = {
    "requires_grad_ str": lambda lib: X(lib).requires_grad_("yes"),
    "requires_grad_ int": lambda lib: X(lib).requires_grad_(1),
    "requires_grad_ None": lambda lib: X(lib).requires_grad_(None),
    "requires_grad_ False on non-leaf": lambda lib: (X(lib, True) * 2).requires_grad_(False),
    "requires_grad = int": lambda lib: setattr(X(lib), "requires_grad", 1),
    "requires_grad = str": lambda lib: setattr(X(lib), "requires_grad", "yes"),
    "requires_grad = None": lambda lib: setattr(X(lib), "requires_grad", None),
    "grad = list": lambda lib: setattr(X(lib, True), "grad", [1.0]),
    "grad = wrong shape": lambda lib: setattr(X(lib, True), "grad", lib.ones(4)),
    "grad = wrong dtype": lambda lib: setattr(X(lib, True), "grad", lib.ones(2, 3, dtype=lib.float64)),
    "grad = ndarray": lambda lib: setattr(X(lib, True), "grad", np.ones((2, 3))),
    "item of 2 elements": lambda lib: V(lib).item(),
    "item of empty": lambda lib: lib.ones(0).item(),
    "len of 0-d": lambda lib: len(lib.tensor(1.0)),
    "bool of 2 elements": lambda lib: bool(V(lib)),
    "float of 2 elements": lambda lib: float(V(lib)),
    "int of 2 elements": lambda lib: int(V(lib)),
    "index of float tensor": lambda lib: [1, 2, 3][lib.tensor(1.0)],
    "iter of 0-d": lambda lib: list(lib.tensor(1.0)),
    "numpy of requires grad": lambda lib: X(lib, True).numpy(),
    "retain_grad without requires_grad": lambda lib: X(lib).retain_grad(),
    "detach_ of a view": lambda lib: X(lib, True)[0].detach_(),
    "to dtype int": lambda lib: X(lib).to(dtype=5),
    "to object": lambda lib: X(lib).to(OPAQUE),
    "to bool dtype": lambda lib: X(lib).to(dtype=True),
    "to unknown device": lambda lib: X(lib).to("tpu"),
    "to float64 (valid)": lambda lib: X(lib).to(lib.float64),
    "to int64 (valid)": lambda lib: X(lib).to(lib.int64),
    "to tensor (valid)": lambda lib: X(lib).to(I(lib)),
    "item of 1 element (valid)": lambda lib: lib.tensor([2.5]).item(),
    "size() no args (valid)": lambda lib: tuple(X(lib).size()),
    "to non-keyword kwargs": lambda lib: X(lib).to(colour="red"),
}
for _label, _fn in STATE.items():
    case(_label, _fn, match={"to unknown device": "device type at start of device string: tpu",
                             "grad = wrong dtype": "attempting to assign a gradient with dtype 'double' to a tensor "
                                                   "with grad_dtype 'Float'. The gradient must match the tensor's",
                             "to non-keyword kwargs": "(?i)to\\(\\).*(argument|keyword)"}.get(_label))

GRAD_MODE = {
    "set_grad_enabled str": lambda lib: lib.set_grad_enabled("a"),
    "set_grad_enabled None": lambda lib: lib.set_grad_enabled(None),
    "set_grad_enabled int": lambda lib: lib.set_grad_enabled(1),
    "set_default_dtype int64": lambda lib: lib.set_default_dtype(lib.int64),
    "manual_seed str": lambda lib: lib.manual_seed("a"),
    "manual_seed float": lambda lib: lib.manual_seed(1.5),
    "manual_seed None": lambda lib: lib.manual_seed(None),
}
for _label, _fn in GRAD_MODE.items():
    case(_label, _fn, match={"set_default_dtype int64": "(?i)only floating.point types are supported as the "
                                                         "default type"}.get(_label))


# --------------------------------------------------------------------------- backward and grad
SECTION = "backward and grad"
def _loss(lib: Lib) -> tuple:
    x = X(lib, True)
    return x, (x * x).sum()


def _out(lib: Lib) -> tuple:
    x = X(lib, True)
    return x, x * 2


def _backward(lib: Lib, gradient: Any, **kw: Any) -> Any:
    x, y = _out(lib)
    g = gradient(lib) if callable(gradient) else gradient
    lib.wait(y.backward(g, **kw))
    return x.grad


BACKWARD_GRADIENTS = {
    "wrong shape": lambda lib: lib.ones(3),
    "int dtype": lambda lib: lib.ones(2, 3, dtype=lib.int64),
    "bool dtype": lambda lib: lib.ones(2, 3, dtype=lib.bool),
    "float64 for float32 (valid)": lambda lib: lib.ones(2, 3, dtype=lib.float64) * 3,
    "list": lambda lib: [[1.0] * 3] * 2,
    "float": lambda lib: 1.0,
    "ndarray": lambda lib: np.ones((2, 3)),
    "str": lambda lib: "a",
    "None for non-scalar": lambda lib: None,
    "broadcastable shape": lambda lib: lib.ones(3),
    "0-d": lambda lib: lib.tensor(1.0),
    "requires grad (valid)": lambda lib: lib.ones(2, 3, requires_grad=True),
}
for _label, _g in BACKWARD_GRADIENTS.items():
    case(f"backward gradient {_label}", lambda lib, g=_g: _backward(lib, g))
ag_only("backward gradient on another device",
        lambda lib: _backward(lib, lambda lib: lib.ones(2, 3, device="sim:0")), RuntimeError,
        "invalid gradient at index 0 - expected device cpu but got sim:0")


def _backward_inputs(lib: Lib, inputs: Callable) -> Any:
    x, loss = _loss(lib)
    lib.wait(loss.backward(inputs=inputs(lib, x)))
    return x.grad


BACKWARD_INPUTS = {
    "empty list": lambda lib, x: [],
    "not requiring grad": lambda lib, x: [lib.ones(2)],
    "None in list": lambda lib, x: [x, None],
    "float in list": lambda lib, x: [x, 1.0],
    "str": lambda lib, x: "a",
    "ndarray": lambda lib, x: [np.ones(2)],
    "single tensor (valid)": lambda lib, x: x,
    "tuple (valid)": lambda lib, x: (x,),
    "unused leaf (valid)": lambda lib, x: [x, lib.ones(2, requires_grad=True)],
    "dict (valid)": lambda lib, x: {"x": x},
    "OrderedDict": lambda lib, x: OrderedDict(x=x),
    "dict of a str": lambda lib, x: {"x": "a"},
}
for _label, _inputs in BACKWARD_INPUTS.items():
    case(f"backward inputs {_label}", lambda lib, i=_inputs: _backward_inputs(lib, i))


def _ag_backward(lib: Lib, tensors: Callable, grads: Callable | None = None) -> Any:
    x = X(lib, True)
    y = (x * x).sum()
    z = x * 3
    lib.wait(lib.backward(tensors(lib, x, y, z), grads(lib, x, y, z) if grads else None))
    return x.grad


AUTOGRAD_BACKWARD = {
    "None in tensors": (lambda lib, x, y, z: [y, None], None),
    "None": (lambda lib, x, y, z: None, None),
    "str": (lambda lib, x, y, z: "a", None),
    "float in tensors": (lambda lib, x, y, z: [y, 1.0], None),
    "empty list": (lambda lib, x, y, z: [], None),
    "no grad_fn": (lambda lib, x, y, z: [lib.ones(2).sum()], None),
    "grad_tensors too few": (lambda lib, x, y, z: [y, z], lambda lib, x, y, z: [None]),
    "grad_tensors wrong shape": (lambda lib, x, y, z: [z], lambda lib, x, y, z: [lib.ones(3)]),
    "grad_tensors None for non-scalar": (lambda lib, x, y, z: [y, z], lambda lib, x, y, z: [None, None]),
    "grad_tensors str": (lambda lib, x, y, z: [z], lambda lib, x, y, z: ["a"]),
    "grad_tensors int dtype": (lambda lib, x, y, z: [z], lambda lib, x, y, z: [lib.ones(2, 3, dtype=lib.int32)]),
    "grad_tensors single tensor (valid)": (lambda lib, x, y, z: z, lambda lib, x, y, z: lib.ones(2, 3)),
    "two roots (valid)": (lambda lib, x, y, z: [y, z], lambda lib, x, y, z: [None, lib.ones(2, 3)]),
    "root twice (valid)": (lambda lib, x, y, z: [y, y], None),
    "non-scalar without gradient": (lambda lib, x, y, z: z, None),
    "int output": (lambda lib, x, y, z: [lib.ones(2, dtype=lib.int64)], None),
}
for _label, (_t, _g) in AUTOGRAD_BACKWARD.items():
    case(f"autograd.backward {_label}", lambda lib, t=_t, g=_g: _ag_backward(lib, t, g),
         match="tensors must be Tensors" if _label in ("None in tensors", "str", "float in tensors") else None)


def _second_backward(lib: Lib) -> None:
    x, loss = _loss(lib)
    lib.wait(loss.backward())
    lib.wait(loss.backward())


case("backward twice", _second_backward, match="Trying to backward through the graph a second time")
case("backward of leaf without grad", lambda lib: lib.wait(lib.tensor(1.0).backward()))
case("backward retain_graph str", lambda lib: _backward(lib, lambda lib: lib.ones(2, 3), retain_graph="yes"),
     match=r"\bstr\b")
# torch silently drops extra gradients (it zips); asyncgrad refuses the mismatch
ag_only("autograd.backward grad_tensors too many", lambda lib: _ag_backward(
    lib, lambda lib, x, y, z: [y], lambda lib, x, y, z: [None, None]), RuntimeError, "got 1 tensors and 2 gradients")
ag_only("autograd.grad grad_outputs wrong length", lambda lib: _grad(
    lib, lambda lib, x, w, y, z: [z], lambda lib, x, w, y, z: [x],
    lambda lib, x, w, y, z: [lib.ones(2, 3), lib.ones(2, 3)]), RuntimeError,
    "grad_outputs must have the same length as outputs")
case("backward of 0-d int (valid grad of leaf)", lambda lib: _backward(lib, lambda lib: lib.ones(2, 3), inputs=None))


def _grad(lib: Lib, outputs: Callable, inputs: Callable, grad_outputs: Callable | None = None, **kw: Any) -> Any:
    x = X(lib, True)
    w = V(lib, True)
    y = (x * w).sum()
    z = x * w
    return lib.wait(lib.grad(outputs(lib, x, w, y, z), inputs(lib, x, w, y, z),
                             grad_outputs(lib, x, w, y, z) if grad_outputs else None, **kw))


GRAD_CALLS = {
    "inputs empty": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: [], None, {}),
    "inputs not requiring grad": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: [lib.ones(2)], None, {}),
    "inputs None": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: None, None, {}),
    "inputs None in list": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: [x, None], None, {}),
    "inputs str": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: "a", None, {}),
    "inputs float in list": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: [x, 1.0], None, {}),
    "outputs None in list": (lambda lib, x, w, y, z: [y, None], lambda lib, x, w, y, z: [x], None, {}),
    "outputs str": (lambda lib, x, w, y, z: "a", lambda lib, x, w, y, z: [x], None, {}),
    "outputs float": (lambda lib, x, w, y, z: 1.0, lambda lib, x, w, y, z: [x], None, {}),
    "outputs empty": (lambda lib, x, w, y, z: [], lambda lib, x, w, y, z: [x], None, {}),
    "outputs no grad_fn": (lambda lib, x, w, y, z: lib.ones(1).sum(), lambda lib, x, w, y, z: [x], None, {}),
    "grad_outputs wrong shape": (lambda lib, x, w, y, z: z, lambda lib, x, w, y, z: [x],
                                 lambda lib, x, w, y, z: lib.ones(3), {}),
    "grad_outputs str": (lambda lib, x, w, y, z: [z], lambda lib, x, w, y, z: [x],
                         lambda lib, x, w, y, z: ["a"], {}),
    "grad_outputs float": (lambda lib, x, w, y, z: [z], lambda lib, x, w, y, z: [x],
                           lambda lib, x, w, y, z: [1.0], {}),
    "grad_outputs int dtype": (lambda lib, x, w, y, z: z, lambda lib, x, w, y, z: [x],
                               lambda lib, x, w, y, z: lib.ones(2, 3, dtype=lib.int64), {}),
    "grad_outputs None for non-scalar": (lambda lib, x, w, y, z: z, lambda lib, x, w, y, z: [x],
                                         lambda lib, x, w, y, z: [None], {}),
    "grad_outputs float64 (valid)": (lambda lib, x, w, y, z: z, lambda lib, x, w, y, z: [x, w],
                                     lambda lib, x, w, y, z: lib.ones(2, 3, dtype=lib.float64), {}),
    "unused input": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: [x, lib.ones(2, requires_grad=True)],
                     None, {}),
    "unused input allow_unused (valid)": (lambda lib, x, w, y, z: y,
                                          lambda lib, x, w, y, z: [x, lib.ones(2, requires_grad=True)], None,
                                          {"allow_unused": True}),
    "materialize_grads with allow_unused False": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: [x], None,
                                                  {"allow_unused": False, "materialize_grads": True}),
    "materialize_grads (valid)": (lambda lib, x, w, y, z: y,
                                  lambda lib, x, w, y, z: [w, lib.ones(2, requires_grad=True)], None,
                                  {"materialize_grads": True}),
    "non-leaf input (valid)": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: z, None, {}),
    "input is the output (valid)": (lambda lib, x, w, y, z: y, lambda lib, x, w, y, z: y, None, {}),
}
for _label, (_o, _i, _go, _kw) in GRAD_CALLS.items():
    case(f"autograd.grad {_label}", lambda lib, o=_o, i=_i, go=_go, kw=_kw: _grad(lib, o, i, go, **kw),
         match="outputs must be Tensors" if _label in ("outputs None in list", "outputs str") else None)
ag_only("autograd.grad grad_outputs on another device",
        lambda lib: _grad(lib, lambda lib, x, w, y, z: z, lambda lib, x, w, y, z: [x],
                          lambda lib, x, w, y, z: lib.ones(2, 3, device="sim:0")),
        RuntimeError, "invalid gradient at index 0 - expected device cpu but got sim:0")


# --------------------------------------------------------------------------- hooks
SECTION = "hooks"
def _with_hook(lib: Lib, result: Callable, leaf: bool) -> Any:
    x = X(lib, True)
    target = x if leaf else x * 1.0
    if not leaf:
        target.retain_grad()
    target.register_hook(lambda g: result(lib, g))
    lib.wait((target * 2).sum().backward())
    return x.grad


HOOK_RESULTS = {
    "wrong shape": lambda lib, g: lib.ones(3),
    "wrong dtype": lambda lib, g: g.double(),
    "int dtype": lambda lib, g: g.long(),
    "ndarray": lambda lib, g: np.ones((2, 3)),
    "float": lambda lib, g: 1.0,
    "list": lambda lib, g: [g],
    "str": lambda lib, g: "a",
    "tuple": lambda lib, g: (g,),
    "scaled (valid)": lambda lib, g: g * 3,
    "None (valid)": lambda lib, g: None,
    "broadcastable shape": lambda lib, g: lib.ones(3),
    "0-d": lambda lib, g: lib.tensor(1.0),
}
for _where in ("leaf", "non-leaf"):
    for _label, _result in HOOK_RESULTS.items():
        case(f"{_where} hook returns {_label}",
             lambda lib, r=_result, leaf=_where == "leaf": _with_hook(lib, r, leaf))
    ag_only(f"{_where} hook returns a tensor on another device",
            lambda lib, leaf=_where == "leaf": _with_hook(lib, lambda lib, g: g.to("sim:0"), leaf),
            RuntimeError, "has changed the type of value")
case("register_hook on tensor not requiring grad", lambda lib: X(lib).register_hook(lambda g: g))
case("register_hook not callable then backward", lambda lib: _hook_not_callable(lib), match="callable")
case("post accumulate hook on non-leaf",
     lambda lib: (X(lib, True) * 2).register_post_accumulate_grad_hook(lambda t: None))
case("post accumulate hook without requires_grad",
     lambda lib: X(lib).register_post_accumulate_grad_hook(lambda t: None))


def _hook_not_callable(lib: Lib) -> Any:
    x = X(lib, True)
    x.register_hook(5)
    lib.wait(x.sum().backward())
    return x.grad


def _node_hook(lib: Lib, kind: str, result: Callable) -> Any:
    x = X(lib, True)
    y = x * 2
    if kind == "post":
        y.grad_fn.register_hook(lambda gi, go: result(lib, gi))
    else:
        y.grad_fn.register_prehook(lambda go: result(lib, go))
    lib.wait(y.sum().backward())
    return x.grad


NODE_HOOK_RESULTS = {
    "too many": lambda lib, g: (g[0], g[0]),
    "empty tuple": lambda lib, g: (),
    "wrong shape": lambda lib, g: (lib.ones(4),),
    "tensor not tuple": lambda lib, g: g[0],
    "list (valid)": lambda lib, g: [g[0] * 2],
    "str in tuple": lambda lib, g: ("a",),
    "float in tuple": lambda lib, g: (1.0,),
    "wrong dtype": lambda lib, g: (g[0].double(),),
    "scaled (valid)": lambda lib, g: (g[0] * 5,),
}
for _kind in ("post", "pre"):
    for _label, _result in NODE_HOOK_RESULTS.items():
        case(f"node {_kind}hook returns {_label}", lambda lib, k=_kind, r=_result: _node_hook(lib, k, r))


# --------------------------------------------------------------------------- custom functions
SECTION = "custom functions"
def _function(lib: Lib, grads: Callable, n_inputs: int = 1) -> Any:
    class Fn(lib.Function):
        @staticmethod
        def forward(ctx, *xs):
            return xs[0] * 2

        @staticmethod
        def backward(ctx, g):
            return grads(lib, g)

    xs = [X(lib, True) for _ in range(n_inputs)]
    lib.wait(Fn.apply(*xs).sum().backward())
    return xs[0].grad


FUNCTION_GRADS = {
    "too many": (lambda lib, g: (g, g), 1),
    "too few": (lambda lib, g: g, 2),
    "wrong shape": (lambda lib, g: lib.ones(4), 1),
    "str": (lambda lib, g: "a", 1),
    "float": (lambda lib, g: 1.0, 1),
    "ndarray": (lambda lib, g: np.ones((2, 3)), 1),
    "wrong dtype (valid)": (lambda lib, g: g.double(), 1),
    "int dtype": (lambda lib, g: g.long(), 1),
    "broadcastable (valid)": (lambda lib, g: lib.ones(1, 3), 1),
    "None (valid)": (lambda lib, g: None, 1),
    "list": (lambda lib, g: [g], 1),
}
for _label, (_g, _n) in FUNCTION_GRADS.items():
    case(f"Function backward returns {_label}", lambda lib, g=_g, n=_n: _function(lib, g, n))


def _forward_returns(lib: Lib, value: Callable) -> Any:
    class Fn(lib.Function):
        @staticmethod
        def forward(ctx, x):
            return value(lib, x)

        @staticmethod
        def backward(ctx, g):
            return g

    return Fn.apply(X(lib, True))


for _label, _value in {"float": lambda lib, x: 1.0, "None": lambda lib, x: None, "str": lambda lib, x: "a",
                       "ndarray": lambda lib, x: np.ones(2)}.items():
    case(f"Function forward returns {_label}", lambda lib, v=_value: _forward_returns(lib, v),
         match={"None": None}.get(_label, ".*"))
ag_only("Function called directly", lambda lib: lib.Function()(X(lib)), RuntimeError,  # torch's text
        "Legacy autograd function with non-static forward method is deprecated")


# --------------------------------------------------------------------------- nn
SECTION = "nn"
def _seeded_linear(lib: Lib, *args: Any, **kw: Any) -> Any:
    return lib.nn.Linear(*args, **kw)


NN = {
    "Linear in float": lambda lib: lib.nn.Linear(2.5, 3),
    "Linear out str": lambda lib: lib.nn.Linear(3, "a"),
    "Linear in None": lambda lib: lib.nn.Linear(None, 3),
    "Linear negative": lambda lib: lib.nn.Linear(-1, 3),
    "Linear bad dtype": lambda lib: lib.nn.Linear(3, 2, dtype=5),
    "Linear forward wrong features": lambda lib: lib.nn.Linear(4, 2)(X(lib)),
    "Linear forward None": lambda lib: lib.nn.Linear(3, 2)(None),
    "Linear forward list": lambda lib: lib.nn.Linear(3, 2)([1.0, 2.0, 3.0]),
    "Linear forward int tensor": lambda lib: lib.nn.Linear(3, 2)(I(lib)),
    "Linear forward float64": lambda lib: lib.nn.Linear(3, 2)(X(lib).double()),
    "Linear forward 0-d": lambda lib: lib.nn.Linear(3, 2)(lib.tensor(1.0)),
    "Sequential of int": lambda lib: lib.nn.Sequential(5),
    "Sequential index out of range": lambda lib: lib.nn.Sequential(lib.nn.ReLU())[3],
    "Sequential index str": lambda lib: lib.nn.Sequential(lib.nn.ReLU())["a"],
    "Module without forward": lambda lib: lib.nn.Module()(X(lib)),
    "train str": lambda lib: lib.nn.ReLU().train("yes"),
    "train int": lambda lib: lib.nn.ReLU().train(1),
    "ReLU None": lambda lib: lib.nn.ReLU()(None),
    "ReLU inplace on leaf": lambda lib: lib.nn.ReLU(inplace=True)(X(lib, True)),
    "MSELoss bad reduction": lambda lib: lib.nn.MSELoss(reduction="bad")(X(lib), X(lib)),
    "CrossEntropyLoss None target": lambda lib: lib.nn.CrossEntropyLoss()(X(lib), None),
    "Parameter of str": lambda lib: lib.nn.Parameter("a"),
    "Parameter of list": lambda lib: lib.nn.Parameter([1.0]),
    "Parameter of int tensor": lambda lib: lib.nn.Parameter(I(lib)),
    "load_state_dict missing": lambda lib: _linear(lib).load_state_dict({"weight": lib.ones(2, 3)}),
    "load_state_dict unexpected": lambda lib: _linear(lib).load_state_dict(
        {"weight": lib.ones(2, 3), "bias": lib.ones(2), "extra": lib.ones(1)}),
    "load_state_dict size mismatch": lambda lib: _linear(lib).load_state_dict(
        {"weight": lib.ones(3, 3), "bias": lib.ones(2)}),
    "load_state_dict not a mapping": lambda lib: _linear(lib).load_state_dict([1, 2]),
    "load_state_dict value str": lambda lib: _linear(lib).load_state_dict({"weight": "a", "bias": lib.ones(2)}),
    "load_state_dict (valid)": lambda lib: _state(lib),
    "Linear forward (valid)": lambda lib: _linear(lib)(X(lib)),
}


def _linear(lib: Lib) -> Any:
    """Linear(3, 2) with fixed weights, the same in both libraries."""
    m = lib.nn.Linear(3, 2)
    with lib.no_grad():
        m.weight.copy_(lib.tensor([[0.1, 0.2, 0.3], [-0.4, 0.5, -0.6]]))
        m.bias.copy_(lib.tensor([0.25, -0.5]))
    return m


def _state(lib: Lib) -> Any:
    m = _linear(lib)
    m.load_state_dict({"weight": lib.ones(2, 3), "bias": lib.zeros(2)})
    return m(X(lib))


for _label, _fn in NN.items():
    case(f"nn {_label}", _fn, match={
        "Linear in float": "must be tuple of ints,but got float", "Linear out str": "must be tuple of ints",
        "Linear in None": "(?i)must be tuple of ints", "Linear bad dtype": "argument 'dtype' must be",
        "Module without forward": "missing the required \"forward\" function",
        "Parameter of str": "Parameter expects a Tensor, got str",
        "Parameter of list": "Parameter expects a Tensor, got list",
        "Parameter of int tensor": "(?i)only Tensors of floating point",
        "load_state_dict not a mapping": "(?i)expected.*(Mapping|dict)",
    }.get(_label))

TARGET = lambda lib: lib.tensor([0, 2])  # noqa: E731 - class indices for X's rows
LOSSES = {
    "mse_loss None target": lambda lib: lib.F.mse_loss(X(lib), None),
    "mse_loss None input": lambda lib: lib.F.mse_loss(None, X(lib)),
    "mse_loss list target": lambda lib: lib.F.mse_loss(X(lib), [[1.0] * 3] * 2),
    "mse_loss bad reduction": lambda lib: lib.F.mse_loss(X(lib), X(lib), reduction="bad"),
    "mse_loss reduction None": lambda lib: lib.F.mse_loss(X(lib), X(lib), reduction=None),
    "mse_loss int target (valid)": lambda lib: lib.F.mse_loss(X(lib), I(lib)),
    "mse_loss shape mismatch": lambda lib: lib.F.mse_loss(X(lib), lib.ones(2, 4)),
    "mse_loss sum (valid)": lambda lib: lib.F.mse_loss(X(lib), lib.zeros(2, 3), reduction="sum"),
    "mse_loss none (valid)": lambda lib: lib.F.mse_loss(X(lib), lib.zeros(2, 3), reduction="none"),
    "cross_entropy target out of range": lambda lib: lib.F.cross_entropy(X(lib), lib.tensor([0, 5])),
    "cross_entropy negative target": lambda lib: lib.F.cross_entropy(X(lib), lib.tensor([0, -2])),
    "cross_entropy target wrong length": lambda lib: lib.F.cross_entropy(X(lib), lib.tensor([0, 1, 2])),
    "cross_entropy target None": lambda lib: lib.F.cross_entropy(X(lib), None),
    "cross_entropy input None": lambda lib: lib.F.cross_entropy(None, TARGET(lib)),
    "cross_entropy target list": lambda lib: lib.F.cross_entropy(X(lib), [0, 2]),
    "cross_entropy float target wrong shape": lambda lib: lib.F.cross_entropy(X(lib), lib.ones(2)),
    "cross_entropy bool target": lambda lib: lib.F.cross_entropy(X(lib), lib.tensor([True, False])),
    "cross_entropy bad reduction": lambda lib: lib.F.cross_entropy(X(lib), TARGET(lib), reduction="bad"),
    "cross_entropy weight wrong size": lambda lib: lib.F.cross_entropy(X(lib), TARGET(lib), weight=lib.ones(4)),
    "cross_entropy weight list": lambda lib: lib.F.cross_entropy(X(lib), TARGET(lib), weight=[1.0, 1.0, 1.0]),
    "cross_entropy int input": lambda lib: lib.F.cross_entropy(I(lib), TARGET(lib)),
    "cross_entropy 0-d input": lambda lib: lib.F.cross_entropy(lib.tensor(1.0), lib.tensor(0)),
    "cross_entropy ignore_index float": lambda lib: lib.F.cross_entropy(X(lib), TARGET(lib), ignore_index=1.5),
    "cross_entropy probabilities (valid)": lambda lib: lib.F.cross_entropy(X(lib), X(lib).softmax(1)),
    "cross_entropy ignore_index (valid)": lambda lib: lib.F.cross_entropy(X(lib), TARGET(lib), ignore_index=2),
    "cross_entropy 1-d input (valid)": lambda lib: lib.F.cross_entropy(V(lib), lib.tensor(1)),
    "nll_loss target out of range": lambda lib: lib.F.nll_loss(X(lib), lib.tensor([0, 3])),
    "nll_loss float target": lambda lib: lib.F.nll_loss(X(lib), lib.tensor([0.0, 1.0])),
    "nll_loss target wrong batch": lambda lib: lib.F.nll_loss(X(lib), lib.tensor([0])),
    "nll_loss 3-d target wrong shape": lambda lib: lib.F.nll_loss(lib.ones(2, 3, 4), lib.tensor([0, 1])),
    "nll_loss target None": lambda lib: lib.F.nll_loss(X(lib), None),
    "nll_loss bad reduction": lambda lib: lib.F.nll_loss(X(lib), TARGET(lib), reduction="mean "),
    "nll_loss weight wrong size": lambda lib: lib.F.nll_loss(X(lib), TARGET(lib), weight=lib.ones(2)),
    "nll_loss 0-d input": lambda lib: lib.F.nll_loss(lib.tensor(1.0), lib.tensor(0)),
    "nll_loss (valid)": lambda lib: lib.F.nll_loss(X(lib), TARGET(lib)),
    "linear None weight": lambda lib: lib.F.linear(X(lib), None),
    "linear None input": lambda lib: lib.F.linear(None, X(lib)),
    "linear str bias": lambda lib: lib.F.linear(X(lib), X(lib), "b"),
    "linear bias wrong shape": lambda lib: lib.F.linear(X(lib), X(lib), lib.ones(3)),
    "linear 1-d weight (valid)": lambda lib: lib.F.linear(X(lib), V(lib)),
    "linear 3-d weight": lambda lib: lib.F.linear(X(lib), lib.ones(2, 2, 3)),
    "linear list input": lambda lib: lib.F.linear([1.0, 2.0, 3.0], X(lib)),
    "relu None": lambda lib: lib.F.relu(None),
    "relu list": lambda lib: lib.F.relu([1.0]),
    "relu int (valid)": lambda lib: lib.F.relu(I(lib) - 3),
    "softmax None input": lambda lib: lib.F.softmax(None, 0),
    "log_softmax str dim": lambda lib: lib.F.log_softmax(X(lib), "a"),
    "log_softmax int input": lambda lib: lib.F.log_softmax(I(lib), 0),
}
for _label, _fn in LOSSES.items():
    case(f"F.{_label}", _fn, match={
        "mse_loss reduction None": "is not a valid value for reduction",
        "mse_loss None target": "mse_loss\\(\\): argument 'target' \\(position 2\\) must be Tensor, not NoneType",
        "mse_loss None input": "mse_loss\\(\\): argument 'input' \\(position 1\\) must be Tensor, not NoneType",
        "mse_loss list target": "mse_loss\\(\\): argument 'target' \\(position 2\\) must be Tensor, not list",
        "softmax None input": "softmax\\(\\): argument 'input' \\(position 1\\) must be Tensor, not NoneType",
        "cross_entropy target list": "argument 'target' \\(position 2\\) must be Tensor, not list",
        "cross_entropy target None": "argument 'target' \\(position 2\\) must be Tensor, not NoneType",
        "cross_entropy weight list": "argument 'weight' \\(position 3\\) must be Tensor, not list",
        "linear str bias": "argument 'bias' \\(position 3\\) must be Tensor, not str",
        "log_softmax str dim": ".*",
    }.get(_label))


# --------------------------------------------------------------------------- optim
SECTION = "optim"
def _params(lib: Lib) -> list:
    return [X(lib, True)]


OPTIM = {
    "SGD lr negative": lambda lib: lib.optim.SGD(_params(lib), lr=-0.1),
    "SGD lr str": lambda lib: lib.optim.SGD(_params(lib), lr="a"),
    "SGD lr None": lambda lib: lib.optim.SGD(_params(lib), lr=None),
    "SGD empty list": lambda lib: lib.optim.SGD([], lr=0.1),
    "SGD empty generator": lambda lib: lib.optim.SGD(iter([]), lr=0.1),
    "SGD tensor not list": lambda lib: lib.optim.SGD(X(lib, True), lr=0.1),
    "SGD list of floats": lambda lib: lib.optim.SGD([1.0, 2.0], lr=0.1),
    "SGD None in list": lambda lib: lib.optim.SGD([X(lib, True), None], lr=0.1),
    "SGD params None": lambda lib: lib.optim.SGD(None, lr=0.1),
    "SGD params int": lambda lib: lib.optim.SGD(5, lr=0.1),
    "SGD non-leaf": lambda lib: lib.optim.SGD([X(lib, True) * 2], lr=0.1),
    "SGD momentum negative": lambda lib: lib.optim.SGD(_params(lib), lr=0.1, momentum=-0.5),
    "SGD weight_decay negative": lambda lib: lib.optim.SGD(_params(lib), lr=0.1, weight_decay=-1),
    "SGD nesterov without momentum": lambda lib: lib.optim.SGD(_params(lib), lr=0.1, nesterov=True),
    "SGD nesterov with dampening": lambda lib: lib.optim.SGD(_params(lib), lr=0.1, momentum=0.9, dampening=0.1,
                                                               nesterov=True),
    "SGD same param in two groups": lambda lib: _two_groups(lib),
    "SGD group without params": lambda lib: lib.optim.SGD([{"lr": 0.1}]),
    "SGD group params None": lambda lib: lib.optim.SGD([{"params": None}], lr=0.1),
    "SGD group params str": lambda lib: lib.optim.SGD([{"params": "ab"}], lr=0.1),
    "SGD set of params": lambda lib: lib.optim.SGD({X(lib, True)}, lr=0.1),
    "Adam lr negative": lambda lib: lib.optim.Adam(_params(lib), lr=-1.0),
    "Adam beta1 one": lambda lib: lib.optim.Adam(_params(lib), betas=(1.0, 0.999)),
    "Adam beta2 negative": lambda lib: lib.optim.Adam(_params(lib), betas=(0.9, -0.1)),
    "Adam eps negative": lambda lib: lib.optim.Adam(_params(lib), eps=-1e-8),
    "Adam weight_decay negative": lambda lib: lib.optim.Adam(_params(lib), weight_decay=-0.1),
    "Adam empty list": lambda lib: lib.optim.Adam([]),
    "Adam tensor not list": lambda lib: lib.optim.Adam(X(lib, True)),
    "Adam list of ints": lambda lib: lib.optim.Adam([1, 2]),
    "Adam betas str": lambda lib: lib.optim.Adam(_params(lib), betas="ab"),
    "Adam lr str": lambda lib: lib.optim.Adam(_params(lib), lr="a"),
    "SGD step (valid)": lambda lib: _sgd_step(lib),
    "Adam int param": lambda lib: lib.optim.Adam([I(lib)]),
    "add_param_group not a dict": lambda lib: lib.optim.SGD(_params(lib), lr=0.1).add_param_group(X(lib, True)),
}


def _two_groups(lib: Lib) -> Any:
    p = X(lib, True)
    return lib.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def _sgd_step(lib: Lib) -> Any:
    p = X(lib, True)
    opt = lib.optim.SGD([p], lr=0.5, momentum=0.9)
    p.grad = lib.ones(2, 3)
    opt.step()
    opt.step()
    return p.detach()


for _label, _fn in OPTIM.items():
    case(f"optim {_label}", _fn, match={
        "SGD list of floats": "optimizer can only optimize Tensors, but one of the params is float",
        "SGD None in list": "optimizer can only optimize Tensors, but one of the params is NoneType",
        "Adam list of ints": "optimizer can only optimize Tensors, but one of the params is int",
        "SGD params None": ".*", "SGD params int": ".*", "SGD group params None": ".*",
        "SGD group params str": ".*", "SGD group without params": ".*", "Adam betas str": ".*",
        "SGD lr None": ".*", "Adam int param": ".*", "add_param_group not a dict": ".*",
        "SGD set of params": ".*",
    }.get(_label))


# --------------------------------------------------------------------------- functional, gradcheck, checkpoint
SECTION = "functional, gradcheck, checkpoint"
def _sq(x: Any) -> Any:
    return x * x


def _sum_sq(x: Any) -> Any:
    return (x * x).sum()


FUNCTIONAL = {
    "vjp inputs list": lambda lib: lib.functional.vjp(_sq, [X(lib)], X(lib)),
    "vjp inputs None": lambda lib: lib.functional.vjp(_sq, None),
    "vjp inputs float": lambda lib: lib.functional.vjp(_sq, 1.0),
    "vjp v None for non-scalar": lambda lib: lib.functional.vjp(_sq, X(lib)),
    "vjp v wrong shape": lambda lib: lib.functional.vjp(_sq, X(lib), lib.ones(3)),
    "vjp v wrong length": lambda lib: lib.functional.vjp(_sq, X(lib), (lib.ones(2, 3), lib.ones(2, 3))),
    "vjp v list": lambda lib: lib.functional.vjp(_sq, X(lib), [lib.ones(2, 3)]),
    "vjp func returns float": lambda lib: lib.functional.vjp(lambda x: 1.0, X(lib)),
    "vjp func returns list": lambda lib: lib.functional.vjp(lambda x: [x], X(lib), lib.ones(2, 3)),
    "vjp func not callable": lambda lib: lib.functional.vjp(5, X(lib)),
    "vjp (valid)": lambda lib: lib.functional.vjp(_sq, X(lib), lib.ones(2, 3)),
    "jvp v wrong shape": lambda lib: lib.functional.jvp(_sq, X(lib), lib.ones(3)),
    "jvp v None for non-scalar input": lambda lib: lib.functional.jvp(_sq, X(lib)),
    "jvp inputs list": lambda lib: lib.functional.jvp(_sq, [X(lib)], X(lib)),
    "jvp (valid)": lambda lib: lib.functional.jvp(_sq, X(lib), lib.ones(2, 3)),
    "jacobian inputs None": lambda lib: lib.functional.jacobian(_sq, None),
    "jacobian inputs list": lambda lib: lib.functional.jacobian(_sq, [X(lib)]),
    "jacobian func returns list": lambda lib: lib.functional.jacobian(lambda x: [x], X(lib)),
    "jacobian strict independent": lambda lib: lib.functional.jacobian(lambda x: lib.ones(2), V(lib), strict=True),
    "jacobian (valid)": lambda lib: lib.functional.jacobian(_sq, V(lib)),
    "hessian non-scalar": lambda lib: lib.functional.hessian(_sq, V(lib)),
    "hessian inputs list": lambda lib: lib.functional.hessian(_sum_sq, [V(lib)]),
    "hessian func returns float": lambda lib: lib.functional.hessian(lambda x: 1.0, V(lib)),
    "hessian (valid)": lambda lib: lib.functional.hessian(_sum_sq, V(lib)),
    "hvp v wrong shape": lambda lib: lib.functional.hvp(_sum_sq, V(lib), lib.ones(4)),
    "hvp v None": lambda lib: lib.functional.hvp(_sum_sq, V(lib)),
    "hvp non-scalar": lambda lib: lib.functional.hvp(_sq, V(lib), lib.ones(3)),
    "vhp v wrong shape": lambda lib: lib.functional.vhp(_sum_sq, V(lib), lib.ones(4)),
    "vhp (valid)": lambda lib: lib.functional.vhp(_sum_sq, V(lib), lib.ones(3)),
}
for _label, _fn in FUNCTIONAL.items():
    case(f"functional {_label}", lambda lib, f=_fn: lib.wait(f(lib)), match={
        "vjp func not callable": "'int' object is not callable",
    }.get(_label))


def _d(lib: Lib, requires_grad: bool = True) -> Any:
    return lib.tensor([0.5, -1.0, 2.0], dtype=lib.float64, requires_grad=requires_grad)


GRADCHECK = {
    "no input requires grad": lambda lib: lib.gradcheck(_sq, (_d(lib, False),)),
    "inputs None": lambda lib: lib.gradcheck(_sq, None),
    "inputs list of floats": lambda lib: lib.gradcheck(_sq, [1.0, 2.0]),
    "fn not callable": lambda lib: lib.gradcheck(5, (_d(lib),)),
    "fn returns float": lambda lib: lib.gradcheck(lambda x: 1.0, (_d(lib),)),
    "fn returns None": lambda lib: lib.gradcheck(lambda x: None, (_d(lib),)),
    "wrong gradient": lambda lib: lib.gradcheck(_wrong_grad_fn(lib), (_d(lib),)),
    "wrong gradient no raise (valid)": lambda lib: lib.gradcheck(_wrong_grad_fn(lib), (_d(lib),),
                                                                 raise_exception=False),
    "single tensor (valid)": lambda lib: lib.gradcheck(_sq, _d(lib)),
    "list of tensors (valid)": lambda lib: lib.gradcheck(_sq, [_d(lib)]),
    "gradgradcheck no input requires grad": lambda lib: lib.gradgradcheck(_sq, (_d(lib, False),)),
    "gradgradcheck (valid)": lambda lib: lib.gradgradcheck(_sq, (_d(lib),)),
}


def _wrong_grad_fn(lib: Lib) -> Callable:
    class Wrong(lib.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    return Wrong.apply


for _label, _fn in GRADCHECK.items():
    case(f"gradcheck {_label}", lambda lib, f=_fn: lib.wait(f(lib)), match={
        "wrong gradient": "Jacobian mismatch for output 0 with respect to input 0",
        "fn returns float": "gradcheck expects the function to return Tensors, but it returned float",
        "fn returns None": "gradcheck expects the function to return Tensors, but it returned NoneType",
        "fn not callable": "'int' object is not callable",
    }.get(_label))

CHECKPOINT = {
    "fn not callable": lambda lib: lib.checkpoint(5, X(lib, True)),
    "fn raises": lambda lib: lib.checkpoint(lambda x: x.reshape(7), X(lib, True)),
    "fn with wrong arity": lambda lib: lib.checkpoint(lambda x, y: x, X(lib, True)),
}
for _label, _fn in CHECKPOINT.items():
    case(f"checkpoint {_label}", lambda lib, f=_fn: lib.wait(f(lib)), match={
        "fn not callable": "'int' object is not callable",
        "fn with wrong arity": "missing 1 required positional argument: 'y'",
    }.get(_label))


def _checkpoint_grad(lib: Lib) -> Any:
    x = X(lib, True)
    y = lib.wait(lib.checkpoint(lambda t: (t * t).sin(), x))
    lib.wait(y.sum().backward())
    return x.grad


case("checkpoint (valid)", _checkpoint_grad)


# --------------------------------------------------------------------------- function forms, ctx, more optimizers
SECTION = "function forms, ctx, more optimizers"
UNARY = ["exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "abs", "neg", "sign"]
for _fn in UNARY:
    for _label, _value in {"None": None, "list": [1.0, 2.0], "float": 1.5, "str": "a"}.items():
        case(f"{_fn}({_label})", lambda lib, f=_fn, v=_value: getattr(lib, f)(v))
    case(f"{_fn} of int tensor (valid)", lambda lib, f=_fn: getattr(lib, f)(I(lib)))
    case(f"{_fn} of bool tensor", lambda lib, f=_fn: getattr(lib, f)(lib.tensor([True, False])))
FUNCTION_FORMS = {
    "reshape(None, shape)": lambda lib: lib.reshape(None, (2, 3)),
    "reshape(list, shape)": lambda lib: lib.reshape([1.0, 2.0], (2,)),
    "transpose(None)": lambda lib: lib.transpose(None, 0, 1),
    "permute(ndarray)": lambda lib: lib.permute(np.ones((2, 3)), (1, 0)),
    "squeeze(str)": lambda lib: lib.squeeze("a"),
    "unsqueeze(float)": lambda lib: lib.unsqueeze(1.5, 0),
    "flatten(list)": lambda lib: lib.flatten([1.0]),
    "sum(None)": lambda lib: lib.sum(None),
    "mean(list)": lambda lib: lib.mean([1.0, 2.0]),
    "max(None)": lambda lib: lib.max(None),
    "argmax(list)": lambda lib: lib.argmax([1.0, 2.0]),
    "softmax(list)": lambda lib: lib.softmax([1.0, 2.0], 0),
    "log_softmax(None)": lambda lib: lib.log_softmax(None, 0),
    "clamp(None)": lambda lib: lib.clamp(None, min=0.0),
    "clone(list)": lambda lib: lib.clone([1.0]),
    "matmul(None, x)": lambda lib: lib.matmul(None, X(lib)),
}
for _label, _fn in FUNCTION_FORMS.items():
    case(_label, _fn, match={"sum(None)": "sum", "max(None)": "max", "log_softmax(None)": "log_softmax",
                             "softmax(list)": "softmax", "clamp(None)": "clamp"}.get(_label))


def _ctx_misuse(lib: Lib, misuse: Callable) -> Any:
    class Fn(lib.Function):
        @staticmethod
        def forward(ctx, x):
            misuse(ctx, x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    x = X(lib, True)
    lib.wait(Fn.apply(x).sum().backward())
    return x.grad


CTX = {
    "save_for_backward int": lambda ctx, x: ctx.save_for_backward(1),
    "save_for_backward list": lambda ctx, x: ctx.save_for_backward([x]),
    "save_for_backward str": lambda ctx, x: ctx.save_for_backward("a"),
    "save_for_backward None (valid)": lambda ctx, x: ctx.save_for_backward(None),
    "mark_non_differentiable str": lambda ctx, x: ctx.mark_non_differentiable("a"),
}
for _label, _misuse in CTX.items():
    case(f"ctx {_label}", lambda lib, m=_misuse: _ctx_misuse(lib, m), match={
        "mark_non_differentiable str": ".*"}.get(_label))

MORE_OPTIM = {
    "AdamW lr negative": lambda lib: lib.optim.AdamW(_params(lib), lr=-1.0),
    "AdamW beta1 one": lambda lib: lib.optim.AdamW(_params(lib), betas=(1.0, 0.9)),
    "AdamW eps negative": lambda lib: lib.optim.AdamW(_params(lib), eps=-1.0),
    "AdamW weight_decay negative": lambda lib: lib.optim.AdamW(_params(lib), weight_decay=-1.0),
    "AdamW empty": lambda lib: lib.optim.AdamW([]),
    "RMSprop lr negative": lambda lib: lib.optim.RMSprop(_params(lib), lr=-1.0),
    "RMSprop alpha negative": lambda lib: lib.optim.RMSprop(_params(lib), alpha=-0.5),
    "RMSprop momentum negative": lambda lib: lib.optim.RMSprop(_params(lib), momentum=-0.5),
    "RMSprop eps negative": lambda lib: lib.optim.RMSprop(_params(lib), eps=-1.0),
    "RMSprop weight_decay negative": lambda lib: lib.optim.RMSprop(_params(lib), weight_decay=-1.0),
    "Adagrad lr negative": lambda lib: lib.optim.Adagrad(_params(lib), lr=-1.0),
    "Adagrad lr_decay negative": lambda lib: lib.optim.Adagrad(_params(lib), lr_decay=-1.0),
    "Adagrad eps negative": lambda lib: lib.optim.Adagrad(_params(lib), eps=-1.0),
    "Adagrad initial_accumulator_value negative":
        lambda lib: lib.optim.Adagrad(_params(lib), initial_accumulator_value=-1.0),
    "Adagrad tensor not list": lambda lib: lib.optim.Adagrad(X(lib, True)),
    "StepLR not an optimizer": lambda lib: lib.optim.lr_scheduler.StepLR(5, step_size=1),
    "LambdaLR wrong number of lambdas": lambda lib: lib.optim.lr_scheduler.LambdaLR(
        lib.optim.SGD(_params(lib), lr=0.1), [lambda e: 1.0, lambda e: 1.0]),
    "ExponentialLR not an optimizer": lambda lib: lib.optim.lr_scheduler.ExponentialLR(None, gamma=0.5),
    "ReduceLROnPlateau bad mode": lambda lib: lib.optim.lr_scheduler.ReduceLROnPlateau(
        lib.optim.SGD(_params(lib), lr=0.1), mode="sideways"),
    "ReduceLROnPlateau factor 1": lambda lib: lib.optim.lr_scheduler.ReduceLROnPlateau(
        lib.optim.SGD(_params(lib), lr=0.1), factor=1.0),
    "OneCycleLR no total_steps": lambda lib: lib.optim.lr_scheduler.OneCycleLR(
        lib.optim.SGD(_params(lib), lr=0.1), max_lr=1.0),
    "OneCycleLR pct_start 2": lambda lib: lib.optim.lr_scheduler.OneCycleLR(
        lib.optim.SGD(_params(lib), lr=0.1), max_lr=1.0, total_steps=10, pct_start=2.0),
}
for _label, _fn in MORE_OPTIM.items():
    case(f"optim {_label}", _fn, match={
        "StepLR not an optimizer": "is not an Optimizer", "ExponentialLR not an optimizer": "is not an Optimizer",
        "Adagrad tensor not list": "params argument given to the optimizer should be an iterable of Tensors",
    }.get(_label))
ag_only("save to a float path", lambda lib: ag.save({"a": ag.ones(2)}, 3.5), TypeError, "save\\(\\): f must be")
ag_only("load from None", lambda lib: ag.load(None), TypeError, "load\\(\\): f must be")
ag_only("load a missing file", lambda lib: ag.load("/nonexistent/asyncgrad-file"), (OSError, RuntimeError),
        "nonexistent")


# --------------------------------------------------------------------------- asyncgrad-only entry points
SECTION = "asyncgrad-only entry points"
for _setter, _what in ((ag.set_num_workers, "num_workers"), (ag.set_inline_threshold, "threshold")):
    _name = _setter.__name__
    for _label, _args in {"str count": ("cpu", "2"), "float count": ("cpu", 2.5), "None count": ("cpu", None),
                          "bool count": ("cpu", True), "list count": ("cpu", [2]), "negative": ("cpu", -1)}.items():
        ag_only(f"{_name} {_label}", lambda lib, s=_setter, a=_args: s(*a), (TypeError, ValueError),
                _what if _label != "negative" else "at least")
    for _label, _args in {"unknown device": ("tpu", 2), "int device": (5, 2), "bad index": ("sim:x", 2)}.items():
        ag_only(f"{_name} {_label}", lambda lib, s=_setter, a=_args: s(*a), (TypeError, RuntimeError),
                "device")
ag_only("set_num_workers zero", lambda lib: ag.set_num_workers("cpu", 0), ValueError, "num_workers")
for _label, _spec in {"int": 5, "unknown type": "tpu", "bad index": "sim:x", "negative index": "sim:-1",
                      "empty": "", "list": ["cpu"], "trailing colon": "cpu:", "cpu index": "cpu:3"}.items():
    ag_only(f"device {_label}", lambda lib, s=_spec: ag.device(s), (TypeError, RuntimeError), "device")
ag_only("queue_callback not callable", lambda lib: _in_loop(lambda: ag.get_engine().queue_callback(5)),
        (TypeError, RuntimeError), "callback")
ag_only("Sequential of None", lambda lib: ag.nn.Sequential(None), TypeError, "is not a Module subclass")
ag_only("checkpoint nothing requires grad then backward",
        lambda lib: wait(wait(ag.checkpoint(lambda t: t * 2, X(lib))).sum().backward()), RuntimeError,
        "does not require grad")
ag_only("backward_sync inside a running loop", lambda lib: _in_loop(lambda: ag.backward_sync(_loss(lib)[1])),
        RuntimeError, "await")


def _in_loop(fn: Callable) -> Any:
    async def main() -> Any:
        return fn()

    return asyncio.run(main())


# --------------------------------------------------------------------------- the checks
def _run(case: Case, lib: Lib) -> tuple[bool, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return True, case.fn(lib)
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test compares
            return False, exc


def _first_line(exc: BaseException, lib: Lib) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    line = line.replace(lib.dev, "DEV")
    return re.sub(r"\b(torch|asyncgrad|ag)[./]", "", line).strip()


_OVERLOAD = re.compile(r"^(\w+)\(\) received an invalid combination of arguments - got \((.*)\), but expected one "
                       r"of:$")


def _assert_names_the_argument(case: Case, result: BaseException, name: str, got: str) -> None:
    """torch's first line for an overloaded function lists the argument types of the call, not the
    wrong one; asyncgrad's (a TypeError from the same function) names the argument and its type.
    What must agree: the exception type, the function, and a type from torch's list."""
    message = _first_line(result, AG)
    types = {item.split("=")[-1].strip() for item in got.split(",") if item.strip()}
    assert isinstance(result, TypeError) and message.startswith(f"{name}("), (
        f"{case.desc}: torch says {name}() got ({got}); asyncgrad raised {type(result).__name__}: {message}")
    assert "argument '" in message or any(re.search(rf"\b{re.escape(t)}\b", message) for t in types), (
        f"{case.desc}: asyncgrad's {message!r} names none of torch's argument types ({got})")


def _host(value: Any) -> Any:
    """A result in comparable form: arrays for tensors, recursively through tuples and lists."""
    if isinstance(value, (ag.Tensor, torch.Tensor)):
        t = value.detach()
        if isinstance(t, torch.Tensor):
            return np.asarray(t.numpy()) if t.device.type != "meta" else ("meta", tuple(t.shape), str(t.dtype))
        return np.asarray(t.cpu())
    if isinstance(value, (tuple, list)):
        return [_host(v) for v in value] if isinstance(value, list) else tuple(_host(v) for v in value)
    return value


def _dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "").replace("bool_", "bool")


def _assert_same_value(actual: Any, expected: Any, values: bool, where: str = "result") -> None:
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{where}: asyncgrad gave {type(actual).__name__}, torch an array"
        assert actual.shape == expected.shape, f"{where}: shape {actual.shape}, torch {expected.shape}"
        assert _dtype_name(actual.dtype) == _dtype_name(expected.dtype), (
            f"{where}: dtype {actual.dtype}, torch {expected.dtype}")
        if values:
            np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64), rtol=1e-6, atol=1e-7,
                                       err_msg=where)
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), (
            f"{where}: {actual!r} vs torch's {expected!r}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_same_value(a, e, values, f"{where}[{i}]")
    elif isinstance(expected, (bool, int, float, type(None))):
        assert actual == expected or (isinstance(expected, float) and np.isclose(actual, expected)), (
            f"{where}: {actual!r}, torch {expected!r}")


def _is_module_or_optimizer(value: Any) -> bool:
    return isinstance(value, (torch.nn.Module, torch.optim.Optimizer))


def check(case: Case) -> None:
    ok, result = _run(case, AG)
    if not case.torch:
        assert not ok, f"{case.desc}: expected {case.raises}, asyncgrad returned {result!r}"
        assert isinstance(result, case.raises) and not isinstance(result, INTERNAL), (
            f"{case.desc}: expected {case.raises}, got {type(result).__name__}: {result}")
        assert re.search(case.match, str(result)), f"{case.desc}: {result!s} does not match {case.match!r}"
        return
    with torch_defaults():
        t_ok, t_result = _run(case, TORCH)
    if not t_ok:
        assert not ok, f"{case.desc}: torch raised {type(t_result).__name__}: {t_result}, asyncgrad returned {result!r}"
        if isinstance(t_result, TORCH_INTERNAL):
            # torch fails inside its own code here; asyncgrad owes a clear error that names the problem
            assert not isinstance(result, INTERNAL) and case.match is not None, (
                f"{case.desc}: torch's {type(t_result).__name__} is no model; asyncgrad raised "
                f"{type(result).__name__}: {result}")
            assert re.search(case.match, str(result)), f"{case.desc}: {result!s} does not match {case.match!r}"
            return
        overload = _OVERLOAD.match(_first_line(t_result, TORCH))
        if overload is not None and case.match is None:
            _assert_names_the_argument(case, result, *overload.groups())
            return
        same_type = type(result).__name__ == type(t_result).__name__ or (
            type(t_result).__module__ == "builtins" and isinstance(result, type(t_result)))
        assert same_type, (f"{case.desc}: torch raised {type(t_result).__name__}: {t_result}\n"
                           f"asyncgrad raised {type(result).__name__}: {result}")
        if case.match is not None:
            for exc in (result, t_result):
                assert re.search(case.match, str(exc)), f"{case.desc}: {exc!s} does not match {case.match!r}"
        else:
            assert _first_line(result, AG) == _first_line(t_result, TORCH), (
                f"{case.desc}: messages differ\n  asyncgrad: {_first_line(result, AG)}\n"
                f"  torch:     {_first_line(t_result, TORCH)}")
        return
    assert ok, f"{case.desc}: torch returned {t_result!r}, asyncgrad raised {type(result).__name__}: {result}"
    if _is_module_or_optimizer(t_result):
        return
    _assert_same_value(_host(result), _host(t_result), case.values)


class torch_defaults:
    """torch's default dtype set to asyncgrad's while a case runs in torch."""

    def __enter__(self) -> None:
        self.previous = torch.get_default_dtype()
        torch.set_default_dtype(getattr(torch, ag.get_default_dtype().name))

    def __exit__(self, *exc: Any) -> None:
        torch.set_default_dtype(self.previous)


def test_at_least_500_distinct_wrong_calls():
    descriptions = [c.desc for c in CASES]
    duplicates = sorted({d for d in descriptions if descriptions.count(d) > 1})
    assert not duplicates, duplicates
    wrong = [c for c in CASES if "(valid)" not in c.desc]
    assert len(wrong) >= 500, len(wrong)
    assert sum(c.torch for c in CASES) >= 400


SECTIONS = list(dict.fromkeys(c.section for c in CASES))


@pytest.mark.parametrize("section", SECTIONS)
def test_bad_input(section):
    """Every case of one section; all failures reported at once."""
    failures = []
    for c in CASES:
        if c.section != section:
            continue
        try:
            check(c)
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, f"{len(failures)} failing cases:\n" + "\n".join(failures)
