"""gradcheck / gradgradcheck: analytical gradients against central finite differences, as
torch's slow mode (``torch/autograd/gradcheck.py``), with its checks and its words.

Design: docs/design/gradcheck.md.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from typing import Any, Callable

import numpy as np

from asyncgrad import factories
from asyncgrad._validate import type_label
from asyncgrad.autograd.api import call_plain, grad
from asyncgrad.autograd.awaitable import require_asyncio
from asyncgrad.autograd.function import Function
from asyncgrad.autograd.grad_mode import enable_grad
from asyncgrad.tensor import Tensor

# Note [gradcheck as torch]: what torch's slow gradcheck does, asyncgrad's does, in its order:
#
# * the inputs: a Tensor, a tuple or a list; at least one requiring grad (ValueError), a warning
#   for each one that requires grad and is not float64;
# * the numerical Jacobian calls ``fn`` in the caller's grad mode, as torch does (so a function
#   that registers a hook on an intermediate works), perturbing each element of each input by
#   ``±eps`` in place (no version bump, as torch's ``.data``) and copying the outputs before the
#   next perturbation: an output that aliases its input (``t[:]``, ``t``) would otherwise change
#   under the next perturbation and give a false mismatch;
# * no differentiable output: the numerical Jacobian must be zero ("Numerical gradient for
#   function expected to be zero");
# * per differentiable output, the analytical Jacobian one row at a time (``grad`` with a one-hot
#   ``grad_output``), twice: rows that differ by more than ``nondet_tol`` are "Backward is not
#   reentrant"; wrong gradient sizes (and, with ``check_grad_dtypes``, dtypes) are refused; then
#   each (output, input) pair is compared with ``allclose(analytical, numerical, rtol, atol)``
#   ("Jacobian mismatch for output i with respect to input j", both Jacobians printed as tensors);
# * ``backward`` must be multiplied by ``grad_output`` (zero ``grad_outputs`` give zero gradients);
# * ``check_undefined_grad``: with the outputs' gradients undefined (``None``, an identity Function
#   whose backward returns None), the gradients must be None or zero.
#
# ``raise_exception=False`` turns a GradcheckError into ``False`` (other errors still raise, as
# torch). ``check_batched_grad=True`` needs vmap, which asyncgrad does not have (Note [No vmap, no
# forward mode] in functional.py): computing the batch with a loop would compare each vector-
# Jacobian product with itself and check nothing, so it is refused with a NotImplementedError.


class GradcheckError(RuntimeError):
    """Raised by gradcheck/gradgradcheck when the two Jacobians disagree."""


_FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations i.e., it is listed here:
https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html
this failure might be expected.

If you are adding a new operator, please file an issue and then use one of the
workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.
If the test
- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck
  with `nondet_tol=<tol>` as a keyword argument.
- is OpInfo-based (e.g., in test_ops_gradients.py), then modify the OpInfo for the test
  to have `gradcheck_nondet_tol=<tol>`.
- is a Module test (e.g., in common_nn.py), then modify the corresponding
  module_test entry to have `gradcheck_nondet_tol=<tol>`
"""

_NO_BATCHED_GRAD = (
    "gradcheck(check_batched_grad=True) needs vmap (batched backward formulas), which asyncgrad does not have; "
    "a loop over the batch would compare each vector-Jacobian product with itself and check nothing: use "
    "check_batched_grad=False")


