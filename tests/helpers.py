"""The one op-test helper (micrograd/tinygrad's ``helper_test_op``, plus finite differences).

An op test is a function written once against what asyncgrad and torch share: Tensor
methods and operators, or, when its first parameter is named ``lib``, a namespace that
holds the library (``lib.cat``, ``lib.where``, ``lib.maximum``...), its functional module
(``lib.F.linear``, ``lib.F.cross_entropy``) and ``lib.tensor(array)`` for constants
(indices, masks, targets). ``check_op`` then

* builds float64 inputs from shapes (seeded, fixed) or takes given arrays,
* checks asyncgrad's gradients, from ``await ag.grad(...)`` and from ``await out.backward()``,
  against central finite differences of the same function in asyncgrad,
* and, when torch is importable, runs the function on torch tensors and compares values,
  gradients, dtypes, shapes and (optionally) the ``grad_fn`` name.

``check_gradgrad`` does the same for second order: the gradient of ``<u, grad>`` recorded
with ``create_graph=True``, against finite differences of asyncgrad's first-order gradient
and against torch. Without torch every check still runs except the comparison with torch.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import sys
import types
from typing import Any, Callable, Iterator, Sequence

import numpy as np

import asyncgrad as ag
from asyncgrad.ops import nn as ag_functional

try:  # torch is optional: without it only the torch comparison is left out
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None

# pytest (and conftest) run gc.collect() after every test; with torch's ~150k long-lived objects
# that costs ~0.1 s a test. Freezing what imports made keeps it cheap; torch imports more lazily
# (sympy, on some double backwards), which ``_freeze_new_imports`` catches.
gc.freeze()
_modules_seen = [len(sys.modules)]


def _freeze_new_imports() -> None:
    if len(sys.modules) != _modules_seen[0]:
        _modules_seen[0] = len(sys.modules)
        gc.freeze()


EPS = 1e-6
FD_RTOL = 1e-6
FD_ATOL = 1e-6
TORCH_RTOL = 1e-7
TORCH_ATOL = 1e-10


# --------------------------------------------------------------------------- the two libraries
class Lib:
    """What an op test may call besides Tensor methods: the library, ``F``, ``tensor``."""

    def __init__(self, name: str, module: Any, functional: Any, tensor: Callable[[Any], Any]) -> None:
        self.name = name
        self.module = module
        self.F = functional
        self._tensor = tensor

    def tensor(self, value: Any, dtype: Any = None) -> Any:
        """A constant (no grad): indices, masks, targets; a numpy array keeps its dtype."""
        return self._tensor(value, dtype=dtype)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)

    def __repr__(self) -> str:
        return f"Lib({self.name})"


DEVICE = ["cpu"]
"""The device op tests run on: the ``op_device`` fixture (conftest.py) runs every test of the
op modules on ``cpu`` and again on ``sim:0``, whose arrays are array_api_strict's (Note [One
array backend per device] in asyncgrad/devices/backend.py)."""


def ag_tensor(value: Any, dtype: Any = None, requires_grad: bool = False) -> ag.Tensor:
    """``ag.tensor`` on the device under test."""
    return ag.tensor(value, dtype=dtype, device=DEVICE[0], requires_grad=requires_grad)


AG = Lib("asyncgrad", ag, types.SimpleNamespace(
    linear=ag_functional.linear, mse_loss=ag_functional.mse_loss, nll_loss=ag_functional.nll_loss,
    cross_entropy=ag_functional.cross_entropy, relu=ag.relu,
), ag_tensor)

TORCH = Lib("torch", torch, torch.nn.functional, torch.tensor) if torch is not None else None


def has_torch() -> bool:
    return torch is not None


@contextlib.contextmanager
def torch_defaults() -> Iterator[None]:
    """torch's default dtype set to asyncgrad's for the block (other fixtures change it globally)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, ag.get_default_dtype().name))
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def run_torch(fn: Callable, args: Sequence[Any] = ()) -> Any:
    """``fn`` on torch, with torch's defaults matching asyncgrad's."""
    with torch_defaults():
        return call(fn, TORCH, args)


def _takes_lib(fn: Callable) -> bool:
    params = list(inspect.signature(fn).parameters)
    return bool(params) and params[0] == "lib"


def call(fn: Callable, lib: Lib, args: Sequence[Any]) -> Any:
    return fn(lib, *args) if _takes_lib(fn) else fn(*args)


