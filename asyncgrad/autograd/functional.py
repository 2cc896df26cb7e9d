"""torch.autograd.functional on asyncgrad: vjp, jvp, jacobian, hessian, vhp, hvp (coroutines).

Inputs and outputs keep torch's conventions: a Tensor in gives a Tensor out, a tuple in
gives a tuple out. ``jvp`` and ``hvp`` use the double-backward trick (a vjp is linear in
its cotangent, so differentiating it once more against the cotangent gives a jvp).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from asyncgrad import factories
from asyncgrad.autograd.api import call_plain, grad
from asyncgrad.graph.grad_mode import enable_grad
from asyncgrad.ops.shape import stack
from asyncgrad.tensor import Tensor


def _as_tuple(value: Any, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, item in enumerate(items):
        if not isinstance(item, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but "
                                f"the value at index {i} has type {type(item)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the "
                            f"given {arg_name} has type {type(item)}.")
    return is_tuple, items


def _prepare(inputs: tuple, create_graph: bool, need_graph: bool = True) -> tuple:
    """torch's ``_grad_preprocess``: always new Tensor objects, so that the inputs given as
    arguments differ from the same tensors captured by ``func``; views that keep the graph when
    ``create_graph`` and the input requires grad, else detached leaves (requiring grad when the
    function needs a graph, not for the vectors ``v``)."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view(t.shape))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _finish(values: tuple, create_graph: bool) -> tuple:
    """torch's ``_grad_postprocess``: no history handed back unless ``create_graph``."""
    if create_graph:
        return values
    return tuple(v.detach() if isinstance(v, Tensor) else v for v in values)


def _grad_on(fn: Callable) -> Callable:
    """Note [The functional API records in any grad mode]: as torch's, each function runs under
    ``enable_grad``, so that under ``no_grad`` it still differentiates ``func`` and, with
    ``create_graph=True``, still hands back results with history; the caller's mode is back once
    it returns."""

    @functools.wraps(fn)
    async def with_grad(*args: Any, **kwargs: Any) -> Any:
        with enable_grad():
            return await fn(*args, **kwargs)

    return with_grad


async def _call(func: Callable, inputs: tuple) -> Any:
    with enable_grad():
        result = await call_plain(func, *inputs)  # a plain func may call grad_sync (Note [Sync bridge])
        if inspect.isawaitable(result):
            result = await result
    return result


# Note [Strict mode as torch]: with ``strict=True`` these functions raise, in torch's words, where a
# result would otherwise be zeros filled in for a gradient the graph does not have: an output
# that does not require grad (``_check_requires_grad``), an input some gradient is independent
# of (``_fill_in_zeros``, one message per stage of the computation), and, with
# ``create_graph=True``, a gradient that does not require grad (the Jacobian of a linear function
# for vjp/jvp, its Hessian for vhp/hvp). The checks run in torch's order, so a function that
# breaks two rules gets torch's first error.
def _check_requires_grad(values: tuple, input_type: str, strict: bool) -> None:
    """torch's ``_check_requires_grad``, word for word (Note [Strict mode as torch])."""
    if not strict:
        return
    for i, value in enumerate(values):
        if value is None:  # only for grad_inputs
            raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is not "
                               "allowed in strict mode.")
        if not value.requires_grad:
            if input_type == "hessian":
                raise RuntimeError(
                    f"The hessian of the user-provided function with respect to input {i} is independent of the "
                    "input. This is not allowed in strict mode. You should ensure that your function is thrice "
                    "differentiable and that the hessian depends on the inputs.")
            if input_type == "jacobian":
                raise RuntimeError(
                    "While computing the hessian, found that the jacobian of the user-provided function with "
                    f"respect to input {i} is independent of the input. This is not allowed in strict mode. You "
                    "should ensure that your function is twice differentiable and that the jacobian depends on the "
                    "inputs (this would be violated by a linear function for example).")
            if input_type == "grad_inputs":
                raise RuntimeError(f"The gradient with respect to input {i} is independent of the inputs of the "
                                   "user-provided function. This is not allowed in strict mode.")
            raise RuntimeError(f"Output {i} of the user-provided function does not require gradients. The outputs "
                               "must be computed in a differentiable manner from the input when running in strict "
                               "mode.")