def _user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning given by this function's caller point at the
    innermost line outside asyncgrad (the user's call of gradcheck, however deep the check is)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _as_tuple(value: Any) -> tuple:
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    return (value,)


async def _outputs(fn: Callable, inputs: tuple) -> tuple:
    """``fn(*inputs)`` as a tuple, in the caller's grad mode (Note [gradcheck as torch]).
    A plain fn may call grad_sync (Note [Sync bridge])."""
    result = await call_plain(fn, *inputs)
    if inspect.isawaitable(result):
        result = await result
    result = _as_tuple(result)
    for out in result:
        if not isinstance(out, Tensor):  # a number would make every check pass vacuously
            raise TypeError(f"gradcheck expects the function to return Tensors, but it returned {type_label(out)}")
    return result


def _host64(t: Tensor) -> np.ndarray:
    """A tensor's values on the host, flat, in float64, always a copy (an output may alias an input
    that is perturbed next)."""
    return np.array(t.device.to_host(t.data), dtype=np.float64).reshape(-1)


def _check_inputs(inputs: tuple) -> None:
    """torch's ``_check_inputs``: a warning per non-double input requiring grad, and at least one."""
    any_requiring = False
    for i, t in enumerate(inputs):
        if isinstance(t, Tensor) and t.requires_grad:
            if t.dtype != np.float64:
                warnings.warn(
                    f"Input #{i} requires gradient and is not a double precision floating point or complex. This "
                    "check will likely fail if all the inputs are not of double precision floating point or complex. ",
                    UserWarning, stacklevel=_user_stacklevel())
            any_requiring = True
    if not any_requiring:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")


def _floating(t: Tensor) -> bool:
    return t.dtype.kind in "fc"


async def _numerical(fn: Callable, inputs: tuple, outputs: tuple, eps: float) -> list[list[np.ndarray]]:
    """jac[i][j]: d output j / d differentiable input i, shape (input numel, output numel), for
    every floating output (torch's ``_get_numerical_jacobian``)."""
    floating = [j for j, o in enumerate(outputs) if _floating(o)]
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    jac = [[np.zeros((inputs[i].numel(), outputs[j].numel())) for j in floating] for i in diff]
    for row, i in enumerate(diff):
        data, backend = inputs[i].data, inputs[i].device.backend
        original = np.array(backend.to_host(data))
        for k, index in enumerate(np.ndindex(data.shape)):
            orig = original[index].item()
            values = []
            for sign in (-1, 1):
                backend.setitem(data, index, orig + sign * eps)
                try:  # copied before the input changes again: an output may alias it
                    outs = await _outputs(fn, inputs)
                    values.append([_host64(outs[j]) for j in floating])
                finally:
                    backend.setitem(data, index, orig)
            for col, (minus, plus) in enumerate(zip(*values)):
                jac[row][col][k] = (plus - minus) / (2 * eps)
    return jac


async def _analytical_rows(output: Tensor, diff: list[Tensor]) -> list[list[Any]]:
    """rows[i][k]: the gradient of element k of ``output`` with respect to ``diff[i]`` (or None),
    from ``grad`` with a one-hot ``grad_output`` (torch's ``_compute_analytical_jacobian_rows``)."""
    rows: list[list[Any]] = [[] for _ in diff]
    onehot = np.zeros(output.numel())
    for k in range(output.numel()):
        onehot[:] = 0.0
        onehot[k] = 1.0
        grad_output = Tensor(onehot.reshape(output.shape), dtype=output.dtype, device=output.device)
        grads = await grad(output, diff, grad_output, retain_graph=True, allow_unused=True)
        for i, g in enumerate(grads):  # copied to the host at once, as torch clones each row
            rows[i].append(None if g is None else (g.shape, g.dtype, _host64(g)))
    return rows


def _stack(rows: list[list[Any]], diff: list[Tensor], numel: int) -> tuple[list[np.ndarray], bool, bool]:
    """torch's ``_stack_and_check_tensors``: the Jacobians, and whether sizes and dtypes were right."""
    jacobians, sizes_ok, types_ok = [], True, True
    for inp, row in zip(diff, rows):
        jac = np.zeros((inp.numel(), numel))
        for k, g in enumerate(row):
            if g is None:
                continue
            shape, dtype, flat = g
            if shape != inp.shape:
                sizes_ok = False
            elif dtype != inp.dtype:
                types_ok = False
            if flat.size == inp.numel():
                jac[:, k] = flat
        jacobians.append(jac)
    return jacobians, sizes_ok, types_ok


async def _analytical(output: Tensor, diff: list[Tensor], nondet_tol: float,
                      check_grad_dtypes: bool) -> list[np.ndarray]:
    """torch's ``_check_analytical_jacobian_attributes``: every row computed twice (reentrancy)."""
    first, types_ok, sizes_ok = _stack(await _analytical_rows(output, diff), diff, output.numel())
    second = _stack(await _analytical_rows(output, diff), diff, output.numel())[0]
    reentrant = all(a.size == 0 or np.abs(a - b).max() <= nondet_tol for a, b in zip(first, second))
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same input and grad_output multiple times gives "
            "different values, although analytical gradient matches numerical gradient."
            f"The tolerance for nondeterminism was {nondet_tol}." + _FAILED_NONDET_MSG)
    return first


def _printed(jacobian: np.ndarray, like: Tensor) -> Tensor:
    """A Jacobian as torch prints it in its message: a tensor of the given tensor's dtype."""
    return Tensor(jacobian, dtype=like.dtype)


