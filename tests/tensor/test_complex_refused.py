"""Complex numbers are refused at every entry point, never silently cast (Note [Complex numbers are refused]).

asyncgrad has no complex autograd, and numpy would drop an imaginary part on many paths (a
complex fill into a float array, ``np.exp`` cast back to float32). So every way a complex value
could enter (tensor construction, dtypes, fill values, Python and numpy scalars or arrays mixed
into ops, in-place ops and assignment, conversions, gradients, hooks, custom backwards, layers,
optimizers) must raise a clear error that says "complex"; no call may return, and no ``.grad``
may be written.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from helpers import wait

import asyncgrad as ag

INTERNAL = (AttributeError, KeyError, IndexError, AssertionError, UnboundLocalError, NameError)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)


def X(requires_grad: bool = False) -> ag.Tensor:
    return ag.tensor([[0.5, -1.0, 2.0], [1.5, 3.0, -0.25]], requires_grad=requires_grad)




CONSTRUCTION: dict[str, Callable[[], Any]] = {
    "tensor(python complex)": lambda: ag.tensor(1 + 2j),
    "tensor(list with complex)": lambda: ag.tensor([1.0, 2j]),
    "tensor(nested list with complex)": lambda: ag.tensor([[1.0, 2.0], [3.0, 4j]]),
    "tensor(numpy complex scalar)": lambda: ag.tensor(np.complex64(1j)),
    "tensor(list of numpy complex scalars)": lambda: ag.tensor([np.complex128(1j)]),
    "tensor(complex128 array)": lambda: ag.tensor(np.array([1 + 1j])),
    "tensor(complex64 array)": lambda: ag.tensor(np.zeros(3, dtype=C64)),
    "tensor(complex array with zero imaginary part)": lambda: ag.tensor(np.array([1 + 0j])),
    "tensor(complex array, dtype=float32)": lambda: ag.tensor(np.array([1 + 1j]), dtype=ag.float32),
    "tensor(real data, dtype=complex64)": lambda: ag.tensor([1.0], dtype=C64),
    "tensor(real data, dtype=np.complex128)": lambda: ag.tensor([1.0], dtype=np.complex128),
    "tensor(real data, dtype='complex64')": lambda: ag.tensor([1.0], dtype="complex64"),
    "tensor(real data, dtype=complex)": lambda: ag.tensor([1.0], dtype=complex),
    "Tensor(complex list)": lambda: ag.Tensor([1j]),
    "tensor(complex, requires_grad)": lambda: ag.tensor([1j], requires_grad=True),
    "tensor(complex, device sim)": lambda: ag.tensor([1j], device="sim:0"),
    "from_numpy(complex64)": lambda: ag.from_numpy(np.ones(2, dtype=C64)),
    "from_numpy(complex128)": lambda: ag.from_numpy(np.ones(2, dtype=C128)),
    "zeros(dtype=complex64)": lambda: ag.zeros(2, dtype=C64),
    "ones(dtype=complex128)": lambda: ag.ones(2, dtype=C128),
    "empty(dtype=complex64)": lambda: ag.empty(2, dtype=C64),
    "full(complex fill)": lambda: ag.full((2,), 1 + 2j),
    "full(numpy complex fill)": lambda: ag.full((2,), np.complex64(1j)),
    "full(complex fill, dtype=float32)": lambda: ag.full((2,), 1 + 2j, dtype=ag.float32),
    "full(real fill, dtype=complex64)": lambda: ag.full((2,), 1.0, dtype=C64),
    "eye(dtype=complex64)": lambda: ag.eye(2, dtype=C64),
    "arange(complex end)": lambda: ag.arange(1j),
    "arange(complex step)": lambda: ag.arange(0, 3, 1j),
    "arange(dtype=complex64)": lambda: ag.arange(3, dtype=C64),
    "linspace(complex end)": lambda: ag.linspace(0, 1j, 3),
    "linspace(dtype=complex64)": lambda: ag.linspace(0, 1, 3, dtype=C64),
    "randn(dtype=complex64)": lambda: ag.randn(2, dtype=C64),
    "rand(dtype=complex128)": lambda: ag.rand(2, dtype=C128),
    "randint(dtype=complex64)": lambda: ag.randint(0, 3, (2,), dtype=C64),
    "zeros_like(dtype=complex64)": lambda: ag.zeros_like(X(), dtype=C64),
    "ones_like(dtype=complex64)": lambda: ag.ones_like(X(), dtype=C64),
    "full_like(complex fill)": lambda: ag.full_like(X(), 1j),
    "randn_like(dtype=complex64)": lambda: ag.randn_like(X(), dtype=C64),
    "rand_like(dtype=complex128)": lambda: ag.rand_like(X(), dtype=C128),
    "empty_like(dtype=complex64)": lambda: ag.empty_like(X(), dtype=C64),
    "nn.Linear(dtype=complex64)": lambda: ag.nn.Linear(2, 2, dtype=C64),
    "nn.Parameter(complex tensor)": lambda: ag.nn.Parameter(ag.tensor([1j])),
    "set_default_dtype(complex64)": lambda: ag.set_default_dtype(C64),
}

COMPLEX_OPERANDS = {"python": 1j, "numpy scalar": np.complex128(2j), "numpy complex64 scalar": np.complex64(1 + 1j),
                    "numpy array": np.array([1j, 2j, 3j]), "list": [1j, 0.0, 1.0], "zero imaginary": 1 + 0j}
BINARY = {
    "x + c": lambda x, c: x + c, "c + x": lambda x, c: c + x, "x - c": lambda x, c: x - c,
    "c - x": lambda x, c: c - x, "x * c": lambda x, c: x * c, "c * x": lambda x, c: c * x,
    "x / c": lambda x, c: x / c, "c / x": lambda x, c: c / x, "x ** c": lambda x, c: x ** c,
    "c ** x": lambda x, c: c ** x, "x < c": lambda x, c: x < c, "x == c": lambda x, c: x == c,
    "add(x, c)": lambda x, c: ag.add(x, c), "mul(x, c)": lambda x, c: ag.mul(x, c),
    "maximum(x, c)": lambda x, c: ag.maximum(x, c), "minimum(x, c)": lambda x, c: ag.minimum(x, c),
    "where(mask, x, c)": lambda x, c: ag.where(x > 0, x, c), "where(mask, c, x)": lambda x, c: ag.where(x > 0, c, x),
    "x.add_(c)": lambda x, c: x.add_(c), "x.mul_(c)": lambda x, c: x.mul_(c), "x += c": lambda x, c: x.__iadd__(c),
    "x.fill_(c)": lambda x, c: x.fill_(c) if np.ndim(c) == 0 else x.fill_(np.asarray(c).reshape(-1)[0]),
    "x[0] = c": lambda x, c: x.__setitem__(0, c), "x[[0]] = c": lambda x, c: x.__setitem__([0], c),
    "x.clamp(min=c)": lambda x, c: x.clamp(min=c) if np.ndim(c) == 0 else x.clamp(min=np.asarray(c)[0]),
}


def _ops_cases() -> dict[str, Callable[[], Any]]:
    cases = {}
    for op_name, op in BINARY.items():
        for c_name, c in COMPLEX_OPERANDS.items():
            if op_name.startswith(("x.fill_", "x.clamp")) and c_name in ("numpy array", "list"):
                continue
            if op_name.startswith("x[") and c_name == "list":  # torch refuses any list there ("can't assign")
                continue
            cases[f"{op_name} with {c_name} complex"] = lambda op=op, c=c: op(X()[0], c)
    return cases


CONVERSIONS = {
    "x.to(complex64)": lambda: X().to(C64),
    "x.to(np.complex128)": lambda: X().to(np.complex128),
    "x.to(dtype='complex64')": lambda: X().to(dtype="complex64"),
    "x.to('sim:0', complex64)": lambda: X().to("sim:0", C64),
    "x.sum(dtype=complex64)": lambda: X().sum(dtype=C64),
    "x.requires_grad.to(complex64)": lambda: X(True).to(C64),
}


def _backward_with(gradient: Any) -> ag.Tensor:
    x = X(True)
    try:
        wait((x * 2).backward(gradient))
    finally:
        assert x._grad is None, "a complex gradient reached .grad"
    return x


def _hook_returning(value: Callable[[ag.Tensor], Any], leaf: bool) -> Any:
    x = X(True)
    target = x if leaf else x * 1.0
    target.register_hook(value)
    try:
        wait((target * 2).sum().backward())
    finally:
        assert x._grad is None, "a hook's complex result reached .grad"


def _function_returning(value: Callable[[ag.Tensor], Any]) -> Any:
    class Fn(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return value(g)

    x = X(True)
    try:
        wait(Fn.apply(x).sum().backward())
    finally:
        assert x._grad is None, "a custom backward's complex result reached .grad"


GRADIENTS = {
    "backward(gradient=complex array)": lambda: _backward_with(np.ones((2, 3), dtype=C64)),
    "backward(gradient=python complex)": lambda: _backward_with(1j),
    "autograd.backward(grad_tensors=[complex array])":
        lambda: wait(ag.backward([X(True) * 2], [np.ones((2, 3), dtype=C128)])),
    "grad(grad_outputs=complex array)":
        lambda: wait(ag.grad(X(True) * 2, X(True), np.ones((2, 3), dtype=C128))),
    "leaf hook returns complex array": lambda: _hook_returning(lambda g: np.ones((2, 3), dtype=C64), True),
    "leaf hook returns python complex": lambda: _hook_returning(lambda g: 1j, True),
    "leaf hook returns g * 1j": lambda: _hook_returning(lambda g: g * 1j, True),
    "non-leaf hook returns complex array": lambda: _hook_returning(lambda g: np.ones((2, 3), dtype=C64), False),
    "non-leaf hook returns g * 1j": lambda: _hook_returning(lambda g: g * 1j, False),
    "custom backward returns complex array": lambda: _function_returning(lambda g: np.ones((2, 3), dtype=C64)),
    "custom backward returns g * 1j": lambda: _function_returning(lambda g: g * 1j),
    "custom forward returns x * 1j": lambda: _custom_forward(),
    "optim.SGD(lr=1j)": lambda: ag.optim.SGD([X(True)], lr=1j),
    "optim.Adam(lr=1j)": lambda: ag.optim.Adam([X(True)], lr=1j),
    "functional.vjp(v=complex array)": lambda: wait(ag.functional.vjp(lambda t: t * 2, X(), np.ones((2, 3), C64))),
    "mse_loss(x, complex array)": lambda: ag.nn.functional.mse_loss(X(), np.ones((2, 3), dtype=C64)),
    "grad setter complex array": lambda: setattr(X(True), "grad", np.ones((2, 3), dtype=C64)),
}


def _custom_forward() -> Any:
    class Fn(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1j

        @staticmethod
        def backward(ctx, g):
            return g

    return Fn.apply(X(True))


CASES = {**CONSTRUCTION, **_ops_cases(), **CONVERSIONS, **GRADIENTS}


@pytest.mark.parametrize("group", ["construction", "ops", "conversions", "gradients"])
def test_complex_is_refused_everywhere(group):
    """Each call raises a TypeError that says "complex" (or, for a gradient of the wrong kind,
    torch's TypeError/RuntimeError), never an internal error, never a result."""
    cases = {"construction": CONSTRUCTION, "ops": _ops_cases(), "conversions": CONVERSIONS,
             "gradients": GRADIENTS}[group]
    failures = []
    for name, fn in cases.items():
        try:
            result = fn()
        except (TypeError, RuntimeError, ValueError) as exc:
            if isinstance(exc, INTERNAL):
                failures.append(f"{name}: internal {type(exc).__name__}: {exc}")
            elif group != "gradients" and "complex" not in str(exc):
                failures.append(f"{name}: {type(exc).__name__} does not say complex: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - any other exception is a failure to report
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        failures.append(f"{name}: returned {result!r} instead of raising")
    assert not failures, f"{len(failures)} of {len(cases)}:\n" + "\n".join(failures)


def test_refusal_names_the_way_out():
    """The message tells the user what to do instead (two real tensors)."""
    with pytest.raises(TypeError, match=r"does not support complex tensors \(got complex64\).*a\.real.*a\.imag"):
        ag.tensor(np.ones(2, dtype=C64))


def test_there_are_many_entry_points():
    assert len(CASES) >= 150, len(CASES)


def test_no_tensor_ever_holds_complex_data():
    """A sweep over every public factory and op that returns a tensor from real input: none is complex."""
    x = X(True)
    results = [x * 2, x + 1, x.abs() ** 0.5, ag.exp(x), ag.log(x.abs() + 1), ag.sqrt(x.abs()), ag.sin(x), ag.cos(x),
               ag.tanh(x), ag.sigmoid(x), x.softmax(1), x.log_softmax(1), x.sum(), x.mean(), x @ x.T,
               ag.full((2,), 2), ag.arange(3.0), ag.linspace(0, 1, 3), ag.randn(2)]
    for r in results:
        assert r.dtype.kind != "c", r


def test_real_values_are_untouched_next_to_refusals():
    """A refused complex op leaves its operand as it was (no partial in-place write)."""
    x = X()
    before = x.numpy().copy()
    for op in (lambda: x.add_(1j), lambda: x.__setitem__(0, 1j), lambda: x.fill_(2j), lambda: x.mul_(np.array(1j))):
        with pytest.raises(TypeError, match="complex"):
            op()
        np.testing.assert_array_equal(x.numpy(), before)
    assert x._version == 0