async def _autograd_grad(outputs: tuple, inputs: tuple, grad_outputs: tuple | None = None,
                         create_graph: bool = False) -> tuple:
    """torch's ``_autograd_grad``: ``grad`` over the outputs that require grad (None entries and
    the others are left out), None for every input when none does."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return tuple(await grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs], retain_graph=True,
                            create_graph=create_graph, allow_unused=True))


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is not allowed in strict "
            "mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the grad_outputs when "
                  "using the double backward trick to compute forward mode gradients. This is not allowed in strict "
                  "mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. This is not allowed in "
                   "strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} in the "
                         "grad_jacobian. This is not allowed in strict mode as it prevents from using the double "
                         "backward trick to replace forward mode AD.",
}


def _fill_in_zeros(grads: tuple, refs: tuple, strict: bool, create_graph: bool, stage: str) -> tuple:
    """torch's ``_fill_in_zeros``: zeros for a missing gradient, or its error in strict mode
    (Note [Strict mode as torch])."""
    out = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise RuntimeError(_INDEPENDENT[stage].format(i=i))
            g = factories.zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            which = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {which} of the user-provided function is independent of input {i}. This is not "
                               "allowed in strict mode when create_graph=True.")
        out.append(g)
    return tuple(out)


def _check_v(v: Any, like: tuple, name: str, fn_name: str, like_is_tuple: bool) -> tuple:
    """torch's ``_validate_v``, word for word."""
    _, vs = _as_tuple(v, name, fn_name)
    if len(vs) != len(like):
        if like_is_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(like)} but got {len(vs)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(vs, like)):
        if a.shape != b.shape:
            prefix = f"Entry {i} in " if like_is_tuple else ""
            raise RuntimeError(f"{prefix}v has invalid size: should be asyncgrad.Size({list(b.shape)}) but got "
                               f"asyncgrad.Size({list(a.shape)}).")
    return vs


@_grad_on
async def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
              strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), v^T J), as torch's ``vjp`` (Note [Strict mode as torch])."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outputs = _as_tuple(await _call(func, inputs), "outputs of the user-provided function", "vjp")
    _check_requires_grad(outputs, "outputs", strict)
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single Tensor "
                               "with a single element.")
        vs = (factories.ones_like(outputs[0]),)
    else:
        vs = _prepare(_check_v(v, outputs, "v", "vjp", out_tuple), create_graph, need_graph=False)
    result = _fill_in_zeros(await _autograd_grad(outputs, inputs, vs, create_graph), inputs, strict, create_graph,
                            "back")
    outputs, result = _finish(outputs, create_graph), _finish(result, create_graph)
    return (outputs if out_tuple else outputs[0]), (result if is_tuple else result[0])


@_grad_on
async def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
              strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), J v), by differentiating a vjp against its cotangent (torch's double
    backward trick; Note [Strict mode as torch])."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
    inputs = _prepare(inputs, create_graph)
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                               "Tensor with a single element.")
        vs = (factories.ones_like(inputs[0]),)
    else:
        vs = _prepare(_check_v(v, inputs, "v", "jvp", is_tuple), create_graph, need_graph=False)
    out_tuple, outputs = _as_tuple(await _call(func, inputs), "outputs of the user-provided function", "jvp")
    _check_requires_grad(outputs, "outputs", strict)
    # the backward is linear in its cotangent: its value never enters the double backward
    cotangents = tuple(factories.zeros_like(o).requires_grad_(True) for o in outputs)
    grad_inputs = await _autograd_grad(outputs, inputs, cotangents, create_graph=True)
    _check_requires_grad(grad_inputs, "grad_inputs", strict)
    result = _fill_in_zeros(await _autograd_grad(grad_inputs, cotangents, vs, create_graph), outputs, strict,
                            create_graph, "back_trick")
    outputs, result = _finish(outputs, create_graph), _finish(result, create_graph)
    return (outputs if out_tuple else outputs[0]), (result if out_tuple else result[0])


