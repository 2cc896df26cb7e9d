"""gradcheck / gradgradcheck: analytical gradients against central finite differences.

Both run on any device: inputs are perturbed in place through their device's backend, and
outputs and gradients are copied to the host (``to_host``) to build float64 Jacobians there.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from asyncgrad._validate import type_label
from asyncgrad.autograd.api import call_plain, grad
from asyncgrad.autograd.awaitable import require_asyncio
from asyncgrad.autograd.grad_mode import enable_grad, no_grad
from asyncgrad.tensor import Tensor


class GradcheckError(RuntimeError):
    """Raised by gradcheck/gradgradcheck when the two Jacobians disagree."""


async def _outputs(fn: Callable, inputs: tuple) -> tuple:
    result = await call_plain(fn, *inputs)  # a plain fn may call grad_sync (Note [Sync bridge])
    if inspect.isawaitable(result):
        result = await result
    result = result if isinstance(result, tuple) else (result,)
    for out in result:
        if not isinstance(out, Tensor):  # a number would make every check pass vacuously
            raise TypeError(f"gradcheck expects the function to return Tensors, but it returned {type_label(out)}")
    return result


def _host64(t: Tensor) -> np.ndarray:
    """A tensor's values on the host, flat, in float64 (an explicit copy off an accelerator)."""
    return np.asarray(t.device.to_host(t.data), dtype=np.float64).reshape(-1)


def _checked_inputs(inputs: Any) -> tuple:
    """gradcheck's inputs as a tuple (a Tensor, a tuple or a list), at least one requiring grad."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    if not any(isinstance(t, Tensor) and t.requires_grad for t in inputs):
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of them have "
                         "requires_grad=True.")
    return inputs


async def _numerical(fn: Callable, inputs: tuple, eps: float) -> list[list[np.ndarray]]:
    """jac[i][j]: d output j / d input i, shape (input numel, output numel)."""
    with no_grad():
        base = await _outputs(fn, inputs)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    jac = [[np.zeros((inputs[i].numel(), o.numel())) for o in base if isinstance(o, Tensor)] for i in diff]
    for row, i in enumerate(diff):
        data, backend = inputs[i].data, inputs[i].device.backend
        original = np.array(backend.to_host(data))
        for k, index in enumerate(np.ndindex(data.shape)):
            orig = original[index].item()
            values = []
            for sign in (1, -1):
                backend.setitem(data, index, orig + sign * eps)
                with no_grad():
                    values.append([_host64(o) for o in await _outputs(fn, inputs) if isinstance(o, Tensor)])
            backend.setitem(data, index, orig)
            for j, (plus, minus) in enumerate(zip(*values)):
                jac[row][j][k] = (plus - minus) / (2 * eps)
    return jac


async def _analytical(fn: Callable, inputs: tuple) -> list[list[np.ndarray]]:
    with enable_grad():
        outputs = [o for o in await _outputs(fn, inputs) if isinstance(o, Tensor)]
    diff = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    jac = [[np.zeros((t.numel(), o.numel())) for o in outputs] for t in diff]
    for j, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        flat = out.reshape(-1)
        for k in range(flat.numel()):
            grads = await grad(flat[k], diff, retain_graph=True, allow_unused=True)
            for row, g in enumerate(grads):
                if g is not None:
                    jac[row][j][:, k] = _host64(g)
    return jac


async def gradcheck(fn: Callable, inputs: Any, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                    raise_exception: bool = True) -> bool:
    """True when ``fn``'s gradients match finite differences; else raise (or return False)."""
    require_asyncio("gradcheck()")  # before the finite differences, not after (Note [asyncio only])
    inputs = _checked_inputs(inputs)
    for t in inputs:
        if isinstance(t, Tensor) and t.requires_grad and t.dtype != np.float64:
            import warnings

            warnings.warn(
                "Input #0 requires gradient and is not a double precision floating point. This check will likely "
                "fail if all the inputs are not of double precision floating point. ", UserWarning, stacklevel=2)
    numerical = await _numerical(fn, inputs, eps)
    analytical = await _analytical(fn, inputs)
    for i, (num_row, ana_row) in enumerate(zip(numerical, analytical)):
        for j, (num, ana) in enumerate(zip(num_row, ana_row)):
            if not np.allclose(ana, num, rtol=rtol, atol=atol):
                if not raise_exception:
                    return False
                raise GradcheckError(
                    f"Jacobian mismatch for output {j} with respect to input {i},\n"
                    f"numerical:{num}\nanalytical:{ana}\n")
    return True


async def gradgradcheck(fn: Callable, inputs: Any, grad_outputs: Any = None, eps: float = 1e-6, atol: float = 1e-5,
                        rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """gradcheck of the vector-Jacobian product of ``fn`` (second derivatives)."""
    require_asyncio("gradgradcheck()")
    inputs = _checked_inputs(inputs)
    with enable_grad():
        outputs = [o for o in await _outputs(fn, inputs) if isinstance(o, Tensor)]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            Tensor(rng.standard_normal(o.shape), dtype=o.dtype, device=o.device, requires_grad=True) for o in outputs)
    grad_outputs = grad_outputs if isinstance(grad_outputs, tuple) else (grad_outputs,)
    diff_positions = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    n = len(inputs)

    async def vjp_fn(*args: Any) -> tuple:
        ins, gos = args[:n], args[n:]
        with enable_grad():
            outs = [o for o in await _outputs(fn, ins) if isinstance(o, Tensor) and o.requires_grad]
        diff = [ins[i] for i in diff_positions]
        grads = await grad(outs, diff, list(gos[:len(outs)]), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return await gradcheck(vjp_fn, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                           raise_exception=raise_exception)