# --------------------------------------------------------------------------- inputs
def make_inputs(inputs: Sequence[Any], seed: int = 0, low: float | None = None, high: float | None = None
                ) -> list[np.ndarray]:
    """float64 arrays: a shape becomes seeded normal values (uniform in [low, high] if given)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in inputs:
        if isinstance(spec, np.ndarray):
            arrays.append(spec.astype(np.float64) if spec.dtype.kind == "f" else spec)
        elif isinstance(spec, (tuple, list)) and all(isinstance(n, int) for n in spec):
            shape = tuple(spec)
            if low is None and high is None:
                arrays.append(rng.standard_normal(shape))
            else:
                arrays.append(rng.uniform(-1.0 if low is None else low, 1.0 if high is None else high, shape))
        else:
            arrays.append(np.asarray(spec, dtype=np.float64))
    return arrays


def _grad_mask(arrays: Sequence[np.ndarray], requires_grad: Sequence[bool] | None) -> list[bool]:
    if requires_grad is None:
        return [a.dtype.kind == "f" for a in arrays]
    return [bool(r) and a.dtype.kind == "f" for a, r in zip(arrays, requires_grad)]


def ag_inputs(arrays: Sequence[np.ndarray], mask: Sequence[bool]) -> list[ag.Tensor]:
    return [ag_tensor(a, requires_grad=m) for a, m in zip(arrays, mask)]


def torch_inputs(arrays: Sequence[np.ndarray], mask: Sequence[bool]) -> list[Any]:
    return [torch.tensor(a, requires_grad=m) for a, m in zip(arrays, mask)]


def _np(t: Any) -> np.ndarray:
    if t is None:
        return None
    if torch is not None and isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return np.asarray(t.detach().cpu() if isinstance(t, ag.Tensor) else t)


def assert_close(actual: Any, expected: Any, rtol: float, atol: float, what: str) -> None:
    actual, expected = _np(actual), _np(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


# --------------------------------------------------------------------------- finite differences
def _forward_value(fn: Callable, arrays: Sequence[np.ndarray], cotangent: np.ndarray) -> float:
    """``<cotangent, fn(inputs)>`` computed by asyncgrad without recording."""
    with ag.no_grad():
        out = call(fn, AG, [ag_tensor(a) for a in arrays])
    return float(np.sum(np.asarray(out.cpu(), dtype=np.float64) * cotangent))


async def finite_difference(f: Callable[[list[np.ndarray]], Any], arrays: Sequence[np.ndarray], index: int,
                            eps: float = EPS) -> np.ndarray:
    """Central differences of the scalar ``f`` (a plain or an async function) w.r.t. ``arrays[index]``."""
    base = [a.copy() for a in arrays]
    target = base[index]
    grad = np.zeros(target.shape, dtype=np.float64)
    flat = target.reshape(-1)
    for j in range(flat.size):
        old = flat[j]
        flat[j] = old + eps
        plus = await _value(f(base))
        flat[j] = old - eps
        minus = await _value(f(base))
        flat[j] = old
        grad.reshape(-1)[j] = (plus - minus) / (2 * eps)
    return grad


async def _value(result: Any) -> float:
    return float(await result) if inspect.isawaitable(result) else float(result)


def _cotangent(shape: tuple[int, ...], seed: int) -> np.ndarray:
    if shape == ():
        return np.ones(())
    return np.random.default_rng(seed + 1000).standard_normal(shape)


# --------------------------------------------------------------------------- first order
async def check_op(fn: Callable, *inputs: Any, requires_grad: Sequence[bool] | None = None, name: str | None = None,
                   torch_name: bool = True, fd: bool = True, torch_check: bool = True, seed: int = 0,
                   dtype: Any = np.float64,
                   low: float | None = None, high: float | None = None, fd_rtol: float = FD_RTOL,
                   fd_atol: float = FD_ATOL, rtol: float = TORCH_RTOL, atol: float = TORCH_ATOL,
                   ) -> tuple[ag.Tensor, tuple[ag.Tensor | None, ...]]:
    """Check ``fn``'s value and gradients (FD and torch); returns asyncgrad's output and gradients.

    ``inputs``: shapes or arrays (float arrays require grad unless ``requires_grad`` says
    otherwise; integer/bool arrays are passed as constant tensors). ``name``: the expected
    ``out.grad_fn.name()``; with ``torch_name`` it must also be torch's. ``dtype``: the output's
    (None: not checked). ``fd=False`` where finite differences are wrong on purpose (a kink,
    a tie, a float32 result); the comparison with torch then carries the check. A non-scalar output
    is differentiated against a fixed random cotangent; a scalar one through the implicit 1.
    """
    arrays = make_inputs(inputs, seed, low, high)
    mask = _grad_mask(arrays, requires_grad)
    assert any(mask), "check_op needs at least one input that requires grad"
    xs = ag_inputs(arrays, mask)
    out = call(fn, AG, xs)
    assert isinstance(out, ag.Tensor), f"expected a Tensor, got {type(out).__name__}"
    assert out.requires_grad and out.grad_fn is not None, "the output is not connected to the graph"
    if name is not None:
        assert out.grad_fn.name() == name, f"grad_fn {out.grad_fn.name()} != {name}"
    if dtype is not None:
        assert out.dtype == dtype, f"output dtype {out.dtype}, expected {np.dtype(dtype)}"
    for i, (x, a) in enumerate(zip(xs, arrays)):
        assert x._version == 0 and np.array_equal(_np(x), a), f"the forward changed input {i}"

    v = _cotangent(out.shape, seed)
    diff = [x for x, m in zip(xs, mask) if m]
    assert out.device is ag.device(DEVICE[0]), f"output on {out.device}, inputs on {DEVICE[0]}"
    grads = await ag.grad(out, diff, grad_outputs=None if out.ndim == 0 else ag_tensor(v), retain_graph=True,
                          allow_unused=True)
    grads = tuple(ag.zeros_like(x) if g is None else g for g, x in zip(grads, diff))
    for g, x in zip(grads, diff):
        assert g.shape == x.shape and g.dtype == x.dtype and not g.requires_grad
        assert x.grad is None, "ag.grad must leave .grad untouched"

    # the same gradients through .backward(), accumulated into .grad
    if out.ndim == 0:
        await out.backward()
    else:
        await out.backward(ag_tensor(v))
    for i, (g, x) in enumerate(zip(grads, diff)):
        assert x.grad is not None, f"input {i} got no .grad from backward()"
        assert_close(x.grad, g, 1e-12, 1e-12, f"backward() .grad of input {i} vs ag.grad")

    if fd:
        positions = [i for i, m in enumerate(mask) if m]
        for g, i in zip(grads, positions):
            expected = await finite_difference(lambda arrs: _forward_value(fn, arrs, v), arrays, i)
            assert_close(g, expected, fd_rtol, fd_atol, f"gradient of input {i} vs finite differences")

    if torch_check and torch is not None:
        txs = torch_inputs(arrays, mask)
        tout = run_torch(fn, txs)
        assert_close(out, tout, rtol, atol, "value vs torch")
        assert np.dtype(str(tout.dtype).replace("torch.", "")) == out.dtype, f"dtype {out.dtype} vs {tout.dtype}"
        if name is not None and torch_name:
            assert tout.grad_fn.name() == out.grad_fn.name(), (
                f"grad_fn {out.grad_fn.name()} != torch's {tout.grad_fn.name()}")
        tdiff = [t for t, m in zip(txs, mask) if m]
        tgrads = torch.autograd.grad(tout, tdiff, grad_outputs=torch.tensor(v), allow_unused=True)
        for i, (g, tg, t) in enumerate(zip(grads, tgrads, tdiff)):
            assert_close(g, torch.zeros_like(t) if tg is None else tg, rtol, atol, f"gradient of input {i} vs torch")
        _freeze_new_imports()
    return out, grads


# --------------------------------------------------------------------------- second order
async def _first_grads(fn: Callable, xs: list, v: Any, create_graph: bool) -> tuple:
    out = call(fn, AG, xs)
    diff = [x for x in xs if x.requires_grad]
    grads = await ag.grad(out, diff, grad_outputs=v, create_graph=create_graph, allow_unused=True)
    return tuple(ag.zeros_like(x) if g is None else g for g, x in zip(grads, diff))


async def check_gradgrad(fn: Callable, *inputs: Any, requires_grad: Sequence[bool] | None = None,
                         torch_check: bool = True, seed: int = 0, low: float | None = None,
                         high: float | None = None, fd_rtol: float = 1e-5, fd_atol: float = 1e-6,
                         rtol: float = TORCH_RTOL, atol: float = TORCH_ATOL, fd: bool = True) -> tuple:
    """Second order: d<u, d<v, fn>/dx>/d(x, v), recorded with create_graph=True.

    The cotangent ``v`` requires grad too, as in torch's gradgradcheck, so the backward
    formula is checked as a function of both the inputs and the incoming gradient. Expected
    values: central differences of asyncgrad's first-order gradient, and torch. ``fd=False``
    where torch's first-order formula is not the derivative (check_op's): torch carries the check.
    """
    arrays = make_inputs(inputs, seed, low, high)
    mask = _grad_mask(arrays, requires_grad)
    xs = ag_inputs(arrays, mask)
    with ag.no_grad():
        out_shape = call(fn, AG, [ag_tensor(a) for a in arrays]).shape
    v_arr = _cotangent(out_shape, seed)
    v = ag_tensor(v_arr, requires_grad=True)
    grads = await _first_grads(fn, xs, v, create_graph=True)
    assert any(g.requires_grad for g in grads), "create_graph=True recorded no graph"
    plain = await _first_grads(fn, ag_inputs(arrays, mask), ag_tensor(v_arr), create_graph=False)
    for i, (g, p) in enumerate(zip(grads, plain)):
        assert_close(g, p, 1e-12, 1e-12, f"create_graph gradient {i} vs plain gradient")

    rng = np.random.default_rng(seed + 2000)
    us = [rng.standard_normal(g.shape) for g in grads]
    terms = [(g * ag_tensor(u)).sum() for g, u in zip(grads, us) if g.requires_grad]
    total = sum(terms[1:], terms[0])
    targets = [x for x in xs if x.requires_grad] + [v]
    second = await ag.grad(total, targets, allow_unused=True)
    second = [ag.zeros_like(t) if s is None else s for s, t in zip(second, targets)]

    positions = [i for i, m in enumerate(mask) if m]

    async def inner(arrs: list[np.ndarray], v_value: np.ndarray) -> float:
        g1 = await _first_grads(fn, ag_inputs(arrs, mask), ag_tensor(v_value), create_graph=False)
        return float(sum(np.sum(_np(g) * u) for g, u in zip(g1, us)))

    for s, i in zip(second, positions if fd else []):
        expected = await finite_difference(lambda arrs: inner(arrs, v_arr), arrays, i)
        assert_close(s, expected, fd_rtol, fd_atol, f"second-order gradient of input {i} vs finite differences")
    expected_v = await finite_difference(lambda vs: inner(arrays, vs[0]), [v_arr], 0)
    assert_close(second[-1], expected_v, fd_rtol, fd_atol, "second-order gradient of the cotangent vs FD")

    if torch_check and torch is not None:
        txs = torch_inputs(arrays, mask)
        tv = torch.tensor(v_arr, requires_grad=True)
        tout = run_torch(fn, txs)
        tdiff = [t for t, m in zip(txs, mask) if m]
        tgrads = torch.autograd.grad(tout, tdiff, grad_outputs=tv, create_graph=True, allow_unused=True)
        ttotal = sum((tg * torch.tensor(u)).sum() for tg, u in zip(tgrads, us) if tg is not None and tg.requires_grad)
        tsecond = [None] * len(tdiff + [tv])
        if isinstance(ttotal, torch.Tensor):
            tsecond = torch.autograd.grad(ttotal, tdiff + [tv], allow_unused=True)
        for i, (s, ts, t) in enumerate(zip(second, tsecond, tdiff + [tv])):
            assert_close(s, torch.zeros_like(t) if ts is None else ts, rtol, atol,
                         f"second-order gradient {i} vs torch")
        _freeze_new_imports()
    return grads, second


# --------------------------------------------------------------------------- errors
def check_raises(fn: Callable, exc_type: type[BaseException], match: str, torch_same: bool = True) -> str:
    """``fn`` (of ``lib``) raises ``exc_type`` with a message matching ``match`` in asyncgrad,
    and, when torch is there and ``torch_same``, in torch too: the wording users search for."""
    import pytest

    with pytest.raises(exc_type, match=match) as info:
        call(fn, AG, [])
    if torch_same and torch is not None:
        with pytest.raises(exc_type, match=match):
            run_torch(fn)
    return str(info.value)


class Boom(ag.Function):
    """A custom Function whose backward raises ``ValueError("boom in backward")``: the error tests' fault."""

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        raise ValueError("boom in backward")


def wait(value: Any) -> Any:
    """An asyncgrad coroutine or EngineCall run to its result in a fresh loop (torch's calls block)."""
    if not inspect.isawaitable(value):
        return value

    async def main() -> Any:
        return await value

    return asyncio.run(main())


async def ticks_during(work: Any) -> int:
    """How many times another coroutine got the loop while ``work`` (an awaitable) was awaited:
    a backward that never yields gives 0."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    start = ticks
    try:
        await work
    finally:
        task.cancel()
    return ticks - start