@_grad_on
async def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
                   vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """d outputs / d inputs, one vjp per output element; entry shape = output.shape + input.shape.

    ``strategy`` and ``vectorize`` are checked as torch checks them; what passes gets the same
    Jacobian, computed one vjp per output element (Note [One Jacobian whatever the strategy]).
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        _check_forward_mode(create_graph, strict, vectorize)
    is_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outputs = _as_tuple(await _call(func, inputs), "outputs of the user-provided function", "jacobian")
    _check_requires_grad(outputs, "outputs", strict)
    if vectorize:
        if strict:
            raise RuntimeError("torch.autograd.functional.jacobian: `strict=True` and `vectorized=True` are not "
                               "supported together. Please either set `strict=False` or `vectorize=False`.")
    table = []
    for i, out in enumerate(outputs):
        flat = out.reshape(-1)
        rows: list[list[Tensor]] = [[] for _ in inputs]
        for k in range(flat.numel()):
            row = await _autograd_grad((flat[k],), inputs, (factories.ones_like(flat[k]),), create_graph)
            for j, (r, inp) in enumerate(zip(row, inputs)):
                if r is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is independent of input {j}. "
                                           "This is not allowed in strict mode.")
                    r = factories.zeros_like(inp)
                elif strict and create_graph and not r.requires_grad:  # torch names the output's index here
                    raise RuntimeError(f"The jacobian of the user-provided function is independent of input {i}. "
                                       "This is not allowed in strict mode when create_graph=True.")
                rows[j].append(r)
        entries = []
        for inp, row in zip(inputs, rows):
            block = stack(row) if row else factories.zeros((0,) + inp.shape, dtype=inp.dtype, device=inp.device)
            entries.append(block.reshape(out.shape + inp.shape))
        table.append(tuple(_finish(tuple(entries), create_graph)))
    if not out_tuple:
        return table[0] if is_tuple else table[0][0]
    return tuple(row if is_tuple else row[0] for row in table)


@_grad_on
async def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
                  vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Jacobian of the gradient of a scalar function, as torch's: reverse over reverse (Note
    [One Jacobian whatever the strategy]; ``vectorize`` and ``outer_jacobian_strategy`` go to the
    outer ``jacobian``), strict checks in torch's order (Note [Strict mode as torch])."""
    is_tuple, items = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    async def single_output(*args: Tensor) -> Tensor:
        out = await _call(func, args)
        out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict)
        if out_tuple:
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should contain a single element")
        return out.reshape(())

    async def gradient(*args: Tensor) -> Any:
        jac = await jacobian(single_output, args, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    result = await jacobian(gradient, items, create_graph=create_graph, strict=strict, vectorize=vectorize,
                            strategy=outer_jacobian_strategy)
    if is_tuple:
        return result
    return result[0][0]


# Note [One Jacobian whatever the strategy]: torch's ``vectorize=True`` computes every row of a
# Jacobian in one backward by running each node's formula under vmap, and ``strategy="forward-mode"``
# pushes dual tensors forward; both only choose how the same Jacobian is computed. asyncgrad has
# neither vmap nor dual tensors, so, once torch's own checks of the combination have passed (its
# words, its order), every choice computes the Jacobian one vector-Jacobian product per output
# element through the engine: the values torch gives, at the cost of one backward per row.


def _check_forward_mode(create_graph: bool, strict: bool, vectorize: bool) -> None:
    """torch's checks for ``strategy="forward-mode"``, in its order and words (Note [One Jacobian
    whatever the strategy])."""
    if create_graph:
        raise NotImplementedError(
            "torch.autograd.functional.jacobian: `create_graph=True` and `strategy=\"forward-mode\"` are not "
            "supported together (yet). Please either set `create_graph=False` or `strategy=\"reverse-mode\"`.")
    if strict:
        raise RuntimeError(
            "torch.autograd.functional.jacobian: `strict=True` and `strategy=\"forward-mode\"` are not supported "
            "together (yet). Please either set `strict=False` or `strategy=\"reverse-mode\"`.")
    if not vectorize:
        raise NotImplementedError(  # torch's two literals, without a space between them
            "Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
            "only implemented for `vectorize=True`.")


@_grad_on
async def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
              strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), v^T H): a vjp of the gradient (Note [Strict mode as torch])."""
    is_tuple, inputs, vs, out, jac = await _recorded_gradient(func, inputs, v, create_graph, strict, "vhp")
    result = _fill_in_zeros(await _autograd_grad(jac, inputs, vs, create_graph), inputs, strict, create_graph,
                            "double_back")
    (out,), result = _finish((out,), create_graph), _finish(result, create_graph)
    return out, (result if is_tuple else result[0])


@_grad_on
async def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
              strict: bool = False) -> tuple[Any, Any]:
    """(func(inputs), H v), by the double-backward trick on the gradient (Note [Strict mode as torch])."""
    is_tuple, inputs, vs, out, jac = await _recorded_gradient(func, inputs, v, create_graph, strict, "hvp")
    grad_jac = tuple(factories.zeros_like(t).requires_grad_(True) for t in inputs)
    double_back = await _autograd_grad(jac, inputs, grad_jac, create_graph=True)
    _check_requires_grad(jac, "hessian", strict)  # torch checks jac here, not double_back
    result = _fill_in_zeros(await _autograd_grad(double_back, grad_jac, vs, create_graph), inputs, strict,
                            create_graph, "double_back_trick")
    (out,), result = _finish((out,), create_graph), _finish(result, create_graph)
    return out, (result if is_tuple else result[0])


async def _recorded_gradient(func: Callable, inputs: Any, v: Any, create_graph: bool, strict: bool,
                             fn_name: str) -> tuple:
    """What vhp and hvp start from, as torch: the inputs, the vectors, func's scalar output and
    its gradient recorded (create_graph) so it can be differentiated again."""
    is_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _prepare(inputs, create_graph)
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                               "Tensor with a single element.")
        vs = (factories.ones_like(inputs[0]),)
    else:
        vs = _prepare(_check_v(v, inputs, "v", fn_name, is_tuple), create_graph, need_graph=False)
    out_tuple, outputs = _as_tuple(await _call(func, inputs), "outputs of the user-provided function", fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    if out_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain a single element")
    jac = await _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict)
    return is_tuple, inputs, vs, outputs[0], jac