async def _check_mul_by_grad_output(outputs: tuple, diff: list[Tensor]) -> None:
    """torch's ``_test_backward_mul_by_grad_output``."""
    grads = await grad(list(outputs), diff, [factories.zeros_like(o) for o in outputs], allow_unused=True)
    for g, d in zip(grads, diff):
        if g is None:
            continue
        if np.any(np.asarray(g.device.to_host(g.data)) != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if g.dtype != d.dtype:
            raise GradcheckError("grad is incorrect type")
        if g.device is not d.device:
            raise GradcheckError("grad is incorrect device")
        if g.shape != d.shape:
            raise GradcheckError("grad is incorrect size")


class _UndefinedGrad(Function):
    """torch's ``UndefinedGrad``: the identity, whose backward hands on an undefined gradient."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> None:
        return None


def _warn_bc_breaking() -> None:
    warnings.warn(
        "Backwards compatibility: New undefined gradient support checking feature is enabled by default, but it may "
        "break existing callers of this function. If this is true for you, you can call this function with "
        '"check_undefined_grad=False" to disable the feature', UserWarning, stacklevel=_user_stacklevel())


async def _check_undefined_grad(fn: Callable, inputs: tuple, diff: list[Tensor]) -> None:
    """torch's ``_test_undefined_backward_mode``: all outputs' gradients undefined, then (with
    several outputs) each one in turn."""

    async def differentiable() -> list[Tensor]:
        with enable_grad():
            return [o for o in await _outputs(fn, inputs) if o.requires_grad]

    first = await differentiable()
    to_check = [[_UndefinedGrad.apply(o) for o in first]]
    if len(first) > 1:
        for undefined in range(len(first)):
            outs = await differentiable()
            to_check.append([_UndefinedGrad.apply(o) if i == undefined else o for i, o in enumerate(outs)])
    for outs in to_check:
        try:
            grads = await grad(outs, diff, [factories.zeros_like(o) for o in outs], allow_unused=True)
        except RuntimeError as exc:
            _warn_bc_breaking()
            raise GradcheckError(
                "Expected backward function to handle undefined output grads. Please look at \"Notes about undefined "
                "output gradients\" in \"tools/autograd/derivatives.yaml\"") from exc
        for g in grads:
            if g is not None and np.any(np.asarray(g.device.to_host(g.data)) != 0):
                _warn_bc_breaking()
                raise GradcheckError(
                    "Expected all input grads to be undefined or zero when all output grads are undefined or zero. "
                    "Please look at \"Notes about undefined output gradients\" in \"tools/autograd/derivatives.yaml\"")


async def _gradcheck(fn: Callable, inputs: tuple, eps: float, atol: float, rtol: float, nondet_tol: float,
                     check_undefined_grad: bool, check_grad_dtypes: bool) -> bool:
    func_out = await _outputs(fn, inputs)
    outputs = tuple(o for o in func_out if o.requires_grad)
    diff = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    if not outputs:
        for row in await _numerical(fn, inputs, func_out, eps):
            for jac in row:
                if np.any(jac != 0):
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    numerical = await _numerical(fn, inputs, func_out, eps)
    floating = [o for o in func_out if _floating(o)]
    by_output = [[numerical[i][j] for i in range(len(diff))] for j, o in enumerate(floating) if o.requires_grad]
    for i, out in enumerate(outputs):
        analytical = await _analytical(out, diff, nondet_tol, check_grad_dtypes)
        for j, (a, n) in enumerate(zip(analytical, by_output[i])):
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                raise GradcheckError(
                    f"Jacobian mismatch for output {i:d} with respect to input {j:d},\n"
                    f"numerical:{_printed(n, out)}\nanalytical:{_printed(a, diff[j])}\n")
    await _check_mul_by_grad_output(outputs, diff)
    if check_undefined_grad:
        await _check_undefined_grad(fn, inputs, diff)
    return True


async def gradcheck(fn: Callable, inputs: Any, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                    raise_exception: bool = True, nondet_tol: float = 0.0, check_undefined_grad: bool = True,
                    check_grad_dtypes: bool = False, check_batched_grad: bool = False) -> bool:
    """True when ``fn``'s gradients match finite differences; else raise GradcheckError (or
    return False with ``raise_exception=False``). Note [gradcheck as torch]."""
    require_asyncio("gradcheck()")  # before the finite differences, not after (Note [asyncio only])
    if check_batched_grad:
        raise NotImplementedError(_NO_BATCHED_GRAD)
    inputs = _as_tuple(inputs)
    _check_inputs(inputs)
    try:
        return await _gradcheck(fn, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad, check_grad_dtypes)
    except GradcheckError:
        if raise_exception:
            raise
        return False


async def gradgradcheck(fn: Callable, inputs: Any, grad_outputs: Any = None, eps: float = 1e-6, atol: float = 1e-5,
                        rtol: float = 1e-3, raise_exception: bool = True, nondet_tol: float = 0.0,
                        check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                        check_batched_grad: bool = False) -> bool:
    """gradcheck of the vector-Jacobian product of ``fn`` (second derivatives), as torch's: random
    ``grad_outputs`` in [-1, 1) unless given, then ``gradcheck`` of ``(inputs, grad_outputs) ->
    grad(fn(inputs), inputs, grad_outputs, create_graph=True)``."""
    require_asyncio("gradgradcheck()")
    if check_batched_grad:
        raise NotImplementedError(_NO_BATCHED_GRAD.replace("gradcheck(", "gradgradcheck("))
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = [o for o in await _outputs(fn, inputs) if o.requires_grad]
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            Tensor(rng.uniform(-1.0, 1.0, o.shape), dtype=o.dtype if _floating(o) else np.float64, device=o.device,
                   requires_grad=True) for o in outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_out = len(grad_outputs)
    diff_inputs = {i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad}

    async def vjp_fn(*args: Any) -> tuple:
        ins, gos = args[:len(args) - n_out], args[len(args) - n_out:]
        outs = [o for o in await _outputs(fn, ins) if o.requires_grad]
        diff = [t for i, t in enumerate(ins) if i in diff_inputs]
        grads = await grad(outs, diff, list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return await gradcheck(vjp_fn, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                           raise_exception=raise_exception, nondet_tol=nondet_tol,
                           check_undefined_grad=check_undefined_grad, check_grad_dtypes=check_grad_dtypes)
